"""Dashboard page renders with many schedules and a long ledger: p50 / p95 per page.

    python -m bench.web_pages                                  # 100,000 schedules, 1,000,000 fires
    python -m bench.web_pages --schedules 10000 --fires 100000 --requests 30

Loads the schedules (planned, daily, at 1,440 different times) and the ledger (fires spread over them,
a skip reason on one in three, a run for one in ten) into a fresh database on the benchmark server
(PostgreSQL 15 where installed), VACUUM ANALYZEs it, then renders each page ``--requests`` times in-process
(Starlette's test client: the whole request, the database included, but no network) signed in as the local
role, after one warm-up render. The target: every page under 100 ms at p95. /load evaluates the crons of the
enabled schedules in Python (once per group of schedules with the same cron, zone and window) and keeps the
result for the minute: its first render is reported apart. No worker has registered the schedules' task, so
/health's doctor finding is about all of them (it names the first 20 and counts the rest).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
from starlette.testclient import TestClient

from agentlab_sched.settings import Settings
from agentlab_sched.web import WebConfig, create_app
from agentlab_sched.web.dashboard import LOAD_GROUPS

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
        results["/load (first, all crons evaluated)"] = {"ms": round((time.perf_counter() - first) * 1000, 1)}
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
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--fires", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=None, help="write the JSON result to this file too")
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
            "load_page_evaluates_at_most_groups": LOAD_GROUPS,
            "load_seconds": round(loaded, 1),
            "machine": common.machine(),
            "pages": measure(url, args.requests),
        }
        srv.describe(result)
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
