"""The built-in ``sql`` task: run a schedule's SQL command in a named database, as a named role.

A schedule made with ``agentlab_sched.schedule_sql()`` (or ``admin.schedule_sql``, or
``agentlab-sched schedules add-sql``) has the task :data:`SQL_TASK` and the inputs ``command``,
``database``, ``username`` and ``statement_timeout``. A worker carries it out like pg_cron does:

- it connects to ``database`` on the server of its own connection, with the same credentials (host,
  port, user, password, TLS settings of the app's connection; libpq's ``PGPASSWORD`` / ``.pgpass`` /
  ``PGSERVICE`` apply as they do to that connection, looked up for ``database``);
- ``SET ROLE username`` (the worker's login role must be a member of it: ``GRANT reporting TO worker``),
  ``statement_timeout``, and ``application_name`` naming the schedule;
- the command is sent as one simple query (several statements run as one implicit transaction, and a
  single ``VACUUM`` works, as with pg_cron);
- the run's result records each statement's status and rows affected, the total, and the notices the
  server sent; an error fails the run with the server's message and SQLSTATE.

Who may create such a schedule is a privilege of its own (``docs/security.md``): the database checks it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import procrastinate
import psycopg
from psycopg import conninfo

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError
from agentlab_sched.runs.context import current_run
from agentlab_sched.settings import Settings

__all__ = ["MAX_NOTICES", "SQL_TASK", "SqlTaskError", "register", "run_sql"]

#: The task's name as schedules name it (the blueprint's ``sql`` in namespace ``agentlab_sched``);
#: the database's ``agentlab_sched.sql_task_name()`` is the same.
SQL_TASK = "agentlab_sched:sql"
#: The most notices kept on a run's result (the first ones), each cut to 1000 characters.
MAX_NOTICES = 100


class SqlTaskError(SchedError):
    """A sql run failed: the run's error is this message (``messages/_sql.py``) and its code."""

    def __init__(self, code: str, **params: object) -> None:
        super().__init__(code, None, **params)


async def _own_conninfo(context: procrastinate.JobContext) -> str:
    """The conninfo of the worker's own connection (password included), from the app's pool."""
    pool = getattr(context.app.connector, "pool", None)
    if pool is None:  # a connector without a pool: the configured database
        url = Settings.from_env().database_url
        if not url:
            raise SqlTaskError("sql.cannot_connect", database="?", message="no database connection to copy")
        return url
    async with pool.connection() as own:
        params = {k: v for k, v in own.info.get_parameters().items() if k != "options"}
        password = own.info.password
    if password:
        params["password"] = password
    return conninfo.make_conninfo("", **params)


def _target(own: str, database: str, name: str) -> str:
    return conninfo.make_conninfo(own, dbname=database, application_name=f"agentlab-sched sql: {name}"[:63])


async def run_sql(
    context: procrastinate.JobContext,
    command: str,
    database: str,
    username: str,
    statement_timeout: str = "1 hour",
) -> dict[str, Any]:
    """Run ``command`` in ``database`` as ``username`` under ``statement_timeout``; what it did."""
    try:
        name = current_run().schedule or "manual"
    except LookupError:  # run without the run middleware
        name = "manual"
    own = await _own_conninfo(context)
    try:
        conn = await psycopg.AsyncConnection.connect(_target(own, database, name), autocommit=True)
    except psycopg.Error as exc:
        raise SqlTaskError("sql.cannot_connect", database=database, message=_first_line(exc)) from None
    notices: list[dict[str, str]] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:
        if len(notices) < MAX_NOTICES:
            notices.append({"severity": diag.severity or "", "message": (diag.message_primary or "")[:1000]})

    conn.add_notice_handler(keep)
    started = time.monotonic()
    try:
        worker = await queries.value(conn, "session_user")
        try:
            await queries.execute(conn, "set_role", identifiers={"username": username})
        except psycopg.Error as exc:
            raise SqlTaskError(
                "sql.cannot_set_role", worker=worker, username=username, message=_first_line(exc)
            ) from None
        await queries.execute(conn, "set_statement_timeout", {"timeout": statement_timeout})
        try:
            statements = await queries.run_command(conn, command)
        except psycopg.Error as exc:
            diag = exc.diag
            raise SqlTaskError(
                "sql.failed",
                message=_first_line(exc),
                sqlstate=diag.sqlstate or "?",
                database=database,
                username=username,
            ) from None
    except asyncio.CancelledError:
        await conn.cancel_safe()  # an aborted run stops its statement on the server too
        raise
    finally:
        await conn.close()
    return {
        "database": database,
        "username": username,
        "status": statements[-1]["status"] if statements else "",
        "rows": sum(s["rows"] for s in statements),
        "statements": statements,
        "notices": notices,
        "duration_ms": round((time.monotonic() - started) * 1000),
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def register(bp: procrastinate.Blueprint) -> None:
    """Add the ``sql`` task to the scheduler's blueprint (it runs on the queue the schedule names)."""
    bp.task(name="sql", pass_context=True)(run_sql)
