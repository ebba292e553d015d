"""Procrastinate's job manager as the workers of an app with the run middleware use it.

`agentlab_sched.install(app)` puts a `RunJobManager` in ``app.job_manager`` (deferring and the
``procrastinate`` CLI are unchanged). Around what a worker asks of it:

- finishing a job whose task the worker's app does not have (Procrastinate fails it before any
  middleware runs) first writes that into the run's error;
- finishing (or retrying) a job that is no longer ``doing`` is not an error: it was settled already (the
  run middleware handed it back, or an earlier attempt committed before its connection broke);
- a job the run middleware hands back (the worker stopped before the job's run could be looked up, so
  its body never started) is put back to todo instead of being finished: the run is queued again;
- a job retried, or finished while holding a lock (``buffer_one``, ``buffer_all``, ``cancel_other``
  schedules), wakes the worker to fetch again at once: no NOTIFY says that a job became todo again or
  that a job waiting behind a lock may start now, and the worker would otherwise wait for its next poll.

The worker outlives the database (a restart, a failover, a connection cut): Procrastinate's worker
stops at the first connection error of its fetch loop, its heartbeat or its listener, so here

- fetching waits out an outage (capped backoff, one log line per attempt) and finds nothing meanwhile;
  afterwards, a job this worker fetched while its connection broke (the fetch committed, its answer was
  lost) is handed back, so that it does not stay ``doing`` on a live worker for ever;
- finishing and retrying a job are retried until the database answers: a run in flight when the
  connection broke is settled, not left ``running``. A stopping worker gives up after a moment
  (`stop_soon`): the job then stays ``doing``, its worker stops heartbeating, and housekeeping
  suspends the run (or does what the schedule's ``on_interrupt`` says);
- the heartbeat, the periodic deferrer and the NOTIFY listener wait an outage out too; the worker's
  row is registered again if another worker pruned it meanwhile (its running jobs with it);
- once the database answers again, the workers look for jobs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import procrastinate
from procrastinate import exceptions as pexc
from procrastinate import jobs as pjobs
from procrastinate import manager

from agentlab_sched.database import queries
from agentlab_sched.database.reconnect import Backoff, GiveUp, bounded, describe, is_transient, retrying
from agentlab_sched.observe import presence
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

__all__ = ["RunJobManager"]

#: When to wake the workers after a job is retried: just after it is due, and once more a little later.
RETRY_WAKES = (0.05, 1.0)
#: What procrastinate_finish_job_v1 / procrastinate_retry_job_v2 raise for a job that is not doing.
_NOT_DOING = ("Job was not found or not in", "Job was not found or has an invalid status")
#: How long finishing a job waits out an outage before the worker goes on (seconds): the job is then
#: finished at the worker's next fetch or heartbeat that reaches the database, or, if the worker stops
#: first, left to housekeeping.
FINISH_PATIENCE = 10.0


def _settled_already(exc: BaseException) -> bool:
    # Procrastinate's ConnectorException carries the database's words in its cause; the batch worker's,
    # for a job its batch found settled, in itself.
    said = (str(exc), str(exc.__cause__)) if isinstance(exc, pexc.ConnectorException) else (str(exc),)
    return any(text in words for text in _NOT_DOING for words in said)


class RunJobManager(manager.JobManager):
    """A JobManager for the workers of ``app`` (see the module doc)."""

    def __init__(self, app: procrastinate.App) -> None:
        super().__init__(connector=app.connector)
        self.app = app
        self._wake: list[Callable[..., Awaitable[None]]] = []
        self._hand_back: set[int] = set()
        self._wakes: set[asyncio.Future[None]] = set()
        #: Jobs this process fetched and has not finished (by worker id).
        self._in_flight: dict[int, set[int]] = {}
        #: Workers whose start was reported (`presence.announce`).
        self._announced: set[int] = set()
        #: Workers whose fetch failed: a fetch may have committed without us learning of the job.
        self._orphans_possible: set[int] = set()
        self._give_up_at: float | None = None
        self._fetch_backoff = Backoff()
        self._beat_backoff = Backoff()
        #: Finishes (and retries) that waited out their patience: made at the next chance.
        self._unfinished: dict[int, Callable[[], Awaitable[None]]] = {}
        #: Called with the id Procrastinate gives a worker of this process each time one registers.
        self.on_register: list[Callable[[int], None]] = []

    # ------------------------------------------------------------------------------ stopping, waking

    def stop_soon(self, within: float) -> None:
        """The worker is stopping: calls retried through an outage give up ``within`` seconds from now."""
        self._give_up_at = time.monotonic() + within

    def resume(self) -> None:
        """The worker runs again (after a stop that was not the last one, as in tests)."""
        self._give_up_at = None

    @property
    def stopping(self) -> bool:
        return self._give_up_at is not None

    def _deadline(self, patience: float | None = None) -> Callable[[], float | None]:
        began = time.monotonic()

        def deadline() -> float | None:
            if self._give_up_at is not None:
                return self._give_up_at
            return None if patience is None else began + patience

        return deadline

    #: Whether an error of Procrastinate's finish or retry says the job was settled already.
    settled_already = staticmethod(_settled_already)

    def hand_back(self, job_id: int) -> None:
        """Put this job back to todo when the worker finishes it (see the module doc)."""
        self._hand_back.add(job_id)

    @contextlib.contextmanager
    def woken(self, on_notification: Callable[..., Awaitable[None]]) -> Iterator[None]:
        """While the block runs, `wake_workers` calls ``on_notification`` (a worker's NOTIFY handler)."""
        self._wake.append(on_notification)
        try:
            yield
        finally:
            self._wake.remove(on_notification)

    def finishes_alone(self, job: pjobs.Job, status: pjobs.Status) -> bool:
        """Whether ending ``job`` takes more than Procrastinate's statement (a job handed back, a task the
        app does not have): a worker that ends jobs together leaves those to `finish_job`."""
        return job.id in self._hand_back or self._unknown_task(job, status)

    def _unknown_task(self, job: pjobs.Job, status: pjobs.Status) -> bool:
        return status == pjobs.Status.FAILED and job.id is not None and job.task_name not in self.app.tasks

    async def finished(self, job: pjobs.Job, *, settled_already: bool) -> None:
        """What follows Procrastinate's statement that ended ``job`` (or a statement that ended it with
        others): a job settled already is no error; a job that held a lock wakes the workers."""
        if settled_already:
            logger.debug("job %s was settled already", job.id)
        self._done(job)
        if job.lock is not None:
            await self.wake_workers()

    async def listen_for_jobs(self, *, on_notification: Any, queues: Any = None) -> None:
        """Procrastinate's listener, listening again after a connection it could not make."""
        self._wake.append(on_notification)
        backoff = Backoff()
        try:
            while True:
                try:
                    await super().listen_for_jobs(on_notification=on_notification, queues=queues)
                    return  # it does not return unless it cannot listen at all
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    wait = backoff.next()
                    logger.warning(
                        "job listener: %s; listening again in %.1f s (attempt %d)",
                        describe(exc),
                        wait,
                        backoff.attempts,
                    )
                    await asyncio.sleep(wait)
                    await self.wake_workers()  # jobs deferred while nobody listened
        finally:
            self._wake.remove(on_notification)

    async def wake_workers(self) -> None:
        """Have this app's workers look for a job now (as a NOTIFY of a new job would)."""
        for wake in list(self._wake):
            with contextlib.suppress(Exception):
                await wake(channel="agentlab_sched", notification={"type": "job_inserted", "job_id": 0})

    def _wake_soon(self) -> None:
        task = asyncio.ensure_future(self.wake_workers())
        self._wakes.add(task)  # keep a reference until it ran
        task.add_done_callback(self._wakes.discard)

    def _wake_later(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._wake_soon)

    # ------------------------------------------------------------------------------ the worker's calls

    async def fetch_job(self, queues: Iterable[str] | None, worker_id: int) -> pjobs.Job | None:
        if self.stopping:
            return None
        if worker_id not in self._announced:  # a worker's first fetch: it started; say which queues it takes
            self._announced.add(worker_id)
            await presence.announce(self.app, worker_id, queues)
        try:
            if self._unfinished:
                await self._flush_unfinished()
            if worker_id in self._orphans_possible:
                await self._hand_back_orphans(worker_id)
            # A fetch waiting for a connection the pool cannot make must not hold up a stop.
            job = await bounded(lambda: super(RunJobManager, self).fetch_job(queues=queues, worker_id=worker_id),
                                lambda: self.stopping)  # fmt: skip
        except GiveUp:
            self._orphans_possible.add(worker_id)
            return None
        except Exception as exc:
            if not is_transient(exc):
                raise
            self._orphans_possible.add(worker_id)
            wait = self._fetch_backoff.next()
            logger.warning(
                "fetching jobs: %s; trying again in %.1f s (attempt %d)",
                describe(exc),
                wait,
                self._fetch_backoff.attempts,
            )
            self._wake_later(wait)
            return None
        if self._fetch_backoff.attempts:
            logger.info("fetching jobs: database reachable again after %d attempts", self._fetch_backoff.attempts)
            self._fetch_backoff.reset()
        if job is not None and job.id is not None:
            self._in_flight.setdefault(worker_id, set()).add(job.id)
        return job

    async def _hand_back_orphans(self, worker_id: int) -> None:
        """Jobs the database has as doing on this worker that it is not running: handed back."""
        ours = self._in_flight.get(worker_id, set())
        row = await queries.connector_one(self.connector, "jobs_doing_on_worker", worker=worker_id)
        for job_id in row["ids"]:
            if job_id not in ours:
                await queries.connector_one(self.connector, "hand_back_job", job=job_id)
                logger.warning("job %s was fetched while the connection broke: handed back", job_id)
        self._orphans_possible.discard(worker_id)

    def _done(self, job: pjobs.Job) -> None:
        for jobs in self._in_flight.values():
            jobs.discard(job.id or 0)

    async def finish_job(self, job: pjobs.Job, status: pjobs.Status, delete_job: bool) -> None:
        if await self._settle(job, lambda: self._finish(job, status, delete_job), "finishing"):
            await self.finished(job, settled_already=False)

    async def _settle(self, job: pjobs.Job, call: Callable[[], Awaitable[None]], what: str) -> bool:
        """Finish or retry a job through an outage (see FINISH_PATIENCE); whether it was done now."""
        try:
            await retrying(call, what=f"{what} job {job.id}", logger=logger, deadline=self._deadline(FINISH_PATIENCE))
        except GiveUp:
            if job.id is not None and not self.stopping:
                self._unfinished[job.id] = call
                logger.warning("job %s: %s it later, once the database answers", job.id, what)
            else:
                logger.warning("job %s is left doing; housekeeping will settle its run", job.id)
            return False
        self._done(job)
        return True

    async def _flush_unfinished(self) -> None:
        """The finishes that waited out their patience, once more each (the database may answer now)."""
        for job_id, call in list(self._unfinished.items()):
            try:
                await call()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                return
            del self._unfinished[job_id]
            for jobs in self._in_flight.values():
                jobs.discard(job_id)
            logger.info("job %s finished after the outage", job_id)

    async def _finish(self, job: pjobs.Job, status: pjobs.Status, delete_job: bool) -> None:
        if job.id in self._hand_back:
            row = await queries.connector_one(self.connector, "hand_back_job", job=job.id)
            self._hand_back.discard(job.id)
            if row["back"]:
                logger.info("job %s handed back: the worker stopped before its run was looked up", job.id)
                await self.wake_workers()
                return
        if self._unknown_task(job, status):
            await queries.connector_one(
                self.connector, "record_unknown_task", job=job.id, locale=Settings.from_env().locale
            )
        try:
            await super().finish_job(job=job, status=status, delete_job=delete_job)
        except pexc.ConnectorException as exc:
            if not _settled_already(exc):
                raise
            logger.debug("job %s was settled already", job.id)

    async def retry_job(
        self,
        job: pjobs.Job,
        retry_at: datetime.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        self._hand_back.discard(job.id or 0)  # a retry hands it back already

        async def retry() -> None:
            try:
                await super(RunJobManager, self).retry_job(
                    job, retry_at=retry_at, priority=priority, queue=queue, lock=lock
                )
            except pexc.ConnectorException as exc:
                if not _settled_already(exc):
                    raise
                logger.debug("job %s was settled already", job.id)

        await self._settle(job, retry, "retrying")
        # Due at retry_at (by this process's clock, a little ahead of the database's maybe): look then,
        # and once more a moment later.
        delay = 0.0 if retry_at is None else max(0.0, (retry_at - datetime.datetime.now(datetime.UTC)).total_seconds())
        for extra in RETRY_WAKES:
            self._wake_later(delay + extra)

    async def update_heartbeat(self, worker_id: int) -> None:
        try:
            if self._unfinished:
                await self._flush_unfinished()
            row = await queries.connector_one(self.connector, "worker_heartbeat", worker=worker_id)
            if not row["alive"]:
                # Pruned as stalled by another worker while we could not heartbeat: registered again,
                # with the jobs we are running (their worker was set NULL), so their runs are not suspended.
                running = sorted(self._in_flight.get(worker_id, set()))
                await queries.connector_one(self.connector, "worker_register_again", worker=worker_id, jobs=running)
                logger.warning("worker %s was pruned as stalled meanwhile: registered again", worker_id)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self._beat_backoff.next()
            logger.warning("heartbeat of worker %s: %s; trying again later", worker_id, describe(exc))
            return
        if self._beat_backoff.attempts:
            self._beat_backoff.reset()
            await self.wake_workers()

    async def defer_periodic_job(self, job: pjobs.Job, periodic_id: str, defer_timestamp: int) -> int | None:
        try:
            return await super().defer_periodic_job(job=job, periodic_id=periodic_id, defer_timestamp=defer_timestamp)
        except pexc.AlreadyEnqueued:
            raise
        except Exception as exc:
            if not is_transient(exc):
                raise
            logger.warning("periodic job %s not deferred: %s", job.task_name, describe(exc))
            return None

    async def list_jobs_to_abort_async(self, queue: str | None = None) -> Iterable[int]:
        try:
            return await super().list_jobs_to_abort_async(queue=queue)
        except Exception as exc:
            if not is_transient(exc):
                raise
            logger.warning("looking for jobs to abort: %s; trying again later", describe(exc))
            return []

    async def register_worker(self) -> int:
        worker_id = await super().register_worker()
        for hook in self.on_register:
            hook(worker_id)
        return worker_id

    async def unregister_worker(self, worker_id: int) -> None:
        self._in_flight.pop(worker_id, None)
        self._orphans_possible.discard(worker_id)
        try:
            await asyncio.wait_for(super().unregister_worker(worker_id), timeout=0.3 if self.stopping else None)
        except Exception as exc:
            if not (isinstance(exc, TimeoutError) or is_transient(exc)):
                raise
            logger.warning(
                "worker %s could not unregister (%s); it will be pruned as stalled", worker_id, describe(exc)
            )
