"""Live updates: ONE database connection per server process LISTENs, and every open page hears it over SSE.

The connection (the server's own login, the configured URL) listens on the channels the database notifies:
fires or runs written (``agentlab_sched_live``, from statement-level triggers: sql/58_live.sql), schedules
changed (``agentlab_sched_schedules``) and notifications queued (``agentlab_sched_outbox``). It sends no
statement after its LISTEN: it waits on its socket. Notifications are coalesced (a storm of fires is at
most one event a second); each burst is one ``change`` event to every open page, which then reloads its
own content: browsers never poll, and with no page open nothing is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

import psycopg

from agentlab_sched.database import connect, queries
from agentlab_sched.database.connections import wait_for_notifies

__all__ = ["Hub"]

logger = logging.getLogger(__name__)

#: The channel of the fires and runs triggers (its payload: the table written).
CHANNEL = "agentlab_sched_live"
#: At most one event per this many seconds: the notifications heard meanwhile are folded into it (a new
#: fire still shows within 2 s).
COALESCE = 1.0
#: Seconds between SSE comments that keep an idle connection open through proxies.
KEEPALIVE = 15.0


def _why(heard: list[psycopg.Notify]) -> set[str]:
    """What a burst of notifications was about: the channels, and the fires and runs triggers' table."""
    return {n.payload if n.channel == CHANNEL else n.channel for n in heard}


class Hub:
    """The one LISTEN connection of a server process and the pages that listen to it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._queues: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        #: Seconds within which notifications are folded into one event.
        self.coalesce = COALESCE
        #: Set while the connection LISTENs (tests wait for it).
        self.listening = asyncio.Event()
        #: Events sent and notifications heard since the start (tests read them).
        self.sent = 0
        self.heard = 0
        #: Called with what each burst was about (the channels, the fires and runs triggers' table), whether or
        #: not a page listens: the load page's keeper re-reads the schedules when they changed.
        self.watchers: list[Callable[[set[str]], None]] = []

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

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Hear the notifications of ``conn`` (which LISTENs) and broadcast them, coalesced, until it breaks."""
        loop = asyncio.get_running_loop()
        last = -self.coalesce
        while True:
            heard = await wait_for_notifies(conn, None)
            if not heard:
                continue
            # The watchers hear each change at once (a page loaded next must not show the state before it);
            # only the pages' events are coalesced.
            self._tell_watchers(heard)
            deadline = last + self.coalesce
            # Within a second of the last event: one more event at the end of that second, with what the
            # watchers heard meanwhile.
            while (wait := deadline - loop.time()) > 0:
                later = await wait_for_notifies(conn, wait)
                self._tell_watchers(later)
                heard += later
            last = loop.time()
            self.heard += len(heard)
            if self._queues:
                self._broadcast({"why": sorted(_why(heard))})

    def _tell_watchers(self, heard: list[psycopg.Notify]) -> None:
        if heard:
            why = _why(heard)
            for watcher in self.watchers:
                watcher(why)

    async def _run(self) -> None:
        connected = False
        while True:
            try:
                conn = await connect(self.url, purpose="web live")
                try:
                    await queries.execute(conn, "web_listen")
                    # What changed before this LISTEN went unheard: the watchers (which may have read before
                    # the first one too) read again; the pages only after a reconnection (they load after it).
                    for watcher in self.watchers:
                        watcher({"reconnected"})
                    if connected and self._queues:
                        self._broadcast({"why": ["reconnected"]})
                    connected = True
                    self.listening.set()
                    await self._listen(conn)
                finally:
                    self.listening.clear()
                    await conn.close()
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError) as exc:
                logger.warning("live updates: the database connection failed (%s); trying again", type(exc).__name__)
                await asyncio.sleep(2)

    async def subscribe(self) -> AsyncGenerator[str, None]:
        """The SSE stream of one page: ``change`` events, and a comment now and then to keep it open."""
        q: asyncio.Queue[str] = asyncio.Queue()
        self._queues.add(q)
        try:
            yield "retry: 2000\n\n"
            while True:
                try:  # not wait_for: it can drop a cancellation (3.11)
                    async with asyncio.timeout(KEEPALIVE):
                        data = await q.get()
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                yield f"event: change\ndata: {data}\n\n"
        finally:
            self._queues.discard(q)
