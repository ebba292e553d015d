"""The built-in sql task: schedule_sql() (SQL, Python, CLI), who may create one, and real workers running
it in another database as another role, with rows, notices, errors and timeouts on the run
(docs/sql.md "schedule_sql", docs/security.md "The sql task privilege")."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import psycopg
import psycopg_pool
import pytest
from psycopg import conninfo, sql

from agentlab_sched import errors
from agentlab_sched.demo import make_app
from agentlab_sched.schedules import admin
from agentlab_sched.tasks import sql as sql_task
from agentlab_sched.tasks.sql import SQL_TASK, SqlTaskError, run_sql
from tests.support.cli import ok, refused
from tests.support.rows import Conn, SyncConn, fetched
from tests.support.runs import launch
from tests.support.security_helpers import Roles
from tests.support.workers import run_in, wait_for, worker

NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def module_roles(pg_server: str) -> Iterator[Roles]:
    made = Roles(pg_server)
    try:
        yield made
    finally:
        made.drop_all()


@pytest.fixture(scope="module")
def other_db(pg_server: str, module_roles: Roles) -> Iterator[str]:
    """A second database on the same server (where the commands run), for the module; dropped before
    the roles are."""
    name = f"sql_task_data_{os.getpid()}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def reporting(module_roles: Roles, pg_server: str, other_db: str) -> str:
    """A role that may create tables in the other database."""
    name = module_roles.login("reporting")
    with psycopg.connect(conninfo.make_conninfo(pg_server, dbname=other_db), autocommit=True) as c:
        c.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(name)))
    return name


def test_the_task_name_is_the_same_in_python_and_sql(sync_conn: SyncConn) -> None:
    assert fetched(sync_conn.execute("SELECT agentlab_sched.sql_task_name() AS n").fetchone())["n"] == SQL_TASK
    assert SQL_TASK in make_app("postgresql:///unused").tasks


async def test_schedule_sql_makes_a_schedule_of_the_sql_task(conn: Conn, other_db: str, reporting: str) -> None:
    s = await admin.schedule_sql(
        conn, "purge", "0 3 * * *", "DELETE FROM events", database=other_db, username=reporting, now=NOW
    )
    assert (s.task, s.cron, s.enabled, s.next_run_at) == (SQL_TASK, "0 3 * * *", True, NOW + timedelta(hours=3))
    assert s.inputs == {
        "command": "DELETE FROM events",
        "database": other_db,
        "username": reporting,
        "statement_timeout": "01:00:00",
    }
    # pg_cron's schedule_in_database, in SQL: database defaults to this one; updating keeps the id
    cur = await conn.execute(
        "SELECT agentlab_sched.schedule_sql('purge', '0 4 * * *', 'VACUUM', username => %s,"
        " statement_timeout => '5 minutes', enabled => false) AS id",
        (reporting,),
    )
    assert fetched(await cur.fetchone())["id"] == s.id
    again = await admin.get(conn, "purge")
    here = conninfo.conninfo_to_dict(conn.info.dsn)["dbname"]
    assert (again.cron, again.enabled, again.inputs["database"], again.inputs["statement_timeout"]) == (
        "0 4 * * *",
        False,
        here,
        "00:05:00",
    )


#: (inputs, the code and field of the refusal); {db} and {role} are the other database and its role.
BAD_INPUTS: list[tuple[dict[str, Any], str, str]] = [
    ({"database": "x", "username": "y"}, "schedule.required", "command"),
    ({"command": "  ", "database": "x", "username": "y"}, "schedule.empty", "command"),
    ({"command": 1, "database": "x", "username": "y"}, "sql.not_text", "command"),
    ({"command": "SELECT 1", "username": "y"}, "schedule.required", "database"),
    ({"command": "SELECT 1", "database": "x", "username": "y", "extra": 1}, "sql.unknown_input", "inputs"),
    ({"command": "SELECT 1", "database": "nope_db", "username": "y"}, "sql.no_database", "database"),
    ({"command": "SELECT 1", "database": "{db}", "username": "no_such_role"}, "sql.no_role", "username"),
    (
        {"command": "SELECT 1", "database": "{db}", "username": "{role}", "statement_timeout": "0"},
        "sql.bad_timeout",
        "statement_timeout",
    ),
    (
        {"command": "SELECT 1", "database": "{db}", "username": "{role}", "statement_timeout": "soon"},
        "sql.bad_timeout",
        "statement_timeout",
    ),
]


async def test_bad_inputs_of_a_sql_schedule_are_refused_naming_the_input(
    conn: Conn, other_db: str, reporting: str
) -> None:
    for inputs, code, field in BAD_INPUTS:
        filled = {k: v.format(db=other_db, role=reporting) if isinstance(v, str) else v for k, v in inputs.items()}
        with pytest.raises(errors.SchedError) as caught:
            await admin.schedule(conn, "bad", "0 3 * * *", SQL_TASK, filled, now=NOW)
        assert (caught.value.code, caught.value.field) == (code, field), inputs
        assert "{" not in caught.value.message("en") and "{" not in caught.value.message("zh-CN")
    assert await (await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedules")).fetchone() == {"n": 0}


async def test_running_as_a_superuser_is_refused(conn: Conn) -> None:
    # the tests connect as the server's superuser: the default username is that login role
    with pytest.raises(errors.NotAllowed) as caught:
        await admin.schedule_sql(conn, "as-super", "0 3 * * *", "VACUUM", now=NOW)
    err = caught.value
    assert (err.code, err.field, err.params["value"]) == ("sql.not_allowed", "username", "postgres")
    assert err.message("en") == (
        "username: postgres may not schedule SQL to run as postgres: postgres is a superuser, and a SQL schedule "
        "never runs as one; give a role of its own (agentlab-sched schedules add-sql --username ROLE, or "
        "username => in schedule_sql) (docs/security.md)"
    )
    assert err.message("zh-CN").startswith("「执行角色」:postgres 无权安排以 postgres 身份执行的 SQL:postgres 是超级")
    assert isinstance(err.__cause__, psycopg.errors.InsufficientPrivilege)  # SQLSTATE 42501
    assert await (await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedules")).fetchone() == {"n": 0}


def test_who_may_create_or_change_a_sql_schedule(db_url: str, roles: Roles, other_db: str, reporting: str) -> None:
    """The privilege (EXECUTE on schedule_sql) and membership of the role, on every path; other changes
    of a sql schedule, and other schedules, need neither."""
    groups = roles.groups()
    author = roles.login("author", groups.admin)  # the SQL API, without the sql privilege

    def attempt(query: str, *args: Any) -> str | None:
        with roles.connect(author) as c:
            try:
                c.execute(query, args)
            except psycopg.Error as exc:
                return json.loads(exc.diag.message_detail or "{}").get("code") or exc.diag.sqlstate
        return None

    create = "SELECT agentlab_sched.schedule_sql('nightly', '0 3 * * *', 'SELECT 1', %s, %s)"
    assert attempt(create, other_db, reporting) == "42501"  # no EXECUTE on schedule_sql: PostgreSQL says no
    raw = (
        "SELECT agentlab_sched.schedule('nightly', '0 3 * * *', 'agentlab_sched:sql', jsonb_build_object("
        "'command', 'SELECT 1', 'database', %s::text, 'username', %s::text))"
    )
    assert attempt(raw, other_db, reporting) == "sql.not_allowed"  # the same, through schedule()
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text, text, text, text, text, text,"
                    " interval, boolean) TO {}").format(sql.Identifier(author))
        )  # fmt: skip
    assert attempt(create, other_db, reporting) == "sql.not_allowed"  # not a member of reporting
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(reporting), sql.Identifier(author)))
    assert attempt(create, other_db, reporting) is None
    # someone without the privilege: may change the cron and pause it, not the command, nor trigger
    # it with other inputs
    other = roles.login("other", groups.admin)
    with roles.connect(other) as c:
        c.execute("SELECT agentlab_sched.alter_schedule('nightly', cron => '0 4 * * *')")
        c.execute("SELECT agentlab_sched.pause('nightly')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(
                "SELECT agentlab_sched.alter_schedule('nightly', inputs => jsonb_build_object("
                "'command', 'DROP TABLE x', 'database', %s::text, 'username', %s::text))",
                (other_db, reporting),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(
                "SELECT agentlab_sched.trigger('nightly', jsonb_build_object('command', 'DROP TABLE x',"
                " 'database', %s::text, 'username', %s::text), even_if_paused => true)",
                (other_db, reporting),
            )
        c.execute("SELECT agentlab_sched.trigger('nightly', even_if_paused => true)")  # its own inputs: fine
        c.execute("SELECT agentlab_sched.schedule('plain', '0 3 * * *', 'demo.echo')")  # other tasks: fine
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as as_dicts:
        row = as_dicts.execute("SELECT cron, inputs ->> 'command' AS command FROM agentlab_sched.schedules"
                        " WHERE name = 'nightly'").fetchone()  # fmt: skip
    assert row == {"cron": "0 4 * * *", "command": "SELECT 1"}


def test_the_refusal_names_the_condition_that_failed(db_url: str, roles: Roles, other_db: str, reporting: str) -> None:
    """Each condition of who may schedule SQL as a role is said on its own, first failing first."""
    groups = roles.groups()
    author = roles.login("named", groups.admin)

    def why(username: str) -> tuple[str | None, str]:
        with roles.connect(author) as c:
            try:
                c.execute(
                    "SELECT agentlab_sched.schedule('nightly', '0 3 * * *', 'agentlab_sched:sql', jsonb_build_object("
                    "'command', 'SELECT 1', 'database', %s::text, 'username', %s::text))",
                    (other_db, username),
                )
            except psycopg.errors.InsufficientPrivilege as exc:
                detail = json.loads(exc.diag.message_detail or "{}")
                return detail["params"]["why"]["msg"], exc.diag.message_primary or ""
        return None, ""

    code, said = why("postgres")
    assert code == "sql.not_allowed.superuser" and ": postgres is a superuser, and a SQL schedule never" in said
    code, said = why(reporting)
    assert code == "sql.not_allowed.no_execute", said
    assert said == (
        f"username: {author} may not schedule SQL to run as {reporting}: {author} has no EXECUTE on "
        f"agentlab_sched.schedule_sql, the privilege the schema's owner grants (GRANT EXECUTE ON FUNCTION "
        f"agentlab_sched.schedule_sql TO {author}) (docs/security.md)"
    )
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql TO {}").format(
            sql.Identifier(author)))  # fmt: skip
    assert why(reporting)[0] == "sql.not_allowed.not_member"
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(reporting), sql.Identifier(author)))
    assert why(reporting) == (None, "")


# --------------------------------------------------------------------------------------------------
# Real workers
# --------------------------------------------------------------------------------------------------

COMMAND = """CREATE TABLE IF NOT EXISTS purged (x int);
INSERT INTO purged SELECT generate_series(1, 5);
DO $$ BEGIN RAISE NOTICE 'purging % rows', 2; END $$;
DELETE FROM purged WHERE x <= 2"""


async def _run_once(conn: Conn, db_url: str, name: str) -> dict[str, Any]:
    sid = (await admin.get(conn, name)).id
    await conn.execute("SELECT agentlab_sched.register_tasks(%s)", ([SQL_TASK],))
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        return await wait_for(run_in(conn, run["id"], "succeeded", "failed", "timed_out"), what="the sql run ended")


async def test_a_worker_runs_the_command_in_the_database_as_the_role(
    conn: Conn, db_url: str, other_db: str, reporting: str
) -> None:
    await admin.schedule_sql(conn, "purge", "0 3 * * *", COMMAND, database=other_db, username=reporting, now=NOW)
    done = await _run_once(conn, db_url, "purge")
    assert (done["status"], done["error"]) == ("succeeded", None)
    result = done["result"]
    assert result["statements"] == [
        {"status": "CREATE TABLE", "rows": 0},
        {"status": "INSERT 0 5", "rows": 5},
        {"status": "DO", "rows": 0},
        {"status": "DELETE 2", "rows": 2},
    ]
    assert (result["rows"], result["status"], result["database"], result["username"]) == (
        7,
        "DELETE 2",
        other_db,
        reporting,
    )
    assert result["notices"] == [{"severity": "NOTICE", "message": "purging 2 rows"}]
    assert isinstance(result["duration_ms"], int)
    with psycopg.connect(conninfo.make_conninfo(db_url, dbname=other_db)) as c:
        owner, count = fetched(
            c.execute(
                "SELECT tableowner, (SELECT count(*) FROM purged) FROM pg_tables WHERE tablename = 'purged'"
            ).fetchone()
        )
    assert (owner, count) == (reporting, 3)  # made as the role, in the other database


async def test_a_failing_command_fails_the_run_with_the_servers_words(
    conn: Conn, db_url: str, other_db: str, reporting: str
) -> None:
    await admin.schedule_sql(
        conn, "broken", "0 3 * * *", "INSERT INTO nowhere VALUES (1)", database=other_db, username=reporting, now=NOW
    )
    done = await _run_once(conn, db_url, "broken")
    assert done["status"] == "failed"
    assert done["error"] == (
        f'sql: relation "nowhere" does not exist (SQLSTATE 42P01) in database {other_db} as {reporting}'
    )


async def test_the_statement_timeout_stops_a_long_command(
    conn: Conn, db_url: str, other_db: str, reporting: str
) -> None:
    await admin.schedule_sql(
        conn,
        "slow",
        "0 3 * * *",
        "SELECT pg_sleep(30)",
        database=other_db,
        username=reporting,
        statement_timeout=timedelta(milliseconds=300),
        now=NOW,
    )
    done = await _run_once(conn, db_url, "slow")
    assert done["status"] == "failed"
    assert done["error"] == (
        "sql: the command ran longer than its statement_timeout (00:00:00.3) and the worker stopped it"
        f" (SQLSTATE 57014) in database {other_db} as {reporting}"
    )


@pytest.fixture
async def pool_as(roles: Roles) -> AsyncIterator[Any]:
    """A Procrastinate-like context whose app's pool connects as a login role (a worker host's)."""
    pools: list[psycopg_pool.AsyncConnectionPool] = []

    async def make(role: str) -> Any:
        pool = psycopg_pool.AsyncConnectionPool(roles.url(role), min_size=1, max_size=1, open=False)
        await pool.open()
        pools.append(pool)
        return SimpleNamespace(app=SimpleNamespace(connector=SimpleNamespace(pool=pool)))

    yield make
    for pool in pools:
        await pool.close()


async def test_the_worker_connects_as_the_role_itself(
    pool_as: Any, roles: Roles, other_db: str, reporting: str
) -> None:
    """No grant of the role to the worker's login is needed (nor used): the command's connection is made
    as the role (tests/tasks/test_sql_run_as.py has the rest)."""
    host = roles.login("worker_host")
    context = await pool_as(host)
    result = await run_sql(context, "SELECT 1 UNION SELECT 2", other_db, reporting)
    assert (result["statements"], result["username"]) == ([{"status": "SELECT 2", "rows": 2}], reporting)
    with pytest.raises(SqlTaskError) as caught:
        await run_sql(context, "SELECT 1", "no_such_database", reporting)
    assert caught.value.code == "sql.cannot_connect"
    assert sql_task.MAX_NOTICES == 100


def test_cli_add_sql(db_url: str, other_db: str, reporting: str) -> None:
    out = ok(
        db_url,
        "schedules",
        "add-sql",
        "purge",
        "--cron",
        "0 3 * * *",
        "--command",
        "DELETE FROM events WHERE at < now() - interval '30 days'",
        "--database",
        other_db,
        "--username",
        reporting,
        "--statement-timeout",
        "5m",
        "--tz",
        "Asia/Shanghai",
    ).stdout
    assert out.startswith('added schedule "purge"')
    shown = json.loads(ok(db_url, "schedules", "show", "purge", "--json").stdout)
    assert (shown["task"], shown["timezone"], shown["inputs"]["statement_timeout"]) == (
        SQL_TASK,
        "Asia/Shanghai",
        "00:05:00",
    )
    assert refused(db_url, "schedules", "add-sql", "x", "--cron", "0 3 * * *", "--command", "SELECT 1").startswith(
        "username: postgres may not schedule SQL to run as postgres: postgres is a superuser"
    )
