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
- marks a run whose job a stopping worker aborts, so that it is suspended (resumable), not cancelled.

Housekeeping (every 10 s, in SQL) does the timeout part too, for workers without this middleware. Jobs
that are not runs (the scheduler's own tick, other tasks of the app) pass through with one lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from typing import Any

import procrastinate
from procrastinate import exceptions as pexc
from procrastinate import job_context

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, from_database
from agentlab_sched.firing.blueprint import tick
from agentlab_sched.runs import context as run_context
from agentlab_sched.runs import housekeeping
from agentlab_sched.runs.approvals import AwaitApproval
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

__all__ = ["ABORT_GRACE", "RunMiddleware", "install", "with_run_middleware"]

#: How long a task may take to stop after it was aborted for its timeout before the run says that it
#: ignores the abort (seconds).
ABORT_GRACE = 10.0
#: Results larger than this (JSON characters) are not kept with the run.
MAX_RESULT = 1_000_000


class RunMiddleware:
    """A Procrastinate worker middleware (``async (call_next, context, worker)``); see the module doc."""

    def __init__(self, settings: Settings | None = None, *, abort_grace: float = ABORT_GRACE) -> None:
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
        if job.id is None or job.task_name in self._skip or self._is_own(context):
            return await call_next()
        app = context.app
        try:
            row = await queries.connector_one(app.connector, "run_context", job=job.id)
        except pexc.ConnectorException:
            # The task still runs (a lookup glitch must not fail it), without its run context.
            logger.exception("could not look up the run of job %s; running it without run context", job.id)
            return await call_next()
        data = row["ctx"] if row else None
        if not data:
            return await call_next()
        run = run_context.RunContext.from_data(data)
        task = app.tasks.get(job.task_name)
        is_sync = task is not None and not inspect.iscoroutinefunction(task.func)
        watch = Watch()
        watcher = None
        if data.get("seconds_left") is not None:
            watcher = asyncio.create_task(
                self._watch_deadline(app, run, job.id, float(data["seconds_left"]), is_sync, watch),
                name=f"agentlab-sched timeout of run {run.short_id}",
            )
        tokens = run_context._set(run, app)
        try:
            try:
                result = await call_next()
            except AwaitApproval as ask:
                await self._await_approval(app, run, job.id, ask)
                return None
            except pexc.JobAborted:
                await self._after_abort(app, run, job.id, context)
                raise
            except asyncio.CancelledError:
                if context.abort_reason() == job_context.AbortReason.SHUTDOWN:
                    with contextlib.suppress(Exception):
                        await self._call(app, "mark_shutdown", run=str(run.run_id), job=job.id)
                raise
            except Exception as exc:
                await self._record_error(app, run, job.id, exc)
                raise
            if watch.aborted or context.should_abort():
                # The task returned although it was asked to abort (a sync task that ignored it).
                reason = await self._after_abort(app, run, job.id, context)
                if reason is not None and reason != "shutdown":  # timeout, cancel, cancelled by a newer fire
                    raise pexc.JobAborted(f"run {run.short_id} was aborted ({reason}); its result is discarded")
            await self._record_result(app, run, job.id, result)
            return result
        finally:
            run_context._reset(tokens)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher

    # ------------------------------------------------------------------------------------------------

    def _is_own(self, context: procrastinate.JobContext) -> bool:
        """The scheduler's own periodic tasks are never runs: no lookup for them."""
        task = context.app.tasks.get(context.job.task_name)
        if task is not None and task.func in (tick, housekeeping.housekeeping):
            self._skip.add(context.job.task_name)
            return True
        return False

    async def _call(self, app: procrastinate.App, query: str, **params: Any) -> Any:
        """Named query ``query`` with the deployment's locale for the messages it renders; its value."""
        row = await queries.connector_one(app.connector, query, locale=self.locale, **params)
        return row["value"] if row else None

    async def _await_approval(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, ask: AwaitApproval
    ) -> None:
        try:
            state = json.dumps(ask.state, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problem = str(exc)
            await self._call(
                app,
                "record_not_serialisable",
                run=str(run.run_id),
                job=job_id,
                problem=problem,
            )
            raise TypeError(problem) from None
        try:
            segment = await self._call(
                app,
                "await_approval",
                run=str(run.run_id),
                job=job_id,
                title=ask.title,
                state=state,
            )
        except pexc.ConnectorException as exc:
            refused = from_database(exc.__cause__ or exc)
            if refused is None:
                raise
            await self._record_error(app, run, job_id, refused)
            raise refused from None
        logger.info("run %s awaits approval of segment %s: %s", run.short_id, segment, ask.title)

    async def _record_error(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, exc: BaseException
    ) -> None:
        message, code = error_text(exc)
        try:
            await self._call(
                app,
                "record_task_error",
                run=str(run.run_id),
                job=job_id,
                message=message,
                code=code,
            )
        except Exception:
            logger.exception("could not record the error of run %s", run.short_id)

    async def _record_result(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, result: Any
    ) -> None:
        if result is None:
            return
        try:
            value = json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return  # not JSON data: the task's business; the run still succeeds
        if len(value) > MAX_RESULT:
            return
        try:
            await self._call(
                app,
                "record_result",
                run=str(run.run_id),
                job=job_id,
                value=value,
            )
        except Exception:
            logger.exception("could not record the result of run %s", run.short_id)

    async def _after_abort(
        self, app: procrastinate.App, run: run_context.RunContext, job_id: int, context: procrastinate.JobContext
    ) -> str | None:
        """The task ended after an abort request: for a timeout, the error says how late; the reason."""
        if context.abort_reason() == job_context.AbortReason.SHUTDOWN:
            await self._call(app, "mark_shutdown", run=str(run.run_id), job=job_id)
            return "shutdown"
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
            logger.info("run %s reached its timeout; its job was asked to abort", run.short_id)
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
            logger.exception("could not enforce the timeout of run %s (housekeeping will)", run.short_id)


class Watch:
    """What the deadline watcher found (shared with the middleware call it belongs to)."""

    aborted: bool = False


def error_text(exc: BaseException) -> tuple[str, str]:
    """The run error for an exception: its message (never a repr) and an error code."""
    if isinstance(exc, SchedError):
        return str(exc), exc.code
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return f"KeyError: {exc.args[0]}", "run.task_failed"
    message = str(exc).strip()
    return (message or type(exc).__name__), "run.task_failed"


def install(app: procrastinate.App, middleware: RunMiddleware | None = None) -> procrastinate.App:
    """Add the run middleware to ``app``'s workers, outermost; returns the app.

    Without ``middleware``, an app that has one already keeps it (calling this twice is harmless);
    with one, it replaces the one installed (to set its locale or abort grace).
    """
    current = list(app.worker_defaults.get("worker_middleware") or [])
    if middleware is None and any(isinstance(m, RunMiddleware) for m in current):
        return app
    current = [m for m in current if not isinstance(m, RunMiddleware)]
    current.insert(0, middleware or RunMiddleware())
    app.worker_defaults["worker_middleware"] = current
    return app


def with_run_middleware(app: procrastinate.App, middleware: list[Any] | None) -> list[Any]:
    """``middleware`` (a worker's own list) with the app's run middleware first: passing
    ``worker_middleware=`` to a worker replaces the app's defaults, which must not drop ours."""
    given = [m for m in (middleware or []) if not isinstance(m, RunMiddleware)]
    ours = [m for m in (middleware or []) if isinstance(m, RunMiddleware)]
    ours = ours or [m for m in app.worker_defaults.get("worker_middleware") or [] if isinstance(m, RunMiddleware)]
    return [*(ours[:1] or [RunMiddleware()]), *given]
