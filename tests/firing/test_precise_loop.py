"""The precise loop's waiting: no spinning while what is due is locked elsewhere, and a bounded tick rate
whatever NOTIFYs arrive."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.demo import make_app
from agentlab_sched.firing import tick as tick_module
from agentlab_sched.settings import Settings
from agentlab_sched.worker import precise as scheduler_module
from agentlab_sched.worker.precise import Scheduler
from tests.support.rows import fetched


@pytest.fixture
async def counted(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[float]]:
    """The instants fire_due was called at."""
    calls: list[float] = []
    real = tick_module.fire_due

    async def counting(*args: Any, **kwargs: Any) -> tick_module.TickReport:
        calls.append(time.monotonic())
        return await real(*args, **kwargs)

    monkeypatch.setattr(tick_module, "fire_due", counting)
    yield calls


async def _run_loop_for(db_url: str, seconds: float, during: Any = None) -> None:
    app = make_app(db_url)
    async with app.open_async():
        loop = Scheduler(app, db_url, Settings(locale="en"))
        assert loop.start()
        try:
            if during is not None:
                await asyncio.wait_for(during(seconds), timeout=seconds + 10)
            else:
                await asyncio.sleep(seconds)
        finally:
            await loop.stop()


async def test_the_loop_does_not_spin_while_a_due_schedule_is_locked_elsewhere(
    db_url: str, conn: psycopg.AsyncConnection[DictRow], counted: list[float]
) -> None:
    await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, next_run_at, replan)
           VALUES ('held', '* * * * *', 'demo.echo', 'UTC', now() - interval '1 second', NULL)"""
    )
    await conn.execute("SELECT agentlab_sched.trigger('held')")  # a request for it waits too
    await conn.execute("SELECT agentlab_sched.schedule('replan-held', '0 9 * * *', 'demo.echo')")  # a re-plan too
    holder = await db.connect(db_url, locale="en", autocommit=False)
    try:
        await holder.execute("SELECT 1 FROM agentlab_sched.schedules WHERE name IN ('held', 'replan-held') FOR UPDATE")
        await _run_loop_for(db_url, 2.0)
    finally:
        await holder.rollback()
        await holder.close()
    # Without a back-off the loop called fire_due hundreds of times in these 2 s.
    assert 1 <= len(counted) <= 15, len(counted)


async def test_a_notify_flood_cannot_drive_the_tick_rate(
    db_url: str, conn: psycopg.AsyncConnection[DictRow], counted: list[float]
) -> None:
    sent = 0

    async def flood(seconds: float) -> None:
        nonlocal sent
        noisy = await db.connect(db_url, locale="en")
        try:
            await asyncio.sleep(0.3)  # the loop is listening
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await noisy.execute("NOTIFY agentlab_sched_schedules, '1'")
                sent += 1
        finally:
            await noisy.close()

    began = time.monotonic()
    await _run_loop_for(db_url, 2.0, flood)
    elapsed = time.monotonic() - began
    assert sent > 200
    # At most one tick per MIN_INTERVAL, whatever arrives (a few more for start-up and timing slack).
    assert len(counted) <= elapsed / scheduler_module.MIN_INTERVAL + 5, (len(counted), sent)
    gaps = [b - a for a, b in itertools.pairwise(counted)]
    assert min(gaps) >= scheduler_module.MIN_INTERVAL * 0.5  # measured at fire_due, after taking a connection


async def test_a_change_still_wakes_the_loop_at_once(db_url: str, conn: psycopg.AsyncConnection[DictRow]) -> None:
    """Coalescing delays a NOTIFY's tick by at most MIN_INTERVAL: a schedule created in SQL is planned."""

    async def create(seconds: float) -> None:
        await asyncio.sleep(0.5)
        await conn.execute("SELECT agentlab_sched.schedule('new', '0 9 * * *', 'demo.echo')")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            cur = await conn.execute("SELECT next_run_at FROM agentlab_sched.schedules WHERE name = 'new'")
            if fetched(await cur.fetchone())["next_run_at"] is not None:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the new schedule was not planned")

    await _run_loop_for(db_url, 10.0, create)
