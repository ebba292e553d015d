"""Who is signed in: a PostgreSQL role, checked by PostgreSQL, and a small pool of connections as that role.

Signing in opens a connection with the person's own user name and password: the server decides (SCRAM,
md5, or whatever ``pg_hba.conf`` says), so the web server never holds a password list of its own. The
connections that then serve the person's requests are authenticated as them, so ``session_user`` is the
person and the audit, approvals and requests record them as they would for SQL. A person's pool is closed at
sign-out and when the session expires (a sweep every minute).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from agentlab_sched.database import connect_kwargs, queries
from agentlab_sched.web.config import WebConfig

__all__ = ["People", "Person", "Refused"]


@dataclass(frozen=True)
class Refused:
    """The database did not accept the role and password: the server's own words."""

    words: str


@dataclass
class Person:
    """One signed-in person: their role, their pool, what the database lets them do."""

    id: str
    username: str
    pool: AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]]
    expires_at: float
    #: Signed in without a password (``--local``): the page says so.
    local: bool = False
    #: The server never asked for a password (``trust`` in pg_hba.conf): the page says so.
    unchecked: bool = False
    #: Action -> allowed, from the database's privileges (read at sign-in; see :func:`privileges`).
    may: dict[str, bool] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def connection(self, locale: str) -> AsyncIterator[psycopg.AsyncConnection[dict[str, Any]]]:
        """A connection as this person, its SQL messages in ``locale`` (the reader's)."""
        async with self.pool.connection() as conn:
            await queries.execute(conn, "set_locale", {"locale": locale})
            yield conn


#: Which SQL function each action of the pages calls: a role that may execute none of them gets no button.
ACTION_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "pause": ("pause",),
    "resume": ("resume",),
    "trigger": ("trigger_now", "trigger"),
    "backfill": ("backfill",),
    "edit": ("alter_schedule",),
    "delete": ("unschedule",),
    "approve": ("approve",),
    "reject": ("reject",),
    "resume-run": ("resume_run",),
    "abandon-run": ("abandon",),
    "cancel-run": ("cancel_run",),
}


async def privileges(conn: psycopg.AsyncConnection[Any]) -> dict[str, bool]:
    """What the session's role may do, action by action (``has_function_privilege`` and friends)."""
    row = await queries.one(conn, "web_privileges")
    functions: dict[str, bool] = dict((row or {}).get("functions") or {})
    may = {action: any(functions.get(f, False) for f in names) for action, names in ACTION_FUNCTIONS.items()}
    # A test message needs the webhook's ciphertext, which only the admin and the owner may read.
    may["test-send"] = bool((row or {}).get("webhook_read"))
    return may


class People:
    """The signed-in people of one server process, by session id."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self._people: dict[str, Person] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def _url_for(self, username: str | None, password: str | None) -> str:
        if username is None:
            return self.config.database_url
        return conninfo.make_conninfo(self.config.database_url, user=username, password=password or "")

    async def sign_in(self, username: str | None, password: str | None) -> Person | Refused:
        """Open a pool as ``username`` (None: the configured URL's own role, for ``--local``); the database
        checks the password. :class:`Refused`, with the server's words, when it does not accept them."""
        url = self._url_for(username, password)
        kwargs = {"autocommit": True, "row_factory": dict_row, **connect_kwargs(purpose="web")}
        try:
            first = await psycopg.AsyncConnection.connect(url, **kwargs)
        except psycopg.OperationalError as exc:
            return Refused(_server_words(exc))
        try:
            login = str(await queries.value(first, "web_session_user"))
            may = await privileges(first)
            unchecked = not first.pgconn.used_password and username is not None
        finally:
            await first.close()
        pool: AsyncConnectionPool[psycopg.AsyncConnection[dict[str, Any]]] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=self.config.pool_size,
            kwargs=kwargs,
            open=False,
            name=f"web-{login}",
            max_idle=300,
        )
        await pool.open(wait=True, timeout=10)
        person = Person(
            id=secrets.token_urlsafe(24),
            username=login,
            pool=pool,
            expires_at=time.monotonic() + self.config.session_ttl.total_seconds(),
            local=username is None,
            unchecked=unchecked,
            may=may,
        )
        self._people[person.id] = person
        return person

    def get(self, person_id: str | None) -> Person | None:
        """The signed-in person of a session (None when unknown or expired); using it extends it."""
        if not person_id:
            return None
        person = self._people.get(person_id)
        if person is None:
            return None
        now = time.monotonic()
        if person.expires_at < now:
            self._people.pop(person_id, None)
            asyncio.get_running_loop().create_task(person.pool.close())
            return None
        person.expires_at = now + self.config.session_ttl.total_seconds()
        return person

    async def sign_out(self, person_id: str | None) -> None:
        """End a session: its pool is closed."""
        person = self._people.pop(person_id or "", None)
        if person is not None:
            await person.pool.close()

    async def sweep(self) -> None:
        """Close the pools of expired sessions."""
        now = time.monotonic()
        for pid in [pid for pid, p in self._people.items() if p.expires_at < now]:
            await self.sign_out(pid)

    async def start(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(60)
                await self.sweep()

        self._sweeper = asyncio.get_running_loop().create_task(loop())

    async def close(self) -> None:
        """Every pool closed (the server stops)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for pid in list(self._people):
            await self.sign_out(pid)


def _server_words(exc: psycopg.OperationalError) -> str:
    """What the server said, without libpq's "connection failed: connection to server at ..." preamble
    (it names hosts and addresses)."""
    text = str(exc).strip()
    for line in reversed(text.splitlines()):
        if "FATAL:" in line:
            return line.split("FATAL:", 1)[1].strip()
    return text.splitlines()[-1] if text else ""
