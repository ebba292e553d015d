"""The database clock: one clock for all workers and commands."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from agentlab_sched.database import queries


async def db_now(conn: psycopg.AsyncConnection[Any]) -> datetime:
    """The database clock: one clock for all workers."""
    now: datetime = await queries.value(conn, "db_now")
    return now
