"""Housekeeping, a periodic task beside the tick: finished tick jobs pruned (they would pile up at one
a second), and the run lifecycle checks (timeouts, suspended runs, retention)."""

from __future__ import annotations

import logging
from typing import Any

import procrastinate

from .settings import Settings

logger = logging.getLogger(__name__)

#: Every 10 seconds: a suspended run is detected within Procrastinate's 30 s stall window plus this.
CRON = "*/10 * * * * *"


async def housekeeping(context: procrastinate.JobContext, timestamp: int) -> dict[str, Any]:
    """One round of housekeeping on the app's database."""
    from .blueprint import scheduler_connection

    settings = Settings.from_env()
    async with scheduler_connection(context.app, settings) as conn:
        cur = await conn.execute("SELECT agentlab_sched.housekeeping() AS done")
        row = await cur.fetchone()
    return row["done"] if row else {}


def register(bp: procrastinate.Blueprint) -> None:
    task = bp.task(name="housekeeping", queueing_lock="agentlab_sched:housekeeping", pass_context=True)(
        housekeeping
    )
    bp.periodic(cron=CRON, periodic_id="housekeeping")(task)
