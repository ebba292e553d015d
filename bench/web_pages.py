"""Dashboard page renders with many schedules and a long ledger: p50 / p95 per page.

    python -m bench.web_pages                                  # 100,000 schedules, 1,000,000 fires
    python -m bench.web_pages --schedules 10000 --fires 100000 --requests 30

Loads the schedules (planned, daily, at 1,440 different times) and the ledger (fires spread over them,
a skip reason on one in three, a run for one in ten) into a fresh database on the benchmark server
(PostgreSQL 15 where installed), VACUUM ANALYZEs it, then renders each page ``--requests`` times in-process
(Starlette's test client: the whole request, the database included, but no network) signed in as the local
role, after one warm-up render. The target: every page under 100 ms at p95. /load reads a heat map the server keeps in
the background (web/load.py: each distinct rule evaluated once at the start, re-counted when the minute
turns): the first request, which may wait for that start, is reported apart with what the keeper did.
With ``--explain``, the plans of the schedule list's text filters; with ``--idle SECONDS``, the
transactions the server ran while the dashboard (``agentlab-sched web --local``, a process of its own) had a
page's event stream open and idle that long. No worker has registered the schedules' task, so
/health's doctor finding is about all of them (it names the first 20 and counts the rest).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from starlette.testclient import TestClient

from agentlab_sched.database import queries
from agentlab_sched.settings import Settings
from agentlab_sched.web import WebConfig, create_app

from . import common


def _load(url: str, schedules: int, fires: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        common.insert_schedules(conn, schedules, cron="0 9 * * *", next_run_at=None, prefix="web")
        # 1,440 distinct daily times (the load page evaluates each once), planned for tomorrow.
        conn.execute(
            """UPDATE agentlab_sched.schedules SET cron = (id % 60) || ' ' || (id / 60 % 24) || ' * * *',
                      next_run_at = date_trunc('day', now()) + interval '1 day'
                                    + (id / 60 % 24) * interval '1 hour' + (id % 60) * interval '1 minute',
                      replan = NULL"""
        )
        # Fires spread over the schedules, one a day back in time per schedule (daily schedules); a run for one in
        # ten, one a second back in time.
        conn.execute(
            """INSERT INTO agentlab_sched.runs (id, schedule_id, task, inputs, status, started_by, created_at,
                                                started_at, finished_at)
               SELECT gen_random_uuid(), 1 + g %% %(s)s, 'demo.echo', '{}', 'succeeded', 'schedule:bench',
                      now() - g * interval '1 second', now() - g * interval '1 second' + interval '50 ms',
                      now() - g * interval '1 second' + interval '1 s'
               FROM generate_series(1, %(n)s / 10) g""",
            {"s": schedules, "n": fires},
        )
        conn.execute(
            """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, reason_code, reason, created_at)
               SELECT 1 + g %% %(s)s, date_trunc('minute', now()) - (g / %(s)s) * interval '1 day'
                                      - (g %% 1440) * interval '1 minute',
                      'scheduled',
                      CASE WHEN g %% 3 = 0 THEN 'skipped_overlap' ELSE 'started' END,
                      CASE WHEN g %% 3 = 0 THEN 'overlap.running' END,
                      CASE WHEN g %% 3 = 0 THEN 'skipped: the previous run is still in progress' END,
                      date_trunc('minute', now()) - (g / %(s)s) * interval '1 day'
                      - (g %% 1440) * interval '1 minute' + interval '20 ms'
               FROM generate_series(1, %(n)s) g""",
            {"s": schedules, "n": fires},
        )
        # No live worker has registered the task (as when a long load outlives the registration): the health
        # page's doctor finding is then about every schedule, its worst case, whatever the load took.
        conn.execute("DELETE FROM agentlab_sched.known_tasks")
    common.settle(url)


PAGES = (
    "/schedules",
    "/schedules?status=paused",
    "/schedules?q=web-99",
    "/schedules?q=WEB",
    "/schedules?after=web-5",
    "/schedules/web-1",
    "/runs",
    "/runs?status=succeeded",
    "/health",
    "/load",
)


def measure(url: str, requests: int) -> dict[str, Any]:
    config = WebConfig(database_url=url, settings=Settings.from_env(), local=True)
    results: dict[str, Any] = {}
    with TestClient(create_app(config)) as client:
        first = time.perf_counter()
        assert client.get("/load").status_code == 200
        load = client.app.state.dashboard.load  # type: ignore[attr-defined]
        results["/load (first: may wait for the keeper's start)"] = {
            "ms": round((time.perf_counter() - first) * 1000, 1),
            "keeper_reads": load.reads,
            "keeper_rules_evaluated": load.evaluated,
            "keeper_longest_ms": round(load.longest * 1000, 1),
        }
        for page in PAGES:
            response = client.get(page)  # warm-up (and the sign-in on the first)
            assert response.status_code == 200, (page, response.status_code, response.text[:500])
            times = []
            for _ in range(requests):
                start = time.perf_counter()
                response = client.get(page)
                times.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200
            results[page] = {
                "p50_ms": round(common.percentile(times, 50), 1),
                "p95_ms": round(common.percentile(times, 95), 1),
                "bytes": len(response.content),
            }
        results["load keeper at the end"] = {"reads": load.reads, "rules_evaluated": load.evaluated}
    return results


def explain(url: str) -> dict[str, list[str]]:
    """The plans of the schedule list with a text filter (rare, common) and of the bulk selection."""
    plans: dict[str, list[str]] = {}
    base = {"status": None, "task": None, "after": None, "limit": 51}
    cases = {
        "web_schedules q=web-99": ("web_schedules", {**base, "text": "web-99"}),
        "web_schedules q=WEB": ("web_schedules", {**base, "text": "WEB"}),
        "web_schedule_names q=web-99": ("web_schedule_names", {"status": None, "task": None, "text": "web-99",
                                                               "limit": 1000}),
    }  # fmt: skip
    with psycopg.connect(url, autocommit=True) as conn:
        for label, (name, params) in cases.items():
            statement = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + queries.text(name)
            plans[label] = [str(r[0]) for r in conn.execute(statement, params).fetchall()]
    return plans


def _xacts(admin: psycopg.Connection[Any], dbname: str) -> int:
    row = admin.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (dbname,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def idle(url: str, admin_url: str, seconds: float) -> dict[str, Any]:
    """The server's transactions while a dashboard process has one page's event stream open and idle."""
    port = 18765 + os.getpid() % 1000
    env = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": url}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "agentlab-sched"), "web", "--local", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    events: list[str] = []
    try:
        client = httpx.Client(base_url=base, timeout=None)
        for _ in range(100):
            try:
                if client.get("/load").status_code == 200:  # signed in (--local), the keeper started
                    break
            except httpx.HTTPError:
                time.sleep(0.2)

        def listen() -> None:
            with contextlib.suppress(httpx.HTTPError), client.stream("GET", "/events") as stream:
                for line in stream.iter_lines():
                    events.append(line)

        threading.Thread(target=listen, daemon=True).start()
        time.sleep(2)  # the page's stream open, the render's transactions reported
        dbname = str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
        with psycopg.connect(admin_url, autocommit=True) as admin:
            if common.statements_profiled():
                admin.execute("SELECT pg_stat_statements_reset()")
            before = _xacts(admin, dbname)
            started = admin.execute("SELECT now()").fetchone()
            time.sleep(seconds)
            time.sleep(1.5)  # a backend reports its transactions when it goes idle, at most once a second
            spent: dict[str, Any] = {"xacts_in_its_database": _xacts(admin, dbname) - before}
            if common.statements_profiled():
                spent["statements"] = common.top_statements(admin, dbname)
            with psycopg.connect(url, autocommit=True) as own:  # autovacuum's transactions are counted there too
                vacuumed = own.execute(
                    """SELECT count(*) FILTER (WHERE last_autovacuum >= %(t)s)
                              + count(*) FILTER (WHERE last_autoanalyze >= %(t)s)
                       FROM pg_stat_all_tables""",
                    {"t": started[0] if started else None},
                ).fetchone()
            spent["autovacuum_or_autoanalyze_runs_meanwhile"] = int(vacuumed[0]) if vacuumed else 0
            spent["its_connections"] = [
                list(r)
                for r in admin.execute(
                    "SELECT application_name, state, left(query, 60) FROM pg_stat_activity WHERE datname = %s",
                    (dbname,),
                ).fetchall()
            ]
    finally:
        proc.terminate()
        proc.wait(10)
    return {"seconds": seconds, **spent, "sse_lines": len(events)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--fires", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=None, help="write the JSON result to this file too")
    parser.add_argument("--explain", action="store_true", help="the plans of the schedule list's text filters")
    parser.add_argument("--idle", type=float, default=0, help="seconds a page stays open and idle (0: not measured)")
    args = parser.parse_args()
    with common.server(args.server) as srv, srv.database() as url:
        started = time.perf_counter()
        _load(url, args.schedules, args.fires)
        loaded = time.perf_counter() - started
        result: dict[str, Any] = {
            "benchmark": "web_pages",
            "schedules": args.schedules,
            "fires": args.fires,
            "runs": args.fires // 10,
            "requests_per_page": args.requests,
            "load_seconds": round(loaded, 1),
            "machine": common.machine(),
            "pages": measure(url, args.requests),
        }
        if args.explain:
            result["plans"] = explain(url)
        if args.idle:
            result["idle_page"] = idle(url, srv.admin_url, args.idle)
        srv.describe(result)
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
