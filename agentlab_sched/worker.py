"""`agentlab-sched worker`: a Procrastinate worker, the precise scheduling loop and notification dispatch.

The blueprint's periodic tick fires schedules from any plain `procrastinate worker`, at most a tick
late. This worker runs the precise loop instead (`agentlab_sched.firing.scheduler.Scheduler`), which
fires at the due time. Stopping (SIGTERM, SIGINT) ends the loop, the notification dispatch and the
worker within 3 s; a batch claimed but not committed rolls back, so the next worker fires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

import procrastinate
from procrastinate import PsycopgConnector

from agentlab_sched import database as db
from agentlab_sched.database.connections import display_url, scheduler_connection
from agentlab_sched.firing.blueprint import register_app_tasks
from agentlab_sched.firing.blueprint import tick as blueprint_tick
from agentlab_sched.firing.scheduler import Scheduler
from agentlab_sched.notify.dispatcher import Dispatcher
from agentlab_sched.observe import events, presence
from agentlab_sched.observe.metrics import Metrics
from agentlab_sched.runner import BatchWorker
from agentlab_sched.runs.middleware import install, with_run_middleware
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Procrastinate's fallback polls for new jobs and abort requests (both are also sent by NOTIFY).
POLL_FALLBACK = 30.0
#: Connections of the app's pool beyond one per job slot (see _pool_for).
POOL_EXTRA = 4
#: How long the worker may take to stop (its running jobs get this much, then are cancelled).
STOP_GRACE = 2.0


def connector_for(url: str, **options: Any) -> PsycopgConnector:
    """A Procrastinate connector on ``url`` with our session settings on every connection."""
    pool = {"min_size": 1, "max_size": 10, **options}
    pool["kwargs"] = {**db.connect_kwargs(), **(options.get("kwargs") or {})}
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
    app_path: str | None = None,
    **worker_options: Any,
) -> None:
    """Run the Procrastinate worker, the precise scheduler loop and the notification dispatcher until
    ``stop`` is set or SIGTERM/SIGINT arrives; stop all of them within 3 s.

    ``worker_options`` go to Procrastinate's worker (``delete_jobs``, ``additional_context``, ...); a
    ``worker_middleware`` list given there runs inside the run middleware, which is always kept.

    When everything runs it logs a ``ready`` event (database, queues, tasks, whether it fires and sends
    notifications), then one event per fire and run change (`agentlab_sched.observe.events`); it reports
    itself in ``agentlab_sched.workers`` for `agentlab-sched doctor`. With ``metrics_port`` it serves
    Prometheus metrics there (0: any free port, said in the ready event).
    """
    settings = settings or Settings.from_env()
    install(app)  # the run middleware: run context, approvals, task errors, timeouts
    if "worker_middleware" in worker_options:
        worker_options["worker_middleware"] = with_run_middleware(app, worker_options["worker_middleware"])
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if install_signal_handlers:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    metrics = Metrics(url) if metrics_port is not None else None
    port = metrics.serve(metrics_port) if metrics is not None and metrics_port is not None else None
    try:
        async with app.open_async():
            async with scheduler_connection(app, settings) as conn:
                await register_app_tasks(app, conn, force=True)
            scheduler = Scheduler(app, url, settings)
            if scheduler.start():
                # The precise loop fires on time: the per-second periodic tick would only add a job a second.
                _without_periodic_tick(app)
            dispatcher = await _start_dispatcher(app, url, settings)
            report = presence.Report(
                name=presence.worker_name(), kind="agentlab-sched", app=app_path,
                queues=tuple(queues) if queues else None, concurrency=concurrency,
                fires=scheduler.running, notifies=dispatcher.running,
            )  # fmt: skip
            here = presence.Presence(app, report)
            await here.start()
            # Its jobs carry its name: the run middleware then leaves reporting to it.
            context = {**(worker_options.pop("additional_context", None) or {}), presence.CONTEXT_KEY: report.name}
            await _pool_for(app, concurrency)
            worker = asyncio.create_task(
                _run_jobs(
                    app,
                    url,
                    concurrency=concurrency,
                    queues=queues,  # type: ignore[arg-type]  # None = every queue (WorkerOptions omits it)
                    install_signal_handlers=False,
                    shutdown_graceful_timeout=STOP_GRACE,
                    # New jobs and abort requests arrive by NOTIFY; polling is only the fallback.
                    fetch_job_polling_interval=POLL_FALLBACK,
                    abort_job_polling_interval=POLL_FALLBACK,
                    additional_context=context,
                    **worker_options,
                ),
                name="agentlab-sched-worker",
            )
            tasks = sorted(t for t in app.tasks if not t.startswith("builtin:"))  # not Procrastinate's aliases
            events.worker_event(
                "ready", settings.locale, database=display_url(url), queues=list(queues or []), tasks=tasks,
                concurrency=concurrency, fires=scheduler.running, notifies=dispatcher.running, metrics_port=port,
                worker=report.name,
            )  # fmt: skip
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            await asyncio.gather(scheduler.stop(), _stop_dispatcher(dispatcher), _stop_worker(worker), here.stop())
            events.worker_event("stopped", settings.locale, worker=report.name)
    finally:
        if metrics is not None:
            metrics.stop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


async def _run_jobs(app: procrastinate.App, url: str, **options: Any) -> None:
    """Procrastinate's worker as `BatchWorker` runs it (jobs taken and finished in batches), with the
    app's worker defaults, as ``app.run_worker_async`` would."""
    app.perform_import_paths()
    await BatchWorker(app, listen_url=url, **{**app.worker_defaults, **options}).run()


async def _pool_for(app: procrastinate.App, concurrency: int) -> None:
    """Grow the app's pool to a connection per job slot plus the worker's own (taking and finishing jobs,
    the precise loop, heartbeats): a smaller pool makes job bodies wait for connections."""
    pool = getattr(app.connector, "pool", None)
    needed = concurrency + POOL_EXTRA
    if pool is not None and pool.max_size < needed:
        await pool.resize(pool.min_size, needed)


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


async def _start_dispatcher(app: procrastinate.App, url: str, settings: Settings) -> Dispatcher:
    dispatcher = Dispatcher(url, settings=settings)
    await dispatcher.start()  # starts its tasks and returns; without a usable key it says why and runs nothing
    return dispatcher


async def _stop_dispatcher(dispatcher: Dispatcher) -> None:
    await dispatcher.stop()
