"""The built-in ``sql`` task: run a schedule's SQL command in a named database, as a named role.

A schedule made with ``agentlab_sched.schedule_sql()`` (or ``admin.schedule_sql``, or
``agentlab-sched schedules add-sql``) has the task :data:`SQL_TASK` and the inputs ``command``,
``database``, ``username`` and ``statement_timeout``. A worker carries it out like pg_cron does (pg_cron
connects as the job's user):

- it connects to ``database`` on the server of its own connection **as** ``username``: host, port and TLS
  settings are those of the worker's connection, the user is ``username``, and the password is never the
  worker's (neither its connection's nor ``PGPASSWORD``): libpq looks it up in the passfile
  (``PGPASSFILE``, ``~/.pgpass``) for that host, port, database and role, or the server lets the role in
  by a trust, peer or cert rule the operator wrote. The command therefore has exactly the role's rights:
  ``RESET ROLE`` goes back to ``username`` itself, and ``SET ROLE`` reaches only roles it belongs to;
- ``statement_timeout`` is enforced by the worker: at the limit it cancels the command, and terminates its
  backend if it does not stop, whatever the command set (the server's ``statement_timeout`` is set a
  little above the limit as a backstop for a worker that died);
- the command is sent as one simple query on an autocommit connection (several statements run as one
  implicit transaction, and ``VACUUM`` or a ``CALL`` of a procedure that commits work, as with pg_cron);
- the run's result records each statement's status and rows affected, the total, and the notices the
  server sent; an error fails the run with the server's message and SQLSTATE.

Who may create such a schedule is a privilege of its own (``docs/security.md``): the database checks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import procrastinate
import psycopg
from psycopg import conninfo

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError
from agentlab_sched.runs.context import current_run
from agentlab_sched.settings import Settings

__all__ = ["MAX_NOTICES", "SQL_TASK", "SqlTaskError", "register", "run_as_conninfo", "run_sql"]

#: The task's name as schedules name it (the blueprint's ``sql`` in namespace ``agentlab_sched``);
#: the database's ``agentlab_sched.sql_task_name()`` is the same.
SQL_TASK = "agentlab_sched:sql"
#: The most notices kept on a run's result (the first ones), each cut to 1000 characters.
MAX_NOTICES = 100
#: Seconds a cancelled command is given to stop before its backend is terminated (a command can catch
#: query_canceled in PL/pgSQL; it cannot catch a termination).
CANCEL_GRACE = 2.0
#: Milliseconds the server's own statement_timeout is set above the limit: a backstop that fires only when
#: the worker could not stop the command (it died), so the worker's message is the one a run records.
SERVER_BACKSTOP_MS = 5000

#: Connection parameters of the worker's own connection that are never carried to the role's: its
#: identity and credentials, and what the task sets itself.
_NOT_COPIED = ("user", "password", "dbname", "options", "application_name", "service", "servicefile")


class SqlTaskError(SchedError):
    """A sql run failed: the run's error is this message (``messages/_sql.py``) and its code."""

    def __init__(self, code: str, **params: object) -> None:
        super().__init__(code, None, **params)


async def _own_conninfo(context: procrastinate.JobContext) -> str:
    """The conninfo of the worker's own connection (its password is not part of it), from the app's pool."""
    pool = getattr(context.app.connector, "pool", None)
    if pool is None:  # a connector without a pool: the configured database
        url = Settings.from_env().database_url
        if not url:
            raise SqlTaskError(
                "sql.cannot_connect", database="?", username="?", message="no database connection to copy"
            )
        return url
    async with pool.connection() as own:
        return conninfo.make_conninfo("", **own.info.get_parameters())


def run_as_conninfo(own: str, database: str, username: str, label: str) -> str:
    """The conninfo of a connection to ``database`` as ``username`` on the server of ``own``: the server
    and TLS settings of ``own``, none of its credentials. ``password=''`` keeps libpq from using
    ``PGPASSWORD`` (the worker's) and makes it look the role's password up in the passfile."""
    params = {k: v for k, v in conninfo.conninfo_to_dict(own).items() if k not in _NOT_COPIED}
    return conninfo.make_conninfo(
        "", **params, dbname=database, user=username, password="", application_name=label[:63]
    )


async def run_sql(
    context: procrastinate.JobContext,
    command: str,
    database: str,
    username: str,
    statement_timeout: str = "1 hour",
) -> dict[str, Any]:
    """Run ``command`` in ``database`` as ``username`` under ``statement_timeout``; what it did."""
    try:
        label = f"agentlab-sched sql run {current_run().short_id}"  # never the schedule's name: anyone sees it
    except LookupError:  # run without the run middleware
        label = "agentlab-sched sql"
    target = run_as_conninfo(await _own_conninfo(context), database, username, label)
    try:
        conn = await psycopg.AsyncConnection.connect(target, autocommit=True)
    except psycopg.Error as exc:
        raise SqlTaskError(
            "sql.cannot_connect", database=database, username=username, message=_first_line(exc)
        ) from None
    notices: list[dict[str, str]] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:
        if len(notices) < MAX_NOTICES:
            notices.append({"severity": diag.severity or "", "message": (diag.message_primary or "")[:1000]})

    conn.add_notice_handler(keep)
    backend_pid = conn.info.backend_pid
    started = time.monotonic()
    try:
        limit_ms = int(await queries.value(conn, "statement_timeout_ms", {"timeout": statement_timeout}))
        await queries.execute(conn, "set_statement_timeout", {"ms": limit_ms + SERVER_BACKSTOP_MS})
        statements = await _run_bounded(conn, target, command, limit_ms / 1000)
    except psycopg.Error as exc:
        raise SqlTaskError(
            "sql.failed",
            message=_first_line(exc),
            sqlstate=exc.diag.sqlstate or "?",
            database=database,
            username=username,
        ) from None
    except TimeoutError:
        raise SqlTaskError("sql.timed_out", timeout=statement_timeout, database=database, username=username) from None
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
        "pid": backend_pid,  # the backend that ran it (cron.job_run_details.job_pid)
    }


async def _run_bounded(
    conn: psycopg.AsyncConnection[Any], target: str, command: str, limit: float
) -> list[dict[str, Any]]:
    """The command's statements; TimeoutError once it ran ``limit`` seconds (it is stopped on the server)."""
    running = asyncio.ensure_future(queries.run_command(conn, command))
    try:
        done, _ = await asyncio.wait({running}, timeout=limit)
    except asyncio.CancelledError:  # an aborted run stops its statement on the server too
        await _stop(running, conn, target)
        raise
    if done:
        return running.result()
    await _stop(running, conn, target)
    raise TimeoutError


async def _stop(running: asyncio.Future[Any], conn: psycopg.AsyncConnection[Any], target: str) -> None:
    """Stop the command: cancel it (psycopg sends the server a cancel request and waits for the statement to
    end), then terminate its backend if it is still running after :data:`CANCEL_GRACE`."""
    pid = conn.info.backend_pid
    running.cancel()
    done, _ = await asyncio.wait({running}, timeout=CANCEL_GRACE)
    if not done:
        with contextlib.suppress(psycopg.Error):  # the role may signal its own backends
            async with await psycopg.AsyncConnection.connect(target, autocommit=True) as other:
                await queries.execute(other, "terminate_backend", {"pid": pid})
        await asyncio.wait({running}, timeout=CANCEL_GRACE)
    if running.done() and not running.cancelled():
        running.exception()  # retrieved: the run's outcome is the timeout or the abort, not this error


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def register(bp: procrastinate.Blueprint) -> None:
    """Add the ``sql`` task to the scheduler's blueprint (it runs on the queue the schedule names)."""
    bp.task(name="sql", pass_context=True)(run_sql)
