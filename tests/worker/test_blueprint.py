"""The scheduler's blueprint: the real cadence of its periodic tasks (as Procrastinate's own deferrer
computes them), one blueprint per app, the scheduler queue setting, and a worker's own middleware kept
beside the run middleware."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

import procrastinate
import procrastinate.testing
import psycopg
import pytest
from procrastinate.periodic import PeriodicDeferrer
from psycopg.rows import DictRow

import agentlab_sched
from agentlab_sched.demo import make_app
from agentlab_sched.runs.context import current_run_or_none
from agentlab_sched.settings import Settings
from agentlab_sched.worker import blueprint as blueprint_module
from agentlab_sched.worker.middleware import RunMiddleware
from agentlab_sched.worker.process import run_worker
from tests.support.firing_helpers import make_schedule
from tests.support.runs import launch
from tests.support.workers import run_in, wait_for

#: The gap between two runs of each periodic task, in seconds.
CADENCE = {"agentlab_sched:tick": 1, "agentlab_sched:housekeeping": 10}


def _app() -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.testing.InMemoryConnector())
    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")
    return app


def test_every_periodic_task_runs_at_its_cadence_all_hour_long() -> None:
    """Procrastinate's cron puts seconds last: the gaps its deferrer really leaves, over two hours."""
    app = _app()
    deferrer = PeriodicDeferrer(registry=app.periodic_registry)
    start = int(datetime(2026, 10, 5, 1, 0, 3, tzinfo=UTC).timestamp())
    registered = {p.task.name: p for p in app.periodic_registry.periodic_tasks.values()}
    assert set(registered) == set(CADENCE)
    for name, periodic in registered.items():
        times = list(deferrer.get_timestamps(periodic_task=periodic, since=start, until=start + 7200))
        gaps = {b - a for a, b in itertools.pairwise(times)}
        assert gaps == {CADENCE[name]}, (name, sorted(gaps)[:5])
        assert times[0] - start <= CADENCE[name]


def test_each_app_gets_its_own_blueprint() -> None:
    first, second = _app(), _app()
    for app in (first, second):
        assert {"agentlab_sched:tick", "agentlab_sched:housekeeping"} <= set(app.tasks)
        assert {p.task.name for p in app.periodic_registry.periodic_tasks.values()} == set(CADENCE)
        assert all(app.tasks[name].blueprint is app for name in CADENCE)
    assert first.tasks["agentlab_sched:tick"] is not second.tasks["agentlab_sched:tick"]
    # The package attribute is a fresh blueprint at every read.
    assert agentlab_sched.blueprint is not agentlab_sched.blueprint
    assert isinstance(agentlab_sched.blueprint, procrastinate.Blueprint)


def test_the_scheduler_queue_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {_app().tasks[name].queue for name in CADENCE} == {"default"}
    monkeypatch.setenv("AGENTLAB_SCHED_SCHEDULER_QUEUE", "scheduler")
    assert Settings.from_env().scheduler_queue == "scheduler"
    assert {_app().tasks[name].queue for name in CADENCE} == {"scheduler"}
    assert {blueprint_module.make_blueprint("other").tasks[n].queue for n in ("tick", "housekeeping")} == {"other"}


async def test_a_workers_own_middleware_runs_inside_the_run_middleware(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    seen: list[tuple[str, bool]] = []

    async def mine(call_next: Any, context: procrastinate.JobContext, worker: Any) -> Any:
        seen.append((context.job.task_name, current_run_or_none() is not None))
        return await call_next()

    app = make_app(db_url)
    sid = await make_schedule(conn, "echo", task="demo.echo", inputs={"a": 1}, next_run_at=None)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(app, db_url, stop=stop, install_signal_handlers=False, worker_middleware=[mine],
                   settings=Settings(locale="en", scheduler=False))
    )  # fmt: skip
    try:
        run = await launch(conn, sid)
        done = await wait_for(run_in(conn, run["id"], "succeeded", "failed"), what="finished")
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
    assert (done["status"], done["result"]) == ("succeeded", {"a": 1})  # the run middleware recorded it
    assert ("demo.echo", True) in seen  # ours ran, inside the run context
    assert [type(m) for m in app.worker_defaults["worker_middleware"]] == [RunMiddleware]
