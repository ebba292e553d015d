"""`agentlab-sched schedules ...`: list, show, add, import, edit, rm, pause, resume, next."""

from __future__ import annotations

import csv
import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.text import Text

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.core import options as option_table
from agentlab_sched.errors import Conflict, SchedError

if TYPE_CHECKING:
    from agentlab_sched.core import cron as cronlib
    from agentlab_sched.schedules import admin

schedules_app = typer.Typer(
    name="schedules",
    help="Create, change and inspect schedules.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table.")]
Name = Annotated[str, typer.Argument(help="The schedule's name.", show_default=False)]


def _when(value: datetime | None, tz: str) -> str:
    """A time in the schedule's zone, ``YYYY-MM-DD HH:MM``."""
    return messages.local_time(value, tz) if value is not None else ""


def _next_text(s: admin.Schedule | admin.ScheduleStatus, locale: str, *, zone: bool = True) -> str:
    """The next fire, said for a person: its local time, or why there is none."""
    if not s.enabled:
        return common.text("cli.paused_note", locale)
    if s.next_run_at is not None:
        return f"{_when(s.next_run_at, s.timezone)} ({s.timezone})" if zone else _when(s.next_run_at, s.timezone)
    if s.replan is not None:
        return common.text("cli.not_planned", locale)
    return common.text("cli.no_next", locale)


def _clock(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM`` (seconds shown only when not zero), in the value's own zone."""
    return value.strftime("%Y-%m-%d %H:%M:%S" if value.second else "%Y-%m-%d %H:%M")


_cell = common.cell


# ---------------------------------------------------------------------------------------------- list


@schedules_app.command("list")
def list_cmd(
    ctx: typer.Context,
    after: Annotated[
        str | None, typer.Option("--after", help="The page after this name (the last one shown).", show_default=False)
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many schedules.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """The schedules by name, a page at a time: cron, next fire, last fire and run."""
    import psycopg

    from agentlab_sched.schedules import admin

    async def page(conn: psycopg.AsyncConnection[Any]) -> tuple[list[admin.ScheduleStatus], admin.ScheduleCount]:
        found = await admin.list_schedules(conn, after=after, limit=limit + 1)
        return found, await admin.count_schedules(conn)

    found, count = common.run(ctx, page)
    rows, more = found[:limit], len(found) > limit
    locale = common.state(ctx).locale
    if as_json:
        common.print_json([r.as_dict() for r in rows])
        return
    if not rows:
        common.say(ctx, "cli.no_schedules" if after is None else "cli.no_schedules_after", name=after)
        return
    table = common.table(locale, "name", "cron", "timezone", "task", "next_run", "last_fire", "last_run", "failures")
    for r in rows:
        last_fire = ""
        if r.last_fire_at:
            last_fire = f"{_when(r.last_fire_at, r.timezone)} {common.term('fire.status', r.last_fire_status, locale)}"
        table.add_row(
            _cell(r.name),
            _cell(r.cron),
            _cell(r.timezone),
            _cell(r.task),
            Text(_next_text(r, locale, zone=False), style="" if r.enabled else "yellow"),
            _cell(last_fire),
            _cell(common.term("run.status", r.last_run_status, locale)),
            _cell(r.consecutive_failures or ""),
        )
    common.out().print(table)
    if more:
        common.say(
            ctx, "cli.schedules_more_estimated" if count.estimated else "cli.schedules_more",
            shown=len(rows), total=count.total, name=rows[-1].name,
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------- show


@schedules_app.command("show")
def show_cmd(ctx: typer.Context, name: Name, as_json: JsonOption = False) -> None:
    """One schedule in full: its definition, its next fire, its last fire and run."""
    import psycopg

    from agentlab_sched.schedules import admin

    async def fetch(conn: psycopg.AsyncConnection[Any]) -> tuple[admin.Schedule, admin.ScheduleStatus]:
        return await admin.get(conn, name), await admin.status(conn, name)

    s, st = common.run(ctx, fetch)
    locale = common.state(ctx).locale
    if as_json:
        data = s.as_dict()
        data.update({k: v for k, v in st.as_dict().items() if k.startswith("last_") or k == "webhook"})
        common.print_json(data)
        return
    tz = s.timezone
    rows: list[tuple[str, object]] = [
        ("name", s.name),
        ("id", s.id),
        ("cron", s.cron),
        ("timezone", tz),
        ("task", s.task),
        ("inputs", messages_json(s.inputs)),
        ("enabled", messages.text(s.enabled, locale)),
        ("next_run", _next_text(s, locale)),
        ("paused", f"{_when(s.paused_at, tz)} {s.paused_reason or ''}".strip() if not s.enabled else ""),
        ("queue", s.queue),
        ("priority", s.priority),
        ("overlap", s.overlap),
        ("misfire_grace", messages.duration(s.misfire_grace, locale)),
        ("timeout", messages.duration(s.timeout, locale) if s.timeout else ""),
        ("catchup", common.text("cli.catchup_text", locale, catchup=s.catchup, max=s.max_catchup)),
        ("starts_at", _when(s.starts_at, tz)),
        ("ends_at", _when(s.ends_at, tz)),
        ("remaining_runs", s.remaining_runs),
        ("pause_after_failures", s.pause_after_failures),
        ("consecutive_failures", s.consecutive_failures),
        ("context", s.context),
        ("dst", f"dst_gap {s.dst_gap}, dst_repeat {s.dst_repeat}"),
        ("defined_in", s.defined_in),
        ("imported_from", s.imported_from),
        ("webhook", _webhook_text(s, locale)),
        ("last_fire", _last_fire_text(st, locale)),
        ("last_run", _last_run_text(st, locale)),
        ("version", s.version),
        ("updated", f"{_when(s.updated_at, tz)}"),
    ]
    common.print_fields(locale, rows)


def messages_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _webhook_text(s: admin.Schedule, locale: str) -> str:
    if not s.webhook_configured:
        return ""
    return common.text(
        "cli.webhook_text", locale, format=s.webhook_format or "generic", host=s.webhook_url_hint or "***",
        events=",".join(s.webhook_events),
        secret=common.text("cli.webhook_secret_set", locale) if s.webhook_has_secret else "",
    )  # fmt: skip


def _last_fire_text(st: admin.ScheduleStatus, locale: str) -> str:
    if st.last_fire_at is None:
        return ""
    text = common.text(
        "cli.last_fire_text", locale, when=_when(st.last_fire_at, st.timezone),
        kind=common.term("fire.kind", st.last_fire_kind, locale),
        status=common.term("fire.status", st.last_fire_status, locale),
    )  # fmt: skip
    return f"{text}: {st.last_fire_reason}" if st.last_fire_reason else text


def _last_run_text(st: admin.ScheduleStatus, locale: str) -> str:
    if not st.last_run_id:
        return ""
    return common.text(
        "cli.last_run_text", locale, status=common.term("run.status", st.last_run_status, locale),
        run=str(st.last_run_id)[:6],
    )  # fmt: skip


# ----------------------------------------------------------------------------------------- add, edit

Cron = Annotated[str | None, typer.Option("--cron", help='Cron expression, e.g. "0 9 * * 1-5" or @daily.')]
Task = Annotated[str | None, typer.Option("--task", help="Procrastinate task name, e.g. demo.echo.")]
Inputs = Annotated[
    str | None,
    typer.Option(
        "--inputs",
        help='Input template as a JSON object (or @file.json), e.g. \'{"day": "{{ schedule.date }}"}\'.',
    ),
]
Timezone = Annotated[str | None, typer.Option("--timezone", "--tz", help="IANA time zone, e.g. Asia/Shanghai.")]


def _option_parameter(option: option_table.Option) -> inspect.Parameter:
    """The typer parameter of one schedule option: durations and times are read as text, then parsed."""
    cli_type: type = str if option.py_type in (timedelta, datetime) else option.py_type
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[cli_type | None, typer.Option(option.flag, help=option.help_text)],
    )


F = TypeVar("F", bound=Callable[..., Any])


def with_schedule_options(command: F) -> F:
    """Give ``command`` one CLI option per schedule option (``core/options.py``), before its own
    keyword-only parameters; their values reach it in ``**given``."""

    signature = inspect.signature(command, eval_str=True)
    params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.KEYWORD_ONLY), len(params))
    extra = [_option_parameter(o) for o in option_table.OPTIONS]
    command.__signature__ = signature.replace(parameters=params[:at] + extra + params[at:])  # type: ignore[attr-defined]
    return command


def _options(values: dict[str, Any], timezone: str) -> dict[str, Any]:
    """The schedule options given on the command line as admin arguments (durations and times parsed;
    times without an offset read in ``timezone``)."""
    from agentlab_sched.core import cron as cronlib

    given = {o.name: values[o.name] for o in option_table.OPTIONS if values.get(o.name) is not None}
    result: dict[str, Any] = {}
    for name, value in given.items():
        kind = option_table.by_name(name).py_type
        if kind is timedelta:
            value = common.parse_duration(value, name)
        elif kind is datetime:
            cronlib.check_timezone(timezone)
            value = common.parse_time(value, name, timezone)
        result[name] = value
    return result


@schedules_app.command("add")
@with_schedule_options
def add_cmd(
    ctx: typer.Context,
    name: Name,
    cron: Annotated[str, typer.Option("--cron", help='Cron expression, e.g. "0 9 * * 1-5" or @daily.')],
    task: Annotated[str, typer.Option("--task", help="Procrastinate task name, e.g. demo.echo.")],
    inputs: Inputs = None,
    timezone: Annotated[str, typer.Option("--timezone", "--tz", help="IANA time zone, e.g. Asia/Shanghai.")] = "UTC",
    *,
    update: Annotated[bool, typer.Option("--update", help="Update the schedule if the name exists.")] = False,
    as_json: JsonOption = False,
    **given: Any,
) -> None:
    """Add a schedule (refused if the name exists, unless --update)."""
    import psycopg

    from agentlab_sched.schedules import admin

    options = _options(given, timezone)
    data = common.parse_json_object(inputs) if inputs is not None else {}

    async def add(conn: psycopg.AsyncConnection[Any]) -> tuple[admin.Schedule, bool]:
        if update:
            try:
                await admin.get(conn, name)
                existed = True
            except SchedError:
                existed = False
            return await admin.schedule(conn, name, cron, task, data, timezone=timezone, **options), existed
        try:
            return await admin.create(conn, name, cron, task, data, timezone=timezone, **options), False
        except Conflict as exc:
            if exc.code == "schedule.name_taken":
                raise Conflict("cli.exists", "name", name=name) from None
            raise

    s, existed = common.run(ctx, add)
    if as_json:
        common.print_json(s.as_dict())
        return
    locale = common.state(ctx).locale
    if existed:
        common.say(ctx, "cli.updated", name=s.name, version=s.version, next=_next_text(s, locale))
    else:
        common.say(ctx, "cli.added", name=s.name, id=s.id, next=_next_text(s, locale))


@schedules_app.command("add-sql")
def add_sql_cmd(
    ctx: typer.Context,
    name: Name,
    cron: Annotated[str, typer.Option("--cron", help='Cron expression, e.g. "0 3 * * *" or @daily.')],
    command: Annotated[str, typer.Option("--command", help="The SQL to run, e.g. VACUUM ANALYZE.")],
    database: Annotated[
        str | None, typer.Option("--database", help="The database it runs in (default: this one).")
    ] = None,
    username: Annotated[
        str | None, typer.Option("--username", help="The role it runs as (default: your login role).")
    ] = None,
    statement_timeout: Annotated[
        str, typer.Option("--statement-timeout", help="Cancel the command after this long: 30s, 5m, 1h.")
    ] = "1h",
    timezone: Annotated[str, typer.Option("--timezone", "--tz", help="IANA time zone, e.g. Asia/Shanghai.")] = "UTC",
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it paused.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Add (or update) a schedule that runs a SQL command as a role, like pg_cron's schedule_in_database."""
    import psycopg

    from agentlab_sched.schedules import admin

    limit = common.parse_duration(statement_timeout, "statement_timeout")

    async def add(conn: psycopg.AsyncConnection[Any]) -> tuple[admin.Schedule, bool]:
        try:
            await admin.get(conn, name)
            existed = True
        except SchedError:
            existed = False
        s = await admin.schedule_sql(
            conn, name, cron, command, database=database, username=username, timezone=timezone,
            statement_timeout=limit, enabled=False if disabled else None,
        )  # fmt: skip
        return s, existed

    s, existed = common.run(ctx, add)
    if as_json:
        common.print_json(s.as_dict())
        return
    locale = common.state(ctx).locale
    if existed:
        common.say(ctx, "cli.updated", name=s.name, version=s.version, next=_next_text(s, locale))
    else:
        common.say(ctx, "cli.added", name=s.name, id=s.id, next=_next_text(s, locale))
    common.say(ctx, "sql.runs_as", username=s.inputs["username"], database=s.inputs["database"])


@schedules_app.command("sync")
def sync_cmd(
    ctx: typer.Context,
    app_path: Annotated[str, typer.Option("--app", help="Dotted path of the Procrastinate app, e.g. host.app.")],
    adopt: Annotated[
        bool, typer.Option("--adopt", help="Make this code the newest deployment (to go back to older code).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Sync the schedules the app's code declares (@agentlab_sched.schedule), as its workers do at start."""
    import psycopg

    from agentlab_sched.schedules import code

    locale = common.state(ctx).locale
    procrastinate_app = common.load_app(app_path, common.state(ctx).database().url)

    async def run(conn: psycopg.AsyncConnection[Any]) -> code.SyncReport:
        return await code.sync(conn, procrastinate_app, adopt=adopt, locale=locale)

    report = common.run(ctx, run)
    if as_json:
        common.print_json(report.as_dict())
        return
    common.say(
        ctx, "cli.sync.result", fingerprint=report.fingerprint, created=len(report.created),
        updated=len(report.updated), unchanged=len(report.unchanged), gone=len(report.paused_gone),
    )  # fmt: skip
    if report.newer_elsewhere:
        common.err().print(Text(common.text("cli.sync.newer", locale, names=", ".join(report.newer_elsewhere))))
    for name, reason in report.refused.items():
        common.err().print(Text(common.text("cli.sync.refused", locale, name=name, reason=reason)))


@schedules_app.command("edit")
@with_schedule_options
def edit_cmd(
    ctx: typer.Context,
    name: Name,
    cron: Cron = None,
    timezone: Timezone = None,
    task: Task = None,
    inputs: Inputs = None,
    *,
    rename: Annotated[str | None, typer.Option("--rename", help="A new name.")] = None,
    clear: Annotated[
        list[str] | None,
        typer.Option("--clear", help=f"Unset an optional field ({', '.join(option_table.CLEARABLE)}); repeatable."),
    ] = None,
    expected_version: Annotated[
        int | None,
        typer.Option("--expected-version", help="Refuse if someone changed it since this version."),
    ] = None,
    webhook_url: Annotated[str | None, typer.Option("--webhook-url", help="Notification webhook URL.")] = None,
    webhook_format: Annotated[
        str | None, typer.Option("--webhook-format", help="generic, feishu, wecom or dingtalk.")
    ] = None,
    webhook_secret: Annotated[str | None, typer.Option("--webhook-secret", help="Signing secret of the bot.")] = None,
    webhook_events: Annotated[
        str | None,
        typer.Option("--webhook-events", help="Comma-separated: finished,failed,awaiting_approval."),
    ] = None,
    as_json: JsonOption = False,
    **given: Any,
) -> None:
    """Change some fields of a schedule; what is not given stays as it is."""
    import psycopg

    from agentlab_sched import notify
    from agentlab_sched.schedules import admin

    changes_given = any(v is not None for v in (cron, timezone, task, inputs, rename, *given.values())) or bool(clear)
    webhook_given = any(v is not None for v in (webhook_url, webhook_format, webhook_secret, webhook_events))
    if not changes_given and not webhook_given:
        raise SchedError("cli.nothing_to_change")
    data = common.parse_json_object(inputs) if inputs is not None else None
    settings = common.state(ctx).settings() if webhook_given else None

    async def edit(conn: psycopg.AsyncConnection[Any]) -> tuple[admin.Schedule, int]:
        before = await admin.get(conn, name)
        zone = timezone or before.timezone
        options = _options(given, zone)
        async with conn.transaction():
            s = before
            if changes_given:
                s = await admin.alter(
                    conn, name, cron=cron, timezone=timezone, task=task, inputs=data,
                    new_name=rename, expected_version=expected_version, clear=clear or (), **options,
                )  # fmt: skip
            elif expected_version is not None and expected_version != before.version:
                raise Conflict(
                    "schedule.stale_version", "expected_version",
                    name=name, expected=expected_version, actual=before.version,
                )  # fmt: skip
            if webhook_given:
                # Only what was given: set_webhook keeps what it is not told (url=None would remove it).
                given_webhook: dict[str, Any] = {
                    key: value
                    for key, value in (("url", webhook_url), ("format", webhook_format),
                                       ("secret", webhook_secret), ("events", webhook_events))
                    if value is not None
                }  # fmt: skip
                assert settings is not None  # read above whenever a webhook option is given
                await notify.set_webhook(conn, s.name, settings=settings, **given_webhook)
                s = await admin.get(conn, s.name)
        return s, before.version

    s, version_before = common.run(ctx, edit)
    if as_json:
        common.print_json(s.as_dict())
        return
    locale = common.state(ctx).locale
    if s.version == version_before:
        common.say(ctx, "cli.unchanged", name=s.name, version=s.version)
    else:
        common.say(ctx, "cli.updated", name=s.name, version=s.version, next=_next_text(s, locale))


# ------------------------------------------------------------------------------- rm, pause, resume


@schedules_app.command("rm")
def rm_cmd(
    ctx: typer.Context,
    name: Name,
    missing_ok: Annotated[bool, typer.Option("--missing-ok", help="Succeed when there is no such schedule.")] = False,
) -> None:
    """Delete a schedule and its fire history (its runs stay)."""
    import psycopg

    from agentlab_sched.schedules import admin

    async def rm(conn: psycopg.AsyncConnection[Any]) -> bool:
        return await admin.unschedule(conn, name)

    if common.run(ctx, rm):
        common.say(ctx, "cli.removed", name=name)
    elif not missing_ok:
        raise SchedError("schedule.not_found", "name", name=name)


#: CSV columns whose cells are JSON (an object, a list), not text.
_JSON_COLUMNS = frozenset({"inputs"})


def _read_definitions(path: str) -> list[dict[str, Any]]:
    """The definitions in ``path``: CSV with a header of schedule()'s argument names (an empty cell is not
    given; ``inputs`` as JSON), or JSON lines (one object a line; blank lines skipped)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except OSError as e:
        raise SchedError("cli.import_unreadable", "file", path=path, reason=e.strerror or type(e).__name__) from None
    except UnicodeError as e:
        raise SchedError("cli.import_unreadable", "file", path=path, reason=type(e).__name__) from None
    rows: list[dict[str, Any]] = []
    if path.lower().endswith(".csv") or not text.lstrip().startswith("{"):
        for line, record in enumerate(csv.DictReader(text.splitlines()), start=2):
            row: dict[str, Any] = {}
            for column, cell in record.items():
                if column is None or cell is None or cell == "":
                    continue
                if column in _JSON_COLUMNS:
                    try:
                        row[column] = json.loads(cell)
                    except ValueError as e:
                        raise SchedError(
                            "cli.import_bad_cell", "file", path=path, line=line, column=column, reason=str(e)
                        ) from None
                else:
                    row[column] = cell
            rows.append(row)
        return rows
    for line, content in enumerate(text.splitlines(), start=1):
        if not content.strip():
            continue
        try:
            value = json.loads(content)
        except ValueError as e:
            raise SchedError("cli.import_bad_line", "file", path=path, line=line, reason=str(e)) from None
        if not isinstance(value, dict):
            raise SchedError("cli.import_bad_line", "file", path=path, line=line, reason=type(value).__name__)
        rows.append(value)
    return rows


@schedules_app.command("import")
def import_cmd(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="A CSV file (a header of schedule()'s argument names) or JSON lines.")],
) -> None:
    """Create many schedules from a file, all of them or none (a refusal names the definition)."""
    import psycopg

    from agentlab_sched.schedules import admin

    definitions = _read_definitions(path)

    async def run(conn: psycopg.AsyncConnection[Any]) -> int:
        return await admin.schedule_many(conn, definitions)

    common.say(ctx, "cli.imported", count=common.run(ctx, run), path=path)


@schedules_app.command("pause")
def pause_cmd(
    ctx: typer.Context,
    name: Name,
    reason: Annotated[str | None, typer.Option("--reason", help="Why, shown in schedules list/show.")] = None,
) -> None:
    """Stop firing a schedule until it is resumed."""
    import psycopg

    from agentlab_sched.schedules import admin

    async def pause(conn: psycopg.AsyncConnection[Any]) -> tuple[bool, admin.Schedule]:
        was_enabled = (await admin.get(conn, name)).enabled
        return was_enabled, await admin.pause(conn, name, reason)

    was_enabled, s = common.run(ctx, pause)
    common.say(ctx, "cli.paused" if was_enabled else "cli.already_paused", name=s.name)


@schedules_app.command("resume")
def resume_cmd(ctx: typer.Context, name: Name) -> None:
    """Fire a paused schedule again, from the next due time after now (missed times are not replayed)."""
    import psycopg

    from agentlab_sched.schedules import admin

    async def resume(conn: psycopg.AsyncConnection[Any]) -> tuple[bool, admin.Schedule]:
        was_enabled = (await admin.get(conn, name)).enabled
        return was_enabled, await admin.resume(conn, name)

    was_enabled, s = common.run(ctx, resume)
    locale = common.state(ctx).locale
    common.say(ctx, "cli.already_running" if was_enabled else "cli.resumed", name=s.name, next=_next_text(s, locale))


# ---------------------------------------------------------------------------------------------- next


def _has_dst(tz: str, near: datetime) -> bool:
    """Whether the zone's offset differs between January and July of that year (it keeps DST)."""
    from agentlab_sched.core import cron as cronlib

    zone = cronlib.check_timezone(tz)
    return datetime(near.year, 1, 1, tzinfo=zone).utcoffset() != datetime(near.year, 7, 1, tzinfo=zone).utcoffset()


def _dst_note(expr: cronlib.Cron, t: cronlib.Upcoming, locale: str) -> str:
    """Why a coming fire is special (DST), in the reader's language; empty when it is not."""
    if t.note == "dst_gap":
        return common.text("cli.note_dst_gap", locale)
    if t.note == "dst_skipped":
        return common.text("cli.note_dst_skipped", locale, time=t.nominal.strftime("%H:%M") if t.nominal else "")
    if t.note != "dst_repeat":
        return ""
    if not expr.fixed_time or expr.sub_hourly:
        return common.text("cli.note_dst_repeat_copy_second" if t.fold else "cli.note_dst_repeat_copy_first", locale)
    if expr.dst_repeat == "both":
        return common.text("cli.note_dst_repeat_both_second" if t.fold else "cli.note_dst_repeat_both_first", locale)
    return common.text("cli.note_dst_repeat_last" if expr.dst_repeat == "last" else "cli.note_dst_repeat", locale)


@schedules_app.command("next")
def next_cmd(
    ctx: typer.Context,
    name: Name,
    count: Annotated[int, typer.Option("-n", "--count", help="How many fire times (1-1000).")] = 5,
    as_json: JsonOption = False,
) -> None:
    """The coming fire times in UTC and local time, marking DST-moved and repeated-hour fires."""
    import psycopg

    from agentlab_sched.core import planner
    from agentlab_sched.schedules import admin

    async def fetch(conn: psycopg.AsyncConnection[Any]) -> tuple[admin.Schedule, list[Any]]:
        return await admin.get(conn, name), await admin.upcoming(conn, name, count, skipped=True)

    s, times = common.run(ctx, fetch)
    locale = common.state(ctx).locale
    expr = planner.cron_of(vars(s))
    if as_json:
        common.print_json(
            [
                {
                    "at": t.at.isoformat(),
                    "local": t.local.isoformat(),
                    "timezone": s.timezone,
                    "note": t.note,
                    "fold": t.fold,
                    "nominal": t.nominal.isoformat() if t.nominal else None,
                }
                for t in times
            ]
        )
        return
    table = common.table(locale, "number", "utc", ("local", {"timezone": s.timezone}), "note")
    number = 0
    for t in times:
        number += t.note != "dst_skipped"
        table.add_row(
            "" if t.note == "dst_skipped" else str(number),
            _clock(t.at.astimezone(UTC)),
            _cell(f"{_clock(t.local)} {t.local.strftime('%Z %z')}"),
            Text(_dst_note(expr, t, locale), style="yellow"),
        )
    if expr.fixed_time and expr.every is None and _has_dst(s.timezone, times[0].at if times else datetime.now(UTC)):
        common.err().print(Text(common.text("cli.dst_policy", locale, gap=s.dst_gap, repeat=s.dst_repeat)))
    if not s.enabled:
        common.err().print(Text(common.text("cli.paused_note", locale), style="yellow"))
    common.out().print(table)
