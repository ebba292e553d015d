"""`agentlab-sched fires`, `agentlab-sched runs list|show|approve|reject|resume|abandon|cancel` and
`agentlab-sched prune`: the ledger, the runs, and what people do with them (docs/cli.md, docs/runs.md).

A run is named by its id or its first characters (``1a2b3c`` or ``#1a2b3c``, as the ledger shows it).
`fires` and `runs list` show a page at a time, newest first: ``--before`` the last row of a page (a fire by
its id, a run by its id or its first characters) shows the next, by keyset on the ledger's order
((created_at, id), the indexes fires_created_idx and runs_created_idx), and a full page with more after it
ends with a line giving that option.
Refusals (approving twice, resuming a run that is not suspended, a bad status) print the message in
the CLI's locale on stderr and exit 2, through the root's one error handler.
"""

from __future__ import annotations

import getpass
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlab_sched import messages
from agentlab_sched._plain import plain
from agentlab_sched.cli import common
from agentlab_sched.errors import NotFound, SchedError, ValidationError

if TYPE_CHECKING:
    from agentlab_sched.runs import lifecycle

__all__ = ["fires_cmd", "prune_cmd", "runs_app"]

runs_app = typer.Typer(
    name="runs",
    help="Runs: list and show them; approve, reject, resume, abandon or cancel one.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of text.")]
RunId = Annotated[str, typer.Argument(help="The run's id or its first characters (e.g. 1a2b3c).", show_default=False)]
By = Annotated[str | None, typer.Option("--by", help="Who decides (default: your user name).", show_default=False)]
Comment = Annotated[str | None, typer.Option("--comment", help="What to tell the run and the record.")]
Segment = Annotated[
    int | None,
    typer.Option("--segment", help="The segment you mean to decide (refused if the run waits on another)."),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since", help="Only since this time (2026-10-05 09:00, UTC unless it has an offset) or age (2h, 7d)."
    ),
]
Limit = Annotated[int, typer.Option("--limit", min=1, help="At most this many rows.")]
BeforeFire = Annotated[
    str | None,
    typer.Option(
        "--before", help="The page after this fire (the id in the first column of the last row shown).",
        show_default=False,
    ),
]  # fmt: skip
BeforeRun = Annotated[
    str | None,
    typer.Option(
        "--before", help="The page after this run (the last one shown): its id or its first characters.",
        show_default=False,
    ),
]  # fmt: skip

#: The largest fire id (a bigint).
_MAX_FIRE_ID = 2**63 - 1
#: What refusing to find the run named by --before says, by the code of the refusal.
_BEFORE_RUN = {"run.bad_ref": "cli.before_bad_run", "run.not_found": "cli.before_no_run",
               "run.ambiguous": "cli.before_ambiguous_run"}  # fmt: skip


def _by(value: str | None) -> str:
    if value is not None:
        return value
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "cli"


def _since(value: str | None) -> datetime | None:
    """``--since``: an ISO time (UTC unless it has an offset) or an age back from now."""
    from agentlab_sched.runs import lifecycle

    if value is None:
        return None
    try:
        return datetime.now(UTC) - lifecycle.parse_age(value, "since")
    except ValidationError:
        pass
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValidationError("run.bad_since", "since", value=value) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _fire_id(value: str) -> int:
    """``fires --before``: a fire's id as the first column shows it (a positive whole number)."""
    text_value = value.strip()
    if not text_value.isascii() or not text_value.isdigit() or not 0 < int(text_value) <= _MAX_FIRE_ID:
        raise ValidationError("cli.before_bad_fire", "before", value=value)
    return int(text_value)


async def _fire_key(conn: Any, value: str, fire_id: int) -> tuple[datetime, int]:
    """``fires --before``: the (created_at, id) of fire ``fire_id``; refused, naming --before, when there
    is none."""
    from agentlab_sched.runs import lifecycle

    key = await lifecycle.fire_key(conn, fire_id)
    if key is None:
        raise ValidationError("cli.before_no_fire", "before", value=value)
    return key


async def _run_key(conn: Any, value: str) -> tuple[datetime, uuid.UUID]:
    """``runs list --before``: the (created_at, id) of the run ``value`` names, found as `runs show` finds
    it; a refusal names --before."""
    from agentlab_sched.runs import lifecycle

    try:
        found = await lifecycle.get_run(conn, value)
    except SchedError as exc:
        if exc.code not in _BEFORE_RUN:
            raise
        count = {"count": exc.params["count"]} if "count" in exc.params else {}
        raise ValidationError(_BEFORE_RUN[exc.code], "before", value=value, **count) from None
    return found.created_at, found.id


def _more(ctx: typer.Context, key: object) -> None:
    """The last line of a full page with more after it: the option that shows the next."""
    common.say(ctx, "cli.history_more", key=key)


def _when(value: datetime | None, tz: str) -> str:
    return messages.local_time(value, tz) if value is not None else ""


def _when_zoned(value: datetime | None, tz: str) -> str:
    """A time of `runs show`, with the zone it is read in (one run is read alone, without a zone column)."""
    return f"{messages.local_time(value, tz)} ({tz})" if value is not None else ""


_cell = common.cell


def _status(status: str, locale: str) -> str:
    return common.text(f"run.status.{status}", locale)


# ---------------------------------------------------------------------------------------------- fires


def fires_cmd(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Only this schedule's fires.", show_default=False)] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="started, skipped_overlap, skipped_misfire or failed_to_start."),
    ] = None,
    since: Since = None,
    before: BeforeFire = None,
    limit: Limit = 50,
    as_json: JsonOption = False,
) -> None:
    """The ledger, newest first: every fire, launched or skipped, and why; with its run's status. A page at
    a time: --before the id of the last fire shown."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    after = _since(since)
    typed = (before, _fire_id(before)) if before is not None else None  # refused before connecting

    async def fetch(conn: psycopg.AsyncConnection[Any]) -> list[lifecycle.Fire]:
        key = await _fire_key(conn, *typed) if typed is not None else None
        return await lifecycle.list_fires(conn, name, status=status, since=after, before=key, limit=limit + 1)

    found = common.run(ctx, fetch)
    rows, more = found[:limit], len(found) > limit
    if as_json:
        common.print_json([r.as_dict() for r in rows])
        return
    if not rows:
        common.say(ctx, "fire.none")
        return
    locale = common.state(ctx).locale
    # The first column is the fire's id: what --before takes.
    table = common.table(locale)
    table.add_column(common.label("id", locale), justify="right", no_wrap=True)
    for column in ("fire_at", "schedule", "kind", "status", "run", "reason"):
        table.add_column(common.label(column, locale), overflow="fold")
    for f in rows:
        run = f"#{str(f.run_id)[:6]} {_status(f.run_status, locale)}" if f.run_id and f.run_status else ""
        table.add_row(
            _cell(f.fire_id),
            _cell(common.text("cli.when_zone", locale, when=_when(f.fire_at, f.timezone), timezone=f.timezone)),
            _cell(f.schedule_name),
            _cell(common.term("fire.kind", f.kind, locale)),
            _cell(common.term("fire.status", f.status, locale)),
            _cell(run),
            _cell(f.reason),
        )
    common.out().print(table)
    if more:
        _more(ctx, rows[-1].fire_id)


# ----------------------------------------------------------------------------------------------- runs


@runs_app.command("list")
def list_cmd(
    ctx: typer.Context,
    schedule: Annotated[str | None, typer.Option("--schedule", help="Only this schedule's runs.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            help="queued, running, awaiting_approval, suspended, succeeded, failed, cancelled or timed_out.",
        ),
    ] = None,
    since: Since = None,
    before: BeforeRun = None,
    limit: Limit = 50,
    as_json: JsonOption = False,
) -> None:
    """Runs, newest first; a run waiting for a person says what it asks. A page at a time: --before the
    last run shown."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    after = _since(since)

    async def fetch(conn: psycopg.AsyncConnection[Any]) -> list[lifecycle.Run]:
        key = await _run_key(conn, before) if before is not None else None
        return await lifecycle.list_runs(conn, schedule, status=status, since=after, before=key, limit=limit + 1)

    found = common.run(ctx, fetch)
    rows, more = found[:limit], len(found) > limit
    if as_json:
        common.print_json([r.as_dict() for r in rows])
        return
    if not rows:
        common.say(ctx, "run.none")
        return
    locale = common.state(ctx).locale
    table = common.table(locale, "run", "schedule", "status", "segment", "created", "finished", "note")
    for r in rows:
        table.add_row(
            _cell(f"#{r.short_id}"),
            _cell(r.schedule_name or r.started_by),
            _cell(_status(r.status, locale)),
            _cell(r.segment),
            _cell(_when(r.created_at, r.timezone)),
            _cell(_when(r.finished_at, r.timezone)),
            _cell(_note(r, locale)),
        )
    common.out().print(table)
    if more:
        # The whole id: the first characters the table shows may name several runs in a large ledger.
        _more(ctx, rows[-1].id)


def _note(r: lifecycle.Run, locale: str) -> str:
    """What a person should know about a run in one line: what it waits for, or its error."""
    if r.waiting_for is not None:
        return common.text(
            "run.waiting_for",
            locale,
            segment=r.waiting_for.segment,
            title=r.waiting_for.title,
            since=_when(r.waiting_for.created_at, r.timezone),
        )
    return r.error or ""


@runs_app.command("show")
def show_cmd(ctx: typer.Context, run: RunId, as_json: JsonOption = False) -> None:
    """One run in full: its status, error or result, session, and every approval point."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    async def fetch(conn: psycopg.AsyncConnection[Any]) -> tuple[lifecycle.Run, list[lifecycle.Approval]]:
        found = await lifecycle.get_run(conn, run)
        return found, await lifecycle.approvals(conn, found.id)

    r, points = common.run(ctx, fetch)
    if as_json:
        data = r.as_dict()
        data["approvals"] = [plain(a) for a in points]
        common.print_json(data)
        return
    locale = common.state(ctx).locale
    tz = r.timezone
    rows: list[tuple[str, object]] = [
        ("run", f"#{r.short_id} ({r.id})"),
        ("schedule", r.schedule_name or ""),
        ("fire", _fire_text(r, locale)),
        ("task", r.task),
        ("inputs", _json_text(r.inputs)),
        ("status", _status(r.status, locale)),
        ("segment", r.segment),
        ("note", _note(r, locale)),
        ("started_by", r.started_by),
        ("created", _when_zoned(r.created_at, tz)),
        ("started", _when_zoned(r.started_at, tz)),
        ("finished", _when_zoned(r.finished_at, tz)),
        ("timeout", messages.duration(r.timeout, locale) if r.timeout else ""),
        ("deadline", _when_zoned(r.deadline_at, tz)),
        ("session_key", r.session_key or ""),
        ("result", _json_text(r.result) if r.result is not None else ""),
        ("job", r.job_id or ""),
    ]
    common.print_fields(locale, rows)
    if points:
        approvals = common.table(
            locale, "segment", "title", "status", "by", "at", "comment",
            title=common.label("approvals", locale), title_justify="left",
        )  # fmt: skip
        for a in points:
            approvals.add_row(
                _cell(a.segment),
                _cell(a.title),
                _cell(common.text(f"approval.status.{a.status}", locale)),
                _cell(a.decided_by if not a.decided_label else f"{a.decided_label} ({a.decided_by})"),
                _cell(_when(a.decided_at, tz)),
                _cell(a.comment),
            )
        common.out().print(approvals)


def _fire_text(r: lifecycle.Run, locale: str) -> str:
    if not r.fire_at:
        return ""
    return common.text(
        "cli.fire_text", locale, when=_when(r.fire_at, r.timezone), timezone=r.timezone,
        kind=common.term("fire.kind", r.kind, locale),
    )  # fmt: skip


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _report_run(ctx: typer.Context, r: lifecycle.Run, as_json: bool, code: str, **params: object) -> None:
    """What an action on a run prints: the run as JSON, or one line saying what was done."""
    if as_json:
        common.print_json(r.as_dict())
        return
    common.say(ctx, code, run=r.short_id, **params)


@runs_app.command("approve")
def approve_cmd(
    ctx: typer.Context, run: RunId, comment: Comment = None, segment: Segment = None, by: By = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Approve the run's pending approval: it continues in its next segment with its state."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    async def act(conn: psycopg.AsyncConnection[Any]) -> lifecycle.Run:
        return await lifecycle.approve(conn, run, _by(by), comment, segment)

    r = common.run(ctx, act)
    _report_run(ctx, r, as_json, "run.approved", segment=r.segment, next=r.segment + 1)


@runs_app.command("reject")
def reject_cmd(
    ctx: typer.Context, run: RunId, comment: Comment = None, segment: Segment = None, by: By = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Reject the run's pending approval: the run is cancelled."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    async def act(conn: psycopg.AsyncConnection[Any]) -> lifecycle.Run:
        return await lifecycle.reject(conn, run, _by(by), comment, segment)

    _report_run(ctx, common.run(ctx, act), as_json, "run.rejected")


#: `runs resume|abandon --suspended [SCHEDULE]`: every suspended run, or those of one schedule.
Suspended = Annotated[
    bool,
    typer.Option("--suspended", help="Every suspended run (of the schedule named instead of RUN, if any)."),
]
RunOrSchedule = Annotated[
    str | None,
    typer.Argument(
        help="The run's id or its first characters; with --suspended, a schedule's name.", show_default=False
    ),
]


@runs_app.command("resume")
def resume_cmd(
    ctx: typer.Context, run: RunOrSchedule = None, suspended: Suspended = False, by: By = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Re-queue a suspended run (its worker stopped): Procrastinate retries its job. With --suspended, every
    suspended run (of one schedule)."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    if suspended:
        _settle_suspended(ctx, lifecycle.resume_suspended, run, by, as_json, "run.resumed_suspended")
        return

    async def act(conn: psycopg.AsyncConnection[Any]) -> lifecycle.Run:
        return await lifecycle.resume(conn, _one_run(run), _by(by))

    _report_run(ctx, common.run(ctx, act), as_json, "run.resumed")


@runs_app.command("abandon")
def abandon_cmd(
    ctx: typer.Context, run: RunOrSchedule = None, suspended: Suspended = False, by: By = None,
    as_json: JsonOption = False,
) -> None:  # fmt: skip
    """Give up on a suspended run: it is cancelled. With --suspended, on every suspended run (of one
    schedule)."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    if suspended:
        _settle_suspended(ctx, lifecycle.abandon_suspended, run, by, as_json, "run.abandoned_suspended")
        return

    async def act(conn: psycopg.AsyncConnection[Any]) -> lifecycle.Run:
        return await lifecycle.abandon(conn, _one_run(run), _by(by))

    _report_run(ctx, common.run(ctx, act), as_json, "run.abandoned")


def _one_run(run: str | None) -> str:
    if run is None:
        raise ValidationError("run.run_or_suspended", "run_id")
    return run


#: What a run id typed for a schedule's name looks like: hex, with dashes, six characters or more.
_RUN_ID = re.compile(r"[0-9a-fA-F-]{6,36}")


def _settle_suspended(
    ctx: typer.Context,
    settle: Callable[..., Awaitable[int]],
    schedule: str | None,
    by: str | None,
    as_json: bool,
    code: str,
) -> None:
    """Resume or abandon every suspended run (of ``schedule``); one line (or JSON) says how many."""
    import psycopg

    async def act(conn: psycopg.AsyncConnection[Any]) -> int:
        try:
            return await settle(conn, schedule, _by(by))
        except NotFound as exc:
            # With --suspended the argument is a schedule; one that looks like a run id was meant as one.
            if schedule is not None and exc.code == "schedule.not_found" and _RUN_ID.fullmatch(schedule.lstrip("#")):
                raise ValidationError("run.suspended_takes_schedule", "run_id", value=schedule) from None
            raise

    count = common.run(ctx, act)
    if as_json:
        common.print_json({"schedule": schedule, "count": count})
        return
    scope = messages.term("run.scope_schedule", name=schedule) if schedule else messages.term("run.scope_all")
    common.say(ctx, code, count=count, scope=scope)


@runs_app.command("cancel")
def cancel_cmd(ctx: typer.Context, run: RunId, by: By = None, as_json: JsonOption = False) -> None:
    """Cancel a run that has not ended; a running one is aborted by its worker."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    async def act(conn: psycopg.AsyncConnection[Any]) -> tuple[lifecycle.Run, str]:
        return await lifecycle.cancel(conn, run, _by(by))

    r, outcome = common.run(ctx, act)
    if as_json:
        common.print_json({**r.as_dict(), "outcome": outcome})
        return
    common.say(ctx, "run.abort_requested" if outcome == "abort_requested" else "run.cancelled", run=r.short_id)


# ---------------------------------------------------------------------------------------------- prune


def prune_cmd(
    ctx: typer.Context,
    older_than: Annotated[
        str, typer.Option("--older-than", help="Remove finished history older than this (e.g. 30d, 12h).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Remove finished history older than --older-than: fires, runs, approvals, notifications and their
    Procrastinate jobs. Never the newest fire of a schedule, never a run that has not ended."""
    import psycopg

    from agentlab_sched.runs import lifecycle

    age = lifecycle.parse_age(older_than, "older_than")

    async def act(conn: psycopg.AsyncConnection[Any]) -> lifecycle.PruneReport:
        return await lifecycle.prune(conn, age)

    report = common.run(ctx, act)
    if as_json:
        common.print_json(report.as_dict())
        return
    locale = common.state(ctx).locale
    common.say(ctx, "run.pruned", older_than=messages.duration(age, locale), **report.as_dict())
