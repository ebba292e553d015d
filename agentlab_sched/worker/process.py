"""`agentlab-sched worker`: a Procrastinate worker, the precise scheduling loop and notification dispatch.

The blueprint's periodic tick fires schedules from any plain `procrastinate worker`, at most a tick
late. This worker runs the precise loop instead (`agentlab_sched.worker.precise.Scheduler`), which
fires at the due time. Stopping (SIGTERM, SIGINT) ends the loop, the notification dispatch and the
worker within 3 s; a batch claimed but not committed rolls back, so the next worker fires it.

It outlives the database (a restart, a failover, ``pg_terminate_backend`` of any of its connections):
each part reconnects with capped backoff (`agentlab_sched.database.reconnect`), Procrastinate's worker
is started again when it stops by itself, and runs in flight are settled when the database answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from typing import Any

import procrastinate
import psycopg_pool
from procrastinate import PsycopgConnector

from agentlab_sched import database as db
from agentlab_sched.database import queries
from agentlab_sched.database.connections import display_url, listen_delivers, scheduler_connection
from agentlab_sched.database.reconnect import Backoff, describe, is_transient, retrying
from agentlab_sched.errors import SchedError
from agentlab_sched.notify.dispatcher import Dispatcher
from agentlab_sched.observe import events, presence
from agentlab_sched.observe.metrics import Metrics
from agentlab_sched.runs.housekeeping import Housekeeper, housekeeping
from agentlab_sched.settings import Settings
from agentlab_sched.worker import internals
from agentlab_sched.worker.batch import BatchWorker
from agentlab_sched.worker.blueprint import register_app_tasks
from agentlab_sched.worker.blueprint import tick as blueprint_tick
from agentlab_sched.worker.jobs import RunJobManager
from agentlab_sched.worker.middleware import install, with_run_middleware
from agentlab_sched.worker.precise import Scheduler

logger = logging.getLogger(__name__)

#: Procrastinate's fallback polls for new jobs and abort requests (both are also sent by NOTIFY).
POLL_FALLBACK = 30.0
#: The worker stops within this (seconds), whatever it waits for: a database that is down, a table a
#: migration locked, a synchronous task that ignores its abort.
STOP_WITHIN = 2.7
#: Of which jobs still running get this long to finish before they are aborted (async tasks are
#: cancelled, sync ones asked to stop); what is not finished then is left to housekeeping.
JOB_GRACE = 1.2
#: How long a worker's statements wait for a lock (seconds): see connections.connect_kwargs.
WORKER_LOCK_TIMEOUT = 10.0
#: Connections of the app's pool beyond one per job slot (see _pool_for).
POOL_EXTRA = 4
#: How long the pool waits for a connection (seconds), when it is asked for one and when it opens: then
#: a database that is down or not created yet is an error the caller retries with backoff, rather than
#: psycopg_pool's 30 s wait.
POOL_WAIT = 5.0


class _Pool(psycopg_pool.AsyncConnectionPool):
    """psycopg_pool's pool, whose ``open(wait=True)`` (as Procrastinate's connector opens it, with no
    timeout) gives up after `POOL_WAIT`."""

    async def open(self, wait: bool = False, timeout: float = POOL_WAIT) -> None:  # noqa: ASYNC109 (its signature)
        await super().open(wait=wait, timeout=timeout)


def connector_for(url: str, **options: Any) -> PsycopgConnector:
    """A Procrastinate connector on ``url`` with our session settings on every connection."""
    pool = {"min_size": 1, "max_size": 10, "timeout": POOL_WAIT, "pool_factory": _Pool, **options}
    pool["kwargs"] = {
        **db.connect_kwargs(purpose="worker", lock_timeout=WORKER_LOCK_TIMEOUT),
        **(options.get("kwargs") or {}),
    }
    return PsycopgConnector(conninfo=url, **pool)


async def run_worker(
    app: procrastinate.App,
    url: str,
    *,
    concurrency: int = 10,
    queues: list[str] | None = None,
    settings: Settings | None = None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    app_path: str | None = None,
    listen_url: str | None = None,
    **worker_options: Any,
) -> bool:
    """Run the Procrastinate worker, the precise scheduler loop and the notification dispatcher until
    ``stop`` is set or SIGTERM/SIGINT arrives; stop all of them within 3 s (`STOP_WITHIN`).

    The worker outlives the database: an outage (a restart, a failover, a cut connection) is waited out
    with capped backoff by every part, and Procrastinate's worker, which stops at connection errors, is
    started again. It returns only when asked to stop: True when everything stopped in time, False when
    something was left behind (a synchronous task that ignores its abort: a process should then exit
    without waiting for its thread). An error it cannot ride through (the database is not migrated, the
    app is broken) is raised.

    ``worker_options`` go to Procrastinate's worker (``delete_jobs``, ``additional_context``, ...); a
    ``worker_middleware`` list given there runs inside the run middleware, which is always kept.

    When everything runs it logs a ``ready`` event (database, queues, tasks, whether it fires and sends
    notifications), then one event per fire and run change (`agentlab_sched.observe.events`); it reports
    itself in ``agentlab_sched.workers`` for `agentlab-sched doctor`. With ``metrics_port`` it serves
    Prometheus metrics there (0: any free port, said in the ready event), on ``metrics_host``
    (127.0.0.1 unless told otherwise).

    ``listen_url`` (default: the settings' ``listen_url``, else ``url``) is where it LISTENs: the precise
    loop (which also ticks on that connection), the job listener and the notification listener. With
    ``url`` going through a transaction pooler (PgBouncer), it is a direct connection to PostgreSQL. It
    checks at start that a LISTEN there hears a NOTIFY, and raises ``worker.listen_pooled`` when it does
    not (rather than never being woken).
    """
    settings = settings or Settings.from_env()
    listen = listen_url or settings.listen_url or url
    changed = internals.problems()
    if changed:  # said before anything starts, rather than an AttributeError in the middle of a run
        raise SchedError(
            "worker.procrastinate_changed",
            version=procrastinate.__version__,
            problems="; ".join(changed),
            checked=", ".join(internals.CHECKED_AGAINST),
        )
    install(app)  # the run middleware and its job manager: run context, approvals, errors, timeouts, outages
    manager = app.job_manager
    assert isinstance(manager, RunJobManager)
    manager.resume()
    if "worker_middleware" in worker_options:
        worker_options["worker_middleware"] = with_run_middleware(app, worker_options["worker_middleware"])
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if install_signal_handlers:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    metrics = Metrics(url) if metrics_port is not None else None
    port = metrics.serve(metrics_port, metrics_host) if metrics is not None and metrics_port is not None else None
    stopped_at: float | None = None
    froze = False
    try:
        if not await _until_stopped(_open(app), stop):
            return True
        if not await _until_stopped(_check_primary(app, url), stop):
            return True
        if not await _until_stopped(_register(app, settings), stop):
            return True
        if not await _until_stopped(_check_listen(listen), stop):
            return True
        # What start-up loaded (modules, the app, its tasks) lives as long as the worker: kept out of the
        # garbage collector's full collections, which otherwise walk all of it every few seconds (30-40 ms
        # of the event loop every 16 s at 50 jobs a second: the jobs due then started late). Collected
        # once first, before anything runs on the loop.
        gc.collect()
        gc.freeze()
        froze = True
        scheduler = Scheduler(app, listen, settings)
        scheduler.start()
        # The precise loop fires on time, so the per-second periodic tick would only add a job a second;
        # with firing off in these settings, the tick (which reads the environment's) must not fire either.
        _without_periodic(app, blueprint_tick)
        # Housekeeping in this process: a round costs a statement, not a job.
        housekeeper = Housekeeper(app, settings)
        housekeeper.start()
        _without_periodic(app, housekeeping)
        dispatcher = Dispatcher(url, settings=settings, listen_url=listen)
        await dispatcher.start()  # starts its tasks and returns; without a usable key it says why and runs nothing
        report = presence.Report(
            name=presence.worker_name(), kind="agentlab-sched", app=app_path,
            queues=tuple(queues) if queues else None, concurrency=concurrency,
            fires=scheduler.running, notifies=dispatcher.running,
        )  # fmt: skip
        here = presence.Presence(app, report)
        manager.on_register.append(here.registered)
        await here.start()
        # Its jobs carry its name: the run middleware then leaves reporting to it.
        context = {**(worker_options.pop("additional_context", None) or {}), presence.CONTEXT_KEY: report.name}
        options: dict[str, Any] = {
            **app.worker_defaults,
            "concurrency": concurrency,
            "queues": queues,
            "install_signal_handlers": False,
            "shutdown_graceful_timeout": JOB_GRACE,
            # New jobs and abort requests arrive by NOTIFY; polling is only the fallback.
            "fetch_job_polling_interval": POLL_FALLBACK,
            "abort_job_polling_interval": POLL_FALLBACK,
            "additional_context": context,
            **worker_options,
        }
        await _pool_for(app, concurrency)
        supervisor = Supervisor(app, listen, manager, options, direct=listen != url)
        supervising = asyncio.create_task(supervisor.run(), name="the Procrastinate worker")
        tasks = sorted(t for t in app.tasks if not t.startswith("builtin:"))  # not Procrastinate's aliases
        events.worker_event(
            "ready", settings.locale, database=display_url(url), queues=list(queues or []), tasks=tasks,
            concurrency=concurrency, fires=scheduler.running, notifies=dispatcher.running, metrics_port=port,
            worker=report.name,
        )  # fmt: skip
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({supervising, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        stopped_at = loop.time()
        manager.stop_soon(STOP_WITHIN - JOB_GRACE - 0.3)
        failure = supervising.exception() if supervising.done() and not supervising.cancelled() else None
        clean = await _stop_all(
            scheduler, housekeeper, dispatcher, supervisor, supervising, here, stopped_at + STOP_WITHIN - 0.2
        )
        events.worker_event("stopped", settings.locale, worker=report.name)
        if failure is not None:
            raise failure
        return clean
    finally:
        if froze:  # a process that goes on after its worker (tests, an embedding program) collects them again
            gc.unfreeze()
        if metrics is not None:
            metrics.stop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        left = (stopped_at + STOP_WITHIN - loop.time()) if stopped_at is not None else 1.0
        await _close(app, max(0.05, left))
        manager.resume()  # the app may run a worker again


async def _close(app: procrastinate.App, within: float) -> None:
    """Close the app's pool within ``within`` seconds (its workers may be waiting on a database that is
    down: they are not waited for)."""
    with contextlib.suppress(Exception, TimeoutError):
        pool = getattr(app.connector, "_async_pool", None)  # a PsycopgConnector's, once opened
        if pool is not None:
            await asyncio.wait_for(pool.close(timeout=max(0.05, within - 0.1)), timeout=within)
        await asyncio.wait_for(app.close_async(), timeout=0.1)


async def _until_stopped(step: Any, stop: asyncio.Event) -> bool:
    """Run ``step`` (it retries through an outage) unless ``stop`` comes first: whether it completed."""
    task = asyncio.ensure_future(step)
    waiting = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return False


async def _open(app: procrastinate.App) -> None:
    """Open the app's pool, waiting out a database that is not up yet."""

    async def attempt() -> None:
        try:
            await app.open_async()
        except Exception:
            # A pool that could not fill within its timeout is closed, but Procrastinate's connector keeps
            # it, and its next open_async() would return at once with that closed pool: every later
            # statement would fail with PoolClosed. Forget it, so the next attempt makes a new one.
            pool = getattr(app.connector, "_async_pool", None)
            if pool is not None and getattr(pool, "closed", False):
                app.connector._async_pool = None  # type: ignore[attr-defined]
            raise

    await retrying(attempt, what="opening the worker's connection pool", logger=logger)


async def _register(app: procrastinate.App, settings: Settings) -> None:
    async def register() -> None:
        async with scheduler_connection(app, settings) as conn:
            await register_app_tasks(app, conn, force=True)

    await retrying(register, what="registering the app's tasks", logger=logger)


async def _check_primary(app: procrastinate.App, url: str) -> None:
    """Raise ``worker.standby`` when the database is a hot standby: a worker writes from its first statement
    (it registers its tasks), which a standby refuses with a bare "read-only transaction"."""

    async def in_recovery() -> bool:
        row = await queries.connector_one(app.connector, "in_recovery")
        return bool(row["in_recovery"])

    if await retrying(in_recovery, what="checking the database", logger=logger):
        raise SchedError("worker.standby", database=display_url(url))


async def _check_listen(url: str) -> None:
    """Raise ``worker.listen_pooled`` when a LISTEN on ``url`` hears no NOTIFY (a transaction pooler)."""

    async def check() -> bool:
        return await listen_delivers(url)

    if not await retrying(check, what="checking the LISTEN connection", logger=logger):
        raise SchedError("worker.listen_pooled", url=display_url(url))


class Supervisor:
    """Runs Procrastinate's worker (as `BatchWorker`: jobs taken and finished in batches), and starts it
    again when it stops by itself (it does at a connection error it cannot ride through, such as the
    database going away while it starts)."""

    def __init__(
        self, app: procrastinate.App, url: str, manager: RunJobManager, options: dict[str, Any], *, direct: bool = False
    ) -> None:
        self.app = app
        self.url = url  # where the worker LISTENs
        self.direct = direct  # a URL of its own (not the app's connector's: that one goes through a pooler)
        self.manager = manager
        self.options = options
        self.worker: BatchWorker | None = None
        self._stopping = False
        self._backoff = Backoff()

    async def run(self) -> None:
        self.app.perform_import_paths()
        while not self._stopping:
            self.worker = BatchWorker(self.app, listen_url=self.url, listen_direct=self.direct, **self.options)
            began = time.monotonic()
            try:
                await self.worker.run()
                why = "it stopped by itself"
            except Exception as exc:
                if not is_transient(exc):
                    raise  # not an outage: the process must say so and exit
                why = describe(exc)
            if self._stopping:
                return
            if time.monotonic() - began > 60:
                self._backoff.reset()
            wait = self._backoff.next()
            logger.warning("the Procrastinate worker stopped (%s); starting it again in %.1f s", why, wait)
            await asyncio.sleep(wait)

    def stop(self) -> None:
        self._stopping = True
        if self.worker is not None:
            self.worker.stop()


async def _stop_all(
    scheduler: Scheduler,
    housekeeper: Housekeeper,
    dispatcher: Dispatcher,
    supervisor: Supervisor,
    supervising: asyncio.Task[None],
    here: presence.Presence,
    by: float,
) -> bool:
    """Stop every part by ``by`` (loop time); whether all of them did."""
    loop = asyncio.get_running_loop()
    supervisor.stop()
    parts = [
        asyncio.create_task(scheduler.stop(), name="the precise loop"),
        asyncio.create_task(housekeeper.stop(), name="housekeeping"),
        asyncio.create_task(dispatcher.stop(grace=1.5), name="notification dispatch"),
        asyncio.create_task(here.stop(), name="the worker's report"),
        supervising,
    ]
    _, pending = await asyncio.wait(parts, timeout=max(0.0, by - loop.time()))
    for part in pending:
        part.cancel()
    if pending:
        _, pending = await asyncio.wait(pending, timeout=0.1)
    if pending:
        names = ", ".join(sorted(p.get_name() for p in pending))
        logger.warning("stopped without waiting for %s (a synchronous task ignoring its abort?)", names)
    return not pending


async def _pool_for(app: procrastinate.App, concurrency: int) -> None:
    """Grow the app's pool to a connection per job slot plus the worker's own (taking and finishing jobs,
    the precise loop, heartbeats): a smaller pool makes job bodies wait for connections."""
    pool = getattr(app.connector, "pool", None)
    needed = concurrency + POOL_EXTRA
    if pool is not None and pool.max_size < needed:
        await pool.resize(pool.min_size, needed)


def _without_periodic(app: procrastinate.App, func: Any) -> None:
    """Drop the periodic tasks of the blueprint's ``func`` (the tick, housekeeping) from this app's."""
    registry = app.periodic_registry.periodic_tasks
    for key in [k for k, p in registry.items() if p.task.func is func]:
        del registry[key]
