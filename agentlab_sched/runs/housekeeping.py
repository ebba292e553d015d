"""Housekeeping, a periodic task beside the tick (every 10 s on any worker; a queueing lock keeps one
waiting at a time): SQL ``agentlab_sched.housekeeping(...)`` (sql/80_housekeeping.sql)

- deletes finished jobs of the scheduler's own tick and housekeeping (they would pile up at one a second);
- suspends runs whose worker stopped heartbeating (Procrastinate's stalled jobs, 30 s): with this task
  every 10 s a dead worker's run is suspended within about 40 s;
- aborts runs past their deadline (a worker with the run middleware does this on time; this is the
  fallback) and reports tasks that ignore the abort;
- with ``AGENTLAB_SCHED_RETENTION`` (e.g. ``30d``), prunes older history, at most once every
  ``PRUNE_EVERY`` seconds per worker and ``PRUNE_BATCH`` runs at a time.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import procrastinate

from agentlab_sched.database import queries
from agentlab_sched.database.connections import scheduler_connection
from agentlab_sched.errors import SchedError
from agentlab_sched.runs.lifecycle import parse_age
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Every 10 seconds (Procrastinate's cron puts seconds last): a dead worker's run is suspended within
#: Procrastinate's 30 s stall window plus this.
CRON = "* * * * * */10"
#: A worker that stopped heartbeating this long ago is gone (Procrastinate's stalled-worker window).
STALLED_AFTER = timedelta(seconds=30)
#: How long a task may take to stop after a timeout abort before its run says it ignores the abort.
ABORT_GRACE = timedelta(seconds=10)
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


async def housekeeping(context: procrastinate.JobContext, timestamp: int) -> dict[str, Any]:
    """One round of housekeeping on the app's database."""
    settings = Settings.from_env()
    keep = retention(settings)
    now = time.monotonic()
    if keep is not None and now - _pruned_at.get(id(context.app), -PRUNE_EVERY) < PRUNE_EVERY:
        keep = None
    async with scheduler_connection(context.app, settings) as conn:
        done: dict[str, Any] = await queries.value(
            conn,
            "housekeeping",
            {"stalled_after": STALLED_AFTER, "keep": keep, "abort_grace": ABORT_GRACE, "batch": PRUNE_BATCH},
        )
    if keep is not None:
        _pruned_at[id(context.app)] = now
    done = done or {}
    if done.get("suspended") or done.get("timeouts"):
        logger.info("housekeeping: %s", done)
    return done


def register(bp: procrastinate.Blueprint, queue: str) -> None:
    """Add the housekeeping task and its 10-second periodic schedule to the scheduler's blueprint."""
    task = bp.task(name="housekeeping", queue=queue, queueing_lock="agentlab_sched:housekeeping", pass_context=True)(
        housekeeping
    )
    bp.periodic(cron=CRON, periodic_id="housekeeping")(task)
