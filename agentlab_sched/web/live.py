"""Live updates: ONE database connection per server process LISTENs, and every open page hears it over SSE.

The connection (the server's own login, the configured URL) listens on the channels the database already
notifies: schedules changed (``agentlab_sched_schedules``), a job deferred (Procrastinate's
``procrastinate_any_queue_v1``: every launched fire, every approval that continues a run) and notifications
queued (``agentlab_sched_outbox``). A fire that launches nothing (a skip) and a run that ends send no
notification of their own, so while at least one page listens the same connection also reads a fingerprint
of what changed (a few index lookups, one statement per second for the whole process, whatever the number
of pages); with no page open it sends nothing. Each change is one ``change`` event to every page,
which then reloads its own content: browsers never poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import psycopg

from agentlab_sched.database import connect, queries
from agentlab_sched.database.connections import wait_for_notifies

__all__ = ["Hub"]

logger = logging.getLogger(__name__)

#: Seconds between fingerprint reads while a page listens (a new fire shows within 2 s).
CHECK_EVERY = 1.0
#: Seconds between SSE comments that keep an idle connection open through proxies.
KEEPALIVE = 15.0


class Hub:
    """The one LISTEN connection of a server process and the pages that listen to it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._queues: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._fingerprint: dict[str, Any] | None = None
        #: Events sent since the start (tests read it).
        self.sent = 0

    @property
    def listeners(self) -> int:
        return len(self._queues)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _broadcast(self, data: dict[str, Any]) -> None:
        text = json.dumps(data, default=str)
        self.sent += 1
        for q in list(self._queues):
            if q.qsize() < 10:  # a page that does not read is not fed without bound
                q.put_nowait(text)

    async def _check(self, conn: psycopg.AsyncConnection[Any], reason: str) -> None:
        found = await queries.one(conn, "web_fingerprint")
        if found != self._fingerprint:
            first = self._fingerprint is None
            self._fingerprint = found
            if not first:
                self._broadcast({"why": reason})

    async def _run(self) -> None:
        while True:
            try:
                conn = await connect(self.url, purpose="web live")
                try:
                    await queries.execute(conn, "web_listen")
                    await self._check(conn, "start")
                    while True:
                        # Woken every second to see whether a page listens; the fingerprint is read only then.
                        got = await wait_for_notifies(conn, CHECK_EVERY)
                        if self._queues:
                            await self._check(conn, "notify" if got else "check")
                finally:
                    await conn.close()
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError) as exc:
                logger.warning("live updates: the database connection failed (%s); trying again", type(exc).__name__)
                await asyncio.sleep(2)

    async def subscribe(self) -> AsyncIterator[str]:
        """The SSE stream of one page: ``change`` events, and a comment now and then to keep it open."""
        q: asyncio.Queue[str] = asyncio.Queue()
        self._queues.add(q)
        try:
            yield "retry: 2000\n\n"
            while True:
                try:
                    data = await asyncio.wait_for(q.get(), KEEPALIVE)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                yield f"event: change\ndata: {data}\n\n"
        finally:
            self._queues.discard(q)
