"""The precise loop: fire schedules at their due time, woken by the clock or by NOTIFY.

`agentlab-sched worker` runs it beside its Procrastinate worker (see `agentlab_sched.worker`). It sleeps
until the earliest ``next_run_at`` (or until a NOTIFY says a schedule changed) and fires right then, with
the same `tick.fire_due` as the blueprint's periodic tick, which a plain `procrastinate worker` runs (at
most a tick late). A batch claimed but not committed when the loop stops rolls back, so the next worker
fires it. It listens and ticks on a connection of its own (application name ``agentlab-sched
scheduler``), connected again with capped backoff whenever it breaks, so a worker that is alive fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import datetime
from typing import Any

import procrastinate
import psycopg

from agentlab_sched import database as db
from agentlab_sched.database import queries
from agentlab_sched.database.connections import wait_for_notifies
from agentlab_sched.database.reconnect import Backoff, describe, is_transient
from agentlab_sched.firing import tick as tick_module
from agentlab_sched.settings import Settings
from agentlab_sched.worker.blueprint import register_app_tasks

logger = logging.getLogger(__name__)

#: The channel schedule changes and fire requests are announced on.
CHANNEL = "agentlab_sched_schedules"
#: The loop never sleeps longer than this, so a missed NOTIFY costs at most this much.
MAX_SLEEP = 60.0
#: The shortest time between the starts of two ticks, whatever wakes the loop: wake-ups are coalesced,
#: so a flood of NOTIFYs (any role may send them) costs at most 1 / MIN_INTERVAL ticks a second.
MIN_INTERVAL = 0.05
#: When a tick could not do what is waiting (a due row, a re-plan or a request locked by another session,
#: a schedule another worker is resolving), the loop waits for a NOTIFY or this back-off, doubling up to
#: BACKOFF_MAX, instead of ticking again at once.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 2.0
#: How far ahead of a due time the loop wakes to claim, plan and write its fires, committed at that
#: instant (``fire_due``'s ``commit_not_before``): the 10-20 ms that takes for 50 schedules are then
#: before the due time, not after it, and the jobs can start the moment it comes. Short, because the
#: claimed schedules stay locked until the commit (a job of theirs finishing waits at most 50 ms to count
#: a failure) and their overlap is judged by the runs as they are this much before the due time.
PREPARE_AHEAD = 0.03
#: A wake-up further than this from the due time (the socket readable with no NOTIFY in it) ticks plainly
#: instead: never a transaction holding schedules for longer than the work and this.
ARM_WITHIN = PREPARE_AHEAD + 0.02
#: How long a tick's statement waits for a lock before the tick fails and is tried again (seconds): a
#: migration's LOCK TABLE holds up firing, never the worker's stop.
TICK_LOCK_TIMEOUT = 2.0


class Scheduler:
    """The precise loop: fire schedules at their due time, woken by the clock or by NOTIFY."""

    def __init__(self, app: procrastinate.App, url: str, settings: Settings | None = None) -> None:
        self.app = app
        self.url = url
        self.settings = settings or Settings.from_env()
        self.task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> bool:
        """Start the loop; False (and nothing new) if firing is off or the loop already runs."""
        if not self.settings.scheduler:
            return False
        if self.task is not None and not self.task.done():
            return False
        self.task = asyncio.create_task(self._run(), name="agentlab-sched-scheduler")
        return True

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def stop(self) -> None:
        """Stop the loop; an uncommitted batch rolls back."""
        task, self.task = self.task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        """The loop on a connection of its own (it listens and ticks on it), connected again after an
        outage: a restart, a failover, a cut connection cost a few log lines and the misfire rules."""
        outage = Backoff()
        while True:
            try:
                conn = await db.connect(
                    self.url, locale=self.settings.locale, purpose="scheduler", lock_timeout=TICK_LOCK_TIMEOUT
                )
            except Exception as exc:
                if not is_transient(exc):
                    raise
                wait = outage.next()
                logger.warning(
                    "scheduler: %s; connecting again in %.1f s (attempt %d)", describe(exc), wait, outage.attempts
                )
                await asyncio.sleep(wait)
                continue
            try:
                await queries.execute(conn, "listen_schedules")
                await self._loop(conn, outage)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                wait = outage.next()
                logger.warning(
                    "scheduler: %s; connecting again in %.1f s (attempt %d)", describe(exc), wait, outage.attempts
                )
                await asyncio.sleep(wait)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.close(), 1.0)

    async def _loop(self, conn: psycopg.AsyncConnection[Any], outage: Backoff) -> None:
        """Tick and sleep until the connection breaks (raised: `_run` connects again)."""
        backoff = 0.0
        last = -MIN_INTERVAL
        armed: tuple[datetime, float] | None = None  # a due time, and when it comes on the monotonic clock
        while True:
            # Coalesce: whatever woke us (the clock, one NOTIFY or a thousand), at most one tick per
            # MIN_INTERVAL; NOTIFYs arriving meanwhile are drained, not each answered with a tick.
            gap = time.monotonic() - last
            if gap < MIN_INTERVAL:
                await asyncio.sleep(MIN_INTERVAL - gap)
                await self._drain(conn)
            last = time.monotonic()
            ahead = armed[0] if armed is not None and 0 < armed[1] - last <= ARM_WITHIN else None
            armed = None
            try:
                delay, progressed, due = await self._fire_and_measure(conn, ahead)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_transient(exc) and (conn.closed or conn.broken):
                    raise  # the connection is gone: connect again
                if is_transient(exc):  # a lock timeout, a cancelled statement: the connection is fine
                    wait = outage.next()
                    logger.warning(
                        "scheduler: %s; ticking again in %.1f s (attempt %d)", describe(exc), wait, outage.attempts
                    )
                    await asyncio.sleep(wait)
                    continue
                logger.exception("the scheduler loop failed; retrying in a second")
                delay, progressed, due = 1.0, True, None
            else:
                if outage.attempts:
                    logger.info("scheduler: firing again after %d failed attempts", outage.attempts)
                    outage.reset()
            if delay > 0 or progressed:
                backoff = 0.0
            else:
                # Something waits that this tick could not take (locked elsewhere): no spinning.
                backoff = min(max(backoff * 2, BACKOFF_FIRST), BACKOFF_MAX)
                delay = backoff
                due = None
            if due is not None and 0 < delay < MAX_SLEEP:
                # Wake a little ahead of the due time; a NOTIFY meanwhile means a plain tick instead.
                comes = time.monotonic() + delay
                if not await self._sleep(conn, max(0.0, delay - PREPARE_AHEAD)):
                    armed = (due, comes)
                continue
            await self._sleep(conn, delay)

    async def _fire_and_measure(
        self, conn: psycopg.AsyncConnection[Any], ahead: datetime | None = None
    ) -> tuple[float, bool, datetime | None]:
        """One tick (with ``ahead``, of that due time, committed at it); then how long until the next thing is
        due (0: now), whether the tick did anything, and that next due time (None: none known)."""
        await register_app_tasks(self.app, conn)
        report = await tick_module.fire_due(conn, ahead, settings=self.settings, commit_not_before=ahead)
        row = await queries.one(conn, "next_wake")
        progressed = (report.claimed > 0 and report.retries == 0) or report.requests > 0
        if row is None or row["more"]:
            return (0.0 if row and row["more"] else MAX_SLEEP), progressed, None
        wait = row["wait"]
        if wait is None:
            return MAX_SLEEP, progressed, None
        return max(0.0, min(float(wait), MAX_SLEEP)), progressed, row["at"]

    @staticmethod
    async def _drain(listener: psycopg.AsyncConnection[Any]) -> int:
        """Read the NOTIFYs waiting (also those received while a tick ran on this connection)."""
        n = 0
        async for _ in listener.notifies(timeout=0):
            n += 1
        return n

    async def _sleep(self, listener: psycopg.AsyncConnection[Any], delay: float) -> bool:
        """Sleep ``delay`` seconds, or less if a NOTIFY comes (then True)."""
        if await self._drain(listener):
            await asyncio.sleep(0)
            return True
        if delay <= 0:
            await asyncio.sleep(0)
            return False
        return bool(await wait_for_notifies(listener, delay))  # woken early by a change of schedules; drained
