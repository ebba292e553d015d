"""The sql task runs its command on a connection made as the schedule's role: exactly that role's rights
(no RESET ROLE / SET ROLE / ALTER ROLE way out), in a database the role and the author may connect to,
authenticated by what the operator configured (a passfile), never with the worker's credentials; and its
statement_timeout is the worker's to enforce, whatever the command sets."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
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
from agentlab_sched.tasks.sql import SQL_TASK, SqlTaskError, run_as_conninfo, run_sql
from tests.support.cli import ok
from tests.support.rows import Conn, fetched
from tests.support.runs import launch
from tests.support.workers import run_in, wait_for, worker

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PASSWORD = "run-as-test"
_counter = itertools.count()


class Made:
    """Roles made on the test server for one test, dropped (with what they own) at its end."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.names: list[str] = []

    def role(self, base: str, *, login: bool = True, member_of: tuple[str, ...] = ()) -> str:
        name = f"{base}_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.server, autocommit=True) as c:
            c.execute(
                sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
                    sql.Identifier(name), sql.SQL("LOGIN" if login else "NOLOGIN"), PASSWORD
                )
            )
            for group in member_of:
                c.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(name)))
        self.names.append(name)
        return name

    def url(self, role: str, database: str | None = None) -> str:
        extra = {"dbname": database} if database else {}
        return conninfo.make_conninfo(self.server, user=role, password=PASSWORD, **extra)

    def drop(self, databases: list[str]) -> None:
        for name in reversed(self.names):
            for database in [*databases, None]:
                with psycopg.connect(conninfo.make_conninfo(self.server, **({"dbname": database} if database else {})),
                                     autocommit=True) as c:  # fmt: skip
                    if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                        c.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
            with psycopg.connect(self.server, autocommit=True) as c:
                c.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def data_db(pg_server: str) -> Iterator[str]:
    """A database of its own where the commands run."""
    name = f"run_as_data_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield name
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def made(pg_server: str, db_url: str, data_db: str) -> Iterator[Made]:
    roles = Made(pg_server)
    yield roles
    roles.drop([str(conninfo.conninfo_to_dict(db_url)["dbname"]), data_db])


@pytest.fixture
def password_group(pg_server: str) -> Iterator[str]:
    """A group role whose members must log in with their password (scram-sha-256), by two lines put first
    in the test server's pg_hba.conf (the embedded server trusts every local connection otherwise)."""
    group = f"pw_required_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        hba = Path(fetched(c.execute("SHOW hba_file").fetchone())[0])
        if not os.access(hba, os.W_OK):
            pytest.skip(f"needs to edit the test server's pg_hba.conf ({hba} is not writable here)")
        c.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(group)))
        before = hba.read_text()
        rules = f"local all +{group} scram-sha-256\nhost all +{group} all scram-sha-256\n"
        hba.write_text(rules + before)
        c.execute("SELECT pg_reload_conf()")
    try:
        yield group
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            hba.write_text(hba.read_text().replace(rules, "", 1))
            c.execute("SELECT pg_reload_conf()")
            c.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(group)))


@pytest.fixture
async def pool_as(made: Made) -> AsyncIterator[Any]:
    """A Procrastinate-like job context whose app's pool connects as a login role (a worker host's)."""
    pools: list[psycopg_pool.AsyncConnectionPool] = []

    async def make(role: str) -> Any:
        pool = psycopg_pool.AsyncConnectionPool(made.url(role), min_size=1, max_size=1, open=False)
        await pool.open()
        pools.append(pool)
        return SimpleNamespace(app=SimpleNamespace(connector=SimpleNamespace(pool=pool)))

    yield make
    for pool in pools:
        await pool.close()


def _grant_create(made: Made, data_db: str, role: str) -> None:
    with psycopg.connect(conninfo.make_conninfo(made.server, dbname=data_db), autocommit=True) as c:
        c.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))


def _rows(made: Made, data_db: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo.make_conninfo(made.server, dbname=data_db)) as c:
        return c.execute(query).fetchall()


def test_the_connection_is_made_as_the_role_without_the_workers_credentials() -> None:
    own = "host=db.internal port=6432 user=worker_host password=w0rker dbname=app sslmode=verify-full"
    made = conninfo.conninfo_to_dict(run_as_conninfo(own, "reports", "reporting", "agentlab-sched sql run 1a2b3c"))
    assert made == {
        "host": "db.internal",
        "port": "6432",
        "sslmode": "verify-full",
        "dbname": "reports",
        "user": "reporting",
        "password": "",  # set, and empty: libpq uses neither PGPASSWORD nor the worker's, but the passfile
        "application_name": "agentlab-sched sql run 1a2b3c",
    }


async def test_the_command_has_exactly_the_roles_rights_and_no_way_out(pool_as: Any, made: Made, data_db: str) -> None:
    finance = made.role("finance", login=False)
    with psycopg.connect(conninfo.make_conninfo(made.server, dbname=data_db), autocommit=True) as c:
        c.execute("CREATE TABLE ledger (amount int)")
        c.execute(sql.SQL("GRANT SELECT ON ledger TO {}").format(sql.Identifier(finance)))
    # the worker's login may act as finance; the schedule's role may not
    host = made.role("worker_host", member_of=(finance,))
    reporting = made.role("reporting")
    _grant_create(made, data_db, reporting)
    context = await pool_as(host)
    done = await run_sql(
        context,
        "CREATE TABLE seen (who text, login text); RESET ROLE; INSERT INTO seen VALUES (current_user, session_user)",
        data_db,
        reporting,
    )
    assert done["statements"][-1] == {"status": "INSERT 0 1", "rows": 1}
    assert _rows(made, data_db, "SELECT who, login FROM seen") == [(reporting, reporting)]

    async def refusal(command: str) -> str:
        with pytest.raises(SqlTaskError) as caught:
            await run_sql(context, command, data_db, reporting)
        assert caught.value.code == "sql.failed"
        return caught.value.message("en")

    assert await refusal(f'SET ROLE "{finance}"; SELECT * FROM ledger') == (
        f'sql: permission denied to set role "{finance}" (SQLSTATE 42501) in database {data_db} as {reporting}'
    )
    assert await refusal("RESET ROLE; SELECT * FROM ledger") == (
        f"sql: permission denied for table ledger (SQLSTATE 42501) in database {data_db} as {reporting}"
    )
    assert (await refusal(f'ALTER ROLE "{host}" SET default_transaction_read_only = on')).startswith(
        "sql: permission denied to alter role"
    )
    # what a command does to its own role touches its own sessions only, never the worker's
    await run_sql(context, "ALTER ROLE CURRENT_USER SET default_transaction_read_only = on", data_db, reporting)
    with psycopg.connect(made.url(host)) as c:
        assert c.execute("SHOW default_transaction_read_only").fetchone() == ("off",)


async def test_a_superuser_workers_login_is_no_way_out(conn: Conn, db_url: str, made: Made, data_db: str) -> None:
    """The tests' worker logs in as the server's superuser: the command still runs as its role."""
    reporting = made.role("reporting")
    await admin.schedule_sql(
        conn, "escape", "0 3 * * *", f'RESET ROLE; ALTER ROLE "{reporting}" SUPERUSER', database=data_db,
        username=reporting, now=NOW,
    )  # fmt: skip
    done = await _run_once(conn, db_url, "escape")
    assert done["status"] == "failed"
    assert done["error"].startswith("sql: permission denied to alter role (SQLSTATE 42501)")
    assert _rows(made, data_db, f"SELECT rolsuper FROM pg_roles WHERE rolname = '{reporting}'") == [(False,)]


async def test_the_worker_logs_in_as_the_role_with_the_operators_passfile_only(
    pool_as: Any, made: Made, data_db: str, password_group: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reporting = made.role("reporting", member_of=(password_group,))
    host = made.role("worker_host")
    passfile = tmp_path / "pgpass"  # the worker's passfile, with no line for the role yet
    passfile.write_text("")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    context = await pool_as(host)
    # the worker's own password (PGPASSWORD) is never sent for the role, even when it is the right one
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with pytest.raises(SqlTaskError) as caught:
        await run_sql(context, "SELECT 1", data_db, reporting)
    err = caught.value
    assert (err.code, err.params["username"], err.params["database"]) == ("sql.cannot_connect", reporting, data_db)
    message = err.params["message"]
    assert isinstance(message, str) and message.endswith("fe_sendauth: no password supplied")
    assert err.message("en").startswith(f"sql: the worker cannot connect to database {data_db} as {reporting}: ")
    assert (
        f"a line for {reporting} in the worker's passfile (PGPASSFILE or ~/.pgpass: "
        f"host:port:{data_db}:{reporting}:password), or a trust, peer or cert rule"
    ) in err.message("en")
    assert err.message("zh-CN").startswith(f"sql:worker 无法以 {reporting} 身份连接数据库 {data_db}:")
    monkeypatch.delenv("PGPASSWORD")
    passfile.write_text(f"*:*:{data_db}:{reporting}:{PASSWORD}\n")  # the operator adds the role's line
    done = await run_sql(context, "SELECT 1", data_db, reporting)
    assert (done["username"], done["statements"]) == (reporting, [{"status": "SELECT 1", "rows": 1}])


async def test_a_role_that_may_not_log_in_or_connect_is_refused_when_saved_and_when_run(
    conn: Conn, pool_as: Any, made: Made, data_db: str
) -> None:
    nologin = made.role("nologin", login=False)
    with pytest.raises(errors.SchedError) as caught:
        await admin.schedule_sql(conn, "n", "0 3 * * *", "SELECT 1", database=data_db, username=nologin, now=NOW)
    assert (caught.value.code, caught.value.field) == ("sql.cannot_login", "username")
    assert caught.value.message("en").startswith(f"username: {nologin} may not log in, and a SQL schedule's")
    reporting = made.role("reporting")
    with psycopg.connect(made.server, autocommit=True) as c:
        c.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(data_db)))
    with pytest.raises(errors.NotAllowed) as refused:
        await admin.schedule_sql(conn, "n", "0 3 * * *", "SELECT 1", database=data_db, username=reporting, now=NOW)
    assert (refused.value.code, refused.value.field) == ("sql.no_connect", "database")
    assert refused.value.message("en") == (
        f"database: {reporting} may not connect to database {data_db} (it needs CONNECT: GRANT CONNECT ON"
        f" DATABASE {data_db} TO {reporting})"
    )
    # at run time the connection is the check: CONNECT taken away after the schedule was saved
    context = await pool_as(made.role("worker_host"))
    with pytest.raises(SqlTaskError) as caught_run:
        await run_sql(context, "SELECT 1", data_db, reporting)
    assert caught_run.value.code == "sql.cannot_connect"
    message = caught_run.value.params["message"]
    assert isinstance(message, str) and "permission denied for database" in message


async def test_vacuum_several_statements_and_a_procedure_that_commits_keep_working(
    pool_as: Any, made: Made, data_db: str
) -> None:
    reporting = made.role("reporting")
    _grant_create(made, data_db, reporting)
    context = await pool_as(made.role("worker_host"))
    await run_sql(
        context,
        "CREATE TABLE t (x int); CREATE PROCEDURE fill() LANGUAGE plpgsql AS $$ BEGIN"
        " INSERT INTO t VALUES (1); COMMIT; INSERT INTO t VALUES (2); COMMIT; END $$",
        data_db,
        reporting,
    )
    assert (await run_sql(context, "CALL fill()", data_db, reporting))["statements"] == [{"status": "CALL", "rows": 0}]
    assert (await run_sql(context, "VACUUM t", data_db, reporting))["statements"] == [{"status": "VACUUM", "rows": 0}]
    assert _rows(made, data_db, "SELECT x FROM t ORDER BY x") == [(1,), (2,)]


async def test_the_limit_holds_whatever_the_command_sets(pool_as: Any, made: Made, data_db: str) -> None:
    reporting = made.role("reporting")
    context = await pool_as(made.role("worker_host"))
    for command in (
        "SET statement_timeout = 0; SELECT pg_sleep(30)",
        "SELECT set_config('statement_timeout', '0', false); SELECT pg_sleep(30)",
        "BEGIN; SET LOCAL statement_timeout = 0; SELECT pg_sleep(30); COMMIT",
    ):
        started = time.monotonic()
        with pytest.raises(SqlTaskError) as caught:
            await run_sql(context, command, data_db, reporting, statement_timeout="00:00:00.3")
        assert time.monotonic() - started < 5, command
        assert caught.value.message("en") == (
            f"sql: the command ran longer than its statement_timeout (00:00:00.3) and the worker stopped it"
            f" (SQLSTATE 57014) in database {data_db} as {reporting}"
        )
    await _no_backend_left(made, data_db, reporting)


async def _no_backend_left(made: Made, data_db: str, role: str) -> None:
    """The closed connections' backends leave pg_stat_activity within moments (their exit is the server's)."""
    query = f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'"
    for _ in range(50):
        if _rows(made, data_db, query) == [(0,)]:
            return
        await asyncio.sleep(0.1)
    assert _rows(made, data_db, query) == [(0,)]


async def test_a_command_that_ignores_the_cancel_is_terminated(pool_as: Any, made: Made, data_db: str) -> None:
    reporting = made.role("reporting")
    context = await pool_as(made.role("worker_host"))
    stubborn = (
        "SET statement_timeout = 0; DO $$ BEGIN LOOP BEGIN PERFORM pg_sleep(30);"
        " EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$"
    )
    started = time.monotonic()
    with pytest.raises(SqlTaskError) as caught:
        await run_sql(context, stubborn, data_db, reporting, statement_timeout="00:00:00.3")
    assert caught.value.code == "sql.timed_out"
    assert time.monotonic() - started < 0.3 + 2 * sql_task.CANCEL_GRACE + 2
    await _no_backend_left(made, data_db, reporting)


async def test_pg_stat_activity_shows_the_run_not_the_schedules_name(
    conn: Conn, db_url: str, made: Made, data_db: str
) -> None:
    reporting = made.role("reporting")
    _grant_create(made, data_db, reporting)
    await admin.schedule_sql(
        conn, "payroll-secret-merger", "0 3 * * *",
        "CREATE TABLE app AS SELECT current_setting('application_name') AS name", database=data_db,
        username=reporting, now=NOW,
    )  # fmt: skip
    done = await _run_once(conn, db_url, "payroll-secret-merger")
    assert done["status"] == "succeeded", done["error"]
    assert _rows(made, data_db, "SELECT name FROM app") == [(f"agentlab-sched sql run {str(done['id'])[:6]}",)]


def test_add_sql_and_roles_create_say_what_the_operator_provides(db_url: str, made: Made, data_db: str) -> None:
    reporting = made.role("reporting")
    with psycopg.connect(db_url, autocommit=True) as c:  # the tests' login is a superuser: the author here
        c.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(reporting)))
    said = ok(
        db_url, "schedules", "add-sql", "purge", "--cron", "0 3 * * *", "--command", "VACUUM", "--database", data_db,
        "--username", reporting,
    ).stdout  # fmt: skip
    assert said.splitlines()[1] == (
        f"the worker runs it on a connection made as {reporting} to database {data_db}: {reporting} needs LOGIN,"
        f" and each worker's host a way to log in as it, configured by the operator (a line"
        f" host:port:{data_db}:{reporting}:password in the worker's passfile, PGPASSFILE or ~/.pgpass, or a"
        f" trust, peer or cert rule in pg_hba.conf); without one the run fails saying so (docs/security.md)"
    )
    prefix = f"runas{os.getpid()}"
    made.names.extend([f"{prefix}_worker", f"{prefix}_admin", f"{prefix}_reader"])
    created = ok(db_url, "roles", "create", "--prefix", prefix).stdout
    assert (
        "A SQL schedule's command runs on a connection the worker makes as the schedule's role: such roles need"
        " LOGIN, and the worker's host a way to log in as them (its passfile, or a trust, peer or cert rule:"
        " docs/security.md)"
    ) in " ".join(created.split())


# ------------------------------------------------------------------------------------------------- helpers


async def _run_once(conn: Conn, db_url: str, name: str) -> dict[str, Any]:
    """Fire schedule ``name`` once through launch() and let a real worker in this process run it."""
    sid = (await admin.get(conn, name)).id
    await conn.execute("SELECT agentlab_sched.register_tasks(%s)", ([SQL_TASK],))
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        return await wait_for(run_in(conn, run["id"], "succeeded", "failed", "timed_out"), what="the sql run ended")
