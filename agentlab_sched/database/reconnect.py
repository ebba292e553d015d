"""Riding through a database outage: which errors mean "the database is not reachable now", capped
backoff between attempts, and one log line per attempt (never a traceback a second).

Every loop of a worker (the precise loop, notification dispatch, the job manager's calls, the run
middleware's bookkeeping) retries through these, so a restart or failover of PostgreSQL, or a
connection cut with ``pg_terminate_backend``, costs a few lines in the log and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from procrastinate import exceptions as pexc

__all__ = ["BACKOFF_CAP", "Backoff", "GiveUp", "bounded", "describe", "idle_wait", "is_transient", "retrying"]

T = TypeVar("T")

#: The longest wait between two attempts (seconds): a database back up is used again within this. One
#: connection attempt a second per loop costs a server nothing; a longer pause would hold up the first
#: fire after an outage (the tick that finds its job waits for the job listener's next attempt too).
BACKOFF_CAP = 1.0
#: The first wait.
BACKOFF_FIRST = 0.1


def _cause(exc: BaseException) -> BaseException:
    """The psycopg error behind a Procrastinate ConnectorException (or the error itself)."""
    seen = exc
    while isinstance(seen, pexc.ConnectorException) and seen.__cause__ is not None:
        seen = seen.__cause__
    return seen


def is_transient(exc: BaseException) -> bool:
    """A lost or refused connection, a server shutting down, a pool without connections, a lock or
    statement timeout: worth another attempt. Errors in the statement itself are not."""
    cause = _cause(exc)
    if isinstance(cause, psycopg.OperationalError):  # includes the pool's PoolTimeout, LockNotAvailable
        return True
    if isinstance(cause, psycopg.errors.QueryCanceled | psycopg.errors.AdminShutdown | psycopg.InterfaceError):
        return True
    return isinstance(cause, OSError | TimeoutError)


def describe(exc: BaseException) -> str:
    """One line for the log: the first line of the underlying error, without a traceback."""
    cause = _cause(exc)
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0]}" if text else type(cause).__name__


class Backoff:
    """Waits between attempts: doubling from ``first`` up to ``cap``."""

    def __init__(self, first: float = BACKOFF_FIRST, cap: float = BACKOFF_CAP) -> None:
        self.first = first
        self.cap = cap
        self.attempts = 0

    def next(self) -> float:
        self.attempts += 1
        return min(self.cap, self.first * 2 ** (self.attempts - 1))

    def reset(self) -> None:
        self.attempts = 0


class GiveUp(Exception):
    """`retrying` stopped before the call succeeded (its deadline passed, or it was told to stop)."""


async def bounded(call: Callable[[], Awaitable[T]], past: Callable[[], bool]) -> T:
    """``call()``, cancelled once ``past()`` says its time is up (an attempt that waits for a connection
    the pool cannot make, say): then `GiveUp`."""
    attempt = asyncio.ensure_future(call())
    try:
        while True:
            done, _ = await asyncio.wait({attempt}, timeout=0.1)
            if done:
                return attempt.result()
            if past():
                attempt.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await attempt
                raise GiveUp("the deadline passed")
    finally:
        if not attempt.done():
            attempt.cancel()


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    logger: logging.Logger,
    deadline: Callable[[], float | None] | None = None,
    backoff: Backoff | None = None,
) -> T:
    """``await call()`` until it succeeds, waiting between transient failures; other errors are raised.

    ``deadline()`` (a ``time.monotonic()`` value, or None for none yet) is read before each attempt and
    while waiting (it may appear later: a worker told to stop): once past it, `GiveUp` is raised. Each
    failed attempt logs one line naming ``what`` and the next wait.
    """
    backoff = backoff or Backoff()

    def past() -> bool:
        limit = deadline() if deadline else None
        return limit is not None and time.monotonic() >= limit

    while True:
        try:
            result = await (bounded(call, past) if deadline else call())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not is_transient(exc):
                raise
            wait = backoff.next()
            if past():
                logger.warning("%s: %s; giving up", what, describe(exc))
                raise GiveUp(what) from exc
            logger.warning("%s: %s; retrying in %.1f s (attempt %d)", what, describe(exc), wait, backoff.attempts)
            until = time.monotonic() + wait
            while (left := until - time.monotonic()) > 0:
                await asyncio.sleep(min(left, 0.1))
                if past():
                    raise GiveUp(what) from exc
            continue
        if backoff.attempts:
            logger.info("%s: database reachable again after %d attempts", what, backoff.attempts)
        return result


async def idle_wait(conn: psycopg.AsyncConnection[Any], wake: asyncio.Event, seconds: float) -> None:
    """Wait for ``wake``, ``seconds``, or anything arriving on idle connection ``conn``: a server that
    closes the connection (a restart, ``pg_terminate_backend``) is noticed at once, not at the next use."""
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    try:
        fd = conn.fileno()
    except Exception:
        return  # closed already: the next use reconnects
    loop.add_reader(fd, readable.set)
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(readable.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_reader(fd)
        for waiter in waiters:
            waiter.cancel()
