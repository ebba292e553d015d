"""Three worker processes, 200 per-second schedules, ten seconds of real time: every due time once.

The workers are separate processes, each `agentlab-sched worker --app agentlab_sched.demo.app` (the
Procrastinate worker, the periodic tick and the precise loop), racing for the same schedules. After
SIGTERM (each must exit within 3 s) the ledger must hold exactly one row per (schedule, due time), no
due time may be missing between a schedule's first fire and its pending next_run_at, and every started
fire must have exactly one run and one job whose statuses agree. Lateness is not asserted here (a
loaded CI machine): see bench/lateness.py.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row

from tests.support.rows import fetched
from tests.support.timing import Slowdown
from tests.support.workers import stop_workers

WORKERS = 3
SCHEDULES = 200
SECONDS = 10.0
STOP_WITHIN = 3.0

#: One worker process: the `agentlab-sched` console script, run by this interpreter.
WORKER = [
    sys.executable,
    "-c",
    "from agentlab_sched.cli import main; main()",
    "worker",
    "--app",
    "agentlab_sched.demo.app",
]

JOB_TO_RUN = {"todo": "queued", "doing": "running", "succeeded": "succeeded"}


def _start_workers(db_url: str) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": db_url, "AGENTLAB_SCHED_LOCALE": "en"}
    root = Path(__file__).resolve().parents[2]
    return [subprocess.Popen(WORKER, cwd=root, env=env) for _ in range(WORKERS)]


def _wait_for_first_fire(conn: psycopg.Connection[DictRow], workers: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert all(w.poll() is None for w in workers), "a worker process died while starting"
        if fetched(conn.execute("SELECT EXISTS (SELECT 1 FROM agentlab_sched.fires) AS any").fetchone())["any"]:
            return
        time.sleep(0.1)
    raise AssertionError("no fire within 30 s of starting the workers")


def test_three_worker_processes_fire_each_due_time_once(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        # Created as SQL users create them (next_run_at left to the workers to compute).
        conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, inputs, overlap)
               SELECT 'every-second-' || g, '* * * * * *', 'demo.echo', 'UTC',
                      jsonb_build_object('n', g, 'at', '{{ schedule.fire_at_utc }}'), 'allow_all'
               FROM generate_series(1, %s) g""",
            (SCHEDULES,),
        )
        workers = _start_workers(db_url)
        try:
            _wait_for_first_fire(conn, workers)
            time.sleep(SECONDS)
        finally:
            with Slowdown() as slowdown:
                took = stop_workers(workers)
        assert [w.returncode for w in workers] == [0] * WORKERS
        assert max(took) < slowdown.bound(STOP_WITHIN), f"workers took {took} s to stop ({slowdown})"

        _assert_each_due_time_once(conn)
        _assert_runs_accounted_for(conn)


def _assert_each_due_time_once(conn: psycopg.Connection[DictRow]) -> None:
    doubles = conn.execute(
        """SELECT schedule_id, fire_at, count(*) AS n FROM agentlab_sched.fires
           GROUP BY schedule_id, fire_at HAVING count(*) > 1"""
    ).fetchall()
    assert doubles == []

    rows = conn.execute(
        """SELECT s.id, s.next_run_at, f.fire_at, f.status, f.kind FROM agentlab_sched.schedules s
           LEFT JOIN agentlab_sched.fires f ON f.schedule_id = s.id ORDER BY s.id, f.fire_at"""
    ).fetchall()
    by_schedule: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_schedule.setdefault(row["id"], []).append(row)
    assert len(by_schedule) == SCHEDULES
    second = timedelta(seconds=1)
    for sid, fires in by_schedule.items():
        assert fires[0]["fire_at"] is not None, f"schedule {sid} never fired"
        # Consecutive due times one second apart; a skipped_misfire row stands for a backlog up to
        # the next row (one row however long the backlog, docs/semantics.md).
        for before, after in itertools.pairwise(fires):
            assert after["fire_at"] - before["fire_at"] == second or before["status"] == "skipped_misfire", (
                f"schedule {sid}: due times missing between {before['fire_at']} and {after['fire_at']}"
            )
        # Nothing lost at the end either: the pending due time is the one after the last fire.
        assert fires[-1]["next_run_at"] == fires[-1]["fire_at"] + second, f"schedule {sid}: {fires[-1]}"
        assert fires[-1]["fire_at"] - fires[0]["fire_at"] >= timedelta(seconds=SECONDS / 2), (
            f"schedule {sid} fired only from {fires[0]['fire_at']} to {fires[-1]['fire_at']}"
        )


def _assert_runs_accounted_for(conn: psycopg.Connection[DictRow]) -> None:
    fires = conn.execute(
        """SELECT f.id, f.status, f.run_id, s.name,
                  (SELECT count(*) FROM agentlab_sched.runs r WHERE r.fire_id = f.id) AS runs
           FROM agentlab_sched.fires f JOIN agentlab_sched.schedules s ON s.id = f.schedule_id"""
    ).fetchall()
    started = [f for f in fires if f["status"] == "started"]
    assert len(started) >= SCHEDULES * SECONDS / 2
    assert all(f["runs"] == 1 and f["run_id"] is not None for f in started)
    assert all(f["runs"] == 0 and f["run_id"] is None for f in fires if f["status"] != "started")

    runs = conn.execute(
        """SELECT r.id, r.fire_id, r.status, r.started_by, r.job_id, j.status::text AS job_status, j.task_name,
                  f.run_id AS fire_run_id, s.name
           FROM agentlab_sched.runs r
           LEFT JOIN procrastinate_jobs j ON j.id = r.job_id
           LEFT JOIN agentlab_sched.fires f ON f.id = r.fire_id
           LEFT JOIN agentlab_sched.schedules s ON s.id = r.schedule_id"""
    ).fetchall()
    assert len(runs) == len(started)
    assert len({r["job_id"] for r in runs}) == len(runs)
    for run in runs:
        assert run["fire_run_id"] == run["id"] and run["task_name"] == "demo.echo", run
        assert run["started_by"] == f"schedule:{run['name']}", run
        # Stopped workers leave no job running; a job that was not picked up yet simply waits (queued).
        assert run["job_status"] in ("todo", "succeeded"), run
        assert run["status"] == JOB_TO_RUN[run["job_status"]], run
    jobs = fetched(
        conn.execute("SELECT count(*) AS n FROM procrastinate_jobs WHERE task_name = 'demo.echo'").fetchone()
    )
    assert jobs["n"] == len(started)
