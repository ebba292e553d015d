"""`agentlab-sched worker`: a Procrastinate worker, plus a precise scheduling loop beside it.

The blueprint's periodic tick fires schedules from any plain `procrastinate worker`, at most a tick
late. This worker also runs `Scheduler`: it sleeps until the earliest next_run_at (or until a NOTIFY
says a schedule changed) and fires right then. Both call the same `tick.fire_due`. Stopping (SIGTERM,
SIGINT) ends the loop, the notification dispatch and the worker within 3 s; a batch claimed but not
committed rolls back, so the next worker fires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

import procrastinate
import psycopg
from procrastinate import PsycopgConnector

from agentlab_sched import database as db
from agentlab_sched.firing import tick as tick_module
from agentlab_sched.firing.blueprint import register_app_tasks, scheduler_connection
from agentlab_sched.firing.blueprint import tick as blueprint_tick
from agentlab_sched.runs.middleware import install
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

CHANNEL = "agentlab_sched_schedules"
#: The loop never sleeps longer than this, so a missed NOTIFY costs at most this much.
MAX_SLEEP = 60.0
#: Procrastinate's fallback polls for new jobs and abort requests (both are also sent by NOTIFY).
POLL_FALLBACK = 30.0
#: How long the worker may take to stop (its running jobs get this much, then are cancelled).
STOP_GRACE = 2.0


def connector_for(url: str, **options: Any) -> PsycopgConnector:
    """A Procrastinate connector on ``url`` with our session settings on every connection."""
    kwargs = {"min_size": 1, "max_size": 10, **options}
    return PsycopgConnector(conninfo=url, kwargs=db.connect_kwargs(), **kwargs)


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
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as listener:
            await listener.execute(f"LISTEN {CHANNEL}")
            while True:
                try:
                    delay = await self._fire_and_measure()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("the scheduler loop failed; retrying in a second")
                    delay = 1.0
                await self._sleep(listener, delay)

    async def _fire_and_measure(self) -> float:
        async with scheduler_connection(self.app, self.settings) as conn:
            await register_app_tasks(self.app, conn)
            await tick_module.fire_due(conn, settings=self.settings)
            cur = await conn.execute(
                """SELECT extract(epoch FROM min(next_run_at) - clock_timestamp()) AS wait,
                          EXISTS (SELECT 1 FROM agentlab_sched.schedules WHERE replan IS NOT NULL)
                          OR EXISTS (SELECT 1 FROM agentlab_sched.fire_requests WHERE done_at IS NULL) AS more
                   FROM agentlab_sched.schedules WHERE enabled AND next_run_at IS NOT NULL"""
            )
            row = await cur.fetchone()
        if row is None or row["more"]:
            return 0.0 if row and row["more"] else MAX_SLEEP
        wait = row["wait"]
        return MAX_SLEEP if wait is None else max(0.0, min(float(wait), MAX_SLEEP))

    async def _sleep(self, listener: psycopg.AsyncConnection[Any], delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        # Woken early by a change of schedules (NOTIFY). psycopg's notifies() wakes every 0.1 s to look
        # for interrupts, which is most of an idle worker's CPU: wait for the socket instead, then drain.
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        fd = listener.fileno()
        loop.add_reader(fd, readable.set)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(readable.wait(), delay)
        finally:
            loop.remove_reader(fd)
        if readable.is_set():
            async for _ in listener.notifies(timeout=0):
                pass


async def run_worker(
    app: procrastinate.App,
    url: str,
    *,
    concurrency: int = 10,
    queues: list[str] | None = None,
    settings: Settings | None = None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
) -> None:
    """Run the Procrastinate worker, the precise scheduler loop and the notification dispatcher until
    ``stop`` is set or SIGTERM/SIGINT arrives; stop all of them within 3 s."""
    settings = settings or Settings.from_env()
    install(app)  # the run middleware: run context, approvals, task errors, timeouts
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if install_signal_handlers:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    try:
        async with app.open_async():
            async with scheduler_connection(app, settings) as conn:
                await register_app_tasks(app, conn, force=True)
            scheduler = Scheduler(app, url, settings)
            if scheduler.start():
                # The precise loop fires on time: the per-second periodic tick would only add a job a second.
                _without_periodic_tick(app)
            dispatcher = _start_dispatcher(app, url, settings)
            worker = asyncio.create_task(
                app.run_worker_async(
                    concurrency=concurrency,
                    queues=queues,
                    install_signal_handlers=False,
                    shutdown_graceful_timeout=STOP_GRACE,
                    # New jobs and abort requests arrive by NOTIFY; polling is only the fallback.
                    fetch_job_polling_interval=POLL_FALLBACK,
                    abort_job_polling_interval=POLL_FALLBACK,
                ),
                name="agentlab-sched-worker",
            )
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            await asyncio.gather(scheduler.stop(), _stop_dispatcher(dispatcher), _stop_worker(worker))
    finally:
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def _without_periodic_tick(app: procrastinate.App) -> None:
    """Drop the blueprint's periodic tick from this app's periodic tasks (housekeeping stays)."""
    registry = app.periodic_registry.periodic_tasks
    for key in [k for k, p in registry.items() if p.task.func is blueprint_tick]:
        del registry[key]


async def _stop_worker(worker: asyncio.Task[None]) -> None:
    if not worker.done():
        worker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await worker


def _start_dispatcher(app: procrastinate.App, url: str, settings: Settings) -> Any:
    try:
        from agentlab_sched.notify.dispatcher import Dispatcher
    except ImportError:  # notifications not installed in this build
        return None
    dispatcher = Dispatcher(url, settings=settings)
    asyncio.get_running_loop().create_task(dispatcher.start())
    return dispatcher


async def _stop_dispatcher(dispatcher: Any) -> None:
    if dispatcher is not None:
        await dispatcher.stop()
