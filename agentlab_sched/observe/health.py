"""`agentlab-sched doctor`: what needs a person, judged from the facts of ``agentlab_sched.doctor_facts()``.

:func:`examine` returns one :class:`Finding` per check, each ``ok``, ``info``, ``warning`` or ``problem``;
a warning or a problem needs a person (the command then exits 1). The checks: the schema is current,
workers are alive (which queues they take, how many jobs at once, whether anything fires), clocks agree
with the database's, no schedule is overdue, stopped or paused by failures, every enabled schedule's task
is registered by a live worker, no run is suspended, fire requests were carried out, notifications are
delivered, and the key here decrypts every stored webhook.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from agentlab_sched import messages
from agentlab_sched.database import queries, roles
from agentlab_sched.database.migrate import pending
from agentlab_sched.errors import SchedError
from agentlab_sched.notify.secrets import SecretBox
from agentlab_sched.notify.webhooks import key_problems
from agentlab_sched.settings import Settings

__all__ = ["LEVELS", "NEEDS_A_PERSON", "Finding", "examine"]

LEVELS = ("ok", "info", "warning", "problem")
#: Findings at these levels need a person.
NEEDS_A_PERSON = ("warning", "problem")
#: A clock this far from the database's (seconds) is a problem.
MAX_SKEW = 5.0
#: The oldest a notification may wait before it is a problem (seconds).
MAX_OUTBOX_AGE = 300.0


@dataclass(frozen=True)
class Finding:
    """One check's verdict: its level, its message (code and parameters) and what it found."""

    check: str
    level: str
    code: str
    params: Mapping[str, Any] = field(default_factory=dict)
    items: tuple[Mapping[str, Any], ...] = ()

    def message(self, locale: str) -> str:
        return messages.render(self.code, locale, **self.params)

    def as_dict(self, locale: str) -> dict[str, Any]:
        return {
            "check": self.check,
            "level": self.level,
            "code": self.code,
            "message": self.message(locale),
            "items": [dict(i) for i in self.items],
        }


async def examine(
    conn: psycopg.AsyncConnection[Any],
    settings: Settings,
    *,
    database: str = "",
    url: str | None = None,
    embedded: bool = False,
) -> list[Finding]:
    """Every check, in the order `doctor` prints them; with ``url``, also the roles and their weaknesses
    (``embedded``: the database is the embedded server's, whose superuser owning the schema is its default).

    A role that may not see part of the facts (the reader: webhook ciphertext; the admin: Procrastinate's
    events) gets the rest, and an ``info`` finding saying what it could not check."""
    before = time.time()
    facts: dict[str, Any] = await queries.value(conn, "doctor_facts")
    after = time.time()
    db_now = _time(facts["now"])
    here_skew = (before + after) / 2 - db_now.timestamp()
    findings = [
        Finding("database", "info", "doctor.database", {"database": database, "version": facts["server_version"]})
    ]
    findings.append(_migrations(facts))
    findings += _workers(facts, facts.get("tick_queue") or settings.scheduler_queue)
    findings += _clocks(facts, here_skew)
    findings += _schedules(facts)
    findings += await _pg_cron_doubles(conn)
    findings.append(_runs(facts))
    findings += _default_partitions(facts)
    findings += _requests(facts)
    findings += _notifications(facts)
    findings.append(_keys(facts, settings))
    if facts.get("webhooks") is not None:  # else the caller may not read the ciphertext either
        findings += await _pending_notifications(conn, settings)
    if url is not None:
        findings += await asyncio.to_thread(_roles, url, embedded)
    return findings


def _roles(url: str, embedded: bool = False) -> list[Finding]:
    """The roles `agentlab-sched roles create` set up, and what weakens them (docs/security.md)."""
    with psycopg.connect(url, autocommit=True) as sync:
        try:
            names = roles.configured(sync)
        except psycopg.errors.InsufficientPrivilege:
            return [Finding("roles", "info", "doctor.unseen_roles")]
        found = [
            Finding("roles", "info", "roles.none")
            if names is None
            else Finding("roles", "info", "roles.configured", dataclasses.asdict(names))
        ]
        # Said, not counted: weaknesses of the set-up, for whoever hardens it (docs/security.md). A superuser
        # owning the schema is the embedded server's default: said as what it is there, not as a warning.
        for w in roles.warnings(sync):
            code = "doctor.embedded_superuser_owner" if embedded and w.code == "roles.superuser_owner" else w.code
            found.append(Finding("roles", "info", code, w.params))
    return found


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _seconds(value: Any) -> dict[str, float]:
    return messages.seconds(float(value or 0))


# ------------------------------------------------------------------------------------------ checks


def _migrations(facts: Mapping[str, Any]) -> Finding:
    todo = pending(set(facts.get("migrations") or []), facts.get("fingerprint"))
    if todo:
        return Finding("migrations", "problem", "doctor.migrations_pending", {"pending": todo})
    return Finding("migrations", "ok", "doctor.migrations_ok", {"count": len(facts.get("migrations") or [])})


def _worker_item(w: Mapping[str, Any], queue: str | None = None) -> dict[str, Any]:
    """One worker as doctor shows it; with ``queue`` (the tick's), whether it takes that queue."""
    item = {
        k: w.get(k)
        for k in ("name", "kind", "host", "pid", "app", "queues", "concurrency", "fires", "notifies", "clock_skew")
    }
    if queue is not None:
        item["tick_queue"] = queue
        item["takes_tick_queue"] = _takes_tick(w, queue)
    return item


def _takes_tick(w: Mapping[str, Any], queue: str) -> bool:
    return not w.get("queues") or queue in (w.get("queues") or [])


def _workers(facts: Mapping[str, Any], queue: str) -> list[Finding]:
    alive = [w for w in facts.get("workers") or [] if w.get("alive")]
    counted = int(facts.get("procrastinate_workers") or 0)
    ours = [w for w in alive if w["kind"] == "agentlab-sched"]
    plain = [w for w in alive if w["kind"] == "procrastinate"]
    enabled = int(facts.get("enabled") or 0)
    total = max(counted, len(alive))
    found: list[Finding] = []
    if total == 0:
        if enabled:
            return [Finding("workers", "problem", "doctor.workers_none", {"count": enabled})]
        return [Finding("workers", "info", "doctor.workers_none_idle")]
    items = tuple(_worker_item(w, queue) for w in alive)
    unreported = max(0, counted - len(plain) - len(ours))
    found.append(Finding("workers", "ok", "doctor.workers", {"count": total, "unreported": unreported}, items))
    firing = [w for w in ours if w.get("fires")] + [w for w in plain if _takes_tick(w, queue)]
    tick_waiting = [j for j in facts.get("waiting_jobs") or [] if str(j.get("task", "")).endswith(":tick")]
    if enabled and not firing and (unreported == 0 or tick_waiting):
        found.append(Finding("firing", "problem", "doctor.nothing_fires", {"queue": queue}))
    elif firing or unreported:
        found.append(Finding("firing", "ok", "doctor.fires", {"count": len(firing) + unreported}))
    for w in ours:
        if not w.get("fires") and not _takes_tick(w, queue):
            level = "info" if firing else "problem"
            found.append(
                Finding(
                    "firing",
                    level,
                    "doctor.never_fires",
                    {"name": w["name"], "queues": w["queues"], "queue": queue},
                    (_worker_item(w, queue),),
                )
            )
    for w in plain:
        if not _takes_tick(w, queue):
            level = "info" if firing else "problem"
            found.append(
                Finding(
                    "firing",
                    level,
                    "doctor.never_fires",
                    {"name": w["name"], "queues": w["queues"], "queue": queue},
                    (_worker_item(w, queue),),
                )
            )
        if w.get("concurrency") == 1 and _takes_tick(w, queue):
            found.append(
                Finding("workers", "warning", "doctor.one_at_a_time", {"name": w["name"]}, (_worker_item(w, queue),))
            )
    if facts.get("waiting_jobs") is None and "waiting_jobs" in facts:
        found.append(Finding("workers", "info", "doctor.unseen_waiting_jobs"))
    for job in facts.get("waiting_jobs") or []:
        found.append(
            Finding(
                "workers",
                "warning",
                "doctor.jobs_waiting",
                {"task": job["task"], "queue": job["queue"], "waiting": _seconds(job["waiting_seconds"])},
                (dict(job),),
            )
        )
    return found


def _skew_words(skew: float) -> dict[str, Any]:
    return {"skew": _seconds(abs(skew)), "direction": messages.term("doctor.ahead" if skew > 0 else "doctor.behind")}


def _clocks(facts: Mapping[str, Any], here: float) -> list[Finding]:
    found = []
    for w in facts.get("workers") or []:
        skew = w.get("clock_skew")
        if w.get("alive") and skew is not None and abs(float(skew)) > MAX_SKEW:
            found.append(
                Finding(
                    "clock",
                    "problem",
                    "doctor.clock_worker",
                    {"name": w["name"], **_skew_words(float(skew))},
                    (_worker_item(w),),
                )
            )
    if abs(here) > MAX_SKEW:
        found.append(Finding("clock", "problem", "doctor.clock_here", _skew_words(here)))
    if not found:
        found.append(Finding("clock", "ok", "doctor.clock_ok", {"max": _seconds(MAX_SKEW)}))
    return found


def _schedules(facts: Mapping[str, Any]) -> list[Finding]:
    found = []
    # The overdue view also lists the stopped schedules: they are said below, with their reason.
    overdue = [o for o in facts.get("overdue") or [] if o.get("problem") != "stopped"]
    if overdue:
        found.append(
            Finding(
                "overdue",
                "problem",
                "doctor.overdue",
                {"count": len(overdue), "names": messages.shown(o["name"] for o in overdue)},
                tuple(overdue),
            )
        )
    else:
        found.append(Finding("overdue", "ok", "doctor.overdue_none"))
    stopped = facts.get("stopped") or []
    if stopped:
        found.append(
            Finding(
                "stopped",
                "problem",
                "doctor.stopped",
                {"names": messages.shown(s["name"] for s in stopped)},
                tuple(stopped),
            )
        )
    failing = facts.get("paused_after_failures") or []
    if failing:
        found.append(
            Finding(
                "stopped",
                "problem",
                "doctor.paused_after_failures",
                {"names": messages.shown(s["name"] for s in failing)},
                tuple(failing),
            )
        )
    if facts.get("paused"):
        found.append(Finding("stopped", "info", "doctor.paused", {"count": facts["paused"]}))
    for s in facts.get("failing") or []:
        error = s.get("error") or s.get("error_code") or ""
        found.append(
            Finding(
                "failing",
                "warning",
                "doctor.failing",
                {"name": s["name"], "failures": s["failures"], "error": " ".join(str(error).split())},
                (dict(s),),
            )
        )
    for s in facts.get("refused_fires") or []:
        found.append(
            Finding("failing", "warning", "doctor.fires_refused", {"name": s["name"], "reason": s.get("reason") or ""},
                    (dict(s),))
        )  # fmt: skip
    unregistered = facts.get("unregistered_tasks") or []
    live = any(w.get("alive") for w in facts.get("workers") or []) or int(facts.get("procrastinate_workers") or 0)
    if unregistered:
        found.append(
            Finding(
                "tasks",
                "problem",
                "doctor.unregistered",
                {
                    "tasks": messages.shown(u["task"] for u in unregistered),
                    "names": messages.shown_of(
                        (n for u in unregistered for n in u["schedules"]), sum(int(u["count"]) for u in unregistered)
                    ),
                },
                tuple(unregistered),
            )
        )
    elif facts.get("enabled") and not live:
        # Registrations outlive their workers (10 minutes): with none alive, nothing is checked.
        found.append(Finding("tasks", "info", "doctor.tasks_no_worker"))
    elif facts.get("enabled"):
        found.append(Finding("tasks", "ok", "doctor.tasks_ok"))
    return found


async def _pg_cron_doubles(conn: psycopg.AsyncConnection[Any]) -> list[Finding]:
    """pg_cron (in this database) still runs jobs whose imported schedules are enabled: each runs twice."""
    try:
        if not await queries.value(conn, "pg_cron_present"):
            return []
        doubles = await queries.rows(conn, "pg_cron_doubles")
    except psycopg.errors.InsufficientPrivilege:
        return [Finding("pg_cron", "info", "doctor.unseen_pg_cron")]
    return [
        Finding("pg_cron", "warning", "doctor.pg_cron_double",
                {"jobid": d["jobid"], "schedule": d["schedule"]}, (dict(d),))
        for d in doubles
    ]  # fmt: skip


def _runs(facts: Mapping[str, Any]) -> Finding:
    suspended = facts.get("suspended_runs") or []
    if suspended:
        return Finding(
            "runs",
            "problem",
            "doctor.suspended",
            {"count": len(suspended), "runs": [f"#{r['run']}" for r in suspended]},
            tuple(suspended),
        )
    return Finding("runs", "ok", "doctor.suspended_none")


def _default_partitions(facts: Mapping[str, Any]) -> list[Finding]:
    """Rows in a history table's DEFAULT partition: their period has no partition yet (housekeeping gives
    them one; until then retention cannot drop them)."""
    found = facts.get("default_partition_rows") or {}
    if not found:
        return []
    return [
        Finding(
            "partitions",
            "warning",
            "doctor.default_partition_rows",
            {"count": sum(found.values()), "tables": [f"{t}: {n}" for t, n in sorted(found.items())]},
            tuple({"table": t, "rows": n} for t, n in sorted(found.items())),
        )
    ]


def _requests(facts: Mapping[str, Any]) -> list[Finding]:
    found = []
    failed = facts.get("failed_requests") or []
    if failed:
        found.append(
            Finding(
                "requests",
                "problem",
                "doctor.failed_requests",
                {"count": len(failed), "details": messages.shown(f"{r['schedule']}: {r['error']}" for r in failed)},
                tuple(failed),
            )
        )
    waiting = facts.get("waiting_requests") or []
    if waiting:
        found.append(
            Finding(
                "requests",
                "problem",
                "doctor.waiting_requests",
                {"count": len(waiting), "names": messages.shown(r["schedule"] for r in waiting)},
                tuple(waiting),
            )
        )
    return found


def _notifications(facts: Mapping[str, Any]) -> list[Finding]:
    outbox = facts.get("outbox") or {}
    found = []
    failing = facts.get("failing_notifications") or []
    if failing:
        details = [f"{n.get('schedule') or ''}: {n.get('error') or ''}".strip(": ") for n in failing]
        found.append(
            Finding(
                "notifications",
                "problem",
                "doctor.notifications_failing",
                {"count": len(failing), "details": messages.shown(details)},
                tuple(failing),
            )
        )
    oldest = float(outbox.get("oldest_seconds") or 0)
    if outbox.get("pending") and oldest > MAX_OUTBOX_AGE:
        found.append(
            Finding(
                "notifications",
                "problem",
                "doctor.outbox_stuck",
                {"count": outbox["pending"], "oldest": _seconds(oldest)},
            )
        )
    elif outbox.get("pending"):
        found.append(Finding("notifications", "info", "doctor.outbox_pending", {"count": outbox["pending"]}))
    if not found:
        found.append(Finding("notifications", "ok", "doctor.notifications_ok"))
    return found


async def _pending_notifications(conn: psycopg.AsyncConnection[Any], settings: Settings) -> list[Finding]:
    """Pending notifications that the keys here cannot open (the webhooks' own check, by schedule)."""
    found = []
    for problem in await key_problems(conn, settings):
        level = "info" if problem.code == "notify.doctor.no_key" else "problem"
        found.append(Finding("keys", level, problem.code, {"schedule": problem.schedule, "count": problem.pending}))
    return found


def _keys(facts: Mapping[str, Any], settings: Settings) -> Finding:
    if facts.get("webhooks") is None and "webhooks" in facts:
        return Finding("keys", "info", "doctor.unseen_webhooks")
    hooks = facts.get("webhooks") or []
    if not hooks:
        return Finding("keys", "ok", "doctor.keys_no_webhooks")
    if not settings.secret_keys:
        return Finding("keys", "info", "doctor.keys_not_here", {"count": len(hooks)})
    try:
        box = SecretBox.from_settings(settings)
    except SchedError as exc:
        return Finding("keys", "problem", "doctor.keys_malformed", {"problem": messages.term(exc.code, **exc.params)})
    bad = [
        h["name"]
        for h in hooks
        if box.try_open(h["url"], schedule_id=h["id"], field="webhook_url") is None
        or (h.get("secret") and box.try_open(h["secret"], schedule_id=h["id"], field="webhook_secret") is None)
    ]
    if bad:
        return Finding(
            "keys",
            "problem",
            "doctor.keys_cannot_decrypt",
            {"names": messages.shown(bad)},
            tuple({"name": n} for n in bad),
        )
    return Finding("keys", "ok", "doctor.keys_ok", {"count": len(hooks)})
