"""`agentlab-sched schedules trigger|backfill`: fire directly and report the outcome when they return."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import typer
from rich.table import Table
from rich.text import Text

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.errors import NotFound

if TYPE_CHECKING:
    from agentlab_sched.firing import requests


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


def _outcome_row(outcome: requests.FireOutcome, tz: str) -> dict[str, Any]:
    """One fire for --json: its instant in UTC and in the schedule's zone, both with their offset."""
    return {
        "fire_id": outcome.fire_id,
        "fire_at": outcome.fire_at.isoformat() if outcome.fire_at else None,
        "local": outcome.fire_at.astimezone(ZoneInfo(tz)).isoformat() if outcome.fire_at else None,
        "timezone": tz,
        "status": outcome.status,
        "run_id": outcome.run_id,
        "reason_code": outcome.reason_code,
        "reason": outcome.reason,
    }


def _table(outcomes: list[requests.FireOutcome], tz: str, locale: str) -> Table:
    table = common.table(locale, "fire", "fire_at", "status", "run", "reason")
    for o in outcomes:
        when = messages.local_time(o.fire_at, tz) if o.fire_at else ""
        table.add_row(
            common.cell(o.fire_id),
            common.cell(common.text("cli.when_zone", locale, when=when, timezone=tz) if when else ""),
            common.cell(common.term("fire.status", o.status, locale)),
            common.cell(f"#{o.run_id[:6]}" if o.run_id else ""),
            common.cell(o.reason or ""),
        )
    return table


def _paused_note(ctx: typer.Context, name: str, outcomes: list[requests.FireOutcome]) -> None:
    if any(o.paused for o in outcomes):
        text = common.text("trigger.fired_while_paused", common.state(ctx).locale, name=name)
        common.err().print(Text(text, style="yellow"))


def _exit_status(outcomes: list[requests.FireOutcome]) -> None:
    """Exit non-zero when a fire did not start because something is wrong (failed_to_start)."""
    if any(o.status == "failed_to_start" for o in outcomes):
        raise typer.Exit(common.EXIT_NOT_STARTED)


async def _timezone(conn: Any, name: str) -> str:
    from agentlab_sched.database import queries

    row = await queries.one(conn, "schedule_timezone", {"name": name})
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
        even_if_paused: bool = typer.Option(
            False, "--even-if-paused", help="fire even though the schedule is paused (it stays paused)"
        ),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        """Fire a schedule now (kind manual), through the same rules as every fire.

        Exits 3 when the fire failed to start (failed_to_start); a paused schedule is refused unless
        --even-if-paused.
        """
        from agentlab_sched.firing import requests

        override = common.parse_json_object(inputs) if inputs is not None else None
        settings = common.state(ctx).settings()

        async def go(conn: Any) -> tuple[list[requests.FireOutcome], str]:
            tz = await _timezone(conn, name)
            outcome = await requests.trigger(
                conn, name, override, even_if_paused=even_if_paused, requested_by=f"manual:{_who()}", settings=settings
            )
            return [outcome], tz

        outcomes, tz = common.run(ctx, go)
        _paused_note(ctx, name, outcomes)
        if as_json:
            common.print_json([_outcome_row(o, tz) | {"paused": o.paused} for o in outcomes])
        else:
            common.out().print(_table(outcomes, tz, common.state(ctx).locale))
        _exit_status(outcomes)

    @schedules_app.command("backfill")
    def backfill_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="schedule name"),
        start: str = typer.Option(..., "--from", help="first instant (ISO 8601; schedule's zone if no offset)"),
        end: str = typer.Option(..., "--to", help="last instant (ISO 8601; schedule's zone if no offset)"),
        overlap: str = typer.Option(
            "buffer_all", "--overlap", help="overlap policy of the backfill's fires (default buffer_all: in order)"
        ),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        """Fire one backfill fire per due time in [from, to] (at most 1000) and say what was launched.

        Exits 3 when a fire failed to start (failed_to_start).
        """
        from agentlab_sched.firing import requests

        settings = common.state(ctx).settings()

        async def go(conn: Any) -> tuple[requests.BackfillResult, str]:
            tz = await _timezone(conn, name)
            result = await requests.backfill(
                conn,
                name,
                common.parse_time(start, "from", tz),
                common.parse_time(end, "to", tz),
                overlap=overlap,
                requested_by=f"backfill:{_who()}",
                settings=settings,
            )
            return result, tz

        result, tz = common.run(ctx, go)
        outcomes = list(result)
        if as_json:
            common.print_json(
                {
                    "request_id": result.request_id,
                    "launched": result.launched,
                    "not_launched": result.not_launched,
                    "counts": result.counts,
                    "fires": [_outcome_row(o, tz) for o in outcomes],
                }
            )
        else:
            common.out().print(_table(outcomes, tz, common.state(ctx).locale))
            _say_summary(ctx, result)
        _exit_status(outcomes)


def _say_summary(ctx: typer.Context, result: requests.BackfillResult) -> None:
    """One line: how many fires were launched, and how many were not, by status."""
    total = sum(result.counts.values())
    if result.not_launched == 0:
        common.say(ctx, "cli.backfill_all_launched", count=total)
        return
    locale = common.state(ctx).locale
    details = ", ".join(
        f"{n} {common.term('fire.status', status, locale)}"
        for status, n in sorted(result.counts.items())
        if status != "started"
    )
    common.say(ctx, "cli.backfill_some_not_launched", launched=result.launched, total=total, details=details)
