"""Connections: which database, and how our connections are set up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import procrastinate
import psycopg
from psycopg import conninfo
from psycopg.rows import dict_row

from agentlab_sched.database import embedded, queries
from agentlab_sched.settings import Settings
from agentlab_sched.waiting import wait_at_most


@dataclass(frozen=True)
class Database:
    url: str
    #: Where it came from, said by every command: "AGENTLAB_SCHED_DATABASE_URL" or "embedded (<dir>)".
    origin: str
    #: The data directory, when it is the embedded server's.
    embedded_dir: str | None = None


def resolve(settings: Settings | None = None, *, data_dir: str | None = None) -> Database:
    """The configured database, or the embedded server (started if needed) when none is configured."""
    settings = settings or Settings.from_env()
    if settings.database_url:
        return Database(settings.database_url, "AGENTLAB_SCHED_DATABASE_URL")
    return embedded_database(settings, data_dir=data_dir)


def embedded_database(settings: Settings | None = None, *, data_dir: str | None = None, dev: bool = False) -> Database:
    """A database on the embedded server (started if needed): ``agentlab_sched``, or with ``dev`` the one
    `agentlab-sched dev` seeds its demo into (``agentlab_sched_dev``), whatever URL is configured."""
    settings = settings or Settings.from_env()
    where = data_dir or settings.data_dir or str(embedded.default_data_dir())
    name = embedded.DEV_DATABASE if dev else embedded.DATABASE
    return Database(embedded.start(where, database=name), f"embedded PostgreSQL ({where})", where)


def display_url(url: str) -> str:
    """A database URL fit to print: no password, just user, host, port and database."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparsable database URL)"
    user = str(parts.get("user") or "")
    host = str(parts.get("host") or "")
    port = parts.get("port")
    where = host if not port else f"{host}:{port}"
    if host.startswith("/"):
        where = f"[{where}]"
    return f"postgresql://{user + '@' if user else ''}{where}/{parts.get('dbname') or ''}"


#: How long a worker's connection attempt may take before it counts as failed (seconds), and the TCP
#: keepalives and user timeout that notice a connection to a server that vanished (a failover to a new
#: address behind the same name) instead of waiting on it for ever.
CONNECT_TIMEOUT = 5
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
TCP_USER_TIMEOUT_MS = 30_000


def connect_kwargs(
    locale: str | None = None, *, purpose: str | None = None, lock_timeout: float | None = None
) -> dict[str, Any]:
    """Session settings for every connection we open: the locale SQL messages render in; ``purpose``
    names the connection in ``pg_stat_activity`` (``agentlab-sched scheduler``, ...); ``lock_timeout``
    (seconds) bounds how long its statements wait for a lock (a table a migration locked)."""
    options = []
    if locale:
        options.append(f"-c agentlab_sched.locale={locale}")
    # Generic plans built on an empty jobs table are pathological later (reference/procrastinate.md).
    options.append("-c plan_cache_mode=force_custom_plan")
    if lock_timeout:
        options.append(f"-c lock_timeout={int(lock_timeout * 1000)}")
    return {
        # No server-side prepared statements: through a transaction pooler (PgBouncer's pool_mode =
        # transaction) a statement prepared on one server connection is executed on another, which does
        # not know it. With plan_cache_mode = force_custom_plan a prepared statement is planned again at
        # every execution anyway, so preparing would save only the parse.
        "prepare_threshold": None,
        "options": " ".join(options),
        "application_name": f"agentlab-sched {purpose}" if purpose else "agentlab-sched",
        "connect_timeout": CONNECT_TIMEOUT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        **KEEPALIVES,
    }


async def connect(
    url: str,
    *,
    locale: str | None = None,
    autocommit: bool = True,
    purpose: str | None = None,
    lock_timeout: float | None = None,
) -> psycopg.AsyncConnection[dict[str, Any]]:
    """An async connection with dict rows and our session settings (see `connect_kwargs`)."""
    return await psycopg.AsyncConnection.connect(
        url,
        autocommit=autocommit,
        row_factory=dict_row,
        **connect_kwargs(locale, purpose=purpose, lock_timeout=lock_timeout),
    )


def connect_sync(url: str, *, locale: str | None = None, autocommit: bool = True) -> psycopg.Connection[dict[str, Any]]:
    """A sync connection with dict rows and our session settings."""
    return psycopg.Connection.connect(url, autocommit=autocommit, row_factory=dict_row, **connect_kwargs(locale))


@asynccontextmanager
async def scheduler_connection(
    app: procrastinate.App, settings: Settings
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection from the app's pool, with dict rows and the deployment's locale for SQL messages.

    In autocommit mode while we hold it: the pool's connections are not, and a pool connection's block is one
    transaction, which would make a whole tick one transaction (no job of a storm visible before its last
    batch); here every ``conn.transaction()`` commits on its own.
    """
    pool = app.connector.pool  # type: ignore[attr-defined]
    async with pool.connection() as conn:
        previous, autocommit = conn.row_factory, conn.autocommit
        conn.row_factory = dict_row
        await conn.set_autocommit(True)
        try:
            await queries.execute(conn, "set_locale", {"locale": settings.locale})
            yield conn
        finally:
            conn.row_factory = previous
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                await conn.set_autocommit(autocommit)


async def wait_for_notifies(conn: psycopg.AsyncConnection[Any], within: float | None) -> list[psycopg.Notify]:
    """The notifications ``conn`` has received, waiting at most ``within`` seconds (None: for ever) for the
    first one.

    ``conn`` only LISTENs. This waits on its socket: psycopg's ``notifies()`` wakes every 0.1 s to look for
    interrupts, which is most of an idle worker's CPU. A broken connection raises ``psycopg.OperationalError``.
    """
    got = [n async for n in conn.notifies(timeout=0)]  # received meanwhile, or already readable
    if got:
        return got
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    fd = conn.fileno()
    loop.add_reader(fd, readable.set)
    try:
        await wait_at_most(readable, within)
    finally:
        loop.remove_reader(fd)
    if not readable.is_set():
        return []
    return [n async for n in conn.notifies(timeout=0)]


#: How long a worker waits, at start, for its LISTEN connection to hear its own probe (seconds).
LISTEN_PROBE_WITHIN = 3.0


async def listen_delivers(url: str, *, within: float = LISTEN_PROBE_WITHIN) -> bool:
    """Whether a connection to ``url`` that LISTENs hears a NOTIFY sent on another connection to ``url``.

    It does not through a transaction pooler (PgBouncer's pool_mode = transaction): the LISTEN ran on a
    server connection that went back to the pool, and nothing reaches the client that asked. A worker
    that listened there would never be woken: it checks at start and says so. Connection errors are
    raised (the caller retries an outage).
    """
    channel = f"agentlab_sched_probe_{os.getpid()}_{secrets.token_hex(4)}"
    payload = secrets.token_hex(8)
    listener = await connect(url, purpose="listen check")
    try:
        await queries.execute(listener, "listen_probe", identifiers={"channel": channel})
        sender = await connect(url, purpose="listen check")
        try:
            await queries.execute(sender, "notify_probe", {"channel": channel, "payload": payload})
        finally:
            await sender.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while (left := deadline - loop.time()) > 0:
            for notify in await wait_for_notifies(listener, left):
                if notify.channel == channel and notify.payload == payload:
                    with contextlib.suppress(psycopg.Error):
                        await queries.execute(listener, "unlisten_probe", identifiers={"channel": channel})
                    return True
        return False
    finally:
        await listener.close()
