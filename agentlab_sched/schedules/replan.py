"""Re-planning: the next fire of schedules that were created or changed.

The tick fires what is due; this computes ``next_run_at`` after a change, so the admin API (and the tick,
for changes made in SQL) fill it at once.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import psycopg

from agentlab_sched.core import planner
from agentlab_sched.database import queries
from agentlab_sched.database.clock import db_now
from agentlab_sched.errors import SchedError


async def replan(conn: psycopg.AsyncConnection[Any], ids: list[int] | None = None, now: datetime | None = None) -> int:
    """Compute next_run_at for schedules whose ``replan`` is set (created or changed); returns how many.

    Only the next due time is computed here; a due time that is already past is left for the tick to
    fire through the usual rules. An explicit ``now`` (the Python API's) is the moment of the change;
    without one, each row's ``replan_at`` says when it was changed.
    """
    explicit = now is not None
    if now is None:
        now = await db_now(conn)
    async with conn.transaction():
        rows = await queries.rows(conn, "lock_replans", {"ids": ids})
        updates = []
        for row in rows:
            state = planner.ScheduleState.from_row(row)
            if explicit:
                state = dataclasses.replace(state, replan_at=now)
            try:
                nxt = planner.next_after_change(state, now)
            except SchedError:
                nxt = None
            updates.append((row["id"], nxt, row["replan"]))
        if updates:
            ids, nexts, replans = (list(column) for column in zip(*updates, strict=True))
            await queries.execute(conn, "set_next_runs", {"ids": ids, "nexts": nexts, "replans": replans})
    return len(rows)
