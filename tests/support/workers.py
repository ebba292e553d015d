"""Real workers for tests: one in this process until a block ends, bounded polls for what it does,
Procrastinate apps without the scheduler's tasks, and stopping worker subprocesses."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import procrastinate
from procrastinate import jobs as pjobs

from agentlab_sched import install
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import connector_for, run_worker
from tests.support.rows import Conn
from tests.support.runs import run_row

#: A worker without the scheduler (no tick, no precise loop): only what a test puts in the queue runs.
QUIET = Settings(locale="en", scheduler=False)


async def wait_for(predicate: Callable[[], Awaitable[Any]], limit: float = 20.0, what: str = "condition") -> Any:
    """Poll ``predicate`` every 50 ms until it returns something true, for at most ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {limit} s")
        await asyncio.sleep(0.05)


def run_in(conn: Conn, rid: Any, *statuses: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    """A predicate for wait_for(): the run's row once its status is one of ``statuses``."""

    async def check() -> dict[str, Any] | None:
        row = await run_row(conn, rid)
        return row if row["status"] in statuses else None

    return check


@asynccontextmanager
async def worker(app: procrastinate.App, url: str, settings: Settings = QUIET) -> AsyncIterator[None]:
    """A real worker in this process (jobs, housekeeping, the run middleware) until the block ends."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, url, stop=stop, install_signal_handlers=False, settings=settings))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


def slow_the_first_time() -> Callable[..., Awaitable[dict[str, Any]]]:
    """A task that hangs on its first call (until its worker stops it) and returns how many calls it had."""
    calls: list[int] = []

    async def once_slow(**inputs: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(3600)
        return {"calls": len(calls)}

    return once_slow


def bare_app(url: str, *, middleware: bool = True, **connector: Any) -> procrastinate.App:
    """An app with the run middleware and no scheduler tasks (so no periodic job gets in the way)."""
    app = procrastinate.App(connector=connector_for(url, **connector))
    return install(app) if middleware else app


@asynccontextmanager
async def opened(app: procrastinate.App) -> AsyncIterator[int]:
    """The app open, and a registered Procrastinate worker id to fetch jobs with."""
    async with app.open_async():
        yield await app.job_manager.register_worker()


async def fetch(app: procrastinate.App, worker_id: int) -> pjobs.Job:
    """The next job the worker ``worker_id`` gets (there must be one)."""
    found = await app.job_manager.fetch_job(queues=None, worker_id=worker_id)
    assert found is not None, "no job to fetch"
    return found


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> list[float]:
    """SIGTERM every worker still running, at once; the seconds each took to exit (killed after 10 s)."""
    began = time.monotonic()
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    took = []
    for w in workers:
        try:
            w.wait(timeout=max(0.1, began + 10 - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
        took.append(time.monotonic() - began)
    return took
