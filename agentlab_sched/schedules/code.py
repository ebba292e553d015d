"""Schedules as code: a decorator on a Procrastinate task declares its schedule; workers sync it.

    @agentlab_sched.schedule("0 9 * * 1", timezone="Asia/Shanghai", inputs={"week": "{{ schedule.week_start }}"})
    @app.task(name="reports.weekly")
    def weekly(week: str) -> None: ...

The declaration is checked when the module is imported (cron, time zone, options: a mistake fails at
once, naming the field). A worker of the app syncs the app's declarations when it starts
(``agentlab-sched worker`` and plain ``procrastinate worker`` alike, through the blueprint), in one
transaction:

- a declared schedule is created, or updated to match the code (every field: an option left out of the
  decorator is its default), and marked as defined in code (``schedules.defined_in``: where). Its
  definition is then changed only by a sync: edits from SQL, Python or the CLI are refused with a message
  saying where it is defined; pausing, resuming, triggering and backfilling still work;
- a schedule defined in code that the code no longer declares (one of this app's tasks, not declared any
  more) is **paused** with a reason, not deleted; it may then be deleted, or comes back when declared
  again;
- a name taken by a schedule not defined in code is left alone and reported.

**Two deployments at once** (a rolling deploy, an old worker restarting): each deployment is known by a
fingerprint of its declarations, and the first time a worker of it synced. The newest deployment wins: a
sync never overwrites (or pauses) a schedule last written by a deployment first seen later than its own;
it reports that it runs older code instead. To go back to older code on purpose, ``agentlab-sched
schedules sync --app host.app --adopt`` makes that deployment the newest. ``docs/coming-from.md``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import procrastinate
import psycopg

from agentlab_sched import errors, messages
from agentlab_sched.core import cron as cronlib
from agentlab_sched.core import options as option_table
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError
from agentlab_sched.schedules import admin

__all__ = ["ATTRIBUTE", "CodeSchedule", "SyncReport", "declared", "fingerprint", "schedule", "sync"]

logger = logging.getLogger(__name__)

#: Where the declarations of a task (or of its function) are kept.
ATTRIBUTE = "_agentlab_sched_schedules"
T = TypeVar("T")


@dataclass(frozen=True)
class CodeSchedule:
    """One schedule declared in code."""

    name: str | None
    cron: str
    timezone: str
    inputs: Mapping[str, Any]
    #: The options given (others take their default).
    options: Mapping[str, Any]
    #: Where the decorator is: ``module.function (path:line)``.
    defined_in: str

    def canonical(self, task: str) -> dict[str, Any]:
        """Every field of the schedule it declares for ``task``: what the fingerprint is made of."""
        options = {o.name: self.options.get(o.name, o.default) for o in option_table.OPTIONS}
        return {
            "name": self.name or task,
            "cron": self.cron,
            "timezone": self.timezone,
            "task": task,
            "inputs": dict(self.inputs),
            "options": {k: option_table.sql_text(v) for k, v in options.items()},
        }


def schedule(
    cron: str,
    *,
    name: str | None = None,
    timezone: str = "UTC",
    inputs: Mapping[str, Any] | None = None,
    **options: Any,
) -> Callable[[T], T]:
    """Declare a schedule for the Procrastinate task this decorates (above or below ``@app.task``).

    ``name`` defaults to the task's name (give one per schedule when a task has several); ``options`` are
    the schedule options (``overlap``, ``misfire_grace``, ``timeout``, ...: ``docs/sql.md``). Checked now:
    a bad cron, time zone or option raises :class:`~agentlab_sched.errors.ValidationError` or
    ``TypeError`` when the module is imported.
    """
    unknown = set(options) - set(option_table.NAMES)
    if unknown:
        raise TypeError(f"agentlab_sched.schedule() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    cronlib.parse(cron, **{k: options[k] for k in ("dst_gap", "dst_repeat") if k in options})
    cronlib.check_timezone(timezone)
    caller = inspect.stack()[1]

    def decorate(target: T) -> T:
        func = getattr(target, "func", target)
        where = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
        declaration = CodeSchedule(
            name, cron, timezone, dict(inputs or {}), dict(options), f"{where} ({caller.filename}:{caller.lineno})"
        )
        found = list(getattr(target, ATTRIBUTE, ()))
        setattr(target, ATTRIBUTE, [*found, declaration])
        return target

    return decorate


def declared(app: procrastinate.App) -> list[tuple[str, CodeSchedule]]:
    """(task name, declaration) of every schedule declared on the app's tasks, by schedule name."""
    found = []
    for task_name, task in app.tasks.items():
        if task_name != task.name:
            continue  # an alias
        for declaration in [*getattr(task, ATTRIBUTE, ()), *getattr(task.func, ATTRIBUTE, ())]:
            found.append((task.name, declaration))
    return sorted(found, key=lambda item: item[1].name or item[0])


def fingerprint(items: list[tuple[str, CodeSchedule]]) -> str:
    """The deployment's identity: a hash of every declared schedule, field by field."""
    data = sorted((d.canonical(task) for task, d in items), key=lambda c: c["name"])
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class SyncReport:
    """What one sync did: schedule names by outcome, and the problems, in words."""

    fingerprint: str
    first_seen_at: datetime | None = None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    paused_gone: list[str] = field(default_factory=list)
    #: Not applied: the schedule was last written by a newer deployment.
    newer_elsewhere: list[str] = field(default_factory=list)
    #: Not applied, with the reason (a name taken, a refusal of the database).
    refused: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def sync(
    conn: psycopg.AsyncConnection[Any],
    app: procrastinate.App,
    *,
    adopt: bool = False,
    now: datetime | None = None,
    locale: str | None = None,
) -> SyncReport:
    """Make the database's code-defined schedules of ``app``'s tasks match its declarations (one
    transaction, one sync at a time); ``adopt`` makes this deployment the newest first."""
    items = declared(app)
    print_ = fingerprint(items)
    report = SyncReport(print_)
    names = [d.name or task for task, d in items]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchedError("code.duplicate_name", "name", name=", ".join(duplicates))
    tasks = sorted(t for t, task in app.tasks.items() if t == task.name)
    async with conn.transaction(), errors.translated():
        report.first_seen_at = await queries.value(
            conn, "code_sync_begin", {"fingerprint": print_, "tasks": tasks, "schedules": names, "adopt": adopt}
        )
        rows = {r["name"]: r for r in await queries.rows(conn, "code_schedules")}
        newer = await queries.rows(conn, "code_newer_deployments", {"fingerprint": print_})

        def covered(name: str, task: str) -> bool:
            # a newer deployment last wrote it (the database stamps only what a sync wrote); a schedule not
            # made yet: a newer deployment declares it, or runs its task (and so leaves it out on purpose)
            row = rows.get(name)
            if row is not None and row["defined_in"] is not None:
                return row["code_version"] in {d["fingerprint"] for d in newer}
            return any(name in d["schedules"] or task in d["tasks"] for d in newer)

        for task, declaration in items:
            name = declaration.name or task
            if covered(name, task):
                report.newer_elsewhere.append(name)
                continue
            await _apply(conn, task, declaration, rows, report, now, locale)
        for row in rows.values():
            gone = row["defined_in"] is not None and row["task"] in tasks and row["name"] not in names
            if not gone or row["code_removed_at"] is not None:
                continue
            if covered(row["name"], row["task"]):
                report.newer_elsewhere.append(row["name"])
                continue
            await queries.execute(conn, "code_schedule_gone", {"name": row["name"]})
            report.paused_gone.append(row["name"])
        await queries.execute(conn, "code_sync_end")
    return report


async def _apply(
    conn: psycopg.AsyncConnection[Any],
    task: str,
    declaration: CodeSchedule,
    rows: dict[str, dict[str, Any]],
    report: SyncReport,
    now: datetime | None,
    locale: str | None,
) -> None:
    name = declaration.name or task
    row = rows.get(name)
    if row is not None and row["defined_in"] is None:
        report.refused[name] = messages.render("code.name_taken", locale, name=name)
        return
    options: dict[str, Any] = {o.name: declaration.options.get(o.name, o.default) for o in option_table.OPTIONS}
    clear = [o for o in option_table.CLEARABLE if options[o] is None]
    given = {k: v for k, v in options.items() if v is not None and k != "enabled"}
    try:
        async with conn.transaction():
            if row is None:
                await admin.create(
                    conn, name, declaration.cron, task, declaration.inputs, timezone=declaration.timezone, now=now,
                    enabled=options["enabled"], **given,
                )  # fmt: skip
                outcome = report.created
            else:
                before = await admin.get(conn, name)
                after = await admin.alter(
                    conn, name, cron=declaration.cron, timezone=declaration.timezone, task=task,
                    inputs=declaration.inputs, clear=clear, now=now, **given,
                )  # fmt: skip
                outcome = report.updated if after.version != before.version else report.unchanged
                if row["code_removed_at"] is not None:  # declared again: it fires again
                    await admin.resume(conn, name, now=now)
                    outcome = report.updated
            moved = row is None or row["defined_in"] != declaration.defined_in
            if outcome is not report.unchanged or moved:  # created, changed, or its decorator moved
                await queries.execute(
                    conn,
                    "code_schedule_mark",
                    {"name": name, "defined_in": declaration.defined_in, "fingerprint": report.fingerprint},
                )
                if outcome is report.unchanged:
                    outcome = report.updated
    except SchedError as err:
        report.refused[name] = err.message(locale)
        return
    outcome.append(name)


#: Apps whose declarations this process has synced (a worker syncs once, when it starts).
_synced: set[int] = set()


async def sync_once(conn: psycopg.AsyncConnection[Any], app: procrastinate.App) -> SyncReport | None:
    """Sync ``app``'s declarations the first time a worker of this process asks; log what happened.
    A failure is logged, never raised: the schedules keep their last definitions."""
    if id(app) in _synced:
        return None
    _synced.add(id(app))
    if not declared(app):
        return None
    try:
        report = await sync(conn, app)
    except SchedError as err:
        if err.code == "code.sync_locked":  # another sync held it: the next registration tries again
            _synced.discard(id(app))
            logger.warning("%s", err.message(None))
            return None
        logger.exception("could not sync the schedules defined in code; they keep their last definitions")
        return None
    except Exception:
        logger.exception("could not sync the schedules defined in code; they keep their last definitions")
        return None
    if report.created or report.updated or report.paused_gone:
        logger.info(
            "schedules defined in code (deployment %s): created %s, updated %s, paused as gone %s",
            report.fingerprint, report.created, report.updated, report.paused_gone,
        )  # fmt: skip
    if report.newer_elsewhere:
        logger.warning(
            "this worker runs older code (deployment %s) than the one that last wrote %s: not applied",
            report.fingerprint, ", ".join(report.newer_elsewhere),
        )  # fmt: skip
    for name, reason in report.refused.items():
        logger.warning("schedule %s defined in code not applied: %s", name, reason)
    return report
