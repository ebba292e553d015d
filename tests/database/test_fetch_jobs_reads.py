"""Taking jobs reads the jobs it takes and their locks, not the whole queue: in a storm of 10,000 jobs with
a lock each, a statement that read every job per call read 6,000 rows per job taken."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agentlab_sched.firing import tick
from tests.support.firing_helpers import EN, NINE
from tests.support.rows import Conn, SyncConn


def _reads(conn: SyncConn) -> dict[str, Any]:
    row = conn.execute(
        """SELECT seq_scan, seq_tup_read, idx_tup_fetch FROM pg_stat_xact_user_tables
           WHERE relid = 'public.procrastinate_jobs'::regclass"""
    ).fetchone()
    assert row is not None
    return dict(row)


def test_taking_ten_of_two_thousand_locked_jobs_reads_a_few_rows(sync_conn: SyncConn) -> None:
    sync_conn.execute(
        """INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, status)
           SELECT 'default', 'demo.echo', 'schedule-' || (g % 1500), '{}', 'todo' FROM generate_series(1, 2000) g"""
    )
    sync_conn.execute("ANALYZE procrastinate_jobs")
    worker = sync_conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()").fetchone()
    assert worker is not None
    with sync_conn.transaction():  # pg_stat_xact_user_tables: this transaction's reads
        before = _reads(sync_conn)
        taken = sync_conn.execute(
            "SELECT id, lock FROM agentlab_sched.fetch_jobs(NULL, %s, 10)", (worker["worker_id"],)
        ).fetchall()
        after = _reads(sync_conn)
    # The ten oldest, one per lock (jobs 1501-2000 wait behind the first 500's locks).
    assert [r["id"] for r in taken] == list(range(taken[0]["id"], taken[0]["id"] + 10))
    assert len({r["lock"] for r in taken}) == 10
    assert after["seq_scan"] == before["seq_scan"], (before, after)
    assert after["idx_tup_fetch"] - before["idx_tup_fetch"] < 100, (before, after)


def test_taking_jobs_on_statistics_of_an_empty_queue_looks_each_lock_up(sync_conn: SyncConn) -> None:
    """Statistics taken while the queue was empty (the start of a storm) do not make the lock checks scan:
    with 500 jobs doing and 1,500 waiting, each with a lock of its own, taking ten reads a few rows."""
    sync_conn.execute("ANALYZE procrastinate_jobs")  # empty
    sync_conn.execute(
        """INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, status)
           SELECT 'default', 'demo.echo', 'schedule-' || g, '{}',
                  (CASE WHEN g <= 500 THEN 'doing' ELSE 'todo' END)::procrastinate_job_status
           FROM generate_series(1, 2000) g"""
    )
    worker = sync_conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()").fetchone()
    assert worker is not None
    with sync_conn.transaction():
        before = _reads(sync_conn)
        taken = sync_conn.execute(
            "SELECT id, lock FROM agentlab_sched.fetch_jobs(NULL, %s, 10)", (worker["worker_id"],)
        ).fetchall()
        after = _reads(sync_conn)
    assert [r["lock"] for r in taken] == [f"schedule-{g}" for g in range(501, 511)]
    assert after["seq_scan"] == before["seq_scan"], (before, after)
    assert after["idx_tup_fetch"] - before["idx_tup_fetch"] < 100, (before, after)


def test_a_job_behind_a_waiting_job_of_its_lock_is_passed_over(sync_conn: SyncConn) -> None:
    sync_conn.execute(
        """INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, status, priority)
           VALUES ('default', 'demo.echo', 'a', '{}', 'todo', 0), ('default', 'demo.echo', 'a', '{}', 'todo', 5),
                  ('default', 'demo.echo', 'b', '{}', 'todo', 0), ('default', 'demo.echo', NULL, '{}', 'todo', 0)"""
    )
    worker = sync_conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()").fetchone()
    assert worker is not None
    rows = sync_conn.execute(
        "SELECT lock, priority FROM agentlab_sched.fetch_jobs(NULL, %s, 10)", (worker["worker_id"],)
    ).fetchall()
    # Lock a: only its highest-priority job (the other waits behind it); b and the unlocked one.
    assert [(r["lock"], r["priority"]) for r in rows] == [("a", 5), ("b", 0), (None, 0)]
    again = sync_conn.execute(
        "SELECT lock FROM agentlab_sched.fetch_jobs(NULL, %s, 10)", (worker["worker_id"],)
    ).fetchall()
    assert again == []  # lock a's other job waits while its first one is doing


BIG = ("procrastinate_jobs", "procrastinate_events", "runs", "fires", "schedules")


async def _scans(conn: Conn) -> dict[str, int]:
    cur = await conn.execute(
        "SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)", (list(BIG),)
    )
    return {r["relname"]: r["seq_scan"] for r in await cur.fetchall()}


async def _take_and_finish(conn: Conn, worker: int, wanted: int) -> list[dict[str, Any]]:
    """Take up to ``wanted`` jobs as ``agentlab-sched worker`` does, and finish them all as succeeded."""
    cur = await conn.execute("SELECT id, run FROM agentlab_sched.fetch_jobs(NULL, %s, %s)", (worker, wanted))
    taken = await cur.fetchall()
    await conn.execute(
        "SELECT agentlab_sched.finish_jobs(%s, %s::procrastinate_job_status[], %s, %s::uuid[], %s::jsonb[])",
        (
            [r["id"] for r in taken],
            ["succeeded"] * len(taken),
            [False] * len(taken),
            [r["run"]["run_id"] for r in taken],
            ['{"ok": true}'] * len(taken),
        ),
    )
    return taken


async def test_taking_and_finishing_runs_jobs_scans_no_big_table(conn: Conn) -> None:
    """2000 runs queued by a fire: taking ten of their jobs (with their runs' context) and finishing them
    (with their results) looks rows up by index in every table that grows with the schedules."""
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, timezone, task, next_run_at, replan)
           SELECT 'agent-' || g, '0 9 * * *', 'Asia/Shanghai', 'demo.echo', %s, NULL FROM generate_series(1, 2000) g""",
        (NINE,),
    )
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    await conn.execute("ANALYZE")
    cur = await conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()")
    worker = await cur.fetchone()
    assert worker is not None
    async with conn.transaction():
        before = await _scans(conn)
        taken = await _take_and_finish(conn, worker["worker_id"], 10)
        after = await _scans(conn)
    assert len(taken) == 10 and all(r["run"] for r in taken)
    assert {t: after.get(t, 0) - before.get(t, 0) for t in BIG} == dict.fromkeys(BIG, 0)
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'")
    assert await cur.fetchone() == {"n": 10}


async def _index_reads(conn: Conn, table: str) -> int:
    """Rows this transaction fetched by index (or read by a scan) in ``table``'s partitions."""
    cur = await conn.execute(
        """SELECT coalesce(sum(t.idx_tup_fetch + t.seq_tup_read), 0)::bigint AS n FROM pg_stat_xact_user_tables t
           JOIN pg_inherits i ON i.inhrelid = t.relid WHERE i.inhparent = %s::regclass""",
        (f"agentlab_sched.{table}",),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def test_plans_kept_from_an_empty_ledger_still_look_runs_up_by_job(conn: Conn) -> None:
    """A worker's session keeps the plans of taking and finishing jobs from its first calls, made while
    the day's partitions of runs and fires were nearly empty (a new day, a new database): when 2000 runs
    are then queued at once, taking and finishing ten still reads their rows by index, not every run of
    the day per call (a plan kept from an empty table read 5,000 index entries per call in a storm)."""
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    cur = await conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()")
    worker = await cur.fetchone()
    assert worker is not None

    for i in range(8):  # one run at a time: the session's plans are made (and kept) on a nearly empty ledger
        at = NINE + timedelta(minutes=i)
        await conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, timezone, task, next_run_at, replan)
               VALUES (%s, '0 9 * * *', 'Asia/Shanghai', 'demo.echo', %s, NULL)""",
            (f"warm-{i}", at),
        )
        await tick.fire_due(conn, at + timedelta(seconds=1), settings=EN)
        assert len(await _take_and_finish(conn, worker["worker_id"], 1)) == 1
    storm = NINE + timedelta(minutes=10)
    await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, timezone, task, next_run_at, replan)
           SELECT 'agent-' || g, '0 9 * * *', 'Asia/Shanghai', 'demo.echo', %s, NULL FROM generate_series(1, 2000) g""",
        (storm,),
    )
    await tick.fire_due(conn, storm + timedelta(seconds=1), settings=EN)
    async with conn.transaction():
        before, scans = await _index_reads(conn, "runs"), await _scans(conn)
        taken = await _take_and_finish(conn, worker["worker_id"], 10)
        runs_read = await _index_reads(conn, "runs") - before
        scanned = {t: n - scans.get(t, 0) for t, n in (await _scans(conn)).items() if n > scans.get(t, 0)}
    assert len(taken) == 10 and all(r["run"] for r in taken)
    # Ten jobs' runs looked up by job and by id, each version of a row once or twice: tens, not thousands.
    assert runs_read < 200, runs_read
    assert scanned == {}  # and no table that grows with the schedules is read whole
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'")
    assert await cur.fetchone() == {"n": 18}
