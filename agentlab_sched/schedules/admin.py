"""The Python admin API for schedules: the SQL API (docs/sql.md) with typed results.

Every function takes an open psycopg ``AsyncConnection`` with dict rows, as ``db.connect()`` gives
(autocommit or not; the work of one call happens in one transaction, a savepoint when the caller
already has one open) and either
returns a frozen dataclass or raises a :class:`~agentlab_sched.errors.SchedError`:
:class:`~agentlab_sched.errors.ValidationError` for bad input (``err.field`` names it),
:class:`~agentlab_sched.errors.NotFound` for an unknown name, :class:`~agentlab_sched.errors.Conflict`
for a stale ``expected_version`` or a name already taken. ``str(err)`` is the message in the
deployment's locale; ``err.message("zh-CN")`` renders another.

Cron and time zone are checked in Python first (``cron.parse``, ``cron.check_timezone``), then again by
the database with the same language and the same messages; everything else is checked once, by the
database's validation trigger, so a refusal reads the same from SQL, Python and the CLI.

Unlike the SQL functions, which leave ``next_run_at`` to a worker, these functions plan the next fire
before they return (``replan`` on the same connection), so ``next_run_at`` is filled at once.

    from agentlab_sched.schedules import admin
    from agentlab_sched import database as db

    async with await db.connect(url) as conn:
        s = await admin.schedule(conn, "daily-report", "0 9 * * *", "demo.echo",
                                 {"day": "{{ schedule.yesterday }}"}, timezone="Asia/Shanghai")
        s = await admin.alter(conn, "daily-report", cron="30 9 * * *", expected_version=s.version)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from agentlab_sched import errors, limits
from agentlab_sched._plain import plain
from agentlab_sched.core import cron as cronlib
from agentlab_sched.core import options as option_table
from agentlab_sched.core import planner
from agentlab_sched.core.cron import Upcoming
from agentlab_sched.database import queries
from agentlab_sched.database.clock import db_now
from agentlab_sched.errors import NotFound, SchedError
from agentlab_sched.messages import CATALOG, term
from agentlab_sched.schedules.replan import replan

__all__ = [
    "CLEARABLE",
    "COUNT_BOUND",
    "MAX_UPCOMING",
    "OPTIONS",
    "SchedError",
    "Schedule",
    "ScheduleCount",
    "ScheduleStatus",
    "alter",
    "count_schedules",
    "create",
    "create_or_update",
    "get",
    "list_schedules",
    "pause",
    "pause_because",
    "resume",
    "schedule",
    "schedule_many",
    "schedule_sql",
    "status",
    "unschedule",
    "upcoming",
]

#: The optional keyword arguments of :func:`schedule` and :func:`create` (the schedule options).
OPTIONS = option_table.NAMES

#: The most fire times :func:`upcoming` lists at once (``schedules next -n``).
MAX_UPCOMING = 1000

#: Optional fields ``alter(..., clear=[...])`` can reset to "not set".
CLEARABLE = option_table.CLEARABLE


class _Record:
    """Shared by the result dataclasses (built by psycopg's ``class_row``): JSON-ready data."""

    def __post_init__(self) -> None:
        # Arrays arrive as lists: keep the frozen record hashable and its sequences immutable.
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` and scripts: times in ISO 8601, durations in seconds."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Schedule(_Record):
    """A schedule as stored (docs/sql.md); webhook URL and secret are never exposed, only whether set."""

    id: int
    name: str
    cron: str
    timezone: str
    task: str
    inputs: Mapping[str, Any]
    queue: str
    priority: int
    overlap: str
    misfire_grace: timedelta
    timeout: timedelta | None
    enabled: bool
    catchup: str
    max_catchup: int
    starts_at: datetime | None
    ends_at: datetime | None
    remaining_runs: int | None
    pause_after_failures: int | None
    consecutive_failures: int
    paused_reason: str | None
    paused_at: datetime | None
    context: str
    dst_gap: str
    dst_repeat: str
    on_interrupt: str
    session_key: str | None
    #: The job it was imported from (pg_cron, Procrastinate), or None.
    imported_from: str | None
    #: Where in code it is defined (schedules as code), or None: then edits from SQL are refused.
    defined_in: str | None
    #: The pending due time; None while a worker has yet to plan it (``replan`` set), or when disabled
    #: or finished.
    next_run_at: datetime | None
    replan: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    webhook_format: str | None
    webhook_url_hint: str | None
    webhook_configured: bool
    webhook_has_secret: bool
    webhook_events: tuple[str, ...]


@dataclass(frozen=True)
class ScheduleStatus(_Record):
    """One row of the ``schedule_status`` view: the schedule, its next fire, its last fire and run."""

    id: int
    name: str
    cron: str
    timezone: str
    task: str
    enabled: bool
    next_run_at: datetime | None
    replan: str | None
    last_fire_id: int | None
    last_fire_at: datetime | None
    last_fire_kind: str | None
    last_fire_status: str | None
    last_fire_reason_code: str | None
    last_fire_reason: str | None
    last_run_id: uuid.UUID | None
    last_run_status: str | None
    last_run_created_at: datetime | None
    last_run_finished_at: datetime | None
    consecutive_failures: int
    pause_after_failures: int | None
    paused_reason: str | None
    paused_at: datetime | None
    overlap: str
    remaining_runs: int | None
    version: int
    updated_at: datetime
    webhook_format: str | None
    webhook_url_hint: str | None
    webhook_has_secret: bool
    webhook_events: tuple[str, ...] | None
    #: Format and URL hint, e.g. ``feishu open.feishu.cn``; None without a webhook.
    webhook: str | None


#: The Python type of every argument the admin functions take besides the options. Not ``inputs``: any JSON
#: reaches the database, which says what kind of value it needs, as it does to SQL and the CLI.
_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "cron": str, "task": str, "timezone": str, "new_name": str,
    "expected_version": int, "reason": str, "now": datetime, "after": datetime, "n": int, "command": str,
    "database": str, "username": str, "statement_timeout": timedelta,
    **{o.name: o.py_type for o in option_table.OPTIONS},
}  # fmt: skip


def _type_term(value: object) -> dict[str, object]:
    for kind in (bool, str, int, float, timedelta, datetime, Mapping, list, tuple):
        if isinstance(value, kind):
            return term(f"schedule.type.{kind.__name__}")
    return term("schedule.type.other", name=type(value).__name__)


def _shown(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


_Fn = TypeVar("_Fn", bound=Callable[..., Awaitable[Any]])


def checked(fn: _Fn) -> _Fn:
    """Refuse what Python would only discover later, or never: an argument the function does not have
    (:class:`~agentlab_sched.errors.UnknownArgument`, also a TypeError, listing the ones it has), a value
    of the wrong type (``misfire_grace="1h"``: a ValidationError naming the field), a time without a
    zone. All before anything is sent to the database."""
    signature = inspect.signature(fn)
    accepts_options = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    names = [p for p in signature.parameters if p != "conn" and signature.parameters[p].kind.name != "VAR_KEYWORD"]
    allowed = names + (list(OPTIONS) if accepts_options else [])

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in allowed:
                raise errors.UnknownArgument(
                    "schedule.unknown_argument", key, function=fn.__name__, name=key, allowed=allowed
                )
        bound = signature.bind_partial(*args, **kwargs)
        values = {**bound.arguments, **bound.arguments.get("options", {})}
        for key, value in values.items():
            expected = _TYPES.get(key)
            if value is None or expected is None:
                continue
            wrong = not isinstance(value, expected) or (isinstance(value, bool) and expected is int)
            if wrong:
                example = expected if isinstance(expected, type) else expected[0]
                raise errors.ValidationError(
                    "schedule.wrong_type", key, field=_term(key), value=_shown(value), given=_type_term(value),
                    expected=term(f"schedule.type.{example.__name__}"),
                )  # fmt: skip
            if isinstance(value, datetime) and value.tzinfo is None:
                raise errors.ValidationError("schedule.naive_time", key, field=_term(key), value=str(value))
        return await fn(*args, **kwargs)

    return call  # type: ignore[return-value]  # functools.wraps keeps fn's signature for callers


def _check_cron_and_zone(cron_expr: str | None, timezone: str | None, inputs: Any = None) -> None:
    """The same checks the database makes, made here first (the same messages); inputs over their size
    limit are refused before they are sent."""
    if cron_expr is not None:
        cronlib.parse(cron_expr)
    if timezone is not None:
        cronlib.check_timezone(timezone)
    if inputs is not None:
        limits.check_inputs(inputs)


async def _replan(conn: psycopg.AsyncConnection[Any], schedule_id: int, now: datetime | None) -> None:
    """Plan the next fire now, as a worker would within a tick (schedules.replan, the one implementation)."""
    await replan(conn, [schedule_id], now=now)


async def _fetch(conn: psycopg.AsyncConnection[Any], name: str) -> Schedule:
    found = await queries.one(conn, "get_schedule", {"name": name}, Schedule)
    if found is None:
        raise NotFound("schedule.not_found", "name", name=name)
    return found


async def _call(conn: psycopg.AsyncConnection[Any], query: str, params: Mapping[str, Any]) -> Any:
    """The value of named query ``query``, the database's refusals raised as SchedError."""
    with errors.translated(), errors.database_warnings(conn):
        return await queries.value(conn, query, params)


#: The arguments the admin functions pass on to the SQL API, besides the options.
_FIELDS = ("name", "cron", "task", "inputs", "timezone", *option_table.NAMES, "new_name", "expected_version", "clear")


def _arguments(given: Mapping[str, Any], **changed: Any) -> dict[str, Any]:
    """The query parameters among a function's own arguments (``locals()`` at its start): every field,
    None when not given; mappings as JSON."""
    values = {k: given.get(k) for k in _FIELDS} | changed
    if values["inputs"] is not None:
        values["inputs"] = Jsonb(dict(values["inputs"]) if isinstance(values["inputs"], Mapping) else values["inputs"])
    return values


@checked
async def schedule(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    cron: str,
    task: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    timezone: str = "UTC",
    queue: str | None = None,
    priority: int | None = None,
    overlap: str | None = None,
    misfire_grace: timedelta | None = None,
    timeout: timedelta | None = None,  # noqa: ASYNC109 (a schedule field, not a call timeout)
    enabled: bool | None = None,
    catchup: str | None = None,
    max_catchup: int | None = None,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    remaining_runs: int | None = None,
    pause_after_failures: int | None = None,
    context: str | None = None,
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
    on_interrupt: str | None = None,
    now: datetime | None = None,
) -> Schedule:
    """Create the schedule ``name``, or update it if it exists (SQL ``schedule()``, like pg_cron).

    ``cron``, ``task``, ``inputs`` (``{}`` when None) and ``timezone`` are always set; the other
    arguments, when None, take their default on create and leave the field as it is on update.
    ``now`` (default: the database clock) is the instant the next fire is planned after.
    """
    params = _arguments(locals(), inputs={} if inputs is None else inputs, if_exists="update")
    _check_cron_and_zone(cron, timezone, inputs)
    async with conn.transaction():
        sid = await _call(conn, "schedule", params)
        await _replan(conn, sid, now)
        return await _fetch(conn, name)


#: Another name for :func:`schedule` that says what it does.
create_or_update = schedule


def _bulk_value(value: Any) -> Any:
    """A definition's value as JSON SQL casts back: intervals in seconds, instants in ISO 8601."""
    if isinstance(value, timedelta):
        return f"{value.total_seconds()} seconds"
    if isinstance(value, datetime):
        return value.isoformat()
    return value


async def schedule_many(conn: psycopg.AsyncConnection[Any], definitions: Iterable[Mapping[str, Any]]) -> int:
    """Create many schedules at once (SQL ``schedule_many()``): all of them or none; how many.

    Each definition maps :func:`schedule`'s argument names (``name``, ``cron``, ``task`` required) to
    values. Every definition is validated as :func:`schedule` would; the first refusal is raised naming
    the definition (``row``, from 1, and ``name``) and the field, as ``schedule.bulk_row`` (its ``code``
    parameter is the refusal's own code). A name that exists already is refused (no update). The new
    schedules are planned by the workers (``replan``), as a schedule inserted by SQL is.
    """
    rows = [{k: _bulk_value(v) for k, v in d.items()} for d in definitions]
    if not rows:
        return 0
    async with conn.transaction():
        return int(await _call(conn, "schedule_many", {"definitions": Jsonb(rows)}))


@checked
async def schedule_sql(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    cron: str,
    command: str,
    *,
    database: str | None = None,
    username: str | None = None,
    timezone: str = "UTC",
    statement_timeout: timedelta = timedelta(hours=1),
    enabled: bool | None = None,
    now: datetime | None = None,
) -> Schedule:
    """Create or update the schedule ``name`` that runs the SQL ``command`` (SQL ``schedule_sql()``, as
    pg_cron's ``schedule_in_database``): in ``database`` (default: this one), as the role ``username``
    (default: the session's login role), under ``statement_timeout``.

    Refused with :class:`~agentlab_sched.errors.NotAllowed` unless the session may run SQL as that role
    (``docs/security.md``). Other options: :func:`alter` afterwards.
    """
    _check_cron_and_zone(cron, timezone)
    params = {
        "name": name, "cron": cron, "command": command, "database": database, "username": username,
        "timezone": timezone, "statement_timeout": statement_timeout, "enabled": enabled,
    }  # fmt: skip
    async with conn.transaction():
        sid = await _call(conn, "schedule_sql", params)
        await _replan(conn, sid, now)
        return await _fetch(conn, name)


@checked
async def create(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    cron: str,
    task: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    timezone: str = "UTC",
    now: datetime | None = None,
    **options: Any,
) -> Schedule:
    """Create a new schedule; :class:`Conflict` (``schedule.name_taken``) when the name exists already.

    ``options`` are the keyword arguments of :func:`schedule` (queue, overlap, misfire_grace, ...).
    """
    _check_cron_and_zone(cron, timezone, inputs)
    params = _arguments(options, name=name, cron=cron, task=task, inputs={} if inputs is None else inputs)
    params["timezone"] = timezone
    params["if_exists"] = "error"  # SQL schedule(), create only: the same validation, defaults and audit
    async with conn.transaction():
        sid = await _call(conn, "schedule", params)
        await _replan(conn, sid, now)
        return await _fetch(conn, name)


@checked
async def alter(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    *,
    cron: str | None = None,
    timezone: str | None = None,
    task: str | None = None,
    inputs: Mapping[str, Any] | None = None,
    enabled: bool | None = None,
    overlap: str | None = None,
    misfire_grace: timedelta | None = None,
    timeout: timedelta | None = None,  # noqa: ASYNC109 (a schedule field, not a call timeout)
    queue: str | None = None,
    priority: int | None = None,
    catchup: str | None = None,
    max_catchup: int | None = None,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    remaining_runs: int | None = None,
    pause_after_failures: int | None = None,
    context: str | None = None,
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
    on_interrupt: str | None = None,
    new_name: str | None = None,
    expected_version: int | None = None,
    clear: Iterable[str] = (),
    now: datetime | None = None,
) -> Schedule:
    """Change some fields of schedule ``name`` (SQL ``alter_schedule()``); None leaves a field as it is.

    ``clear`` names optional fields to reset to "not set" (see :data:`CLEARABLE`). With
    ``expected_version``, the change is made only if the schedule is still at that version, else
    :class:`Conflict` (``schedule.stale_version``). The version goes up by one when something really
    changed. After a real change of cron or time zone the next fire is the pending due time when it was
    already past at ``now`` (the moment of the change) and the new definition still has it, else the new
    definition's first due time after ``now``; enabling plans the first fire after ``now``.
    """
    params = _arguments(locals(), clear=list(clear) or None)
    _check_cron_and_zone(cron, timezone, inputs)
    async with conn.transaction():
        await _call(conn, "alter_schedule", params)
        current = await _fetch(conn, new_name or name)
        if current.replan is not None:
            await _replan(conn, current.id, now)
            current = await _fetch(conn, current.name)
        return current


@checked
async def unschedule(conn: psycopg.AsyncConnection[Any], name: str) -> bool:
    """Delete schedule ``name`` and its ledger (its runs stay, unlinked); False when there was none."""
    return bool(await _call(conn, "unschedule", {"name": name}))


@checked
async def pause(conn: psycopg.AsyncConnection[Any], name: str, reason: str | None = None) -> Schedule:
    """Stop firing schedule ``name`` (``enabled = false``), recording ``reason``; a no-op when paused.

    Nothing is pending while paused (``next_run_at`` is None); :func:`resume` plans from its own moment.
    """
    async with conn.transaction():
        await _call(conn, "pause", {"name": name, "reason": reason})
        return await _fetch(conn, name)


@checked
async def pause_because(
    conn: psycopg.AsyncConnection[Any], name: str, code: str, params: Mapping[str, Any] | None = None
) -> Schedule:
    """:func:`pause` with the system's reason, message ``code`` with ``params``: stored as such and rendered
    when read, in the reader's language (an import pausing what it made)."""
    async with conn.transaction():
        await _call(conn, "pause_because", {"name": name, "code": code, "params": json.dumps(dict(params or {}))})
        return await _fetch(conn, name)


@checked
async def resume(conn: psycopg.AsyncConnection[Any], name: str, *, now: datetime | None = None) -> Schedule:
    """Fire schedule ``name`` again: the next fire is the first due time after ``now`` (the paused time
    is never replayed); clears the pause reason and the failure count. A no-op when it is not paused."""
    async with conn.transaction():
        await _call(conn, "resume", {"name": name})
        current = await _fetch(conn, name)
        if current.replan is not None:
            await _replan(conn, current.id, now)
            current = await _fetch(conn, name)
        return current


@checked
async def get(conn: psycopg.AsyncConnection[Any], name: str) -> Schedule:
    """Schedule ``name``; :class:`NotFound` when there is none."""
    with errors.translated():
        return await _fetch(conn, name)


@checked
async def status(conn: psycopg.AsyncConnection[Any], name: str) -> ScheduleStatus:
    """The ``schedule_status`` row of schedule ``name``; :class:`NotFound` when there is none."""
    with errors.translated():
        found = await queries.one(conn, "schedule_status", {"name": name}, ScheduleStatus)
    if found is None:
        raise NotFound("schedule.not_found", "name", name=name)
    return found


async def list_schedules(
    conn: psycopg.AsyncConnection[Any], *, after: str | None = None, limit: int | None = None
) -> list[ScheduleStatus]:
    """The schedules with their status (the ``schedule_status`` view), by name: every one, or a page of at
    most ``limit`` whose names come after ``after`` (the last name of the page before)."""
    with errors.translated():
        return await queries.rows(conn, "schedule_statuses", {"after": after, "limit": limit}, ScheduleStatus)


#: Schedules counted exactly up to this many; past it the count is the planner's estimate.
COUNT_BOUND = 10_000


@dataclass(frozen=True)
class ScheduleCount:
    """How many schedules there are: exact up to :data:`COUNT_BOUND`, else an estimate (``estimated``)."""

    total: int
    estimated: bool


async def count_schedules(conn: psycopg.AsyncConnection[Any]) -> ScheduleCount:
    """How many schedules there are, without reading them all (:class:`ScheduleCount`)."""
    with errors.translated():
        row = await queries.one(conn, "schedule_count", {"bound": COUNT_BOUND})
    assert row is not None
    return ScheduleCount(total=int(row["total"]), estimated=bool(row["estimated"]))


@checked
async def upcoming(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    n: int = 5,
    *,
    after: datetime | None = None,
    skipped: bool = False,
) -> list[Upcoming]:
    """The next ``n`` fire times (1 to :data:`MAX_UPCOMING`) of schedule ``name`` after ``after`` (default: the
    database clock).

    Each has the UTC instant, the local time in the schedule's zone and a note when the fire was moved
    by a DST gap (``dst_gap``) or falls in a repeated hour (``dst_repeat``, with its ``fold``), under
    the schedule's DST policies. With ``skipped``, the fixed times a gap skips (``dst_gap = skip``) are
    listed too, noted ``dst_skipped`` (not counted in ``n``). The validity window
    (``starts_at``/``ends_at``) and ``remaining_runs`` are respected; a paused schedule shows what it
    would do once resumed.
    """
    if n < 1:
        raise errors.ValidationError("schedule.too_small", "count", field=_term("count"), value=n, min=1)
    if n > MAX_UPCOMING:
        raise errors.ValidationError(
            "schedule.out_of_range", "count", field=_term("count"), value=n, min=1, max=MAX_UPCOMING
        )
    current = await get(conn, name)
    if after is None:
        after = await db_now(conn)
    expr = planner.cron_of(vars(current))
    limit = n if current.remaining_runs is None else min(n, current.remaining_runs)
    if limit <= 0:
        return []
    start = after
    if current.starts_at is not None and current.starts_at > after:
        start = current.starts_at - timedelta(microseconds=1)  # starts_at itself may be a due time
    times = expr.upcoming(start, current.timezone, limit, skipped=skipped)
    if current.ends_at is not None:
        times = [t for t in times if t.at <= current.ends_at]
    return list(times)


def _term(field: str) -> object:
    """A field's name in the reader's language (the argument's own name where the catalogue has none)."""
    code = f"schedule.field.{field}"
    return term(code) if code in CATALOG else field
