"""The benchmarks' Procrastinate apps and their job body, ``bench.hit``: one INSERT, the task's first line.

    agentlab-sched worker --app bench.apps.app           # agentlab-sched: the demo app + bench.hit
    procrastinate --app bench.apps.bare_app worker       # bare Procrastinate: bench.hit alone, no runs

Both apps are built on first use from AGENTLAB_SCHED_DATABASE_URL (run with the repository on
PYTHONPATH). ``bench.hit`` records in ``bench_hits`` (which `create_hits` makes) when its body's first line ran
(``began``, Python's clock, the same machine's as the server's) and when its INSERT ran on the server
(``at``, ``clock_timestamp()``: later by the wait for a connection of the app's pool when many bodies
start at once); pg_cron's baseline runs the same INSERT, where both are the statement's time.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import procrastinate
import psycopg

from agentlab_sched import demo
from agentlab_sched.worker.process import connector_for

TASK = "bench.hit"
#: The job body, and pg_cron's command (with a literal k).
HIT = "INSERT INTO bench_hits (job_id, k, at, began) VALUES (%(job)s, %(k)s, clock_timestamp(), %(began)s)"


def create_hits(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bench_hits (job_id bigint, k integer, at timestamptz NOT NULL, began timestamptz)"
    )


async def hit(context: procrastinate.JobContext, k: int = 0, **inputs: Any) -> None:
    """The benchmarks' job body: one INSERT (a transaction of its own) saying when the body started."""
    began = datetime.datetime.now(datetime.UTC)
    await context.app.connector.execute_query_async(HIT, job=context.job.id, k=k, began=began)  # type: ignore[arg-type]


def make_app(url: str) -> procrastinate.App:
    """agentlab-sched's app: the demo app (scheduler blueprint, run middleware) with ``bench.hit``."""
    app = demo.make_app(url)
    app.task(name=TASK, pass_context=True)(hit)
    return app


def make_bare_app(url: str) -> procrastinate.App:
    """Procrastinate alone: ``bench.hit`` on a connector with our session settings, no scheduler, no runs."""
    app = procrastinate.App(connector=connector_for(url))
    app.task(name=TASK, pass_context=True)(hit)
    return app


_apps: dict[str, procrastinate.App] = {}


def __getattr__(name: str) -> Any:
    if name in ("app", "bare_app"):
        if name not in _apps:
            url = os.environ["AGENTLAB_SCHED_DATABASE_URL"]
            _apps[name] = make_app(url) if name == "app" else make_bare_app(url)
        return _apps[name]
    raise AttributeError(name)
