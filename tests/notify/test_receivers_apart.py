"""Deliveries to different receivers never wait on each other: with one delivery loop, a receiver that
hangs holds its own send (until the deadline), while another receiver's notification is sent at once."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import psycopg
from psycopg.rows import DictRow

from agentlab_sched.notify import Dispatcher, Sender, set_webhook
from tests.support.notify_fakes import (
    T0,
    LocalReceiver,
    add_run,
    add_schedule,
    deliveries,
    fake_dns,
    set_status,
    settings,
)
from tests.support.rows import fetched


async def _finished(conn: psycopg.AsyncConnection[DictRow], name: str) -> None:
    cur = await conn.execute("SELECT id FROM agentlab_sched.schedules WHERE name = %s", (name,))
    sid = fetched(await cur.fetchone())["id"]
    run = await add_run(conn, sid, fire_at=T0)
    await set_status(conn, run, "succeeded", finished_at=T0 + timedelta(minutes=3))


async def test_a_hanging_receiver_does_not_hold_up_another_one(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    slow, fast = LocalReceiver(hang=True), LocalReceiver()
    slow.start()
    fast.start()
    allow = settings(webhook_allow_private=True)
    dispatcher = Dispatcher(db_url, allow, sender=Sender(timeout=8, resolver=fake_dns), concurrency=1)
    try:
        for name, where in (("slow-one", slow), ("fast-one", fast)):
            await add_schedule(conn, name)
            await set_webhook(conn, name, url=where.url, settings=allow)
        await _finished(conn, "slow-one")  # first in the outbox: its send hangs
        await dispatcher.start()
        assert await asyncio.to_thread(slow.arrived.wait, 10)
        started = time.monotonic()
        await _finished(conn, "fast-one")
        assert await asyncio.to_thread(fast.arrived.wait, 5)
        for _ in range(100):
            sent = [d for d in await deliveries(conn) if d["outcome"] == "sent"]
            if sent:
                break
            await asyncio.sleep(0.05)
        assert len(sent) == 1 and time.monotonic() - started < 4  # well before the slow send's deadline
        assert not slow.release.is_set()  # the slow one is still hanging
    finally:
        await dispatcher.stop(grace=0.6)
        slow.stop()
        fast.stop()
