"""The history tables are partitioned by time: once-only across partitions, the DEFAULT partition and the
partitions made ahead, retention by dropping whole partitions (never live work)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from agentlab_sched.observe import health
from tests.support.rows import Conn, fetched

#: A day boundary (partitions are UTC days) far from the real clock: no partition exists for it.
MIDNIGHT = datetime(2031, 3, 1, tzinfo=UTC)


async def _schedule(conn: Conn, name: str = "s") -> int:
    cur = await conn.execute(
        "INSERT INTO agentlab_sched.schedules (name, cron, task, replan)"
        " VALUES (%s, '0 * * * *', 't', NULL) RETURNING id",
        (name,),
    )
    return fetched(await cur.fetchone())["id"]


async def _fire(conn: Conn, sid: int, at: datetime) -> None:
    await conn.execute(
        "INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status) VALUES (%s, %s, 'scheduled', 'started')",
        (sid, at),
    )


async def _where(conn: Conn, table: str) -> list[tuple[str, Any]]:
    cur = await conn.execute(
        f"SELECT tableoid::regclass::text AS part, fire_at FROM agentlab_sched.{table} ORDER BY fire_at"
    )
    return [(r["part"], r["fire_at"]) for r in await cur.fetchall()]


async def _parts(conn: Conn, parent: str) -> list[str]:
    cur = await conn.execute(
        "SELECT part FROM agentlab_sched.history_partitions() WHERE parent = %s ORDER BY part", (parent,)
    )
    return [r["part"] for r in await cur.fetchall()]


async def test_the_same_due_time_is_refused_in_any_partition_and_at_a_boundary(conn: Conn) -> None:
    sid = await _schedule(conn)
    await conn.execute("SELECT agentlab_sched.ensure_partitions(%s)", (MIDNIGHT - timedelta(days=1),))
    # The boundary instant belongs to the later day; the instant before it to the earlier one.
    await _fire(conn, sid, MIDNIGHT)
    await _fire(conn, sid, MIDNIGHT - timedelta(microseconds=1))
    assert await _where(conn, "fires") == [
        ("agentlab_sched_history.fires_p20310228", MIDNIGHT - timedelta(microseconds=1)),
        ("agentlab_sched_history.fires_p20310301", MIDNIGHT),
    ]
    for at in (MIDNIGHT, MIDNIGHT - timedelta(microseconds=1)):
        with pytest.raises(psycopg.errors.UniqueViolation) as err:
            async with conn.transaction():
                await _fire(conn, sid, at)
        assert err.value.diag.constraint_name is not None
        assert err.value.diag.constraint_name.startswith("fires_p")
    # A due time with no partition lands in the default; once its partition is made (moving it), the same
    # due time is still refused.
    later = MIDNIGHT + timedelta(days=30)
    await _fire(conn, sid, later)
    assert (await _where(conn, "fires"))[-1] == ("agentlab_sched_history.fires_default", later)
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with conn.transaction():
            await _fire(conn, sid, later)
    cur = await conn.execute("SELECT agentlab_sched.ensure_partitions(%s) AS made", (later,))
    made = fetched(await cur.fetchone())["made"]
    assert made["moved"] == 1
    assert (await _where(conn, "fires"))[-1] == ("agentlab_sched_history.fires_p20310331", later)
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with conn.transaction():
            await _fire(conn, sid, later)
    assert len(await _where(conn, "fires")) == 3


async def test_a_row_without_a_partition_is_kept_in_the_default_and_doctor_says_so(conn: Conn) -> None:
    sid = await _schedule(conn)
    await _fire(conn, sid, MIDNIGHT)
    await _fire(conn, sid, MIDNIGHT + timedelta(hours=1))
    cur = await conn.execute("SELECT agentlab_sched.doctor_facts() AS f")
    facts = fetched(await cur.fetchone())["f"]
    assert facts["default_partition_rows"] == {"fires": 2}
    [finding] = health._default_partitions(facts)
    assert (finding.check, finding.level) == ("partitions", "warning")
    assert finding.message("en") == (
        "history rows in a default partition (their period has no partition yet): 2 (fires: 2); "
        "housekeeping moves them into partitions of their own"
    )
    assert finding.message("zh-CN") == (
        "位于默认分区中的历史记录(其时段尚无分区):2 条(fires: 2);housekeeping 会把它们移入各自的分区"
    )
    # Housekeeping makes the partitions ahead of its clock and moves the rows into theirs.
    cur = await conn.execute(
        "SELECT agentlab_sched.housekeeping(%s::timestamptz) -> 'partitions' AS p", (MIDNIGHT - timedelta(days=3),)
    )
    made = fetched(await cur.fetchone())["p"]
    assert made["moved"] == 2
    assert [p for p in await _parts(conn, "fires") if p.startswith("fires_p2031")] == [
        "fires_p20310226",
        "fires_p20310227",
        "fires_p20310228",  # its day and the 2 ahead
        "fires_p20310301",  # made for the rows moved out of the default partition
    ]
    cur = await conn.execute("SELECT agentlab_sched.doctor_facts() AS f")
    assert fetched(await cur.fetchone())["f"]["default_partition_rows"] == {}
    assert [p for p, _ in await _where(conn, "fires")] == ["agentlab_sched_history.fires_p20310301"] * 2


async def test_retention_drops_whole_partitions_but_keeps_a_notification_still_to_send(conn: Conn) -> None:
    sid = await _schedule(conn)
    old = MIDNIGHT - timedelta(days=60)
    await _fire(conn, sid, old + timedelta(hours=1))
    await conn.execute(
        """INSERT INTO agentlab_sched.outbox (run_id, run_created_at, schedule_id, event)
           VALUES (gen_random_uuid(), %s, %s, 'finished')""",
        (old + timedelta(hours=2), sid),
    )
    await conn.execute(
        "INSERT INTO agentlab_sched.schedule_changes (schedule_id, schedule_name, operation, changed_at)"
        " VALUES (%s, 's', 'update', %s)",
        (sid, old),
    )
    # Every partition that ended before the cutoff goes (those of the real clock's days too, all empty),
    # but the outbox's day of the pending row.
    await conn.execute("SELECT agentlab_sched.ensure_partitions(%s)", (MIDNIGHT,))
    cur = await conn.execute(
        "SELECT count(*) AS n FROM agentlab_sched.history_partitions() WHERE upper_bound <= %s AND part <> %s",
        (MIDNIGHT - timedelta(days=30), "outbox_p20301231"),
    )
    expected = fetched(await cur.fetchone())["n"]
    cur = await conn.execute("SELECT agentlab_sched.prune(interval '30 days', %s) AS r", (MIDNIGHT,))
    assert fetched(await cur.fetchone())["r"] == {
        "fires": 1,
        "runs": 0,
        "jobs": 0,
        "requests": 0,
        "partitions": expected,
    }
    # The day of the ledger and the month of the audit went whole; the outbox's day waits for its row.
    assert "fires_p20301231" not in await _parts(conn, "fires")
    assert "schedule_changes_p203012" not in await _parts(conn, "schedule_changes")
    assert "outbox_p20301231" in await _parts(conn, "outbox")
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedule_changes WHERE changed_at = %s", (old,))
    assert fetched(await cur.fetchone())["n"] == 0
    await conn.execute("UPDATE agentlab_sched.outbox SET status = 'sent'")
    cur = await conn.execute("SELECT agentlab_sched.prune(interval '30 days', %s) -> 'partitions' AS n", (MIDNIGHT,))
    assert fetched(await cur.fetchone())["n"] == 1
    assert "outbox_p20301231" not in await _parts(conn, "outbox")
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.outbox")
    assert fetched(await cur.fetchone())["n"] == 0


async def test_a_runs_notification_is_once_only_across_the_outbox_partitions(conn: Conn) -> None:
    """The outbox is partitioned by its run's created_at, one value per run: the once-only key holds."""
    sid = await _schedule(conn)
    await conn.execute("SELECT agentlab_sched.ensure_partitions(%s)", (MIDNIGHT - timedelta(days=1),))
    row = "INSERT INTO agentlab_sched.outbox (run_id, run_created_at, schedule_id, event) VALUES (%s, %s, %s, 'failed')"
    run = "5f0c2d8e-0000-4000-8000-000000000001"
    await conn.execute(row, (run, MIDNIGHT, sid))
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with conn.transaction():
            await conn.execute(row, (run, MIDNIGHT, sid))
    cur = await conn.execute("SELECT tableoid::regclass::text AS part FROM agentlab_sched.outbox")
    assert [r["part"] for r in await cur.fetchall()] == ["agentlab_sched_history.outbox_p20310301"]
