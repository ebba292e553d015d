#!/bin/sh
# Every benchmark of docs/benchmarks.md, one after the other (never two at once: they share 2 cores).
# JSON results land in bench/results/ (git-ignored). About 1.5 hours on the 2-core machine; the server is
# Debian's PostgreSQL 15 with pg_cron when installed (BENCH_SERVER=embedded for the embedded one).
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p bench/results
$PY -m bench.e2e_storm -n 10000 --save bench/results/e2e_storm.json
$PY -m bench.e2e_storm -n 1000 -n 100000 --save bench/results/e2e_storm_n.json
$PY -m bench.e2e_storm -n 10000 --workers 2 --workers 4 --system agentlab --system bare \
    --save bench/results/e2e_storm_workers.json
$PY -m bench.e2e_storm -n 10000 --drain --save bench/results/e2e_drain.json
$PY -m bench.lateness --seconds 60 --mode precise --rounds 2 --save bench/results/lateness.json
$PY -m bench.idle --seconds 60 --mode none --mode bare --mode loop --mode precise --save bench/results/idle.json
$PY -m bench.fire_storm -n 1000 -n 10000 --rounds 2 --save bench/results/fire_storm.json
$PY -m bench.fire_storm -n 100000 --rounds 1 --no-baselines --save bench/results/fire_storm_100k.json
$PY -m bench.retention --days 4 --schedules 100 --save bench/results/retention.json
