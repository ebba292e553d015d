"""``agentlab-sched import procrastinate --app host.app``: an app's ``@app.periodic`` tasks as schedules.

Procrastinate reads a periodic task's cron with croniter, in UTC, seconds as an optional **sixth** field
(the convention of this language too), and defers the task with ``timestamp`` (the due time, in seconds)
plus the ``task_kwargs`` it was given. Each periodic task becomes a schedule of the same task, in UTC,
with those kwargs as inputs and ``"timestamp": "{{ schedule.timestamp }}"`` (rendered as the number), on
the task's queue and priority. croniter's dialect is rewritten where it differs (``L5`` -> ``5L``,
``W15`` -> ``15W``, wrap-around ranges -> lists, and ``*/n`` in one day field while the other is
restricted, which croniter reads with OR: ``1-31/n``), each rewrite noted. Overlap as Procrastinate does
it: ``queueing_lock`` -> ``buffer_one``, ``lock`` -> ``buffer_all``, neither -> ``allow_all``.

Schedules are made **paused** unless ``enable`` (Procrastinate's periodic deferrer fires them too while
the decorators are there); the report says which decorator to remove, where.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import procrastinate
import psycopg

from agentlab_sched import messages
from agentlab_sched.core import cron as cronlib
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.imports import literal
from agentlab_sched.schedules import admin

__all__ = ["ImportReport", "Imported", "Refused", "from_croniter", "import_periodic"]

_DAY_NAMES = "SUN MON TUE WED THU FRI SAT".split()
_MONTH_NAMES = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
#: Field order as written (seconds last), their lowest and highest values.
_BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6), (0, 59)]
_RANGE = re.compile(r"([0-9A-Za-z]+)-([0-9A-Za-z]+)")


@dataclass(frozen=True)
class Imported:
    """A periodic task that is (now, or since an earlier import) the schedule ``name``."""

    task: str
    periodic_id: str
    name: str
    cron: str
    overlap: str
    enabled: bool
    #: ``created`` by this import, ``already`` imported before, ``enabled`` now.
    outcome: str
    #: The rewrites of croniter's spelling, in words.
    notes: tuple[str, ...]
    #: Where the ``@app.periodic`` decorator to remove is: ``module.function (file:line)``.
    defined_at: str


@dataclass(frozen=True)
class Refused:
    task: str
    periodic_id: str
    cron: str
    code: str
    reason: str


@dataclass
class ImportReport:
    enable: bool
    dry_run: bool
    imported: list[Imported] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _value(text: str, idx: int) -> int | None:
    upper = text.upper()
    if upper.isdigit():
        return int(upper)
    names = _DAY_NAMES if idx == 4 else _MONTH_NAMES if idx == 3 else []
    if upper in names:
        return names.index(upper) + (1 if idx == 3 else 0)
    return None


def from_croniter(expr: str) -> tuple[str, list[tuple[str, dict[str, object]]]]:
    """croniter's expression as this language writes it, and the rewrites made (message code, params).

    Only what croniter reads differently is rewritten; anything else is left for the parser to accept
    or refuse (naming the construct). What cannot be written so that it keeps croniter's reading is
    refused (:class:`ValidationError`).
    """
    parts = expr.split()
    if not parts or parts[0].startswith("@") or len(parts) not in (5, 6):
        return expr, []
    notes: list[tuple[str, dict[str, object]]] = []
    for idx, text in enumerate(parts):
        items = []
        for item in text.split(","):
            upper = item.upper()
            if idx == 4 and re.fullmatch(r"L([0-7])", upper):
                items.append(f"{upper[1]}L")
                notes.append(("import.note_l_prefix", {"old": item, "new": f"{upper[1]}L"}))
                continue
            if idx == 2 and re.fullmatch(r"W([0-9]+)", upper):
                items.append(f"{upper[1:]}W")
                notes.append(("import.note_w_prefix", {"old": item, "new": f"{upper[1:]}W"}))
                continue
            m = _RANGE.fullmatch(item)
            if m:
                lo, hi = _value(m[1], idx), _value(m[2], idx)
                if lo is not None and hi is not None and lo > hi and not (idx == 4 and hi in (0, 7)):
                    first, last = _BOUNDS[idx]
                    wrapped = f"{lo}-{last},{first}-{hi}"
                    items.append(wrapped)
                    notes.append(("import.note_wrap", {"old": item, "new": wrapped}))
                    continue
            items.append(item)
        parts[idx] = ",".join(items)
    dom, dow = parts[2], parts[4]
    restricted = dom not in ("*", "?") and dow not in ("*", "?")
    if restricted and (re.search(r"[0-9]W", dom.upper()) or re.search(r"#|[0-7]L", dow.upper())):
        # croniter intersects the day fields around a W, # or L form; this language ORs two restricted ones
        raise ValidationError("import.croniter_and", "cron", dom=dom, dow=dow)
    if restricted:  # croniter ORs them; this language ANDs when one starts with *: spell that one out
        for idx in (2, 4):
            if parts[idx].startswith("*/"):
                first, last = _BOUNDS[idx]
                old = parts[idx]
                parts[idx] = f"{first}-{last}" + parts[idx][1:]
                notes.append(("import.note_day_or", {"old": old, "new": parts[idx]}))
    return " ".join(parts), notes


def _overlap(task: procrastinate.tasks.Task[Any, Any, Any], options: dict[str, Any]) -> str:
    if options.get("queueing_lock") or task.queueing_lock:
        return "buffer_one"
    if options.get("lock") or task.lock:
        return "buffer_all"
    return "allow_all"


def _where(task: procrastinate.tasks.Task[Any, Any, Any]) -> str:
    func = task.func
    try:
        line = inspect.getsourcelines(func)[1]
        path = inspect.getsourcefile(func) or "?"
    except (OSError, TypeError):
        return f"{func.__module__}.{func.__qualname__}"
    return f"{func.__module__}.{func.__qualname__} ({path}:{line})"


def _scheduler_own(task: Any) -> bool:
    """The scheduler's own periodic tasks (the blueprint's tick and housekeeping, whatever the namespace the
    app gave them): never schedules of their own."""
    return str(getattr(task.func, "__module__", "")).startswith("agentlab_sched.")


def _source_key(task: str, periodic_id: str) -> str:
    return f"procrastinate periodic task {task}" + (f" ({periodic_id})" if periodic_id else "")


async def import_periodic(
    conn: psycopg.AsyncConnection[Any],
    app: procrastinate.App,
    *,
    enable: bool = False,
    dry_run: bool = False,
    locale: str | None = None,
) -> ImportReport:
    """Make schedules of ``app``'s periodic tasks; what was made, and what could not be and why."""
    report = ImportReport(enable, dry_run)
    done = {row["imported_from"]: row for row in await queries.rows(conn, "imported_schedules")}
    periodic = sorted(
        (p for p in app.periodic_registry.periodic_tasks.values() if not _scheduler_own(p.task)),
        key=lambda p: (p.task.name, p.periodic_id),
    )
    async with conn.transaction(force_rollback=dry_run):
        for p in periodic:
            await _one(conn, p, report, done, locale)
    return report


async def _one(
    conn: psycopg.AsyncConnection[Any],
    p: Any,
    report: ImportReport,
    done: dict[str, dict[str, Any]],
    locale: str | None,
) -> None:
    task, options = p.task, dict(p.configure_kwargs)
    key = _source_key(task.name, p.periodic_id)
    name = task.name + (f":{p.periodic_id}" if p.periodic_id else "")
    overlap = _overlap(task, options)

    def refuse(code: str, **params: object) -> None:
        reason = messages.render(code, locale, **params)
        report.refused.append(Refused(task.name, p.periodic_id, p.cron, code, reason))

    try:
        cron, notes = from_croniter(p.cron)
    except SchedError as err:
        return refuse(err.code, **err.params)
    words = tuple(messages.render(code, locale, **params) for code, params in notes)

    earlier = done.get(key)
    outcome = "already"
    if earlier is None:
        try:
            await admin.get(conn, name)
            return refuse("import.name_taken", name=name)
        except SchedError:
            pass
        inputs = {**literal(options.get("task_kwargs") or {}), "timestamp": "{{ schedule.timestamp }}"}
        try:
            cronlib.parse(cron)
            async with conn.transaction():
                await admin.schedule(
                    conn, name, cron, task.name, inputs, timezone="UTC", queue=options.get("queue") or task.queue,
                    priority=options.get("priority", task.priority), overlap=overlap, enabled=False,
                )  # fmt: skip
                await queries.execute(conn, "mark_imported", {"name": name, "source": key, "overlap": None})
        except SchedError as err:
            return refuse(err.code, **err.params)
        outcome = "created"
    else:
        name = earlier["name"]
    current = await admin.get(conn, name)
    if report.enable and not current.enabled:
        current = await admin.resume(conn, name)
        outcome = "enabled" if outcome == "already" else outcome
    elif not current.enabled:
        await admin.pause_because(conn, name, "import.paused_periodic", {"task": task.name})
    report.imported.append(
        Imported(
            task.name, p.periodic_id, name, current.cron, current.overlap, current.enabled, outcome, words, _where(task)
        )
    )
