"""Privileges: who may do what (docs/security.md)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import psycopg
import pytest
from psycopg.rows import TupleRow, dict_row
from typer.testing import CliRunner, Result

from agentlab_sched import database as db
from agentlab_sched import errors
from agentlab_sched.cli import app
from agentlab_sched.database.roles import RoleNames
from agentlab_sched.settings import Settings
from tests.support.notify_fakes import KEY
from tests.support.rows import fetched
from tests.support.security_helpers import Roles

KEYS = Settings(locale="en", secret_keys=(KEY,))


def test_sql_schedules_need_the_privilege_and_membership_of_the_role_they_run_as(db_url: str, roles: Roles) -> None:
    author = roles.login("author")
    reporting = roles.login("reporting")
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT USAGE ON SCHEMA agentlab_sched TO "{author}"')

    def may(run_as: str) -> bool:
        with roles.connect(author) as conn:
            return fetched(conn.execute("SELECT agentlab_sched.may_schedule_sql(%s)", (run_as,)).fetchone())[0]

    assert may(reporting) is False  # no schedule_sql function, so nobody holds the privilege
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(
            "CREATE FUNCTION agentlab_sched.schedule_sql(name text) RETURNS bigint LANGUAGE sql AS $$SELECT 1$$"
        )
        owner.execute("REVOKE EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text) FROM PUBLIC")
    assert may(reporting) is False  # the privilege is not granted
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text) TO "{author}"')
    assert may(reporting) is False  # not a member of reporting: no role is gained through a schedule
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT "{reporting}" TO "{author}"')
        superuser = fetched(owner.execute("SELECT current_user").fetchone())[0]
    assert may(reporting) is True
    assert may("no_such_role_anywhere") is False
    assert may(superuser) is False  # never a superuser, even for a member


# --------------------------------------------------------------------------------------------------
# roles create
# --------------------------------------------------------------------------------------------------


def cli(url: str, *args: str) -> Result:
    result = CliRunner(env={"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None}).invoke(
        app, ["--database-url", url, *args]
    )
    assert "Traceback" not in result.output, result.output
    return result


def test_roles_create_makes_three_roles_once_with_the_names_asked_for(db_url: str, roles: Roles) -> None:
    prefix = f"rc{os.getpid()}"
    names = RoleNames.with_prefix(prefix)
    roles.made.extend([names.worker, names.admin, names.reader, f"{prefix}_ops"])
    first = cli(db_url, "roles", "create", "--prefix", prefix)
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(
        f"roles created: {prefix}_reader, {prefix}_admin, {prefix}_worker; already there: none; privileges granted."
    )
    second = cli(db_url, "roles", "create", "--prefix", prefix, "--json")
    data = json.loads(second.stdout)
    assert (data["created"], data["existing"]) == ([], [names.reader, names.admin, names.worker])
    with psycopg.connect(db_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE %s ORDER BY 1", (f"{prefix}\\_%",)
        ).fetchall()
        assert found == [(names.admin, False), (names.reader, False), (names.worker, False)]
        members = conn.execute(
            """SELECT m.rolname, g.rolname FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member
               JOIN pg_roles g ON g.oid = a.roleid WHERE g.rolname = %s ORDER BY 1""",
            (names.reader,),
        ).fetchall()
        assert members == [(names.admin, names.reader), (names.worker, names.reader)]
    # A name of one's own for one of them; a superuser is refused, nothing half-done.
    renamed = cli(db_url, "roles", "create", "--prefix", prefix, "--admin", f"{prefix}_ops")
    assert renamed.exit_code == 0 and f"roles created: {prefix}_ops;" in renamed.stdout
    with psycopg.connect(db_url, autocommit=True) as conn:
        superuser = fetched(conn.execute("SELECT current_user").fetchone())[0]
    refused = cli(db_url, "roles", "create", "--prefix", prefix, "--worker", superuser)
    assert refused.exit_code == 2
    assert f"worker: role {superuser} is a superuser or owns schema agentlab_sched" in refused.stderr


# --------------------------------------------------------------------------------------------------
# Each role, connected as itself
# --------------------------------------------------------------------------------------------------


def denied(conn: psycopg.Connection[TupleRow], statement: str, *args: Any) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement, args)


@pytest.fixture
def groups(roles: Roles) -> RoleNames:
    return roles.groups()


def seed(db_url: str) -> dict[str, Any]:
    """A schedule with a webhook, a fire and its run, and an audit row, written by the owner."""
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as owner:
        owner.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        sid = fetched(
            owner.execute(
                """INSERT INTO agentlab_sched.schedules (name, cron, task, inputs, webhook_format, webhook_url_enc,
                   webhook_url_hint) VALUES ('report', '0 9 * * *', 'demo.echo', '{"day": "{{ schedule.date }}"}',
                   'generic', 'gAAAAAsecret', 'https://hooks.example.com/…abcd') RETURNING id"""
            ).fetchone()
        )["id"]
        fire = fetched(
            owner.execute(
                """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status) VALUES (%s, now(), 'manual',
                   'started') RETURNING id""",
                (sid,),
            ).fetchone()
        )["id"]
        run = fetched(
            owner.execute(
                """INSERT INTO agentlab_sched.runs (schedule_id, fire_id, task, started_by, status)
               VALUES (%s, %s, 'demo.echo', 'manual:x', 'succeeded') RETURNING id""",
                (sid, fire),
            ).fetchone()
        )["id"]
    return {"schedule": sid, "fire": fire, "run": run}


def test_the_reader_reads_the_views_and_history_never_ciphertext_and_changes_nothing(
    db_url: str, roles: Roles, groups: RoleNames
) -> None:
    made = seed(db_url)
    reader = roles.login("reader", groups.reader)
    with roles.connect(reader) as conn:
        for view in ("schedule_status", "fire_history", "overdue"):
            conn.execute(f"SELECT * FROM agentlab_sched.{view}").fetchall()
        # pg_cron's monitoring queries keep working for the reader
        assert conn.execute("SELECT jobname, active FROM cron.job").fetchall() == [("report", True)]
        assert conn.execute("SELECT count(*) FROM cron.job_run_details").fetchone() == (1,)
        row = conn.execute("SELECT name, webhook_url_hint, webhook_configured FROM agentlab_sched.schedules").fetchone()
        assert row == ("report", "https://hooks.example.com/…abcd", True)
        assert conn.execute("SELECT count(*) FROM agentlab_sched.runs").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM agentlab_sched.schedule_changes").fetchone() == (1,)
        denied(conn, "SELECT webhook_url_enc FROM agentlab_sched.schedules")
        denied(conn, "SELECT * FROM agentlab_sched.schedules")
        denied(conn, "SELECT * FROM agentlab_sched.bot_sends")
        denied(conn, "UPDATE agentlab_sched.schedules SET cron = '0 10 * * *'")
        denied(conn, "DELETE FROM agentlab_sched.runs")
        denied(conn, "INSERT INTO agentlab_sched.schedule_changes (schedule_id, schedule_name, operation) "
                     "VALUES (1, 'x', 'update')")  # fmt: skip
        denied(conn, "UPDATE agentlab_sched.fires SET status = 'skipped_overlap'")
        denied(conn, "SELECT agentlab_sched.pause('report')")
        denied(conn, "SELECT agentlab_sched.trigger_now('report')")
        denied(conn, "SELECT agentlab_sched.apply_plans('[]', now())")
        denied(conn, "UPDATE procrastinate_jobs SET status = 'failed'")
    url = roles.url(reader)
    for args in (("schedules", "list"), ("schedules", "show", "report"), ("fires",), ("runs", "list"),
                 ("runs", "show", str(made["run"])[:8])):  # fmt: skip
        result = cli(url, *args)
        assert result.exit_code == 0, (args, result.output)
        assert "gAAAAA" not in result.stdout


def test_the_admin_uses_the_sql_api_never_the_tables_and_the_audit_names_it(
    db_url: str, roles: Roles, groups: RoleNames
) -> None:
    made = seed(db_url)
    admin = roles.login("alice", groups.admin)
    with roles.connect(admin) as conn:
        conn.execute("SELECT agentlab_sched.schedule('nightly', '0 3 * * *', 'demo.echo', '{}', remaining_runs => 5)")
        conn.execute("SELECT agentlab_sched.alter_schedule('report', cron => '30 9 * * *')")
        conn.execute("SELECT agentlab_sched.pause('report', 'holiday')")
        conn.execute("SELECT agentlab_sched.resume('report')")
        conn.execute("SELECT agentlab_sched.trigger('report', '{\"day\": \"x\"}')")
        conn.execute("SELECT agentlab_sched.trigger_now('report')")
        conn.execute("SELECT agentlab_sched.backfill('report', now() - interval '2 days', now())")
        # a session setting is no way around the audit
        conn.execute("SET agentlab_sched.countdown = 'on'")
        conn.execute("SELECT agentlab_sched.alter_schedule('nightly', remaining_runs => 4)")
        denied(conn, "INSERT INTO agentlab_sched.schedules (name, cron, task) VALUES ('raw', '0 9 * * *', 'demo.echo')")
        denied(conn, "UPDATE agentlab_sched.schedules SET inputs = '{}'")
        denied(conn, "UPDATE agentlab_sched.schedules SET next_run_at = now()")
        denied(conn, "DELETE FROM agentlab_sched.schedules")
        denied(conn, "INSERT INTO agentlab_sched.schedule_changes (schedule_id, schedule_name, operation, db_role, "
                     "changed_at) VALUES (%s, 'report', 'update', 'cfo', '2020-01-01')", made["schedule"])  # fmt: skip
        denied(conn, "DELETE FROM agentlab_sched.schedule_changes")
        denied(conn, "INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status) "
                     "VALUES (%s, now(), 'manual', 'started')", made["schedule"])  # fmt: skip
        denied(conn, "SELECT agentlab_sched.apply_plans('[]', now())")
        denied(conn, "SELECT agentlab_sched.record_result(%s, 1, '{}')", made["run"])
        denied(conn, "SELECT agentlab_sched.schedule_sql('sql', '0 3 * * *', 'SELECT 1')")  # a privilege of its own
        assert conn.execute("SELECT agentlab_sched.unschedule('nightly')").fetchone() == (True,)
    with psycopg.connect(db_url, autocommit=True) as owner:
        audit = owner.execute(
            "SELECT schedule_name, operation, db_role FROM agentlab_sched.schedule_changes ORDER BY id"
        ).fetchall()
        requests = owner.execute("SELECT kind, requested_by FROM agentlab_sched.fire_requests ORDER BY id").fetchall()
    assert [a[2] for a in audit[1:]] == [admin] * (len(audit) - 1)
    assert [(a[0], a[1]) for a in audit[1:]] == [
        ("nightly", "insert"),
        ("report", "update"),
        ("report", "update"),
        ("report", "update"),
        ("nightly", "update"),
        ("nightly", "delete"),
    ]
    assert requests == [("manual", f"manual:{admin}"), ("manual", f"manual:{admin}"), ("backfill", f"backfill:{admin}")]


async def test_the_python_api_and_the_cli_work_as_the_admin(db_url: str, roles: Roles, groups: RoleNames) -> None:
    from agentlab_sched.firing.requests import trigger
    from agentlab_sched.notify import set_webhook
    from agentlab_sched.schedules import admin as api

    admin = roles.login("alice", groups.admin)
    conn = await db.connect(roles.url(admin), locale="en")
    try:
        await conn.execute("SELECT 1")
        with psycopg.connect(db_url, autocommit=True) as owner:
            owner.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        created = await api.create(conn, "daily", "0 9 * * *", "demo.echo", {"day": "{{ schedule.date }}"})
        assert created.next_run_at is not None  # planned at once, through the worker's bookkeeping functions
        with pytest.raises(errors.Conflict):
            await api.create(conn, "daily", "0 9 * * *", "demo.echo")
        altered = await api.alter(conn, "daily", cron="0 10 * * *", expected_version=created.version)
        assert altered.version == created.version + 1
        info = await set_webhook(conn, "daily", url="https://hooks.example.com/in/abcdef0123456789", settings=KEYS)
        assert info.url_hint == "https://hooks.example.com/…6789"
        outcome = await trigger(conn, "daily", requested_by="manual:alice-laptop", settings=KEYS)
        assert outcome.status == "started"
    finally:
        await conn.close()


def test_the_cli_works_as_the_admin(db_url: str, roles: Roles, groups: RoleNames) -> None:
    admin = roles.login("alice", groups.admin)
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    url = roles.url(admin)
    for args in (
        ("schedules", "add", "daily", "--cron", "0 9 * * *", "--task", "demo.echo"),
        ("schedules", "edit", "daily", "--cron", "0 10 * * *"),
        ("schedules", "trigger", "daily"),
        ("schedules", "pause", "daily"),
        ("runs", "list"),
    ):
        result = cli(url, *args)
        assert result.exit_code == 0, (args, result.output)
    shown = cli(url, "schedules", "show", "daily", "--json")
    assert (json.loads(shown.stdout)["enabled"], json.loads(shown.stdout)["cron"]) == (False, "0 10 * * *")


async def test_the_worker_fires_and_keeps_bookkeeping_never_a_definition(
    db_url: str, roles: Roles, groups: RoleNames
) -> None:
    from agentlab_sched.firing.tick import fire_due

    made = seed(db_url)
    worker = roles.login("worker_host", groups.worker)
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute("UPDATE agentlab_sched.schedules SET next_run_at = now() - interval '1 second', replan = NULL")
    conn = await db.connect(roles.url(worker), locale="en")
    try:
        report = await fire_due(conn, settings=KEYS)
        assert report.fires == {"started": 1}
        cur = await conn.execute("SELECT status FROM agentlab_sched.runs ORDER BY created_at DESC LIMIT 1")
        assert fetched(await cur.fetchone())["status"] == "queued"
        for statement in (
            "UPDATE agentlab_sched.schedules SET task = 'evil.task'",
            "UPDATE agentlab_sched.schedules SET inputs = '{\"x\": 1}'",
            "UPDATE agentlab_sched.schedules SET webhook_url_enc = 'gAAAAAother'",
            "UPDATE agentlab_sched.schedules SET next_run_at = now()",
            "SELECT agentlab_sched.alter_schedule('report', task => 'evil.task')",
            "SELECT agentlab_sched.schedule('evil', '* * * * *', 'evil.task')",
            "SELECT agentlab_sched.trigger('report', '{\"x\": 1}')",
            "SELECT agentlab_sched.trigger_now('report')",
            "INSERT INTO agentlab_sched.schedule_changes (schedule_id, schedule_name, operation)"
            " VALUES (1, 'x', 'insert')",
            "INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status)"
            " VALUES (1, now(), 'manual', 'started')",
            "DELETE FROM agentlab_sched.runs",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(statement)
        # what the dispatcher and Procrastinate need
        await conn.execute("UPDATE agentlab_sched.outbox SET attempts = attempts")
        await conn.execute("UPDATE procrastinate_jobs SET priority = priority")
    finally:
        await conn.close()
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as owner:
        row = owner.execute("SELECT task, inputs FROM agentlab_sched.schedules WHERE id = %s", (made["schedule"],))
        assert row.fetchone() == {"task": "demo.echo", "inputs": {"day": "{{ schedule.date }}"}}


async def test_trigger_now_is_grantable_without_running_the_task_with_other_inputs(
    db_url: str, roles: Roles, groups: RoleNames
) -> None:
    from agentlab_sched.firing.requests import trigger
    from agentlab_sched.firing.tick import fire_due

    seed(db_url)
    oncall = roles.login("oncall", groups.reader)
    worker = roles.login("worker_host", groups.worker)
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT EXECUTE ON FUNCTION agentlab_sched.trigger_now(text, boolean) TO "{oncall}"')
    with roles.connect(oncall) as conn:
        denied(conn, "SELECT agentlab_sched.trigger('report', '{\"day\": \"1999-01-01\"}')")
        denied(conn, "SELECT agentlab_sched.trigger('report', NULL::jsonb)")
        denied(conn, "SELECT agentlab_sched.alter_schedule('report', inputs => '{}')")
    # Through the Python API (and so the CLI): this role may not carry the request out itself; a worker does.
    mine = await db.connect(roles.url(oncall), locale="en")
    theirs = await db.connect(roles.url(worker), locale="en")
    try:
        waiting = asyncio.create_task(trigger(mine, "report", settings=KEYS))
        for _ in range(200):
            await fire_due(theirs, settings=KEYS)
            if waiting.done():
                break
            await asyncio.sleep(0.05)
        outcome = await asyncio.wait_for(waiting, timeout=5)
        assert outcome.status == "started"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await trigger(mine, "report", {"day": "1999-01-01"}, settings=KEYS)
    finally:
        await mine.close()
        await theirs.close()
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as owner:
        run = owner.execute("SELECT inputs, started_by FROM agentlab_sched.runs ORDER BY created_at DESC LIMIT 1")
        fired = fetched(run.fetchone())
    assert fired["started_by"] == f"manual:{oncall}" and fired["inputs"]["day"] != "1999-01-01"


async def test_a_real_worker_as_the_worker_role_fires_and_runs_its_job(
    db_url: str, roles: Roles, groups: RoleNames
) -> None:
    from agentlab_sched.demo import make_app
    from agentlab_sched.worker.process import run_worker

    admin = roles.login("alice", groups.admin)
    worker = roles.login("worker_host", groups.worker)
    with roles.connect(admin) as conn:
        conn.execute("SELECT agentlab_sched.schedule('every-second', '* * * * * *', 'demo.echo', '{\"n\": 1}')")
    url = roles.url(worker)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(make_app(url), url, stop=stop, install_signal_handlers=False, settings=Settings(locale="en"))
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as owner:
                done = owner.execute(
                    "SELECT r.status, r.result FROM agentlab_sched.runs r WHERE r.status = 'succeeded' LIMIT 1"
                ).fetchone()
            if done or time.monotonic() > deadline or task.done():
                break
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)
    assert done is not None, "no run succeeded"
    assert done["result"] == {"n": 1}


async def test_the_worker_delivers_notifications(db_url: str, roles: Roles, groups: RoleNames) -> None:
    from agentlab_sched.notify import deliver_due, set_webhook
    from tests.support.notify_fakes import FEISHU_URL, FakePlatforms, add_run, add_schedule, set_status

    owner = await db.connect(db_url, locale="en")
    worker = await db.connect(roles.url(roles.login("worker_host", groups.worker)), locale="en")
    try:
        sid = await add_schedule(owner)
        await set_webhook(owner, "daily-report", url=FEISHU_URL, settings=KEYS)
        run = await add_run(owner, sid)
        await set_status(owner, run, "succeeded")
        cur = await owner.execute("SELECT clock_timestamp() + interval '1 second' AS now")
        now = fetched(await cur.fetchone())["now"]
        fake = FakePlatforms(now=now)
        fake.add(FEISHU_URL)
        assert (await deliver_due(worker, KEYS, sender=fake.sender(), now=now))["sent"] == 1
        cur = await owner.execute("SELECT status FROM agentlab_sched.outbox")
        assert fetched(await cur.fetchone())["status"] == "sent"
    finally:
        await owner.close()
        await worker.close()
