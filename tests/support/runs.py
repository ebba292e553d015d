"""Runs moved by hand as a worker and its middleware would move them: a manual fire through launch(),
the rows of a run, a schedule and its approvals, an approval point asked for."""

from __future__ import annotations

import json
from typing import Any

from tests.support.rows import Conn


async def launch(conn: Conn, sid: int, who: str = "manual:test") -> dict[str, Any]:
    """One manual fire through launch() (the one path of every fire); returns the new run."""
    outcome = await launch_outcome(conn, sid, who)
    assert outcome["status"] == "started", outcome
    return await run_row(conn, outcome["run_id"])


async def launch_outcome(conn: Conn, sid: int, who: str) -> dict[str, Any]:
    """What launch() answered for one manual fire of schedule ``sid``."""
    async with conn.transaction():  # launch() wants the schedule's row locked by its caller
        await conn.execute("SELECT 1 FROM agentlab_sched.schedules WHERE id = %s FOR UPDATE", (sid,))
        cur = await conn.execute(
            """SELECT agentlab_sched.launch(s, clock_timestamp(), 'manual', NULL, %s) AS r
               FROM agentlab_sched.schedules s WHERE s.id = %s""",
            (who, sid),
        )
        row = await cur.fetchone()
        assert row is not None
        outcome: dict[str, Any] = row["r"]
        return outcome


async def in_locale(conn: Conn, locale: str) -> None:
    """The locale SQL renders reasons and errors in, for this session."""
    await conn.execute("SELECT set_config('agentlab_sched.locale', %s, false)", (locale,))


async def run_row(conn: Conn, rid: Any) -> dict[str, Any]:
    """The run's row."""
    cur = await conn.execute("SELECT * FROM agentlab_sched.runs WHERE id = %s", (rid,))
    row = await cur.fetchone()
    assert row is not None
    return row


async def approvals_of(conn: Conn, rid: Any) -> list[dict[str, Any]]:
    """The run's approval points, by segment."""
    cur = await conn.execute("SELECT * FROM agentlab_sched.approvals WHERE run_id = %s ORDER BY segment", (rid,))
    return list(await cur.fetchall())


async def ask(conn: Conn, run: dict[str, Any], title: str, state: Any) -> int | None:
    """The middleware's part when the task raises AwaitApproval(title, state)."""
    cur = await conn.execute(
        "SELECT agentlab_sched.await_approval(%s, %s, %s, %s::jsonb) AS seg",
        (run["id"], run["job_id"], title, json.dumps(state)),
    )
    row = await cur.fetchone()
    assert row is not None
    segment: int | None = row["seg"]
    return segment


async def schedule_row(conn: Conn, sid: int) -> dict[str, Any]:
    """The schedule's row."""
    cur = await conn.execute("SELECT * FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    row = await cur.fetchone()
    assert row is not None
    return row
