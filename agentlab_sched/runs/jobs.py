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
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import procrastinate
from procrastinate import exceptions as pexc
from procrastinate import jobs as pjobs
from procrastinate import manager

from agentlab_sched.database import queries
from agentlab_sched.database.reconnect import retrying
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

__all__ = ["RunJobManager"]

#: When to wake the workers after a job is retried: just after it is due, and once more a little later.
RETRY_WAKES = (0.05, 1.0)
#: What procrastinate_finish_job_v1 / procrastinate_retry_job_v2 raise for a job that is not doing.
_NOT_DOING = ("Job was not found or not in", "Job was not found or has an invalid status")


def _settled_already(exc: BaseException) -> bool:
    cause = exc.__cause__ if isinstance(exc, pexc.ConnectorException) else exc
    return any(text in str(cause) for text in _NOT_DOING)


class RunJobManager(manager.JobManager):
    """A JobManager for the workers of ``app`` (see the module doc)."""

    def __init__(self, app: procrastinate.App) -> None:
        super().__init__(connector=app.connector)
        self.app = app
        self._wake: list[Callable[..., Awaitable[None]]] = []
        self._hand_back: set[int] = set()
        self._wakes: set[asyncio.Future[None]] = set()

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

    async def listen_for_jobs(self, *, on_notification: Any, queues: Any = None) -> None:
        with self.woken(on_notification):
            await super().listen_for_jobs(on_notification=on_notification, queues=queues)

    async def wake_workers(self) -> None:
        """Have this app's workers look for a job now (as a NOTIFY of a new job would)."""
        for wake in list(self._wake):
            with contextlib.suppress(Exception):
                await wake(channel="agentlab_sched", notification={"type": "job_inserted", "job_id": 0})

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
        if job.lock is not None:
            await self.wake_workers()

    async def finish_job(self, job: pjobs.Job, status: pjobs.Status, delete_job: bool) -> None:
        if job.id in self._hand_back:
            self._hand_back.discard(job.id)
            row = await queries.connector_one(self.connector, "hand_back_job", job=job.id)
            if row["back"]:
                logger.info("job %s handed back: the worker stopped before its run was looked up", job.id)
                await self.wake_workers()
                return
        if self._unknown_task(job, status):
            await retrying(
                lambda: queries.connector_one(
                    self.connector, "record_unknown_task", job=job.id, locale=Settings.from_env().locale
                ),
                what=f"recording that the task of job {job.id} is unknown",
                logger=logger,
            )
        settled = False
        try:
            await super().finish_job(job=job, status=status, delete_job=delete_job)
        except pexc.ConnectorException as exc:
            if not _settled_already(exc):
                raise
            settled = True
        await self.finished(job, settled_already=settled)

    async def retry_job(
        self,
        job: pjobs.Job,
        retry_at: datetime.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        self._hand_back.discard(job.id or 0)  # a retry hands it back already
        try:
            await super().retry_job(job, retry_at=retry_at, priority=priority, queue=queue, lock=lock)
        except pexc.ConnectorException as exc:
            if not _settled_already(exc):
                raise
            logger.debug("job %s was settled already", job.id)
        # Due at retry_at (by this process's clock, a little ahead of the database's maybe): look then,
        # and once more a moment later.
        delay = 0.0 if retry_at is None else max(0.0, (retry_at - datetime.datetime.now(datetime.UTC)).total_seconds())
        loop = asyncio.get_running_loop()
        for extra in RETRY_WAKES:
            loop.call_later(delay + extra, self._wake_soon)

    def _wake_soon(self) -> None:
        task = asyncio.ensure_future(self.wake_workers())
        self._wakes.add(task)  # keep a reference until it ran
        task.add_done_callback(self._wakes.discard)
