"""The live updates' one LISTEN connection: a fire or a run written reaches the open pages by NOTIFY (the
statement-level triggers of sql/58_live.sql), coalesced, and the connection sends no statement after its
LISTEN (nothing polls)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.web.live import Hub
from tests.support.firing_helpers import make_schedule
from tests.support.runs import launch

Conn = psycopg.AsyncConnection[DictRow]


@pytest.fixture
async def hub(db_url: str) -> AsyncIterator[Hub]:
    live = Hub(db_url)
    live.coalesce = 0.05  # the folding window, short: these tests wait on each event
    await live.start()
    await asyncio.wait_for(live.listening.wait(), 10)
    try:
        yield live
    finally:
        await live.close()


async def next_event(stream: AsyncIterator[str]) -> dict[str, Any]:
    """The data of the next ``change`` event of a page's stream (keep-alive comments skipped)."""
    while True:
        text = await asyncio.wait_for(anext(stream), 10)
        if text.startswith("event: change\n"):
            return dict(json.loads(text.split("data: ", 1)[1]))


async def settle(conn: Conn, stream: AsyncIterator[str]) -> None:
    """Read the stream until everything sent so far was heard: a marker notification, then its event
    (notifications arrive in commit order; what came before may be folded into the marker's event)."""
    await conn.execute("SELECT pg_notify('agentlab_sched_outbox', 'marker')")
    while "agentlab_sched_outbox" not in (await next_event(stream))["why"]:
        pass


async def hub_backend(conn: Conn) -> dict[str, Any]:
    cur = await conn.execute(
        """SELECT query, state, state_change FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = 'agentlab-sched web live'"""
    )
    rows = await cur.fetchall()
    assert len(rows) == 1, rows
    return dict(rows[0])


async def test_a_fire_reaches_the_page_by_notify_and_the_connection_sends_nothing_more(conn: Conn, hub: Hub) -> None:
    stream = hub.subscribe()
    assert await anext(stream) == "retry: 2000\n\n"
    sid = await make_schedule(conn, "report", next_run_at=None)
    await settle(conn, stream)
    before = await hub_backend(conn)
    assert before["query"].startswith("LISTEN agentlab_sched_live;")

    run = await launch(conn, sid)  # one transaction: a fire and its run
    assert await next_event(stream) == {"why": ["fires", "runs"]}
    await conn.execute("UPDATE agentlab_sched.runs SET status = 'succeeded', finished_at = now() WHERE id = %s",
                       (run["id"],))  # fmt: skip
    assert await next_event(stream) == {"why": ["runs"]}

    # Its last statement is still the LISTEN, unchanged since: no fingerprint read, no poll.
    assert await hub_backend(conn) == before
    await stream.aclose()


async def test_a_statement_that_writes_nothing_notifies_nothing_and_a_burst_is_one_event(conn: Conn, hub: Hub) -> None:
    stream = hub.subscribe()
    await anext(stream)
    sid = await make_schedule(conn, "report", next_run_at=None)
    await settle(conn, stream)
    heard = hub.heard
    # Housekeeping's kind of statement, finding nothing: no notification. A schedule's NOTIFY after it is
    # heard after anything it sent (notifications arrive in commit order).
    await conn.execute("UPDATE agentlab_sched.runs SET status = 'failed' WHERE false")
    await conn.execute("INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status) SELECT %s, now(), "
                       "'scheduled', 'started' WHERE false", (sid,))  # fmt: skip
    await conn.execute("SELECT pg_notify('agentlab_sched_schedules', %s)", (str(sid),))
    assert await next_event(stream) == {"why": ["agentlab_sched_schedules"]}
    assert hub.heard == heard + 1

    # A storm: a thousand fires in three statements of one transaction are one notification.
    async with conn.transaction():
        for part in range(3):
            await conn.execute(
                """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, reason_code)
                   SELECT %s, now() - (g + %s * 400) * interval '1 minute', 'scheduled', 'skipped_overlap',
                          'overlap.running'
                   FROM generate_series(1, 333) g""",
                (sid, part),
            )
    assert await next_event(stream) == {"why": ["fires"]}
    assert hub.heard == heard + 2
    await stream.aclose()


async def test_with_no_page_open_nothing_is_sent(conn: Conn, hub: Hub) -> None:
    sid = await make_schedule(conn, "report", next_run_at=None)
    await launch(conn, sid)
    await conn.execute("SELECT pg_notify('agentlab_sched_outbox', 'marker')")
    for _ in range(200):  # bounded: the hub reads its socket in its own task
        if hub.heard == 4:  # the schedule, the fire, the run, the marker
            break
        await asyncio.sleep(0.05)
    assert (hub.heard, hub.sent) == (4, 0)
