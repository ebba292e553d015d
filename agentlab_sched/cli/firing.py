"""`agentlab-sched schedules trigger|backfill`: fire directly and report the outcome when they return."""

from __future__ import annotations

import getpass
from typing import Any

import typer
from rich.table import Table

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.errors import NotFound
from agentlab_sched.firing import tick


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


def _outcome_row(outcome: tick.FireOutcome, tz: str) -> dict[str, Any]:
    return {
        "fire_id": outcome.fire_id,
        "fire_at": outcome.fire_at,
        "status": outcome.status,
        "run_id": outcome.run_id,
        "reason": outcome.reason,
        "local": messages.local_time(outcome.fire_at, tz) if outcome.fire_at else None,
    }


def _show(outcomes: list[tick.FireOutcome], tz: str, as_json: bool) -> None:
    rows = [_outcome_row(o, tz) for o in outcomes]
    if as_json:
        common.print_json(rows)
        return
    table = Table()
    for col in ("fire", "fire at", "status", "run", "reason"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r["fire_id"]),
            f"{r['local']} ({tz})",
            r["status"],
            f"#{r['run_id'][:6]}" if r["run_id"] else "",
            r["reason"] or "",
        )
    common.out().print(table)


async def _timezone(conn: Any, name: str) -> str:
    cur = await conn.execute("SELECT timezone FROM agentlab_sched.schedules WHERE name = %s", (name,))
    row = await cur.fetchone()
    if row is None:
        raise NotFound("schedule.not_found", "name", name=name)
    return row["timezone"]


def register(schedules_app: typer.Typer) -> None:
    """Add trigger and backfill to the `schedules` sub-app."""

    @schedules_app.command("trigger")
    def trigger_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="schedule name"),
        inputs: str = typer.Option(None, "--inputs", help="JSON object replacing the schedule's inputs"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        """Fire a schedule now (kind manual), through the same rules as every fire."""
        override = common.parse_json_object(inputs) if inputs is not None else None
        settings = common.state(ctx).settings()

        async def go(conn: Any) -> tuple[list[tick.FireOutcome], str]:
            tz = await _timezone(conn, name)
            outcome = await tick.trigger(conn, name, override, requested_by=f"manual:{_who()}", settings=settings)
            return [outcome], tz

        outcomes, tz = common.run(ctx, go)
        _show(outcomes, tz, as_json)

    @schedules_app.command("backfill")
    def backfill_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="schedule name"),
        start: str = typer.Option(..., "--from", help="first instant (ISO 8601; schedule's zone if no offset)"),
        end: str = typer.Option(..., "--to", help="last instant (ISO 8601; schedule's zone if no offset)"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        """Fire one backfill fire per due time in [from, to] (at most 1000)."""
        settings = common.state(ctx).settings()

        async def go(conn: Any) -> tuple[list[tick.FireOutcome], str]:
            tz = await _timezone(conn, name)
            outcomes = await tick.backfill(
                conn,
                name,
                common.parse_time(start, "from", tz),
                common.parse_time(end, "to", tz),
                requested_by=f"backfill:{_who()}",
                settings=settings,
            )
            return outcomes, tz

        outcomes, tz = common.run(ctx, go)
        _show(outcomes, tz, as_json)
