"""A real worker in-process: the tick fires, the job runs with the rendered inputs, the run follows it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import psycopg
from psycopg.rows import DictRow

from agentlab_sched.demo import make_app
from agentlab_sched.schedules.replan import replan
from agentlab_sched.settings import Settings
from agentlab_sched.worker.precise import Scheduler
from agentlab_sched.worker.process import run_worker
from tests.support.firing_helpers import runs_of
from tests.support.rows import fetched


async def _wait_for(predicate: Any, limit: float = 15.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_worker_fires_runs_and_stops_within_3_seconds(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, inputs, timezone)
           VALUES ('every-second', '* * * * * *', 'demo.echo', %s::jsonb, 'UTC')""",
        (json.dumps({"day": "{{ schedule.date }}"}),),
    )
    sid = fetched(await (await conn.execute("SELECT id FROM agentlab_sched.schedules")).fetchone())["id"]
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_worker(make_app(db_url), db_url, stop=stop, install_signal_handlers=False, settings=Settings(locale="en"))
    )

    async def succeeded() -> list[dict[str, Any]]:
        return [r for r in await runs_of(conn, sid) if r["status"] == "succeeded"]

    try:
        [first, *_] = await _wait_for(succeeded)
    finally:
        began = time.monotonic()
        stop.set()
        await asyncio.wait_for(worker, timeout=10)
        stopped_in = time.monotonic() - began
    assert stopped_in < 3.0
    cur = await conn.execute("SELECT fire_at, kind FROM agentlab_sched.fires WHERE id = %s", (first["fire_id"],))
    fire = fetched(await cur.fetchone())
    assert first["inputs"] == {"day": fire["fire_at"].strftime("%Y-%m-%d")}
    assert first["started_by"] == "schedule:every-second" and first["finished_at"] is not None
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("agentlab-sched")] == []


async def test_starting_the_scheduler_twice_keeps_one_loop(db_url: str) -> None:
    app = make_app(db_url)
    async with app.open_async():
        scheduler = Scheduler(app, db_url, Settings(locale="en"))
        assert scheduler.start() is True
        first = scheduler.task
        assert scheduler.start() is False and scheduler.task is first
        await scheduler.stop()
        assert first is not None and first.done() and not scheduler.running


async def test_scheduler_switched_off_does_not_start(db_url: str) -> None:
    app = make_app(db_url)
    scheduler = Scheduler(app, db_url, Settings(scheduler=False))
    assert scheduler.start() is False and not scheduler.running
    await scheduler.stop()


async def test_replan_fills_next_run_at_of_schedules_created_in_sql(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    await conn.execute(
        "INSERT INTO agentlab_sched.schedules (name, cron, task, timezone) "
        "VALUES ('s', '0 9 * * *', 'demo.echo', 'UTC')"
    )
    assert await replan(conn) == 1
    cur = await conn.execute("SELECT next_run_at, replan FROM agentlab_sched.schedules")
    row = fetched(await cur.fetchone())
    assert row["replan"] is None and row["next_run_at"] is not None and row["next_run_at"].hour == 9
