"""Housekeeping, a periodic task beside the tick (every 10 s on any worker; a queueing lock keeps one
waiting at a time): SQL ``agentlab_sched.housekeeping(...)`` (sql/80_housekeeping.sql)

- deletes finished jobs of the scheduler's own tick and housekeeping (they would pile up at one a second);
- suspends runs whose worker stopped heartbeating (Procrastinate's stalled jobs, 30 s): with this task
  every 10 s a dead worker's run is suspended within about 40 s;
- aborts runs past their deadline (a worker with the run middleware does this on time; this is the
  fallback) and reports tasks that ignore the abort;
- at most once every ``PRUNE_EVERY`` seconds per worker: makes the history tables' partitions for the
  periods ahead (2 days; a month for the monthly audit: sql/72_partitions.sql) and gives rows found in a
  DEFAULT partition one of their own; then, with ``AGENTLAB_SCHED_RETENTION`` (e.g. ``30d``) or else the
  database's retention (``agentlab_sched.set_retention``), drops the partitions past it (``prune``), and at most
  ``PRUNE_BATCH`` of Procrastinate's finished jobs.

`agentlab-sched worker` runs the same round in its own process every `ROUND_EVERY` seconds (`Housekeeper`)
rather than as a periodic job; plain `procrastinate worker` hosts run the periodic task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import timedelta
from typing import Any

import procrastinate

from agentlab_sched import limits
from agentlab_sched.database import queries
from agentlab_sched.database.connections import scheduler_connection
from agentlab_sched.database.reconnect import describe
from agentlab_sched.errors import SchedError
from agentlab_sched.runs.lifecycle import parse_age
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Seconds between two rounds (CRON says the same for the periodic task of plain workers).
ROUND_EVERY = 10.0
#: Every 10 seconds (Procrastinate's cron puts seconds last): a dead worker's run is suspended within
#: Procrastinate's 30 s stall window plus this.
CRON = "* * * * * */10"
#: A worker that stopped heartbeating this long ago is gone (Procrastinate's stalled-worker window).
STALLED_AFTER = limits.STALL_WINDOW
#: How long a task may take to stop after a timeout abort before its run says it ignores the abort.
ABORT_GRACE = limits.ABORT_GRACE
#: Seconds between two automatic prunes by one worker, and the most runs one prune removes.
PRUNE_EVERY = 600.0
PRUNE_BATCH = 1000

_pruned_at: dict[int, float] = {}
_warned: set[str] = set()


def retention(settings: Settings) -> timedelta | None:
    """``AGENTLAB_SCHED_RETENTION`` as a duration; None when unset or unreadable (said once in the log)."""
    if not settings.retention:
        return None
    try:
        return parse_age(settings.retention, "retention")
    except SchedError as exc:
        if settings.retention not in _warned:
            _warned.add(settings.retention)
            logger.error("automatic pruning is off: %s", exc.message(settings.locale))
        return None


async def run_once(app: procrastinate.App, settings: Settings | None = None) -> dict[str, Any]:
    """One round of housekeeping on the app's database; what it did."""
    settings = settings or Settings.from_env()
    keep = retention(settings)
    now = time.monotonic()
    due = now - _pruned_at.get(id(app), -PRUNE_EVERY) >= PRUNE_EVERY
    async with scheduler_connection(app, settings) as conn:
        done: dict[str, Any] = await queries.value(
            conn,
            "housekeeping",
            {
                "stalled_after": STALLED_AFTER,
                "keep": keep,
                "abort_grace": ABORT_GRACE,
                "batch": PRUNE_BATCH,
                "prune_due": due,
            },
        )
    if due:
        _pruned_at[id(app)] = now
    done = done or {}
    if done.get("suspended") or done.get("timeouts"):
        logger.info("housekeeping: %s", done)
    return done


async def housekeeping(context: procrastinate.JobContext, timestamp: int) -> dict[str, Any]:
    """One round of housekeeping on the app's database (the periodic task of plain workers)."""
    return await run_once(context.app)


class Housekeeper:
    """`agentlab-sched worker`'s housekeeping: a round every `ROUND_EVERY` seconds in the worker itself, in place
    of the periodic task (a job a round: deferred, taken, run and ended, for one statement of work; most of
    an idle worker's CPU)."""

    def __init__(self, app: procrastinate.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name="agentlab-sched-housekeeping")

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await run_once(self.app, self.settings)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database away, a lock: the next round tries again
                logger.warning("housekeeping: %s; next round in %.0f s", describe(exc), ROUND_EVERY)
            await asyncio.sleep(ROUND_EVERY)


def register(bp: procrastinate.Blueprint, queue: str) -> None:
    """Add the housekeeping task and its 10-second periodic schedule to the scheduler's blueprint."""
    task = bp.task(name="housekeeping", queue=queue, queueing_lock="agentlab_sched:housekeeping", pass_context=True)(
        housekeeping
    )
    bp.periodic(cron=CRON, periodic_id="housekeeping")(task)
