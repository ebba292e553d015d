"""cron.job and cron.job_run_details as pg_cron has them for what was imported from it: a schedule made
from pg_cron job 7 is jobid 7 there (queries by jobid keep working), return_message reads as pg_cron's
("1 row", "3 rows", "DELETE 3"), and job_pid is the backend that ran the command."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from tests.support.rows import SyncConn, fetched

S = "agentlab_sched"


def sql_schedule(conn: SyncConn, name: str, imported_from: str | None) -> int:
    conn.execute(f"SELECT {S}.schedule(%s, '0 3 * * *', 'demo.echo')", (name,))
    row = conn.execute(f"SELECT id FROM {S}.schedules WHERE name = %s", (name,)).fetchone()
    assert row is not None
    if imported_from:
        conn.execute(f"SELECT {S}.mark_imported(%s, %s, NULL)", (name, imported_from))
    return int(row["id"])


def succeeded_run(conn: SyncConn, sid: int, result: dict[str, Any]) -> None:
    run = uuid.uuid4()
    with conn.transaction():
        conn.execute(
            f"""INSERT INTO {S}.runs (id, schedule_id, task, status, result, started_by, started_at, finished_at)
                VALUES (%s, %s, 'demo.echo', 'succeeded', %s, 'schedule', now(), now())""",
            (run, sid, Jsonb(result)),
        )
        conn.execute(
            f"""INSERT INTO {S}.fires (schedule_id, fire_at, kind, status, run_id)
                VALUES (%s, now(), 'scheduled', 'started', %s)""",
            (sid, run),
        )


def test_imported_schedules_keep_their_pg_cron_job_id(sync_conn: SyncConn) -> None:
    imported = sql_schedule(sync_conn, "purge", "pg_cron job 7 in database postgres")
    own = sql_schedule(sync_conn, "own", None)
    jobs = {r["jobname"]: r["jobid"] for r in sync_conn.execute("SELECT jobname, jobid FROM cron.job")}
    assert jobs == {"purge": 7, "own": own}
    succeeded_run(sync_conn, imported, {"status": "SELECT 1", "rows": 1, "pid": 4242})
    row = sync_conn.execute(
        "SELECT jobid, job_pid, status, return_message FROM cron.job_run_details WHERE jobid = 7"
    ).fetchone()
    assert row == {"jobid": 7, "job_pid": 4242, "status": "succeeded", "return_message": "1 row"}


def test_return_message_reads_as_pg_cron_writes_it(sync_conn: SyncConn) -> None:
    said = {
        status: fetched(sync_conn.execute(f"SELECT {S}.cron_return_message(%s) AS m", (Jsonb(
            {"status": status}),)).fetchone())["m"]
        for status in ("SELECT 1", "SELECT 3", "SELECT 0", "DELETE 3", "VACUUM")
    }  # fmt: skip
    assert said == {"SELECT 1": "1 row", "SELECT 3": "3 rows", "SELECT 0": "0 rows", "DELETE 3": "DELETE 3",
                    "VACUUM": "VACUUM"}  # fmt: skip
