"""Recording: a failed launch is filed against its own fire; a changed definition loses no due time; a
ledger row's created_at is when it was written; `overdue` shows schedules that stopped silently."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.core import planner
from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, fires, make_schedule, next_of, runs_of
from tests.support.rows import fetched

# --------------------------------------------------------------------------------------------------
# A launch error is filed against the fire that failed
# --------------------------------------------------------------------------------------------------


async def test_a_launch_error_is_recorded_against_its_own_fire_and_the_skip_row_stays(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Hourly, down 3h20m: the backlog skip row, then the catch-up launch, whose job insert fails (a queue
    name longer than Procrastinate takes)."""
    sid = await make_schedule(conn, cron="0 * * * *", queue="q" * 150)
    report = await fire_due(conn, NINE + timedelta(hours=3, minutes=20), settings=EN)
    rows = [(f["fire_at"] - NINE, f["kind"], f["status"], f["reason_code"]) for f in await fires(conn, sid)]
    assert rows == [
        (timedelta(0), "misfire", "skipped_misfire", "misfire.backlog"),
        (timedelta(hours=3), "misfire", "failed_to_start", "launch.error"),
    ]
    assert await runs_of(conn, sid) == []
    assert await next_of(conn, sid) == NINE + timedelta(hours=4)
    assert report.errors == 1


async def test_with_catchup_all_each_failed_launch_has_its_row(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(
        conn, cron="*/10 * * * *", catchup="all", max_catchup=3, overlap="allow_all", queue="q" * 150
    )
    await fire_due(conn, NINE + timedelta(hours=2, minutes=1), settings=EN)
    rows = [(f["fire_at"] - NINE, f["kind"], f["status"]) for f in await fires(conn, sid)]
    assert rows == [
        (timedelta(0), "misfire", "skipped_misfire"),
        (timedelta(hours=1, minutes=40), "misfire", "failed_to_start"),
        (timedelta(hours=1, minutes=50), "misfire", "failed_to_start"),
        (timedelta(hours=2), "scheduled", "failed_to_start"),
    ]
    cur = await conn.execute("SELECT consecutive_failures FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert fetched(await cur.fetchone())["consecutive_failures"] == 3


# --------------------------------------------------------------------------------------------------
# A changed definition loses no due time
# --------------------------------------------------------------------------------------------------


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def _state(cron: str, tz: str, pending: datetime, changed: datetime, replan: str = "pending") -> planner.ScheduleState:
    return planner.ScheduleState(
        id=1,
        name="s",
        cron=cron,
        timezone=tz,
        enabled=True,
        next_run_at=pending,
        replan=replan,
        misfire_grace=timedelta(hours=1),
        replan_at=changed,
    )


@pytest.mark.parametrize(
    ("cron", "tz", "pending", "changed", "expected"),
    [
        # Daily 09:00 UTC moved to Shanghai at 10:00 UTC: the next is 09:00 Shanghai tomorrow (01:00 UTC),
        # not the day after (continuing from the old pending time skipped a day).
        ("0 9 * * *", "Asia/Shanghai", _utc(2026, 10, 6, 9), _utc(2026, 10, 5, 10), _utc(2026, 10, 6, 1)),
        # Daily changed to hourly at 10:00:30: 11:00 today, not 09:00 tomorrow.
        ("0 * * * *", "UTC", _utc(2026, 10, 6, 9), _utc(2026, 10, 5, 10, 0, 30), _utc(2026, 10, 5, 11)),
        # A missed 09:00 (past at the change) that the new definition still has: it still fires.
        ("0 9,10 * * *", "UTC", _utc(2026, 10, 5, 9), _utc(2026, 10, 5, 9, 0, 30), _utc(2026, 10, 5, 9)),
        # A missed 09:00 the new definition does not have: its first due time after the change.
        ("0 10 * * *", "UTC", _utc(2026, 10, 5, 9), _utc(2026, 10, 5, 9, 0, 30), _utc(2026, 10, 5, 10)),
        ("0 8 * * *", "UTC", _utc(2026, 10, 5, 9), _utc(2026, 10, 5, 9, 0, 30), _utc(2026, 10, 6, 8)),
    ],
)
def test_a_changed_definition_continues_from_the_moment_of_the_change(
    cron: str, tz: str, pending: datetime, changed: datetime, expected: datetime
) -> None:
    # Planned long after the change (a worker's late tick): the answer does not move.
    for now in (changed, changed + timedelta(minutes=30)):
        assert planner.next_after_change(_state(cron, tz, pending, changed), now) == expected


async def _clock(conn: psycopg.AsyncConnection[DictRow]) -> datetime:
    cur = await conn.execute("SELECT clock_timestamp() AS t")
    return fetched(await cur.fetchone())["t"]


def _minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0) + timedelta(minutes=1)


@pytest.mark.parametrize(
    "change",
    [
        "SELECT agentlab_sched.resume('m')",
        "SELECT agentlab_sched.alter_schedule('m', cron => '* * * * *', enabled => true)",
        "SELECT agentlab_sched.schedule('m', '* * * * *', 'demo.echo', enabled => true)",
    ],
)
async def test_a_change_in_sql_is_planned_from_its_own_moment_not_the_next_tick(
    conn: psycopg.AsyncConnection[DictRow], change: str
) -> None:
    """Every-minute, resumed or redefined in SQL, first planned by a worker three minutes later: the due
    times in between are the tick's backlog (one skip row naming them), not dropped without a row."""
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    await conn.execute("SELECT agentlab_sched.schedule('m', '0 0 1 1 *', 'demo.echo', enabled => false)")
    if "resume" in change:
        await conn.execute("SELECT agentlab_sched.alter_schedule('m', cron => '* * * * *')")
    before = await _clock(conn)
    await conn.execute(change)
    cur = await conn.execute("SELECT id, replan, replan_at FROM agentlab_sched.schedules WHERE name = 'm'")
    row = fetched(await cur.fetchone())
    assert row["replan"] == "now" and row["replan_at"] >= before
    now = row["replan_at"] + timedelta(minutes=3)
    await fire_due(conn, now, settings=EN)
    first = _minute(row["replan_at"])
    rows = await fires(conn, row["id"])
    assert (rows[0]["fire_at"], rows[0]["status"], rows[0]["reason_code"]) == (
        first,
        "skipped_misfire",
        "misfire.backlog",
    )
    assert (rows[-1]["status"], rows[-1]["fire_at"]) == ("started", now.replace(second=0, microsecond=0))


async def test_a_cron_change_in_sql_from_a_future_pending_time_loses_nothing(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Yearly (pending next January) changed to every minute: planned from the change, not from January."""
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    await conn.execute("SELECT agentlab_sched.schedule('y', '0 0 1 1 *', 'demo.echo', overlap => 'allow_all')")
    cur = await conn.execute("SELECT id FROM agentlab_sched.schedules WHERE name = 'y'")
    sid = fetched(await cur.fetchone())["id"]
    from agentlab_sched.schedules.replan import replan

    await replan(conn)
    assert fetched(await next_of(conn, sid)).month == 1
    await conn.execute("SELECT agentlab_sched.alter_schedule('y', cron => '* * * * *')")
    cur = await conn.execute("SELECT replan, replan_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    row = fetched(await cur.fetchone())
    assert row["replan"] == "pending"
    first = _minute(row["replan_at"])
    await fire_due(conn, first + timedelta(seconds=5), settings=EN)
    assert [(f["fire_at"], f["kind"], f["status"]) for f in await fires(conn, sid)] == [(first, "scheduled", "started")]


# --------------------------------------------------------------------------------------------------
# created_at is when the row was written
# --------------------------------------------------------------------------------------------------


async def test_a_ledger_row_is_stamped_when_it_is_written_not_when_the_transaction_began(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    simple = await make_schedule(conn, "simple")
    other = await make_schedule(conn, "other", cron="0 * * * *")  # backlog + catch-up: applied one by one
    async with conn.transaction():
        cur = await conn.execute("SELECT now() AS began, pg_sleep(0.3)")
        began = fetched(await cur.fetchone())["began"]
        await fire_due(conn, NINE + timedelta(hours=3, minutes=20), settings=EN)
    for sid in (simple, other):
        for f in await fires(conn, sid):
            assert f["created_at"] - began >= timedelta(seconds=0.3), f


# --------------------------------------------------------------------------------------------------
# overdue: a silent stop made visible
# --------------------------------------------------------------------------------------------------


async def test_overdue_shows_enabled_schedules_that_will_never_fire_again(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    broken = await make_schedule(conn, "broken")
    await make_schedule(conn, "fine")
    await make_schedule(conn, "ended", next_run_at=None, ends_at=datetime(2020, 1, 1, tzinfo=UTC))
    await make_schedule(conn, "used-up", next_run_at=None, remaining_runs=0)
    await make_schedule(conn, "paused", enabled=False)
    await conn.execute("SET session_replication_role = replica")  # a cron that no longer parses
    await conn.execute("UPDATE agentlab_sched.schedules SET cron = '0 25 * * *' WHERE id = %s", (broken,))
    await conn.execute("SET session_replication_role = DEFAULT")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert await next_of(conn, broken) is None
    cur = await conn.execute("SELECT name, problem, next_run_at FROM agentlab_sched.overdue ORDER BY name")
    rows = await cur.fetchall()
    # "fine" is planned for tomorrow (NINE is in the past of the real clock: it shows as late, not stopped).
    assert {r["name"]: r["problem"] for r in rows}["broken"] == "stopped"
    assert {r["name"] for r in rows} & {"ended", "used-up", "paused"} == set()
