"""Lock order and transient errors: cancel_other against a worker finishing a failed job never deadlocks,
and a transient error (40001, 40P01, 55P03) is tried again, never recorded as failed_to_start."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from agentlab_sched import database as db
from agentlab_sched.firing import tick as tick_module
from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, fires, job, make_schedule, next_of, runs_of
from tests.support.rows import Conn, fetched


async def test_cancel_other_and_a_worker_finishing_a_failed_job_never_deadlock(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick holds the schedule (its claim); a worker finishes the running job as failed (job, run, then
    the schedule, to count the failure: it meets the tick's lock); then the tick's cancel_other wants that
    job. The tick must not wait for it: the fire is tried again by the next tick, nothing is recorded as
    failed, and the worker's finish goes through."""
    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC", overlap="cancel_other")
    await fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    [first] = await runs_of(conn, sid)
    await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (first["job_id"],))

    claimed, go = asyncio.Event(), asyncio.Event()
    real_apply = tick_module._apply

    async def held_apply(*args: Any, **kwargs: Any) -> Any:
        if not go.is_set():
            claimed.set()
            await go.wait()
        return await real_apply(*args, **kwargs)

    monkeypatch.setattr(tick_module, "_apply", held_apply)
    ticking = await db.connect(db_url, locale="en")
    finisher = await db.connect(db_url, locale="en")
    try:
        tick = asyncio.create_task(fire_due(ticking, NINE + timedelta(minutes=1, seconds=1), settings=EN))
        await asyncio.wait_for(claimed.wait(), timeout=10)
        finish = asyncio.create_task(
            finisher.execute("UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %s", (first["job_id"],))
        )
        # The finish meets the tick's lock on the schedule (to count the failure), waits for it at most its
        # 50 ms lock timeout and leaves the count to housekeeping: it ends while the tick still holds the
        # schedule (a wait of 50 ms is too short to be seen reliably in pg_stat_activity; this is not).
        await asyncio.wait_for(finish, timeout=10)  # no deadlock error for the worker, and no wait for the tick
        assert not tick.done()
        cur = await conn.execute("SELECT tally_pending FROM agentlab_sched.runs WHERE id = %s", (first["id"],))
        assert fetched(await cur.fetchone())["tally_pending"] == "failure"
        go.set()
        report = await asyncio.wait_for(tick, timeout=10)
    finally:
        go.set()
        await ticking.close()
        await finisher.close()
    assert report.fires.get("failed_to_start", 0) == 0
    statuses = [(f["fire_at"] - NINE, f["status"]) for f in await fires(conn, sid)]
    assert ("failed_to_start" not in {s for _, s in statuses}) and statuses[0] == (timedelta(0), "started")
    # The failed run is counted once: by the housekeeping that applies pending tallies (the finish could not
    # take the schedule's row within its lock timeout: the tick held it).
    await conn.execute("SELECT agentlab_sched.apply_pending_tallies()")
    cur = await conn.execute("SELECT consecutive_failures FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert fetched(await cur.fetchone())["consecutive_failures"] == 1
    # Whatever this tick managed, the minute fires exactly once in the end (the next tick, if it was left).
    await fire_due(conn, NINE + timedelta(minutes=1, seconds=2), settings=EN)
    assert [(f["fire_at"] - NINE, f["status"]) for f in await fires(conn, sid)] == [
        (timedelta(0), "started"),
        (timedelta(minutes=1), "started"),
    ]
    old = next(r for r in await runs_of(conn, sid) if r["id"] == first["id"])
    assert old["status"] == "failed" and (await job(conn, first["job_id"]))["status"] == "failed"


@pytest.mark.parametrize("sqlstate", ["40001", "40P01", "55P03"])
async def test_a_transient_error_is_tried_again_not_recorded(conn: Conn, sqlstate: str) -> None:
    flaky = await make_schedule(conn, "flaky", overlap="allow_all")
    fine = await make_schedule(conn, "fine")
    await conn.execute(
        f"""CREATE FUNCTION pg_temp.conflict() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '{sqlstate}'; END $$"""
    )
    await conn.execute(
        f"""CREATE TRIGGER conflict BEFORE INSERT ON agentlab_sched.fires FOR EACH ROW
            WHEN (NEW.schedule_id = {flaky}) EXECUTE FUNCTION pg_temp.conflict()"""
    )
    report = await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert await fires(conn, flaky) == [] and await next_of(conn, flaky) == NINE  # left due, nothing recorded
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]
    assert report.retries >= 1 and report.fires == {"started": 1}
    await conn.execute("DROP TRIGGER conflict ON agentlab_sched.fires")
    await fire_due(conn, NINE + timedelta(seconds=6), settings=EN)
    assert [(f["kind"], f["status"]) for f in await fires(conn, flaky)] == [("scheduled", "started")]
