"""The job runner of `agentlab-sched worker`: Procrastinate's worker, taking and finishing jobs in batches.

A subclass of Procrastinate's ``Worker``, so that everything else stays Procrastinate's own: task and
worker middleware, retries, abort (by NOTIFY and by polling), heartbeats and stalled-worker pruning,
periodic tasks, graceful shutdown, ``delete_jobs``. What differs:

- **taking jobs**: one statement (``agentlab_sched.fetch_jobs``) takes as many jobs as there are free slots,
  in the order and under the locks of Procrastinate's own fetch (priority, then age; ``lock``), and returns
  each job with its run's context, which the run middleware then does not look up;
- **finishing jobs**: every job that ends while a write is in flight is written by the next one
  (``agentlab_sched.finish_jobs``), with its run's result, in one transaction; a slot takes the next job as
  soon as the body has returned. A batch that fails is written again job by job, so one job's error stays
  its own. Retries go one by one, through Procrastinate;
- **NOTIFY**: new jobs and abort requests are heard on a connection of its own, waited on by its socket
  (psycopg's ``notifies()`` wakes every 0.1 s, most of an idle worker's CPU), which reconnects after a
  failure.

A plain ``procrastinate worker`` runs the same apps with the same results, one job per transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import procrastinate
import psycopg
from procrastinate import exceptions as pexc
from procrastinate import job_context, jobs, utils
from procrastinate import worker as procrastinate_worker
from procrastinate.manager import get_channel_for_queues
from psycopg.types.json import set_json_loads

from agentlab_sched.database import connect_kwargs, queries
from agentlab_sched.database.connections import wait_for_notifies
from agentlab_sched.database.reconnect import BACKOFF_CAP, GiveUp, retrying
from agentlab_sched.worker.jobs import RunJobManager

logger = logging.getLogger(__name__)

__all__ = ["RUN_CONTEXT", "RUN_RESULT", "BatchWorker"]

#: Where the runner leaves a job's run context for the run middleware (``JobContext.additional_context``):
#: absent, the job was not taken by this runner (the middleware looks its run up); None, it is no run's.
RUN_CONTEXT = "agentlab_sched.run"
#: Where the run middleware leaves what a run's body returned, ``(run id, JSON text or None)``, for the
#: runner to write with the job's end (record_results).
RUN_RESULT = "agentlab_sched.result"
#: A stopping worker waits this long for a job end it cannot write (the database unreachable).
FINISH_GRACE = 1.0
#: A NOTIFY connection that heard nothing for this long is checked (and replaced when it is dead).
LISTEN_CHECK = 60.0
#: The most job ends one statement writes.
MAX_FINISH = 500
#: The lines about a job that every job gets (loaded, started, succeeded, its end written), by their level.
_EVERY_JOB = {
    "loaded_job_info": logging.DEBUG,
    "start_job": logging.INFO,
    "job_success": logging.INFO,
    "finish_task": logging.DEBUG,
}


class BatchWorker(procrastinate_worker.Worker):
    """A Procrastinate worker that takes and finishes jobs in batches (see the module doc).

    Its own connections (taking jobs, ending jobs, NOTIFY) are set up as the app's connector sets up its
    listener's, or opened on ``listen_url`` for another connector; with ``listen_direct`` its NOTIFY
    listener connects to ``listen_url`` whatever the connector (the connector goes through a transaction
    pooler, where LISTEN hears nothing). The other options are ``App.run_worker_async``'s.
    """

    #: The run middleware may leave a run's result in the job's context (RUN_RESULT) for this worker to write.
    records_run_results = True

    def __init__(self, app: procrastinate.App, *, listen_url: str, listen_direct: bool = False, **options: Any) -> None:
        # Procrastinate's listener is replaced by ours (started by run()), so it is switched off there.
        self.listens = bool(options.pop("listen_notify", True))
        super().__init__(app=app, listen_notify=False, **options)
        self.listen_url = listen_url
        self.listen_direct = listen_direct
        self._held: set[int] = set()  # jobs whose body holds a slot
        # Abort requests heard while a fetch was in flight, for jobs not started here yet: the fetch may be
        # taking them (committed, the NOTIFY sent, its rows not read yet). None: no fetch in flight.
        self._aborts_heard: set[int] | None = None
        self._slot_freed = asyncio.Event()
        self._fetching = _Session(app, listen_url)
        self._finisher = _Finisher(_Session(app, listen_url), self._stop_deadline)
        self._stopped_at: float | None = None

    # -- taking jobs ----------------------------------------------------------------------------------

    async def _fetch_and_process_jobs(self) -> None:
        """Take as many jobs as there are free slots, in one statement, until none is left or asked to stop."""
        while not self._stop_event.is_set():
            self._slot_freed.clear()
            free = self.concurrency - len(self._held)
            if free <= 0:
                await utils.wait_any(self._slot_freed.wait(), self._stop_event.wait())
                continue
            self._new_job_event.clear()  # a NOTIFY from now on means another look
            assert self.worker_id is not None
            queues = list(self.queues) if self.queues is not None else None
            params = {"queues": queues, "worker": self.worker_id, "wanted": free}
            self._aborts_heard = set()
            try:  # through an outage, until the worker is told to stop
                rows = await retrying(
                    functools.partial(self._fetching.rows, "fetch_jobs", params),
                    what="taking jobs",
                    logger=logger,
                    deadline=lambda: time.monotonic() if self._stop_event.is_set() else None,
                )
            except GiveUp:
                return
            finally:
                heard, self._aborts_heard = self._aborts_heard, None
            for row in rows:
                self._start(row)
            aborted = heard & {row["id"] for row in rows}
            if aborted:
                # Their tasks first take a step: one cancelled before it would end without its job's end.
                await asyncio.sleep(0)
                for job_id in aborted:
                    await self._abort_requested(job_id)
            if len(rows) < free:
                return  # nothing more to take: wait for a NOTIFY or the polling interval

    def _start(self, row: dict[str, Any]) -> None:
        job = jobs.Job.from_row(row)
        job_id = job.id
        assert job_id is not None
        context = job_context.JobContext(
            app=self.app,
            worker_name=self.worker_name,
            worker_queues=self.queues,
            additional_context={
                **(self.additional_context or {}),
                # Unread (the runs were locked elsewhere): the run middleware looks the run up itself.
                **({RUN_CONTEXT: row["run"]} if row["run_read"] else {}),
            },
            job=job,
            abort_reason=lambda: self._job_ids_to_abort.get(job_id),
            start_timestamp=time.time(),
        )
        task = asyncio.create_task(self._process_job(context), name=f"process job {job.task_name}[{job_id}]")
        self._held.add(job_id)
        self._running_jobs[task] = context

        def done(task: asyncio.Task[Any]) -> None:
            del self._running_jobs[task]
            self._free(job_id)

        task.add_done_callback(done)

    def _free(self, job_id: int) -> None:
        if job_id in self._held:
            self._held.discard(job_id)
            self._slot_freed.set()

    # -- Procrastinate's lines about jobs --------------------------------------------------------------

    def _log_extra(
        self,
        action: str,
        context: job_context.JobContext | None,
        job_result: job_context.JobResult | None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The fields of Procrastinate's line about a job; none for a line every job gets that would not be
        shown (`agentlab-sched worker` shows Procrastinate's warnings only). The fields are built before the
        logger decides (the job as a dict, four times a job): the largest part of the Python between taking
        a job and starting its body."""
        level = _EVERY_JOB.get(action)
        if level is not None and not (
            procrastinate_worker.logger.isEnabledFor(level) or self.logger.isEnabledFor(level)
        ):
            return {}
        return cast(dict[str, Any], super()._log_extra(action, context, job_result, **kwargs))

    # -- finishing jobs -------------------------------------------------------------------------------

    async def _persist_job_status(
        self,
        job: jobs.Job,
        status: jobs.Status,
        retry_decision: Any,
        context: job_context.JobContext,
        job_result: job_context.JobResult | None,
    ) -> None:
        assert job.id is not None
        self._free(job.id)  # the body has returned: its slot takes the next job while this one is written
        recorded = context.additional_context.pop(RUN_RESULT, None)
        manager = self.app.job_manager
        runs = isinstance(manager, RunJobManager)
        if retry_decision or (runs and manager.finishes_alone(job, status)):  # type: ignore[attr-defined]
            # A retry, a job handed back, a task the app does not have: no body returned, Procrastinate's way.
            await super()._persist_job_status(job, status, retry_decision, context, job_result)
            self._look_again(runs)
            return
        delete = {
            jobs.DeleteJobCondition.ALWAYS: True,
            jobs.DeleteJobCondition.NEVER: False,
            jobs.DeleteJobCondition.SUCCESSFUL: status == jobs.Status.SUCCEEDED,
        }[self.delete_jobs]
        try:
            await self._finisher.finish(job.id, status, delete, recorded)
        except GiveUp:
            # Told to stop while the database is unreachable: the job stays "doing" under a worker that
            # is gone, which housekeeping finds as a stalled worker's (its run: suspended), as after a kill.
            logger.warning("job %d: its end is not written (the database is unreachable as the worker stops)", job.id)
            return
        except pexc.ConnectorException as exc:
            if not (runs and manager.settled_already(exc)):  # type: ignore[attr-defined]
                raise
            await manager.finished(job, settled_already=True)  # type: ignore[attr-defined]
        else:
            if runs:
                await manager.finished(job, settled_already=False)  # type: ignore[attr-defined]
        self._job_ids_to_abort.pop(job.id, None)
        self._look_again(runs)
        self.logger.debug(
            f"Acknowledged job completion {job.call_string}",
            extra=self._log_extra(action="finish_task", context=context, status=status, job_result=job_result),
        )

    def _look_again(self, runs: bool) -> None:
        """A job's end is written: it may have made a job ready (a retry, a job behind its lock). The run job
        manager wakes the workers itself; without install(app), nothing would until the next poll."""
        if not runs:
            self._new_job_event.set()

    def _stop_deadline(self) -> float | None:
        """For writing job ends through an outage: none until the worker is told to stop, then FINISH_GRACE."""
        if not self._stop_event.is_set():
            return None
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        return self._stopped_at + FINISH_GRACE

    # -- running ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Procrastinate's ``run()``, with our NOTIFY listener beside it and our connections closed after."""
        listener = asyncio.create_task(self._listen(), name="listener") if self.listens else None
        if listener is not None:
            listener.add_done_callback(self._listener_ended)
        try:
            await super().run()  # running jobs end (and are written) or are aborted before it returns
        finally:
            if listener is not None:
                listener.remove_done_callback(self._listener_ended)
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            await self._fetching.close()
            await self._finisher.session.close()

    def _listener_ended(self, task: asyncio.Task[None]) -> None:
        # It only ends by an error it cannot ride through: stop, as Procrastinate does when a side task fails.
        if not task.cancelled() and task.exception() is not None:
            logger.error("job listener failed; stopping the worker", exc_info=task.exception())
            self.stop()

    # -- NOTIFY ---------------------------------------------------------------------------------------

    async def _listen(self) -> None:
        """New jobs and abort requests by NOTIFY, on a connection of its own; reconnects after a failure."""
        channels = list(get_channel_for_queues(self.queues))
        pause = 0.5
        while True:
            session = _Session(self.app, self.listen_url, direct=self.listen_direct)
            try:
                conn = await session.connection()
                try:
                    for channel in channels:
                        await queries.execute(conn, "listen_channel", identifiers={"channel": channel})
                    pause = 0.5
                    self._new_job_event.set()  # whatever was deferred while nobody listened
                    # And whatever abort was asked for meanwhile: looked up beside the wait, not before it. It
                    # goes through the app's pool, which after an outage can take seconds to connect again,
                    # and the NOTIFYs of new jobs would wait unread all that time.
                    missed = asyncio.create_task(self._aborts_missed_or_say())
                    try:
                        with self._woken():
                            while True:
                                heard = await wait_for_notifies(conn, LISTEN_CHECK)
                                if not heard:
                                    await queries.execute(conn, "ping")
                                for notify in heard:
                                    await self._heard(notify)
                    finally:
                        missed.cancel()
                finally:
                    await session.close()
            except (psycopg.OperationalError, OSError) as exc:
                logger.warning("job listener: %s; listening again in %.1f s", exc, pause)
                await asyncio.sleep(pause)
                # Capped like every reconnection: a longer outage must not delay the first job once it is over.
                pause = min(pause * 2, BACKOFF_CAP)

    def _woken(self) -> contextlib.AbstractContextManager[None]:
        """While listening, the run job manager's wake-ups (a job retried, a lock released) reach us too."""
        manager = self.app.job_manager
        if isinstance(manager, RunJobManager):
            return manager.woken(self._handle_notification)
        return contextlib.nullcontext()

    async def _heard(self, notify: psycopg.Notify) -> None:
        try:
            notification = json.loads(notify.payload)
        except ValueError:
            return
        if not (isinstance(notification, dict) and "type" in notification):
            return
        if notification["type"] == "abort_job_requested" and self._aborts_heard is not None:
            self._aborts_heard.add(int(notification.get("job_id") or 0))
        await self._handle_notification(channel=notify.channel, notification=cast(Any, notification))

    async def _abort_requested(self, job_id: int) -> None:
        """Procrastinate's handling of an abort request for ``job_id`` (running here), as if heard now."""
        await self._handle_notification(channel="", notification={"type": "abort_job_requested", "job_id": job_id})

    async def _aborts_missed_or_say(self) -> None:
        """`_aborts_missed`, an error of which is logged: the fallback poll finds those requests then."""
        try:
            await self._aborts_missed()
        except Exception as exc:
            logger.warning("job listener: could not read the abort requests sent while it was not listening (%s); "
                           "the next poll reads them", exc)  # fmt: skip

    async def _aborts_missed(self) -> None:
        """The abort requests for jobs running here that were sent while this worker did not listen (it was
        starting, or its listener reconnecting): without this they wait for the fallback poll."""
        if not self._running_jobs:
            return
        for job_id in await self.app.job_manager.list_jobs_to_abort_async():
            await self._abort_requested(job_id)


@dataclass
class _End:
    job_id: int
    status: jobs.Status
    delete: bool
    recorded: tuple[str, str | None] | None  # (run id, result) of the run the job ran
    written: asyncio.Future[None]


class _Session:
    """A connection of the runner's own, in autocommit (one round trip a statement, where a pool connection
    costs four: check, BEGIN, statement, COMMIT), set up as the app's connector sets up its connections;
    opened on first use, and again after it broke. With ``direct`` it connects to ``url`` itself."""

    def __init__(self, app: procrastinate.App, url: str, *, direct: bool = False) -> None:
        self.app = app
        self.url = url
        self.direct = direct
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._stack = contextlib.AsyncExitStack()

    async def _open(self) -> psycopg.AsyncConnection[Any]:
        connector = self.app.connector
        standalone = getattr(connector, "_get_standalone_connection", None)  # Procrastinate's, for its listener
        if standalone is not None and not self.direct:
            conn: psycopg.AsyncConnection[Any] = await self._stack.enter_async_context(standalone())
        else:
            conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True, **connect_kwargs())
            self._stack.push_async_callback(conn.close)
        loads = getattr(connector, "_json_loads", None)  # the app's JSON decoder for job arguments, if any
        if loads is not None:
            set_json_loads(loads, conn)
        return conn

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            await self.close()
            self._conn = await self._open()
        return self._conn

    async def rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        conn = await self.connection()
        try:
            return await queries.rows(conn, name, params)
        except psycopg.OperationalError:
            await self.close()
            raise

    async def close(self) -> None:
        self._conn = None
        with contextlib.suppress(Exception):
            await self._stack.aclose()
        self._stack = contextlib.AsyncExitStack()


class _Finisher:
    """Job ends written together: every end that arrives while a write is in flight goes into the next one."""

    def __init__(self, session: _Session, deadline: Callable[[], float | None]) -> None:
        self.session = session
        self.deadline = deadline
        self._pending: list[_End] = []
        self._writer: asyncio.Task[None] | None = None

    async def finish(
        self, job_id: int, status: jobs.Status, delete: bool, recorded: tuple[str, str | None] | None
    ) -> None:
        """Write the end of job ``job_id`` (and first what its run returned); raises what Procrastinate's
        finish would for it (for a job settled already: its "not found or not in doing" error)."""
        end = _End(job_id, status, delete, recorded, asyncio.get_running_loop().create_future())
        self._pending.append(end)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="agentlab-sched finish jobs")
        await end.written

    async def _write(self) -> None:
        batch: list[_End] = []
        try:
            await asyncio.sleep(0)  # the ends of this turn of the event loop join the first write
            while self._pending:
                batch, self._pending = self._pending[:MAX_FINISH], self._pending[MAX_FINISH:]
                await self._write_batch(batch)
                batch = []
        except BaseException as exc:  # cancelled with the event loop: nothing may wait forever
            for end in [*batch, *self._pending]:
                if not end.written.done():
                    end.written.set_exception(exc)
            self._pending = []
            raise
        finally:
            self._writer = None

    async def _write_batch(self, batch: list[_End]) -> None:
        params = {
            "ids": [e.job_id for e in batch],
            "statuses": [e.status.value for e in batch],
            "deletes": [e.delete for e in batch],
            "runs": [e.recorded[0] if e.recorded else None for e in batch],
            "results": [e.recorded[1] if e.recorded else None for e in batch],
        }
        try:
            # Through an outage, as the run middleware's bookkeeping: a body that finished keeps its end.
            [row] = await retrying(
                lambda: self.session.rows("finish_jobs", params),
                what=f"finishing {len(batch)} jobs",
                logger=logger,
                deadline=self.deadline,
            )
        except Exception as exc:
            if len(batch) == 1 or isinstance(exc, GiveUp):
                for end in batch:
                    _settle(end, exc)
                return
            logger.warning("finishing %d jobs together failed (%s); finishing them one by one", len(batch), exc)
            for end in batch:
                await self._write_batch([end])  # each job's error is its own
            return
        missing = set(row["missing"] or [])
        for end in batch:
            _settle(end, _not_doing(end.job_id) if end.job_id in missing else None)


def _not_doing(job_id: int) -> Exception:
    # What procrastinate_finish_job_v1 raises for a job that is not todo or doing (settled already).
    return pexc.ConnectorException(f'Job was not found or not in "doing" or "todo" status (job id: {job_id})')


def _settle(end: _End, error: BaseException | None) -> None:
    if end.written.done():
        return
    if error is None:
        end.written.set_result(None)
    else:
        end.written.set_exception(error)
