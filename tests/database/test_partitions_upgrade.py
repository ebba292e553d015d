"""Upgrading a database that has history to the partitioned tables: the existing rows stay where they
are (the old table becomes a partition), nothing is lost or written twice, and a tick firing while
`migrate` runs carries on."""

from __future__ import annotations

import asyncio
import concurrent.futures
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.database import migrate as migrate_module
from agentlab_sched.firing.tick import fire_due
from bench.history_upgrade import PARTITIONING, migrate_before_partitioning
from tests.support.firing_helpers import EN, make_schedule
from tests.support.rows import fetched

#: A minute boundary: every schedule below is due each minute from here.
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
SCHEDULES = 20


async def _waiting_on_locks(conn: psycopg.AsyncConnection[DictRow], n: int) -> None:
    """Until ``n`` sessions of this database wait for a lock (at most 20 s)."""
    for _ in range(400):
        cur = await conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if fetched(await cur.fetchone())["n"] >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} sessions never waited for a lock")


async def test_migrate_keeps_the_history_and_a_concurrent_tick_loses_nothing(
    empty_db_url: str,
) -> None:
    migrate_before_partitioning(empty_db_url)

    conn = await db.connect(empty_db_url, locale="en")
    ticker = await db.connect(empty_db_url, locale="en")
    try:
        cur = await conn.execute("SELECT relkind FROM pg_class WHERE oid = 'agentlab_sched.fires'::regclass")
        assert fetched(await cur.fetchone())["relkind"] == "r"
        for i in range(SCHEDULES):
            await make_schedule(conn, f"s{i:02}", cron="* * * * *", timezone="UTC", next_run_at=T0, overlap="allow_all")
        for minute in range(2):
            report = await fire_due(conn, T0 + timedelta(minutes=minute, seconds=1), settings=EN)
            assert report.fires.get("started") == SCHEDULES
        cur = await conn.execute("SELECT id, schedule_id, fire_at, run_id FROM agentlab_sched.fires ORDER BY id")
        old_fires = await cur.fetchall()
        cur = await conn.execute("SELECT id, fire_id, created_at FROM agentlab_sched.runs ORDER BY id")
        old_runs = await cur.fetchall()
        assert len(old_fires) == len(old_runs) == 2 * SCHEDULES

        async def tick() -> int:
            launched = 0
            for minute in range(2, 7):
                ticked = await fire_due(ticker, T0 + timedelta(minutes=minute, seconds=1), settings=EN)
                launched += ticked.fires.get("started", 0)
            return launched

        # A reader holds the ledger while migrate starts: migrate waits for it (holding the runs table),
        # the tick then waits behind migrate; the reader lets go and both go on, migrate first.
        blocker = await db.connect(empty_db_url, locale="en")
        await blocker.set_autocommit(False)
        await blocker.execute("LOCK TABLE agentlab_sched.fires IN ACCESS SHARE MODE")
        migrating = asyncio.create_task(asyncio.to_thread(migrate_module.migrate, empty_db_url, cron_schema=None))
        await _waiting_on_locks(conn, 1)
        firing = asyncio.create_task(tick())
        await _waiting_on_locks(conn, 2)
        await blocker.commit()
        await blocker.close()
        migrated = await migrating
        assert migrated.applied == [PARTITIONING]
        assert await firing == 5 * SCHEDULES

        cur = await conn.execute("SELECT relkind FROM pg_class WHERE oid = 'agentlab_sched.fires'::regclass")
        assert fetched(await cur.fetchone())["relkind"] == "p"
        cur = await conn.execute("SELECT id, schedule_id, fire_at, run_id FROM agentlab_sched.fires ORDER BY id")
        fires = await cur.fetchall()
        cur = await conn.execute("SELECT id, fire_id, created_at FROM agentlab_sched.runs ORDER BY id")
        runs = await cur.fetchall()
        # Nothing lost, nothing twice: every old row as it was, one fire per schedule and minute.
        assert [f for f in fires if f["id"] <= old_fires[-1]["id"]] == old_fires
        assert all(r in runs for r in old_runs)
        assert len(fires) == len(runs) == 7 * SCHEDULES
        assert len({(f["schedule_id"], f["fire_at"]) for f in fires}) == 7 * SCHEDULES
        assert {f["run_id"] for f in fires} == {r["id"] for r in runs}
        # The old rows sit in the old table, now a partition; numbering went on from it.
        cur = await conn.execute(
            "SELECT tableoid::regclass::text AS part, count(*) AS n FROM agentlab_sched.fires"
            " WHERE id <= %s GROUP BY 1",
            (old_fires[-1]["id"],),
        )
        assert await cur.fetchall() == [{"part": "agentlab_sched_history.fires_legacy", "n": 2 * SCHEDULES}]
        # The next tick writes on, and the same due time again is refused.
        report = await fire_due(conn, T0 + timedelta(minutes=7, seconds=1), settings=EN)
        assert report.fires.get("started") == SCHEDULES
        cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fires")
        assert fetched(await cur.fetchone())["n"] == 8 * SCHEDULES
    finally:
        await conn.close()
        await ticker.close()


def test_a_tick_that_claims_then_advances_schedules_makes_no_deadlock_with_migrate(
    empty_db_url: str,
) -> None:
    # A tick claims schedules (FOR UPDATE), then advances them (UPDATE), in one transaction. Migrate took a
    # weaker lock on schedules in between (adding a foreign key to it), then wanted it whole (a column
    # added): the tick's UPDATE waited for migrate, and migrate for the tick's claim. With firing on at
    # 5,000,000 ledger rows every attempt of migrate met this deadlock (bench/history_upgrade.py). Migrate
    # now takes the tables firing writes whole at once, in short tries, before it changes any.
    migrate_before_partitioning(empty_db_url)

    async def waiting(n: int) -> None:
        conn = await db.connect(empty_db_url, locale="en")
        try:
            await _waiting_on_locks(conn, n)
        finally:
            await conn.close()

    with psycopg.connect(empty_db_url) as tick:
        tick.execute("SELECT id FROM agentlab_sched.schedules FOR UPDATE")  # the claim
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            migrating = pool.submit(migrate_module.migrate, empty_db_url, cron_schema=None)
            asyncio.run(waiting(1))  # migrate tries for the tables
            tick.execute("UPDATE agentlab_sched.schedules SET enabled = enabled WHERE false")  # the advance
            tick.commit()
            report = migrating.result(timeout=60)
    assert report.applied == [PARTITIONING]
    with psycopg.connect(empty_db_url) as conn:
        kinds = conn.execute(
            "SELECT relname, relkind FROM pg_class WHERE oid IN ('agentlab_sched.fires'::regclass,"
            " 'agentlab_sched.runs'::regclass) ORDER BY relname"
        ).fetchall()
    assert kinds == [("fires", "p"), ("runs", "p")]
