"""Retention's checks for live work read by index: a prune looks at the open runs (few, runs_open_idx),
never at every finished run of the partitions it keeps; and it takes the parents' locks (which firing
needs) only after every partition it drops was checked and counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.rows import Conn, fetched

#: Far from the real clock: the partitions of these days exist only because the test makes them.
NOW = datetime(2031, 6, 10, 12, tzinfo=UTC)
OLD = NOW - timedelta(days=40)


async def _history(conn: Conn, sid: int, day: datetime, n: int, status: str) -> None:
    """``n`` fires of ``day``, each with its run in ``status`` (created that day)."""
    await conn.execute(
        """WITH f AS (
               INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status)
               SELECT %(sid)s, %(day)s + g * interval '1 second', 'scheduled', 'started'
               FROM generate_series(1, %(n)s) g
               RETURNING id, fire_at)
           INSERT INTO agentlab_sched.runs (schedule_id, fire_id, task, status, started_by, created_at, finished_at)
           SELECT %(sid)s, f.id, 't', %(status)s, 'schedule', f.fire_at,
                  CASE WHEN %(status)s = 'running' THEN NULL ELSE f.fire_at END
           FROM f""",
        {"sid": sid, "day": day, "n": n, "status": status},
    )
    await conn.execute(
        "UPDATE agentlab_sched.fires f SET run_id = r.id FROM agentlab_sched.runs r"
        " WHERE r.fire_id = f.id AND f.run_id IS NULL"
    )


async def _parts(conn: Conn, *names: str) -> list[str]:
    """Which of the partitions ``names`` exist."""
    cur = await conn.execute(
        "SELECT part FROM agentlab_sched.history_partitions() WHERE part = ANY(%s) ORDER BY part", (list(names),)
    )
    return [r["part"] for r in await cur.fetchall()]


async def _seq_read(conn: Conn, part: str) -> int:
    """Rows this session read from ``part`` by sequential scans and has not reported yet."""
    cur = await conn.execute(
        "SELECT coalesce(sum(seq_tup_read), 0) AS n FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'agentlab_sched_history' AND relname = %s",
        (part,),
    )
    return int(fetched(await cur.fetchone())["n"])


async def test_prune_checks_live_work_by_index_not_by_reading_the_kept_history(conn: Conn) -> None:
    cur = await conn.execute(
        "INSERT INTO agentlab_sched.schedules (name, cron, task, replan) VALUES ('s', '* * * * * *', 't', NULL)"
        " RETURNING id"
    )
    sid = fetched(await cur.fetchone())["id"]
    for day in (OLD, OLD + timedelta(days=1), NOW - timedelta(hours=1)):
        await conn.execute("SELECT agentlab_sched.ensure_partitions(%s)", (day,))
    await _history(conn, sid, OLD, 500, "succeeded")  # past the retention, finished: dropped
    await _history(conn, sid, OLD + timedelta(days=1), 200, "succeeded")  # past it, but one run still runs
    await _history(conn, sid, OLD + timedelta(days=1, hours=1), 1, "running")
    await _history(conn, sid, NOW - timedelta(hours=1), 3000, "succeeded")  # kept: today's history
    await conn.execute("ANALYZE agentlab_sched.runs")
    await conn.execute("ANALYZE agentlab_sched.fires")

    today = f"runs_p{NOW:%Y%m%d}"
    async with conn.transaction():
        # The session's counts not yet reported (PostgreSQL 15+ reports them now and then): before and after.
        before = await _seq_read(conn, today)
        cur = await conn.execute("SELECT agentlab_sched.prune(interval '30 days', %s) AS r", (NOW,))
        report = fetched(await cur.fetchone())["r"]
        read = await _seq_read(conn, today) - before
    assert (report["fires"], report["runs"]) == (500, 500)
    # The day with a running run is kept, fires and runs; today's 3,000 finished runs were not read.
    gone, kept = f"{OLD:%Y%m%d}", f"{OLD + timedelta(days=1):%Y%m%d}"
    names = [f"{table}_p{day}" for table in ("fires", "runs") for day in (gone, kept)]
    assert await _parts(conn, *names) == [f"fires_p{kept}", f"runs_p{kept}"]
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE created_at < %s) AS old, count(*) AS n FROM agentlab_sched.runs",
        (NOW - timedelta(days=2),),
    )
    assert fetched(await cur.fetchone()) == {"old": 201, "n": 3201}
    assert read < 100, f"prune read {read} rows of {today} by sequential scan"


async def test_a_partition_being_written_is_skipped_not_waited_for(conn: Conn, db_url: str) -> None:
    """A transaction writing the ledger (a backfill into an old day, here) holds the fires table: prune
    waits at most 200 ms for it, leaves the fires' partitions for its next round, and drops the others."""
    import psycopg

    cur = await conn.execute(
        "INSERT INTO agentlab_sched.schedules (name, cron, task, replan) VALUES ('s', '* * * * * *', 't', NULL)"
        " RETURNING id"
    )
    sid = fetched(await cur.fetchone())["id"]
    for day in (OLD, OLD + timedelta(days=1)):
        await conn.execute("SELECT agentlab_sched.ensure_partitions(%s)", (day,))
    await _history(conn, sid, OLD, 10, "succeeded")
    await _history(conn, sid, OLD + timedelta(days=1), 10, "succeeded")
    async with await psycopg.AsyncConnection.connect(db_url) as writer:
        async with writer.transaction():
            await writer.execute(
                "INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status)"
                " VALUES (%s, %s, 'backfill', 'started')",
                (sid, OLD + timedelta(days=1, hours=5)),
            )
            cur = await conn.execute("SELECT agentlab_sched.prune(interval '30 days', %s) AS r", (NOW,))
            report = fetched(await cur.fetchone())["r"]
    # The runs of both days go; the fires stay, every partition, until nobody writes the table.
    assert (report["fires"], report["runs"]) == (0, 20)
    days = [f"{OLD:%Y%m%d}", f"{OLD + timedelta(days=1):%Y%m%d}"]
    names = [f"{table}_p{day}" for table in ("fires", "runs") for day in days]
    assert await _parts(conn, *names) == [f"fires_p{d}" for d in days]
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fires")
    assert fetched(await cur.fetchone())["n"] == 21
    # Next round, with the writer gone: the fires go too.
    cur = await conn.execute("SELECT agentlab_sched.prune(interval '30 days', %s) AS r", (NOW,))
    assert fetched(await cur.fetchone())["r"]["fires"] == 21
    assert await _parts(conn, *names) == []
