#!/bin/sh
# Every benchmark of docs/benchmarks.md, one after the other (never two at once: they share 2 cores).
# JSON results land in bench/results/ (git-ignored). About 30 minutes on the 2-core machine.
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p bench/results
$PY -m bench.fire_storm -n 1000 -n 10000 --rounds 2 --save bench/results/fire_storm.json
$PY -m bench.fire_storm -n 100000 --rounds 1 --no-baselines --save bench/results/fire_storm_100k.json
$PY -m bench.lateness --seconds 60 --rounds 2 --save bench/results/lateness.json
$PY -m bench.idle --seconds 60 --mode none --mode bare --mode loop --mode tick --mode precise \
    --save bench/results/idle.json
$PY -m bench.lateness --seconds 30 --mode precise --synchronous-commit off --save bench/results/lateness_async.json
$PY -m bench.lateness --seconds 30 --mode precise --workers 3 --save bench/results/lateness_3_workers.json
