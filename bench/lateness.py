"""Lateness: 50 per-second schedules; how late does each task start after its nominal due time?

    python -m bench.lateness                          # both modes, 60 s each
    python -m bench.lateness --seconds 15 --mode precise

Lateness is when the job body started (its first line: ``bench.hit`` takes the time, then records it with
one INSERT, see bench/apps.py) minus ``fires.fire_at``, the nominal cron instant. Also reported: when that
INSERT ran on the server (later by the wait for one of the app pool's connections when 50 bodies start at
once: the body's own work, not the scheduler's lateness), when the run turned ``running``
(``runs.started_at``, the transaction in which a worker took the job) and when the fire was recorded
(``fires.created_at``). Modes, each a worker process of its own on a fresh
database (see bench/worker.py):

- ``tick``: a plain procrastinate worker on the demo app; schedules fire from the blueprint's periodic
  tick only (Procrastinate defers it every second, 0.5 s after the second: its MARGIN).
- ``precise``: ``run_worker`` (what ``agentlab-sched worker`` runs): the precise loop, which sleeps until
  the earliest next_run_at (before 73d3ed9 the per-second periodic tick ran beside it too).

Targets (docs/benchmarks.md): p99 < 1 s with the tick, < 100 ms with the precise loop.

``--synchronous-commit off`` sets it on the benchmark database (a diagnosis: how much of the job start
lateness is waiting for WAL flushes, one per job fetch and one per job finish); ``--concurrency`` is each
worker's, ``--workers`` how many worker processes share the schedules and jobs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import apps, common

SCHEDULES = 50
#: Seconds ignored after the first fire (start-up), and before the end (jobs not yet taken).
WARMUP = 3.0
TAIL = 2.0


def _measure(url: str, mode: str, seconds: float, sync_commit: str, concurrency: int, workers: int) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET synchronous_commit = {sync_commit}")
        apps.create_hits(conn)
        common.insert_schedules(
            conn, SCHEDULES, cron="* * * * * *", next_run_at=None, prefix="late", overlap="allow_all", task=apps.TASK
        )
        procs = [common.start_worker(url, mode, "--concurrency", str(concurrency)) for _ in range(workers)]
        try:
            deadline = time.monotonic() + 60
            first = None
            while first is None and time.monotonic() < deadline:
                time.sleep(0.1)
                first = conn.execute("SELECT min(fire_at) AS at FROM agentlab_sched.fires").fetchone()["at"]
            if first is None:
                raise RuntimeError(f"no fire within 60 s in mode {mode}")
            time.sleep(WARMUP + seconds + TAIL)
        finally:
            stopped_in = max(common.stop_worker(p) for p in procs)
        rows = conn.execute(
            """SELECT f.status, f.fire_at, extract(epoch FROM f.created_at - f.fire_at) AS recorded,
                      extract(epoch FROM r.started_at - f.fire_at) AS run_started,
                      extract(epoch FROM h.began - f.fire_at) AS started,
                      extract(epoch FROM h.at - f.fire_at) AS statement_ran
               FROM agentlab_sched.fires f LEFT JOIN agentlab_sched.runs r ON r.id = f.run_id
               LEFT JOIN bench_hits h ON h.job_id = r.job_id
               WHERE f.fire_at >= %(first)s + make_interval(secs => %(warmup)s)
                 AND f.fire_at < %(first)s + make_interval(secs => %(warmup)s + %(seconds)s)""",
            {"first": first, "warmup": WARMUP, "seconds": seconds},
        ).fetchall()
    started = [float(r["started"]) for r in rows if r["started"] is not None]
    # Per due second: its first body and its last (the 50 start one after another in the worker's loop).
    by_second: dict[Any, list[float]] = {}
    for r in rows:
        if r["started"] is not None:
            by_second.setdefault(r["fire_at"], []).append(float(r["started"]))
    firsts = [min(v) for v in by_second.values()]
    lasts = [max(v) for v in by_second.values()]
    recorded = [float(r["recorded"]) for r in rows]
    run_started = [float(r["run_started"]) for r in rows if r["run_started"] is not None]
    statement_ran = [float(r["statement_ran"]) for r in rows if r["statement_ran"] is not None]
    return {
        "mode": mode,
        "fires": len(rows),
        "expected_fires": int(SCHEDULES * seconds),
        "not_launched": sum(1 for r in rows if r["status"] != "started"),
        "not_started": len(rows) - len(started),
        "start_p50_ms": _ms(common.percentile(started, 50)),
        "start_p99_ms": _ms(common.percentile(started, 99)),
        "start_max_ms": _ms(max(started, default=float("nan"))),
        "first_body_p50_ms": _ms(common.percentile(firsts, 50)),
        "last_body_p50_ms": _ms(common.percentile(lasts, 50)),
        "last_body_p99_ms": _ms(common.percentile(lasts, 99)),
        "statement_ran_p50_ms": _ms(common.percentile(statement_ran, 50)),
        "statement_ran_p99_ms": _ms(common.percentile(statement_ran, 99)),
        "run_started_p50_ms": _ms(common.percentile(run_started, 50)),
        "run_started_p99_ms": _ms(common.percentile(run_started, 99)),
        "recorded_p50_ms": _ms(common.percentile(recorded, 50)),
        "recorded_p99_ms": _ms(common.percentile(recorded, 99)),
        "worker_stopped_in_s": round(stopped_in, 2),
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def run(
    modes: list[str],
    seconds: float,
    rounds: int,
    sync_commit: str,
    concurrency: int,
    workers: int,
    server_kind: str | None = None,
) -> dict[str, Any]:
    results: dict[str, Any] = {
        "machine": common.machine(),
        "seconds": seconds,
        "schedules": SCHEDULES,
        "synchronous_commit": sync_commit,
        "concurrency": concurrency,
        "workers": workers,
        "modes": {},
    }
    with common.server(server_kind) as srv:
        srv.describe(results)
        for _ in range(rounds):
            for mode in modes:
                with srv.database() as url:
                    one = _measure(url, mode, seconds, sync_commit, concurrency, workers)
                results["modes"].setdefault(mode, []).append(one)
                print(
                    f"{mode}: start p50 {one['start_p50_ms']} ms, p99 {one['start_p99_ms']} ms "
                    f"({one['fires']} fires, {one['not_started']} not started)",
                    flush=True,
                )
    for mode, ones in results["modes"].items():
        results[f"{mode}_median"] = {
            key: common.median([o[key] for o in ones])
            for key in (
                "start_p50_ms",
                "start_p99_ms",
                "start_max_ms",
                "first_body_p50_ms",
                "last_body_p50_ms",
                "last_body_p99_ms",
                "statement_ran_p50_ms",
                "statement_ran_p99_ms",
                "run_started_p50_ms",
                "run_started_p99_ms",
                "recorded_p50_ms",
                "recorded_p99_ms",
            )
        }
    results["machine"]["loadavg_end"] = common.machine()["loadavg"]
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["tick", "precise"], action="append", help="repeatable; default both")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per mode (default 60)")
    parser.add_argument("--rounds", type=int, default=1, help="measurements per mode (medians reported)")
    parser.add_argument("--synchronous-commit", choices=["on", "off"], default="on")
    parser.add_argument("--concurrency", type=int, default=10, help="each worker's (default 10)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--server", choices=common.server_kinds(), help=f"default {common.default_server()}")
    parser.add_argument("--save", help="write the JSON result to this file too")
    args = parser.parse_args()
    modes = args.mode or ["tick", "precise"]
    result = run(modes, args.seconds, args.rounds, args.synchronous_commit, args.concurrency, args.workers, args.server)
    common.emit(result, args.save)
