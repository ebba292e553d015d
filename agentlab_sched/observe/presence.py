"""Workers say what they run (``agentlab_sched.workers``), so that `agentlab-sched doctor` can tell which are
alive, which queues they take, whether anything fires, and how far their clocks are from the database's.

- `agentlab-sched worker` reports every :data:`REPORT_EVERY` seconds (:class:`Presence`) and removes its row when
  it stops;
- a plain `procrastinate worker` whose app went through ``install(app)`` reports its queues when it starts
  (:func:`announce`, from its first fetch: a worker whose queues leave out the tick's never runs one of our
  jobs, and doctor must still name it), then when it runs an agentlab-sched job, at most every
  :data:`REPORT_EVERY` seconds (:func:`seen_by`); its liveness is Procrastinate's heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import weakref
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import procrastinate

from agentlab_sched.database import queries
from agentlab_sched.waiting import wait_at_most

logger = logging.getLogger(__name__)

#: Seconds between two reports of one worker.
REPORT_EVERY = 10.0
#: The key of ``additional_context`` by which `agentlab-sched worker` marks its own jobs.
CONTEXT_KEY = "agentlab_sched_worker"


@dataclass(frozen=True)
class Report:
    """What one worker runs."""

    name: str
    kind: str
    app: str | None
    queues: tuple[str, ...] | None
    concurrency: int | None
    fires: bool = False
    notifies: bool = False
    procrastinate_worker_id: int | None = None
    host: str = socket.gethostname()
    pid: int = os.getpid()

    def params(self) -> dict[str, Any]:
        return {
            "worker": self.name, "kind": self.kind, "host": self.host, "pid": self.pid, "app": self.app,
            "queues": list(self.queues) if self.queues else None, "concurrency": self.concurrency,
            "fires": self.fires, "notifies": self.notifies, "clock": datetime.now(UTC),
            "procrastinate_worker_id": self.procrastinate_worker_id,
        }  # fmt: skip


def worker_name() -> str:
    """A name for this process's worker: host, pid and start time."""
    return f"{socket.gethostname()}:{os.getpid()}:{int(time.time())}"


async def send(app: procrastinate.App, report: Report) -> None:
    await queries.connector_one(app.connector, "report_worker", **report.params())


#: Apps whose `agentlab-sched worker` is running and reporting itself (its Procrastinate worker's start is
#: not announced as a plain worker's).
_self_reporting: weakref.WeakSet[Any] = weakref.WeakSet()


def reports_itself(app: procrastinate.App) -> bool:
    """Whether an `agentlab-sched worker` of ``app`` runs in this process and reports itself."""
    return app in _self_reporting


def plain_name(worker_id: int | None) -> str:
    """The name a plain Procrastinate worker is reported under (host, pid and Procrastinate's id of it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{worker_id}"


async def announce(app: procrastinate.App, worker_id: int, queues: Any) -> None:
    """A plain Procrastinate worker of ``app`` started (its first fetch): report the queues it takes. Best
    effort and bounded: the worker runs anyway."""
    if reports_itself(app):
        return
    report = Report(
        name=plain_name(worker_id),
        kind="procrastinate",
        app=None,
        queues=tuple(queues) if queues else None,
        concurrency=None,  # not known to the job manager; the first of our jobs it runs reports it
        procrastinate_worker_id=worker_id,
    )
    try:
        await asyncio.wait_for(send(app, report), timeout=2.0)
    except Exception as exc:
        logger.debug("could not report this worker's queues: %s", exc)


class Presence:
    """`agentlab-sched worker`'s reports: one at start, then every :data:`REPORT_EVERY` seconds; removed at stop."""

    def __init__(self, app: procrastinate.App, report: Report) -> None:
        self.app = app
        self.report = report
        self._registered = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def update(self, **changes: Any) -> None:
        self.report = replace(self.report, **changes)

    async def start(self) -> None:
        _self_reporting.add(self.app)
        try:
            await send(self.app, self.report)
        except Exception as exc:  # the worker runs anyway; doctor will not see it until a report gets through
            logger.warning("could not report this worker to the database: %s", exc)
        self._task = asyncio.create_task(self._loop(), name="agentlab-sched-presence")

    async def _loop(self) -> None:
        failing = False
        while True:
            await self._until_due()
            try:
                await send(self.app, self.report)
                failing = False
            except Exception as exc:
                if not failing:  # once per outage, not every 10 s
                    logger.warning("could not report this worker to the database: %s", exc)
                failing = True

    def registered(self, worker_id: int) -> None:
        """Procrastinate gave the worker this id (at each start of its worker): reported at once, so that a
        run's job leads to its host and pid."""
        if worker_id != self.report.procrastinate_worker_id:
            self.update(procrastinate_worker_id=worker_id)
            self._registered.set()

    async def _until_due(self) -> None:
        """Wait until the next report is due: :data:`REPORT_EVERY` seconds, or the worker got a new id (no polling:
        an idle worker wakes only when something is due)."""
        await wait_at_most(self._registered, REPORT_EVERY)
        self._registered.clear()

    async def stop(self) -> None:
        _self_reporting.discard(self.app)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                queries.connector_one(self.app.connector, "forget_worker", worker=self.report.name),
                timeout=1.0,
            )


_seen: dict[int, float] = {}


async def seen_by(context: procrastinate.JobContext, worker: Any) -> None:
    """A plain Procrastinate worker runs an agentlab-sched job: report it (throttled; never raises)."""
    if context.additional_context and context.additional_context.get(CONTEXT_KEY):
        return  # `agentlab-sched worker` reports itself
    key = id(worker)
    now = time.monotonic()
    if now - _seen.get(key, -REPORT_EVERY) < REPORT_EVERY:
        return
    _seen[key] = now
    worker_id = getattr(worker, "worker_id", None)
    queues = getattr(worker, "queues", None)
    report = Report(
        name=plain_name(worker_id),
        kind="procrastinate",
        app=None,
        queues=tuple(queues) if queues else None,
        concurrency=getattr(worker, "concurrency", None),
        procrastinate_worker_id=worker_id,
    )
    try:
        await send(context.app, report)
    except Exception as exc:  # reporting is best effort: the job runs anyway
        logger.debug("could not report this worker: %s", exc)
