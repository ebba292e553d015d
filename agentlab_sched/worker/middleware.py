"""The run middleware: what a worker does around every job of a scheduled run.

Install it in the app that runs the scheduled tasks (``agentlab-sched worker`` and the demo app do)::

    app = procrastinate.App(connector=..., worker_defaults={"worker_middleware": [RunMiddleware()]})
    # or, on an existing app:
    agentlab_sched.install(app)

Around each job that belongs to a run it

- sets the run context (``agentlab_sched.current_run()``) for the task, async or sync;
- turns ``raise AwaitApproval(title, state)`` into a pending approval: the run becomes
  ``awaiting_approval`` and the job ends normally;
- records the message of an exception the task raised as the run's error (the text, never a repr);
- keeps the task's JSON result with the run;
- enforces the schedule's timeout on time: at the deadline it asks Procrastinate to abort the job
  (``abort_reason = 'timeout'``; the run ends ``timed_out``). An async task is cancelled at once; a sync
  task must check ``context.should_abort()``. One that does not is reported as still running after the
  abort, and when it finally returns its result is discarded and the run still ends ``timed_out``;
- marks a run whose job a stopping worker aborts, so that it is suspended (resumable), not cancelled;
- turns the cancellation of a run (``runs cancel``, a newer fire of a ``cancel_other`` schedule) into
  an aborted job, which Procrastinate never retries, even for a task declared with ``retry=``;
- looks the run up again through a database outage rather than run a body without its context, and
  writes down results and errors through one too (a body that finished keeps its result even when the
  worker is stopped meanwhile). What it records also settles the run if the job is deleted instead of
  finished (``procrastinate worker --delete-jobs``).

Housekeeping (every 10 s, in SQL) does the timeout part too, for workers without this middleware. Jobs
that are not runs (the scheduler's own tick, other tasks of the app) pass through with one lookup. Under
``agentlab-sched worker`` (`agentlab_sched.worker.batch`) the run context comes with the job, so there is no
lookup, and the result is written with the job's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import procrastinate
from procrastinate import exceptions as pexc
from procrastinate import job_context
from procrastinate.testing import InMemoryConnector

from agentlab_sched import limits, messages
from agentlab_sched.database import queries
from agentlab_sched.database.reconnect import GiveUp, retrying
from agentlab_sched.errors import SchedError, from_database
from agentlab_sched.observe import events, output, presence
from agentlab_sched.observe.events import fields
from agentlab_sched.observe.output import quiet_aborts
from agentlab_sched.runs import context as run_context
from agentlab_sched.runs import housekeeping
from agentlab_sched.runs.approvals import AwaitApproval
from agentlab_sched.settings import Settings
from agentlab_sched.worker.batch import RUN_CONTEXT, RUN_RESULT
from agentlab_sched.worker.blueprint import tick
from agentlab_sched.worker.jobs import RunJobManager

logger = logging.getLogger(__name__)

__all__ = ["ABORT_GRACE_SECONDS", "RunMiddleware", "install", "with_run_middleware"]

#: How long a task may take to stop after it was aborted for its timeout before the run says that it
#: ignores the abort (seconds; limits.ABORT_GRACE, which SQL reads too).
ABORT_GRACE_SECONDS = limits.ABORT_GRACE.total_seconds()
#: Results larger than this (JSON characters) are not kept with the run.
MAX_RESULT = 1_000_000
#: How long a stopping worker waits for a result, error or abort to be written down (seconds).
BOOKKEEPING_GRACE = 1.0


class RunMiddleware:
    """A Procrastinate worker middleware (``async (call_next, context, worker)``); see the module doc."""

    def __init__(self, settings: Settings | None = None, *, abort_grace: float = ABORT_GRACE_SECONDS) -> None:
        self.settings = settings
        self.abort_grace = abort_grace
        self._skip: set[str] = set()

    @property
    def locale(self) -> str:
        if self.settings is None:
            self.settings = Settings.from_env()
        return self.settings.locale

    async def __call__(self, call_next: Any, context: procrastinate.JobContext, worker: Any) -> Any:
        job = context.job
        await presence.seen_by(context, worker)  # what this worker runs, for `agentlab-sched doctor` (throttled)
        if job.id is None or job.task_name in self._skip or self._is_own(context):
            return await call_next()
        job_id: int = job.id
        app = context.app
        if RUN_CONTEXT in context.additional_context:
            data = context.additional_context[RUN_CONTEXT]  # taken with the job (agentlab-sched worker)
        else:
            data = await self._look_up(app, context)
        if not data:
            return await call_next()  # not a run's job
        if data.get("status") != "running":
            # The run ended (cancelled, ...) before its job started here: its body must not run.
            raise pexc.JobAborted(f"run {str(data['run_id'])[:6]} is {data['status']}; its job was not run")
        run = run_context.RunContext.from_data(data)
        self._tell(run, "running", late_seconds=data.get("late_seconds"))
        task = app.tasks.get(job.task_name)
        is_sync = task is not None and not inspect.iscoroutinefunction(task.func)
        watch = Watch()
        watcher = None
        if data.get("seconds_left") is not None:
            watcher = asyncio.create_task(
                self._watch_deadline(app, run, job_id, float(data["seconds_left"]), is_sync, watch),
                name=f"agentlab-sched timeout of run {run.short_id}",
            )
        tokens = run_context._set(run, app)
        try:
            try:
                result = await call_next()
            except AwaitApproval as ask:
                await self._await_approval(app, context, run, job_id, ask)
                self._tell(run, "awaiting_approval", error=ask.title)
                return None
            except pexc.JobAborted:
                reason = await self._bookkeeping(
                    context, lambda: self._after_abort(app, run, job_id, context), "record the abort", run=run
                )
                self._tell_aborted(run, reason, watch)
                raise
            except asyncio.CancelledError:
                if context.abort_reason() == job_context.AbortReason.SHUTDOWN:
                    # A stopping worker: the run is interrupted (its on_interrupt says what follows), never
                    # cancelled as if someone had asked.
                    coming = await self._bookkeeping(
                        context,
                        lambda: self._call(app, "mark_shutdown", run=str(run.run_id), job=job_id),
                        "record the interruption",
                        run=run,
                    )
                    self._tell_aborted(run, f"shutdown:{coming or 'suspended'}", watch)
                    raise
                # An abort asked for (runs cancel, a newer fire, the timeout): the job ends aborted, which
                # Procrastinate never retries (a CancelledError it would retry, for a task with retry=).
                reason = await self._bookkeeping(
                    context, lambda: self._after_abort(app, run, job_id, context), "record the abort", run=run
                )
                self._tell_aborted(run, reason or "cancel", watch)
                _uncancel()
                raise pexc.JobAborted(f"run {run.short_id} was aborted ({reason or 'cancel'})") from None
            except Exception as exc:
                await self._bookkeeping(
                    context, functools.partial(self._record_error, app, run, job_id, exc), "record the error", run=run
                )
                retry = task.get_retry_exception(exception=exc, job=job) if task is not None else None
                said = exc.message(self.locale) if isinstance(exc, SchedError) else error_text(exc)[0]
                self._tell(run, "queued" if retry else "failed", error=said)
                output.told(exc)  # its line is said: Procrastinate's record of it adds nothing
                raise
            if watch.aborted or context.should_abort():
                # The task returned although it was asked to abort (a sync task that ignored it).
                reason = await self._bookkeeping(
                    context, lambda: self._after_abort(app, run, job_id, context), "record the abort", run=run
                )
                if reason is not None and not reason.startswith("shutdown"):  # timeout, cancel, a newer fire
                    self._tell_aborted(run, reason, watch)
                    raise pexc.JobAborted(f"run {run.short_id} was aborted ({reason}); its result is discarded")
            # The body finished: its result is kept even when a stopping worker cancels us meanwhile.
            await self._bookkeeping(
                context, lambda: self._record_result(context, worker, run, result), "record the result", run=run
            )
            self._tell(run, "succeeded")
            return result
        finally:
            run_context._reset(tokens)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher

    # ------------------------------------------------------------------------------------------------

    def _tell(self, run: run_context.RunContext, status: str, **details: Any) -> None:
        """One event per run change this worker sees (its line in `agentlab-sched worker`, its metrics)."""
        events.run_changed(
            schedule=run.schedule, run_id=run.run_id, status=status, fire_id=run.fire_id, task=run.task,
            locale=self.locale, **details,
        )  # fmt: skip

    def _tell_aborted(self, run: run_context.RunContext, reason: str | None, watch: Watch) -> None:
        """The event of a run whose job was aborted; a stopping worker's says what becomes of the run."""
        status = _aborted_status(reason, watch)
        if reason is not None and reason.startswith("shutdown"):
            self._tell(run, status, error=messages.render(f"run.worker_stopped.{status}", self.locale))
        else:
            self._tell(run, status)

    def _is_own(self, context: procrastinate.JobContext) -> bool:
        """The scheduler's own periodic tasks are never runs: no lookup for them."""
        task = context.app.tasks.get(context.job.task_name)
        if task is not None and task.func in (tick, housekeeping.housekeeping):
            self._skip.add(context.job.task_name)
            return True
        return False

    async def _look_up(self, app: procrastinate.App, context: procrastinate.JobContext) -> dict[str, Any] | None:
        """The job's run (its context), retried through an outage: a scheduled job never runs without its
        context. A worker stopping meanwhile hands the job back (todo again) before its body started."""
        job_id = context.job.id
        assert job_id is not None  # checked by __call__

        async def look() -> dict[str, Any] | None:
            row = await queries.connector_one(app.connector, "run_context", job=job_id)
            return row["ctx"] if row else None

        def stopping() -> float | None:
            return time.monotonic() if context.should_abort() else None

        try:
            return await retrying(look, what=f"looking up the run of job {job_id}", logger=logger, deadline=stopping)
        except (asyncio.CancelledError, GiveUp):
            # Aborted before the body started. A cancel asked for (runs cancel, ...) ends the job aborted:
            # the run is cancelled. A stopping worker's job manager hands the job back instead (todo again,
            # the run queued; without ours, it ends aborted and the run is interrupted, and suspended).
            if context.abort_reason() != job_context.AbortReason.USER_REQUEST and isinstance(
                app.job_manager, RunJobManager
            ):
                app.job_manager.hand_back(job_id)
            _uncancel()
            raise pexc.JobAborted(
                f"job {job_id} is handed back: the worker stopped before its run was looked up"
            ) from None

    async def _bookkeeping(
        self,
        context: procrastinate.JobContext,
        call: Callable[[], Awaitable[Any]],
        what: str,
        *,
        quiet: bool = True,
        run: run_context.RunContext | None = None,
    ) -> Any:
        """Write something down for the run (its result, its error, an abort), retried through an outage.
        A stopping worker waits `BOOKKEEPING_GRACE` for it rather than drop it (its cancellation is
        absorbed), so that the job ends as its body did. ``quiet``: an error is logged, not raised (the
        task's own exception, or result, goes on)."""
        stop_seen: list[float] = []

        def deadline() -> float | None:
            if context.abort_reason() != job_context.AbortReason.SHUTDOWN:
                return None
            if not stop_seen:
                stop_seen.append(time.monotonic() + BOOKKEEPING_GRACE)
            return stop_seen[0]

        async def write_down() -> Any:
            try:
                return await retrying(call, what=f"{what} of a run", logger=logger, deadline=deadline)
            except GiveUp:
                logger.warning("could not %s of a run before the worker stopped", what, extra=_fields(run))
                return None
            except Exception:
                if not quiet:
                    raise
                logger.exception("could not %s of a run", what, extra=_fields(run))
                return None

        write = asyncio.ensure_future(write_down())
        try:
            return await asyncio.shield(write)
        except asyncio.CancelledError:
            if write.done():
                raise
            _uncancel()
            try:
                return await asyncio.wait_for(write, timeout=BOOKKEEPING_GRACE)
            except TimeoutError:
                logger.warning("could not %s of a run before the worker stopped", what, extra=_fields(run))
                return None

    async def _call(self, app: procrastinate.App, query: str, **params: Any) -> Any:
        """Named query ``query`` with the deployment's locale for the messages it renders; its value."""
        row = await queries.connector_one(app.connector, query, locale=self.locale, **params)
        return row["value"] if row else None

    async def _await_approval(
        self,
        app: procrastinate.App,
        context: procrastinate.JobContext,
        run: run_context.RunContext,
        job_id: int,
        ask: AwaitApproval,
    ) -> None:
        try:
            state = json.dumps(ask.state, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problem = str(exc)
            await self._bookkeeping(
                context,
                lambda: self._call(
                    app,
                    "record_not_serialisable",
                    run=str(run.run_id),
                    job=job_id,
                    problem=problem,
                ),
                "record the error",
            )
            raise TypeError(problem) from None
        try:
            segment = await self._bookkeeping(
                context,
                lambda: self._call(
                    app,
                    "await_approval",
                    run=str(run.run_id),
                    job=job_id,
                    title=ask.title,
                    state=state,
                ),
                "record the approval asked for",
                quiet=False,
            )
        except pexc.ConnectorException as exc:
            refused = from_database(exc.__cause__ or exc)
            if refused is None:
                raise
            await self._bookkeeping(context, lambda: self._record_error(app, run, job_id, refused), "record the error")
            raise refused from None
        logger.debug(
            "run %s awaits approval of segment %s: %s", run.short_id, segment, ask.title,
            extra=_fields(run, "awaiting_approval", segment),
        )  # fmt: skip

    async def _record_error(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, exc: BaseException
    ) -> None:
        message, code = error_text(exc)
        await self._call(
            app,
            "record_task_error",
            run=str(run.run_id),
            job=job_id,
            message=message,
            code=code,
            params=error_params(exc),
        )

    async def _record_result(
        self, context: procrastinate.JobContext, worker: Any, run: run_context.RunContext, result: Any
    ) -> None:
        """Keep the result (JSON data up to MAX_RESULT, else none) and that the body succeeded; under a
        worker that writes it with the job's end (agentlab-sched worker), leave it to that worker."""
        value: str | None = None
        if result is not None:
            try:
                value = json.dumps(result, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError):
                value = None  # not JSON data: the task's business; the run still succeeds
            if value is not None and len(value) > MAX_RESULT:
                value = None
        if getattr(worker, "records_run_results", False):
            context.additional_context[RUN_RESULT] = (str(run.run_id), value)
            return
        await self._call(
            context.app,
            "record_result",
            run=str(run.run_id),
            job=context.job.id,
            value=value,
        )

    async def _after_abort(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, context: procrastinate.JobContext
    ) -> str | None:
        """The task ended after an abort request: for a timeout, the error says how late; the reason
        (``shutdown:STATUS`` for a stopping worker's, with the status its run is given: queued, suspended,
        cancelled)."""
        if context.abort_reason() == job_context.AbortReason.SHUTDOWN:
            coming = await self._call(app, "mark_shutdown", run=str(run.run_id), job=job_id)
            return f"shutdown:{coming or 'suspended'}"
        return await self._call(
            app,
            "finish_after_abort",
            run=str(run.run_id),
            job=job_id,
            grace=self.abort_grace,
        )

    async def _watch_deadline(
        self,
        app: procrastinate.App,
        run: run_context.RunContext,
        job_id: int,
        seconds_left: float,
        is_sync: bool,
        watch: Watch,
    ) -> None:
        """At the deadline, abort the job; for a sync task, report it if it is still going after the grace."""
        try:
            await asyncio.sleep(max(seconds_left, 0.0) + 0.05)
            done = await self._call(
                app,
                "time_out_run",
                run=str(run.run_id),
                grace=self.abort_grace,
            )
            if done != "aborted":
                return
            watch.aborted = True
            logger.info(
                "run %s reached its timeout; its job was asked to abort", run.short_id, extra=_fields(run, "timed_out")
            )
            if not is_sync:
                return
            await asyncio.sleep(self.abort_grace + 0.05)
            await self._call(
                app,
                "time_out_run",
                run=str(run.run_id),
                grace=self.abort_grace,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception(
                "could not enforce the timeout of run %s (housekeeping will)", run.short_id, extra=_fields(run)
            )


def _fields(
    run: run_context.RunContext | None, status: str | None = None, segment: int | None = None
) -> dict[str, Any]:
    """The stable log fields of a record about ``run``."""
    more: dict[str, Any] = {"segment": segment} if segment is not None else {}
    if run is None:
        return fields(**more)
    return fields(run.schedule, run.fire_id, run.run_id, status, None, **more)


def _aborted_status(reason: str | None, watch: Watch) -> str:
    """The run's status after its job was aborted for ``reason`` (the worker stopping, a timeout, a cancel)."""
    if reason is not None and reason.startswith("shutdown"):
        return reason.partition(":")[2] or "suspended"
    return "timed_out" if reason == "timeout" or watch.aborted else "cancelled"


class Watch:
    """What the deadline watcher found (shared with the middleware call it belongs to)."""

    aborted: bool = False


def _uncancel() -> None:
    """Absorb the cancellation of the current task (it is handled: the job goes on to be finished)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()


def error_text(exc: BaseException) -> tuple[str, str]:
    """The run error for an exception: its message (never a repr) and an error code."""
    if isinstance(exc, SchedError):
        return str(exc), exc.code
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return f"KeyError: {exc.args[0]}", "run.task_failed"
    message = str(exc).strip()
    return (message or type(exc).__name__), "run.task_failed"


def error_params(exc: BaseException) -> str | None:
    """The parameters of a run error that is a message of the catalogue (a SchedError), as JSON, so that
    it reads in the reader's language; None for a task's own words (kept as written) and for parameters
    that are not JSON data."""
    if not isinstance(exc, SchedError):
        return None
    try:
        return json.dumps(exc.params, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None


def install(app: procrastinate.App, middleware: RunMiddleware | None = None) -> procrastinate.App:
    """Add the run middleware to ``app``'s workers, outermost, and the job manager its workers need
    (`agentlab_sched.worker.jobs.RunJobManager`); returns the app.

    Without ``middleware``, an app that has one already keeps it (calling this twice is harmless);
    with one, it replaces the one installed (to set its locale or abort grace).

    An app on a connector other than Procrastinate's ``PsycopgConnector`` (psycopg 3; its testing
    ``InMemoryConnector`` aside) is refused here, naming it: the scheduler's connection, its tick and its
    bookkeeping run on a psycopg 3 pool, and would fail at every job on aiopg or psycopg2.
    """
    check_connector(app)
    if not isinstance(app.job_manager, RunJobManager):
        app.job_manager = RunJobManager(app)  # unknown tasks and settled jobs, see worker/jobs.py
    quiet_aborts()  # no CancelledError traceback for a job aborted by its timeout, in any worker
    current = list(app.worker_defaults.get("worker_middleware") or [])
    if middleware is None and any(isinstance(m, RunMiddleware) for m in current):
        return app
    current = [m for m in current if not isinstance(m, RunMiddleware)]
    current.insert(0, middleware or RunMiddleware())
    app.worker_defaults["worker_middleware"] = current
    return app


#: The connectors the scheduler runs on.
SUPPORTED_CONNECTORS = ("procrastinate.PsycopgConnector",)


def check_connector(app: procrastinate.App) -> None:
    """Refuse (``worker.connector_unsupported``) an app whose connector the scheduler cannot run on."""
    connector = app.connector
    if isinstance(connector, procrastinate.PsycopgConnector | InMemoryConnector):
        return
    kind = type(connector)
    raise SchedError(
        "worker.connector_unsupported",
        connector=f"{kind.__module__}.{kind.__qualname__}",
        supported=list(SUPPORTED_CONNECTORS),
    )


def with_run_middleware(app: procrastinate.App, middleware: list[Any] | None) -> list[Any]:
    """``middleware`` (a worker's own list) with the app's run middleware first: passing
    ``worker_middleware=`` to a worker replaces the app's defaults, which must not drop ours."""
    given = [m for m in (middleware or []) if not isinstance(m, RunMiddleware)]
    ours = [m for m in (middleware or []) if isinstance(m, RunMiddleware)]
    ours = ours or [m for m in app.worker_defaults.get("worker_middleware") or [] if isinstance(m, RunMiddleware)]
    return [*(ours[:1] or [RunMiddleware()]), *given]
