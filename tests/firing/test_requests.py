"""Manual and backfill requests: each its own fire or its own error; none can stop another or a schedule."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.errors import Conflict, ValidationError
from agentlab_sched.firing.requests import backfill, trigger
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.schedules import admin
from tests.support.firing_helpers import EN, NINE, fires, job, make_schedule, next_of, runs_of
from tests.support.rows import fetched


async def _requests(conn: psycopg.AsyncConnection[DictRow]) -> list[dict[str, Any]]:
    # Not fire_at / until: an infinite one has no Python value.
    cur = await conn.execute(
        """SELECT id, kind, status, overlap, error_code, error_params, error, outcome, fire_ids, done_at
           FROM agentlab_sched.fire_requests ORDER BY id"""
    )
    return await cur.fetchall()


async def _one(conn: psycopg.AsyncConnection[DictRow], sql: str, *params: Any) -> Any:
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


# --------------------------------------------------------------------------------------------------
# Every request its own fire
# --------------------------------------------------------------------------------------------------


async def test_five_sql_triggers_in_one_statement_get_five_fires(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """Same millisecond, same schedule (allow_all): five requests, five fires, each linked to its own."""
    sid = await make_schedule(conn, overlap="allow_all")
    cur = await conn.execute("SELECT " + ", ".join(f"agentlab_sched.trigger('store-report') AS r{i}" for i in range(5)))
    ids = list(fetched(await cur.fetchone()).values())
    assert len(set(ids)) == 5
    await fire_due(conn, NINE - timedelta(hours=1), settings=EN)
    rows = await fires(conn, sid)
    assert [(f["kind"], f["status"]) for f in rows] == [("manual", "started")] * 5
    assert len({f["fire_at"] for f in rows}) == 5
    assert sorted(f["request_id"] for f in rows) == sorted(ids)
    reqs = await _requests(conn)
    assert [(r["status"], r["error"], r["outcome"]) for r in reqs] == [("done", None, {"started": 1})] * 5
    assert sorted(r["fire_ids"][0] for r in reqs) == sorted(f["id"] for f in rows)
    assert len(await runs_of(conn, sid)) == 5


async def test_python_triggers_at_once_each_get_their_own_fire(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    sid = await make_schedule(conn, overlap="allow_all")
    others = [await db.connect(db_url, locale="en") for _ in range(5)]
    try:
        outcomes = await asyncio.gather(*(trigger(c, "store-report", settings=EN) for c in others))
    finally:
        for c in others:
            await c.close()
    assert [o.status for o in outcomes] == ["started"] * 5
    assert len({o.fire_id for o in outcomes}) == 5 and len({o.fire_at for o in outcomes}) == 5
    assert len(await fires(conn, sid)) == 5


# --------------------------------------------------------------------------------------------------
# A request that fails, fails alone
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "field", "message"),
    [
        (
            "-infinity",
            "2026-10-01",
            "from",
            "backfill: from -infinity is outside the range a backfill can cover (1900-01-01 00:00 to "
            "9000-01-01 00:00, UTC)",
        ),
        (
            "2026-10-01",
            "infinity",
            "to",
            "backfill: to infinity is outside the range a backfill can cover (1900-01-01 00:00 to "
            "9000-01-01 00:00, UTC)",
        ),
        (
            "9999-12-30 00:00+00",
            "9999-12-31 00:00+00",
            "from",
            "backfill: from 9999-12-30 00:00 is outside the range a backfill can cover (1900-01-01 00:00 to "
            "9000-01-01 00:00, UTC)",
        ),
        (
            "2026-10-02",
            "2026-10-01",
            "from",
            "backfill: the start 2026-10-02 00:00 must be before the end 2026-10-01 00:00",
        ),
    ],
)
def test_sql_backfill_refuses_an_unbounded_or_out_of_range_range_at_once(
    sync_conn: psycopg.Connection[DictRow], start: str, end: str, field: str, message: str
) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('r', '* * * * * *', 'demo.echo')")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        sync_conn.execute("SELECT agentlab_sched.backfill('r', %s::timestamptz, %s::timestamptz)", (start, end))
    assert (err.value.diag.column_name, err.value.diag.message_primary) == (field, message)
    assert sync_conn.execute("SELECT count(*) AS n FROM agentlab_sched.fire_requests").fetchone() == {"n": 0}


async def test_a_request_that_cannot_be_carried_out_fails_alone_and_is_not_retried(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Requests written around backfill()'s checks: each is marked failed with its reason; schedules fire."""
    bad = await make_schedule(conn, "bad", cron="* * * * * *", timezone="UTC", next_run_at=None)
    due = await make_schedule(conn, "due", overlap="allow_all")
    for start, end in (("-infinity", "infinity"), ("9999-12-30 00:00+00", "9999-12-31 00:00+00")):
        await conn.execute(
            """INSERT INTO agentlab_sched.fire_requests (schedule_id, kind, fire_at, until, requested_by)
               VALUES (%s, 'backfill', %s, %s, 'backfill:someone')""",
            (bad, start, end),
        )
    await conn.execute("SELECT agentlab_sched.trigger('due')")
    report = await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert [(f["kind"], f["status"]) for f in await fires(conn, due)] == [
        ("scheduled", "started"),
        ("manual", "started"),
    ]
    assert await fires(conn, bad) == []
    first, second, manual = await _requests(conn)
    assert (first["status"], first["error_code"], first["error"]) == (
        "failed",
        "backfill.out_of_range",
        "backfill: from -infinity is outside the range a backfill can cover (1900-01-01 00:00 to 9000-01-01 00:00, "
        "UTC)",
    )
    assert (second["status"], second["error_code"]) == ("failed", "backfill.out_of_range")
    assert manual["status"] == "done"
    zh = await _one(
        conn,
        "SELECT agentlab_sched.msg(error_code, error_params, 'zh-CN') FROM agentlab_sched.fire_requests WHERE id = %s",
        first["id"],
    )
    assert zh == "补跑:「起始时间」-infinity 超出补跑可覆盖的范围(1900-01-01 00:00 至 9000-01-01 00:00,UTC)"
    assert report.requests == 1  # the manual one; the other two were refused by the claim itself
    # Never tried again.
    again = await fire_due(conn, NINE + timedelta(seconds=6), settings=EN)
    assert again.requests == 0
    assert [r["done_at"] for r in await _requests(conn)] == [first["done_at"], second["done_at"], manual["done_at"]]


async def test_a_request_whose_schedule_is_locked_holds_up_nothing(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    """Another session holds the requested schedule's row: the tick fires the due schedule and moves on; the
    request waits for a later tick."""
    locked = await make_schedule(conn, "locked", next_run_at=NINE + timedelta(days=1))
    due = await make_schedule(conn, "due")
    await conn.execute("SELECT agentlab_sched.trigger('locked')")
    holder = await db.connect(db_url, locale="en", autocommit=False)
    try:
        await holder.execute("SELECT 1 FROM agentlab_sched.schedules WHERE id = %s FOR UPDATE", (locked,))
        await asyncio.wait_for(fire_due(conn, NINE + timedelta(seconds=5), settings=EN), timeout=20)
        assert [f["status"] for f in await fires(conn, due)] == ["started"]
        assert await fires(conn, locked) == []
        assert [r["status"] for r in await _requests(conn)] == ["pending"]
    finally:
        # Rollback waits for the server to release the lock; close() alone may return before it has.
        await holder.rollback()
        await holder.close()
    await fire_due(conn, NINE + timedelta(seconds=6), settings=EN)
    assert [(f["kind"], f["status"]) for f in await fires(conn, locked)] == [("manual", "started")]
    assert [r["status"] for r in await _requests(conn)] == ["done"]


# --------------------------------------------------------------------------------------------------
# Counting stops at the limit
# --------------------------------------------------------------------------------------------------


async def test_a_per_second_backfill_over_a_year_is_refused_at_once(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, cron="* * * * * *", timezone="UTC")
    began = time.perf_counter()
    with pytest.raises(ValidationError) as err:
        await backfill(conn, "store-report", NINE - timedelta(days=365), NINE, settings=EN)
    assert time.perf_counter() - began < 5.0  # counting 31 million due times took over a minute
    assert err.value.code == "backfill.too_many" and "more than 1000 due times" in err.value.message("en")
    # The same asked for in SQL: refused when asked, nothing written.
    with pytest.raises(psycopg.errors.InvalidParameterValue) as raw:
        await conn.execute("SELECT agentlab_sched.backfill('store-report', %s, %s)", (NINE - timedelta(days=365), NINE))
    assert json.loads(raw.value.diag.message_detail or "{}")["code"] == "backfill.too_many"
    assert await _requests(conn) == []
    # A cron SQL cannot count by periods (months named): the worker refuses it as quickly, and says why on
    # the request.
    await conn.execute("SELECT agentlab_sched.alter_schedule('store-report', cron => '* * * 1-12 * *')")
    await conn.execute("SELECT agentlab_sched.backfill('store-report', %s, %s)", (NINE - timedelta(days=365), NINE))
    began = time.perf_counter()
    await fire_due(conn, NINE - timedelta(days=400), settings=EN)
    assert time.perf_counter() - began < 5.0
    [req] = await _requests(conn)
    assert (req["status"], req["error_code"], req["error_params"]["limit"]) == ("failed", "backfill.too_many", 1000)
    assert await fires(conn, sid) == []


async def test_schedules_next_count_is_bounded(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await make_schedule(conn, cron="* * * * * *", timezone="UTC")
    with pytest.raises(ValidationError) as err:
        await admin.upcoming(conn, "store-report", 1_000_000)
    assert err.value.field == "count"
    assert err.value.message("en") == "count: 1000000 is outside 1-1000"
    assert err.value.message("zh-CN") == "「数量」的取值 1000000 超出 1-1000"
    assert len(await admin.upcoming(conn, "store-report", 1000, after=NINE)) == 1000


# --------------------------------------------------------------------------------------------------
# Backfill and overlap
# --------------------------------------------------------------------------------------------------

MONDAYS = (NINE - timedelta(days=28), NINE - timedelta(days=7))  # four Mondays at 09:00 Shanghai


async def test_backfill_runs_every_due_time_in_order_by_default(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """A default (skip) schedule: the backfill's own policy, buffer_all, queues all four behind one lock."""
    sid = await make_schedule(conn, cron="0 9 * * 1")
    result = await backfill(conn, "store-report", *MONDAYS, settings=EN)
    assert [(o.status, o.fire_at) for o in result] == [
        ("started", MONDAYS[0] + timedelta(days=7 * i)) for i in range(4)
    ]
    assert (result.counts, result.launched, result.not_launched) == ({"started": 4}, 4, 0)
    jobs = [await job(conn, r["job_id"]) for r in await runs_of(conn, sid)]
    assert [j["lock"] for j in jobs] == [f"agentlab_sched:{sid}"] * 4


async def test_backfill_with_its_own_overlap_says_what_was_not_launched(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await make_schedule(conn, cron="0 9 * * 1", overlap="allow_all")
    result = await backfill(conn, "store-report", *MONDAYS, overlap="skip", settings=EN)
    assert [o.status for o in result] == ["started"] + ["skipped_overlap"] * 3
    assert (result.counts, result.launched, result.not_launched) == ({"started": 1, "skipped_overlap": 3}, 1, 3)
    assert all(o.reason and o.reason.startswith("the previous run #") for o in result.fires[1:])


async def test_sql_backfill_takes_an_overlap_and_the_request_reports_its_outcome(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(conn, cron="0 9 * * 1")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        await conn.execute("SELECT agentlab_sched.backfill('store-report', %s, %s, overlap => 'never')", MONDAYS)
    assert err.value.diag.column_name == "overlap"
    rid = await _one(conn, "SELECT agentlab_sched.backfill('store-report', %s, %s, overlap => 'skip')", *MONDAYS)
    await fire_due(conn, NINE - timedelta(hours=1), settings=EN)
    [req] = await _requests(conn)
    assert (req["id"], req["overlap"], req["status"], req["outcome"]) == (
        rid,
        "skip",
        "done",
        {"started": 1, "skipped_overlap": 3},
    )
    rows = await fires(conn, sid)
    assert req["fire_ids"] == [f["id"] for f in rows] and {f["request_id"] for f in rows} == {rid}
    # The default is buffer_all.
    await conn.execute("SELECT agentlab_sched.backfill('store-report', %s, %s)", (MONDAYS[0], MONDAYS[1]))
    cur = await conn.execute("SELECT overlap FROM agentlab_sched.fire_requests ORDER BY id DESC LIMIT 1")
    assert fetched(await cur.fetchone())["overlap"] == "buffer_all"


# --------------------------------------------------------------------------------------------------
# Paused schedules
# --------------------------------------------------------------------------------------------------


async def test_trigger_on_a_paused_schedule_is_refused_unless_asked(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, enabled=False, overlap="allow_all")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as err:
        await conn.execute("SELECT agentlab_sched.trigger('store-report')")
    assert err.value.diag.message_primary == (
        'schedule "store-report" is paused; resume it first, or fire it anyway with even_if_paused '
        "(CLI: --even-if-paused)"
    )
    with pytest.raises(Conflict) as refused:
        await trigger(conn, "store-report", settings=EN)
    assert refused.value.code == "trigger.paused"
    assert await _requests(conn) == [] and await fires(conn, sid) == []

    outcome = await trigger(conn, "store-report", even_if_paused=True, settings=EN)
    assert (outcome.status, outcome.paused) == ("started", True)
    await conn.execute("SELECT agentlab_sched.trigger('store-report', even_if_paused => true)")
    await fire_due(conn, NINE, settings=EN)
    assert [(f["kind"], f["status"]) for f in await fires(conn, sid)] == [("manual", "started")] * 2
    cur = await conn.execute("SELECT enabled, next_run_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert await cur.fetchone() == {"enabled": False, "next_run_at": None}  # still paused


async def test_a_request_made_before_a_pause_fails_saying_so(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    await conn.execute("SELECT agentlab_sched.trigger('store-report')")
    await conn.execute("SELECT agentlab_sched.pause('store-report')")
    await fire_due(conn, NINE - timedelta(hours=1), settings=EN)
    [req] = await _requests(conn)
    assert (req["status"], req["error_code"]) == ("failed", "trigger.paused")
    assert await fires(conn, sid) == []


# --------------------------------------------------------------------------------------------------
# remaining_runs
# --------------------------------------------------------------------------------------------------


async def test_catchup_all_never_launches_more_than_remaining_runs(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(
        conn, cron="* * * * *", timezone="UTC", catchup="all", remaining_runs=1, overlap="allow_all"
    )
    await fire_due(conn, NINE + timedelta(minutes=5, seconds=1), settings=EN)
    rows = [(f["fire_at"] - NINE, f["status"]) for f in await fires(conn, sid)]
    assert rows == [(timedelta(0), "skipped_misfire"), (timedelta(minutes=5), "started")]
    assert len(await runs_of(conn, sid)) == 1
    cur = await conn.execute("SELECT remaining_runs, next_run_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert await cur.fetchone() == {"remaining_runs": 0, "next_run_at": None}


async def test_manual_and_backfill_fires_do_not_count_against_remaining_runs(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(conn, overlap="allow_all", remaining_runs=2)
    assert (await trigger(conn, "store-report", settings=EN)).status == "started"
    result = await backfill(conn, "store-report", NINE - timedelta(days=3), NINE - timedelta(days=1), settings=EN)
    assert result.launched == 3
    cur = await conn.execute("SELECT remaining_runs FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert fetched(await cur.fetchone())["remaining_runs"] == 2
    # At 0 (finished): a manual fire is still allowed, and leaves it at 0.
    await conn.execute(
        "UPDATE agentlab_sched.schedules SET remaining_runs = 0, next_run_at = NULL WHERE id = %s", (sid,)
    )
    assert (await trigger(conn, "store-report", settings=EN)).status == "started"
    cur = await conn.execute("SELECT remaining_runs, next_run_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert await cur.fetchone() == {"remaining_runs": 0, "next_run_at": None}
    assert await next_of(conn, sid) is None
