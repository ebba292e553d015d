"""Helpers for firing-engine tests: schedules written straight into the table, ledger readers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from agentlab_sched.settings import Settings
from tests.support.rows import Conn

#: Shanghai 2026-10-05 (a Monday) 09:00.
NINE = datetime(2026, 10, 5, 1, 0, tzinfo=UTC)
EN = Settings(locale="en")
ZH = Settings(locale="zh-CN")


async def make_schedule(
    conn: Conn,
    name: str = "store-report",
    *,
    cron: str = "0 9 * * *",
    timezone: str = "Asia/Shanghai",
    task: str = "demo.echo",
    inputs: dict[str, Any] | None = None,
    next_run_at: datetime | None = NINE,
    grace: timedelta = timedelta(hours=1),
    register: bool = True,
    **columns: Any,
) -> int:
    """A schedule as a worker would have planned it: next_run_at set, nothing to replan."""
    if register:
        await conn.execute("SELECT agentlab_sched.register_tasks(%s)", ([task],))
    values = {
        "name": name,
        "cron": cron,
        "timezone": timezone,
        "task": task,
        "inputs": json.dumps({"stat_date": "{{ schedule.yesterday }}"} if inputs is None else inputs),
        "next_run_at": next_run_at,
        "misfire_grace": grace,
        "replan": None,
        **columns,
    }
    cols = ", ".join(values)
    marks = ", ".join(f"%({k})s" for k in values)
    cur = await conn.execute(f"INSERT INTO agentlab_sched.schedules ({cols}) VALUES ({marks}) RETURNING id", values)
    row = await cur.fetchone()
    assert row is not None
    return row["id"]


async def fires(conn: Conn, sid: int) -> list[dict[str, Any]]:
    cur = await conn.execute("SELECT * FROM agentlab_sched.fires WHERE schedule_id = %s ORDER BY fire_at, id", (sid,))
    return await cur.fetchall()


async def runs_of(conn: Conn, sid: int) -> list[dict[str, Any]]:
    cur = await conn.execute("SELECT * FROM agentlab_sched.runs WHERE schedule_id = %s ORDER BY created_at, id", (sid,))
    return await cur.fetchall()


async def next_of(conn: Conn, sid: int) -> datetime | None:
    cur = await conn.execute("SELECT next_run_at FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    row = await cur.fetchone()
    assert row is not None
    return row["next_run_at"]


async def job(conn: Conn, job_id: int) -> dict[str, Any]:
    cur = await conn.execute("SELECT * FROM procrastinate_jobs WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    assert row is not None
    return row


async def set_job_status(conn: Conn, job_id: int, status: str) -> None:
    await conn.execute("UPDATE procrastinate_jobs SET status = %s WHERE id = %s", (status, job_id))
