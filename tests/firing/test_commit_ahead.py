"""Fires written ahead of their due time (the precise loop's ``commit_not_before``): claimed, planned and
written a few milliseconds early, committed at the due time on the database's clock and not before;
meanwhile nothing is visible, another worker claims nothing, and the ledger ends with one row."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.database.clock import db_now
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.observe import events
from tests.support.firing_helpers import EN, fires, make_schedule, runs_of
from tests.support.rows import fetched


async def _next_second(conn: psycopg.AsyncConnection[DictRow], at_least: float) -> datetime:
    now = await db_now(conn)
    return (now + timedelta(seconds=at_least + 1)).replace(microsecond=0)


async def _sleeping(conn: psycopg.AsyncConnection[DictRow], pid: int) -> None:
    """Until session ``pid`` waits in pg_sleep (the tick holds its commit)."""
    for _ in range(400):
        cur = await conn.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = await cur.fetchone()
        if row is not None and row["wait_event"] == "PgSleep":
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the tick never waited for its due time")


async def test_fires_written_ahead_commit_at_their_due_time_and_not_before(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    due = await _next_second(conn, 0.8)  # room for the claim and the writes on a loaded machine
    sid = await make_schedule(conn, "every-second", cron="* * * * * *", timezone="UTC", next_run_at=due)
    told: list[dict[str, Any]] = []

    def listen(event: str, data: Any) -> None:
        if event == "fire":
            told.append(dict(data))

    ticker = await db.connect(db_url, locale="en")
    other = await db.connect(db_url, locale="en")
    events.subscribe(listen)
    try:
        ticking = asyncio.create_task(fire_due(ticker, due, settings=EN, commit_not_before=due))
        await _sleeping(conn, ticker.info.backend_pid)
        # Written, not committed: nothing to see, and another worker's tick of the same instant skips it.
        cur = await conn.execute(
            "SELECT count(*) AS n, clock_timestamp() < %s AS early FROM agentlab_sched.fires WHERE schedule_id = %s",
            (due, sid),
        )
        assert fetched(await cur.fetchone()) == {"n": 0, "early": True}
        elsewhere = await fire_due(other, due, settings=EN)
        assert (elsewhere.claimed, elsewhere.fires) == (0, {})

        samples: list[dict[str, Any]] = []
        while not ticking.done():
            cur = await conn.execute(
                "SELECT count(*) AS n, clock_timestamp() AS at FROM agentlab_sched.fires WHERE schedule_id = %s",
                (sid,),
            )
            samples.append(fetched(await cur.fetchone()))
        report = await ticking
        assert (report.claimed, report.fires) == (1, {"started": 1})
        # A statement that saw the row ran after its commit: never before the due time.
        assert all(s["at"] >= due for s in samples if s["n"])
        assert await db_now(conn) >= due
        # Its lateness is counted to the end of the wait on the database's clock, not to the tick's `now`.
        [fired] = [d for d in told if d["schedule"] == "every-second"]
        assert fired["status"] == "started" and 0 < fired["late_seconds"] < 1.0

        [fire] = await fires(conn, sid)
        assert (fire["fire_at"], fire["status"], fire["kind"]) == (due, "started", "scheduled")
        assert due - timedelta(seconds=2) < fire["created_at"] < due  # written ahead, committed at due
        [run] = await runs_of(conn, sid)
        assert (run["status"], run["fire_id"]) == ("queued", fire["id"])
        cur = await conn.execute("SELECT next_run_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
        assert fetched(await cur.fetchone())["next_run_at"] == due + timedelta(seconds=1)
        # The other worker, ticking again at the same instant now, finds nothing left to fire.
        again = await fire_due(other, due, settings=EN)
        assert again.fires == {} and len(await fires(conn, sid)) == 1
    finally:
        events.unsubscribe(listen)
        await ticker.close()
        await other.close()


async def test_a_commit_whose_due_time_has_passed_does_not_wait(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    due = now.replace(microsecond=0)
    sid = await make_schedule(conn, "every-second", cron="* * * * * *", timezone="UTC", next_run_at=due)
    report = await fire_due(conn, due, settings=EN, commit_not_before=due - timedelta(seconds=30))
    assert report.fires == {"started": 1}
    [fire] = await fires(conn, sid)
    assert fire["created_at"] >= now
    assert fire["created_at"] - now < timedelta(seconds=5)  # no wait for an instant already past
