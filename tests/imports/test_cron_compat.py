"""pg_cron's monitoring views over our tables: cron.job and cron.job_run_details with pg_cron's columns,
made by migrate only where pg_cron (or anything not ours) is not (docs/coming-from.md, "pg_cron")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.database.migrate import migrate
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.schedules import admin
from tests.support.firing_helpers import EN, fires, make_schedule, runs_of, set_job_status
from tests.support.rows import Conn, SyncConn, fetched
from tests.support.security_helpers import Roles

#: pg_cron 1.4-1.6's columns, in order.
JOB = [
    ("jobid", "bigint"),
    ("schedule", "text"),
    ("command", "text"),
    ("nodename", "text"),
    ("nodeport", "integer"),
    ("database", "text"),
    ("username", "text"),
    ("active", "boolean"),
    ("jobname", "text"),
]
JOB_RUN_DETAILS = [
    ("jobid", "bigint"),
    ("runid", "bigint"),
    ("job_pid", "integer"),
    ("database", "text"),
    ("username", "text"),
    ("command", "text"),
    ("status", "text"),
    ("return_message", "text"),
    ("start_time", "timestamp with time zone"),
    ("end_time", "timestamp with time zone"),
]


def columns(conn: SyncConn, schema: str, table: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        """SELECT column_name, data_type FROM information_schema.columns
           WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position""",
        (schema, table),
    ).fetchall()
    return [(r["column_name"], r["data_type"]) for r in rows]


def test_the_views_have_pg_crons_columns(sync_conn: SyncConn) -> None:
    assert columns(sync_conn, "cron", "job") == JOB
    assert columns(sync_conn, "cron", "job_run_details") == JOB_RUN_DETAILS


async def test_pg_cron_monitoring_queries_read_our_schedules_and_fires(conn: Conn) -> None:
    now = datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)
    ok = await make_schedule(conn, "report", cron="0 9 * * *", timezone="UTC", next_run_at=now - timedelta(seconds=5))
    missing = await make_schedule(
        conn, "ghost", cron="0 9 * * *", timezone="UTC", task="nope.task", register=False, inputs={},
        next_run_at=now - timedelta(seconds=5),
    )  # fmt: skip
    await fire_due(conn, now, settings=EN)
    cur = await conn.execute("SELECT jobid, jobname, schedule, command, active FROM cron.job ORDER BY jobid")
    assert await cur.fetchall() == [
        {
            "jobid": ok,
            "jobname": "report",
            "schedule": "0 9 * * *",
            "command": 'demo.echo {"stat_date": "{{ schedule.yesterday }}"}',
            "active": True,
        },
        {"jobid": missing, "jobname": "ghost", "schedule": "0 9 * * *", "command": "nope.task", "active": True},
    ]
    [run] = await runs_of(conn, ok)
    cur = await conn.execute(
        "SELECT jobid, runid, status, return_message, end_time FROM cron.job_run_details ORDER BY runid"
    )
    started, refused = await cur.fetchall()
    [fire] = await fires(conn, ok)
    assert (started["jobid"], started["runid"], started["status"], started["end_time"]) == (
        ok,
        fire["id"],
        "starting",
        None,
    )
    [refusal] = await fires(conn, missing)
    assert (refused["jobid"], refused["status"], refused["return_message"]) == (missing, "failed", refusal["reason"])
    assert "nope.task" in refusal["reason"]
    await set_job_status(conn, run["job_id"], "doing")
    cur = await conn.execute("SELECT status FROM cron.job_run_details WHERE runid = %s", (fire["id"],))
    assert fetched(await cur.fetchone())["status"] == "running"
    await set_job_status(conn, run["job_id"], "succeeded")
    cur = await conn.execute(
        "SELECT status, end_time IS NOT NULL AS ended FROM cron.job_run_details WHERE runid = %s", (fire["id"],)
    )
    assert await cur.fetchone() == {"status": "succeeded", "ended": True}
    # the query pg_cron's documentation suggests for failures
    cur = await conn.execute(
        "SELECT jobid, status FROM cron.job_run_details WHERE status = 'failed' ORDER BY start_time DESC LIMIT 5"
    )
    assert await cur.fetchall() == [{"jobid": missing, "status": "failed"}]


async def test_a_sql_schedule_reads_as_pg_cron_would_show_it(conn: Conn, db_url: str) -> None:
    role = "compat_reporting"
    await conn.execute(f"DROP ROLE IF EXISTS {role}")
    await conn.execute(f"CREATE ROLE {role} LOGIN")  # a sql schedule's role logs in
    try:
        s = await admin.schedule_sql(conn, "vacuum", "0 3 * * *", "VACUUM", username=role, enabled=False)
        cur = await conn.execute("SELECT * FROM cron.job WHERE jobname = 'vacuum'")
        row = fetched(await cur.fetchone())
        here = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
        assert (row["jobid"], row["command"], row["database"], row["username"], row["active"]) == (
            s.id,
            "VACUUM",
            here,
            role,
            False,
        )
        assert row["nodename"] == "localhost" and isinstance(row["nodeport"], int)
        # the result of a run of the sql task: its last statement's status is pg_cron's return_message
        run = await _succeeded_sql_run(conn, s.id, {"status": "VACUUM", "rows": 0, "statements": []})
        cur = await conn.execute(
            "SELECT status, return_message, command, username FROM cron.job_run_details WHERE jobid = %s", (s.id,)
        )
        assert await cur.fetchone() == {
            "status": "succeeded",
            "return_message": "VACUUM",
            "command": "VACUUM",
            "username": role,
        }
        assert run is not None
    finally:
        await conn.execute("DELETE FROM agentlab_sched.schedules")
        await conn.execute(f"DROP ROLE IF EXISTS {role}")


async def _succeeded_sql_run(conn: Conn, sid: int, result: dict[str, Any]) -> Any:
    from tests.support.runs import launch

    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['agentlab_sched:sql'])")
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    await conn.execute(
        "SELECT agentlab_sched.record_result(%s, %s, %s::jsonb)", (run["id"], run["job_id"], json.dumps(result))
    )
    await set_job_status(conn, run["job_id"], "succeeded")
    return run


def test_a_schema_that_is_not_ours_is_left_alone(empty_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with psycopg.connect(empty_db_url, autocommit=True) as c:
        c.execute("CREATE SCHEMA cron")
        c.execute("CREATE TABLE cron.job (id int)")  # someone else's
    report = migrate(empty_db_url)
    assert (report.cron_schema, report.cron_blocker) == ("cron", "not made by agentlab-sched")
    with psycopg.connect(empty_db_url, row_factory=psycopg.rows.dict_row) as c:
        assert columns(c, "cron", "job") == [("id", "integer")]
    # another schema name: made there; the note names the schema and what is in it
    monkeypatch.setenv("AGENTLAB_SCHED_CRON_SCHEMA", "agentlab_cron")
    assert migrate(empty_db_url).cron_blocker is None
    with psycopg.connect(empty_db_url, row_factory=psycopg.rows.dict_row) as c:
        assert columns(c, "agentlab_cron", "job") == JOB
    monkeypatch.setenv("AGENTLAB_SCHED_CRON_SCHEMA", "cron")
    result = CliRunner(env={"AGENTLAB_SCHED_LOCALE": "en"}).invoke(app, ["--database-url", empty_db_url, "migrate"])
    assert result.exit_code == 0, result.output
    assert (
        "pg_cron's monitoring views were not made in schema cron (not made by agentlab-sched is there)" in result.stderr
    )
    monkeypatch.setenv("AGENTLAB_SCHED_CRON_SCHEMA", "off")
    assert migrate(empty_db_url).cron_schema is None


def test_migrate_again_keeps_the_views(db_url: str) -> None:
    report = migrate(db_url)
    assert (report.cron_schema, report.cron_blocker) == ("cron", None)
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as c:
        assert columns(c, "cron", "job") == JOB


def test_a_schema_with_the_compatibility_comment_is_not_taken_for_ours(db_url: str) -> None:
    """The owner of any schema can give it the compatibility schema's comment: migrate and roles create
    neither make views in it nor grant on it (they still work), since ours are also owned by our owner."""
    made = Roles(db_url)
    try:
        spoofer = made.login("spoofer")
        with psycopg.connect(db_url, autocommit=True) as owner:
            dbname = fetched(owner.execute("SELECT current_database()").fetchone())[0]
            owner.execute(
                sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(dbname), sql.Identifier(spoofer))
            )
            comment = fetched(owner.execute("SELECT agentlab_sched.cron_compat_comment()").fetchone())[0]
        with made.connect(spoofer) as c:
            c.execute("CREATE SCHEMA spoof")
            c.execute(sql.SQL("COMMENT ON SCHEMA spoof IS {}").format(sql.Literal(comment)))
        report = migrate(db_url, cron_schema="spoof")
        assert report.cron_blocker == "not made by agentlab-sched"
        migrate(db_url)  # the default compatibility schema: applying its grants passes the spoofed one by
        groups = made.groups()  # roles create
        with psycopg.connect(db_url, autocommit=True) as owner:
            tables = fetched(
                owner.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'spoof'::regnamespace").fetchone()
            )[0]
            usage = fetched(
                owner.execute("SELECT has_schema_privilege(%s, 'spoof', 'USAGE')", (groups.reader,)).fetchone()
            )[0]
        assert (tables, usage) == (0, False)
    finally:
        with psycopg.connect(db_url, autocommit=True) as owner:
            owner.execute("DROP SCHEMA IF EXISTS spoof CASCADE")
        made.drop_all()
