"""A storm reads the jobs it creates by key, whatever the statistics said before it.

Each job inserted writes a Procrastinate event row, whose foreign key PostgreSQL checks with a lookup of
the job. That lookup's plan is kept for the session; made while ``procrastinate_jobs`` was analysed near
empty, it was a sequential scan, and a batch inserted by one statement then read, for each job, every job
inserted before it: 50 million rows in a storm of 10,000 (docs/benchmarks.md)."""

from __future__ import annotations

from datetime import timedelta

from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, make_schedule
from tests.support.rows import Conn, fetched

STORM = 300


async def _jobs_read(conn: Conn) -> dict[str, int]:
    """This transaction's reads of procrastinate_jobs: rows by sequential scans, rows by index."""
    cur = await conn.execute(
        "SELECT seq_tup_read AS seq, idx_tup_fetch AS idx FROM pg_stat_xact_user_tables"
        " WHERE relid = 'public.procrastinate_jobs'::regclass"
    )
    return dict(fetched(await cur.fetchone()))


async def test_a_storm_after_the_jobs_were_analysed_near_empty_reads_each_job_by_key(conn: Conn) -> None:
    await make_schedule(conn, "one", cron="* * * * * *", timezone="UTC", inputs={}, overlap="allow_all")
    # A few ticks of one job each, the jobs table analysed while it holds one: the session's plan of the
    # foreign-key lookup is made now, on a near-empty table, as on a fresh database or after a quiet night.
    for second in range(10):
        await fire_due(conn, NINE + timedelta(seconds=second), settings=EN)
        if second == 0:
            await conn.execute("ANALYZE public.procrastinate_jobs")
    await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, timezone, task, inputs, next_run_at, replan)
           SELECT 'storm-' || g, '* * * * * *', 'UTC', 'demo.echo', '{}', %s, NULL FROM generate_series(1, %s) g""",
        (NINE + timedelta(seconds=10), STORM),
    )
    async with conn.transaction():  # pg_stat_xact_user_tables counts this transaction's reads
        before = await _jobs_read(conn)
        report = await fire_due(conn, NINE + timedelta(seconds=10), settings=EN)
        after = await _jobs_read(conn)
    assert report.fires == {"started": STORM + 1}, report
    # No job read by a scan (a scan per job read about STORM**2 / 2 rows), a few index fetches per job.
    assert after["seq"] == before["seq"], (before, after)
    assert after["idx"] - before["idx"] <= 3 * (STORM + 1), (before, after)
