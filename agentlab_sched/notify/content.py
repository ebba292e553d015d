"""The words of a notification: title and text per event, in the deployment's locale.

Pure functions of a snapshot of the run (`EventInfo`); the dispatcher builds the snapshot from the
outbox row, the run, its fire and its approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agentlab_sched.messages import duration, local_time, render
from agentlab_sched.notify.platforms import Message

TITLES = {
    "succeeded": "notify.title.finished",
    "failed": "notify.title.failed",
    "timed_out": "notify.title.timed_out",
    "suspended": "notify.title.suspended",
    "awaiting_approval": "notify.title.awaiting_approval",
}
COLORS = {
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "suspended": "orange",
    "awaiting_approval": "yellow",
}


@dataclass(frozen=True)
class EventInfo:
    """What a notification says about one run at the moment of its status change."""

    event: str
    schedule: str
    timezone: str
    run_id: str
    status: str
    segment: int = 1
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    kind: str | None = None
    fire_at: datetime | None = None
    timeout: timedelta | None = None
    #: the title of the step awaiting approval
    step: str | None = None

    @property
    def short_id(self) -> str:
        """The run as people see it: the first 6 characters of its id."""
        return self.run_id[:6]

    @property
    def idempotency_key(self) -> str:
        """Stable per (run, event, segment): receivers can drop a repeated delivery."""
        return f"agentlab-sched:{self.run_id}:{self.event}:{self.segment}"


def _minute(value: datetime, tz: str) -> str:
    return local_time(value.replace(second=0, microsecond=0), tz)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def run_link(public_url: str | None, run_id: str) -> str | None:
    """The run's page under ``AGENTLAB_SCHED_PUBLIC_URL``, when that is set."""
    return f"{public_url.rstrip('/')}/runs/{run_id}" if public_url else None


def status_line(info: EventInfo, loc: str) -> str:
    """The status in the product's words, with what to do about it."""
    run = info.run_id
    if info.status == "succeeded":
        return render("notify.line.finished", loc)
    if info.status == "failed":
        if info.error:
            return render("notify.line.failed", loc, error=info.error)
        return render("notify.line.failed_no_reason", loc, run_id=run)
    if info.status == "timed_out":
        limit = info.timeout
        if limit is None and info.started_at and info.finished_at:
            limit = info.finished_at - info.started_at
        if limit is not None:
            return render("notify.line.timed_out", loc, timeout=duration(limit, loc))
        return render("notify.line.timed_out_plain", loc)
    if info.status == "suspended":
        return render("notify.line.suspended", loc, run_id=run)
    if info.status == "awaiting_approval":
        if info.step:
            return render("notify.line.awaiting", loc, step=info.step, segment=info.segment, run_id=run)
        return render("notify.line.awaiting_no_step", loc, segment=info.segment, run_id=run)
    return render("notify.line.status", loc, status=info.status)


def kind_line(info: EventInfo, loc: str) -> str | None:
    """How the run was started, when it matters: by hand, caught up after a miss, backfilled."""
    if info.kind is None or info.fire_at is None:
        return None
    when = local_time(info.fire_at, info.timezone)
    code = {
        "manual": "notify.kind.manual",
        "misfire": "notify.kind.misfire",
        "backfill": "notify.kind.backfill",
        "scheduled": "notify.kind.scheduled",
    }.get(info.kind)
    return render(code, loc, fire_at=when, timezone=info.timezone) if code else None


def times_line(info: EventInfo, loc: str) -> str | None:
    """Start and end in the schedule's time zone, and how long it took."""
    tz = info.timezone
    if info.started_at and info.finished_at and info.status not in ("awaiting_approval",):
        return render(
            "notify.times.both",
            loc,
            started_at=_minute(info.started_at, tz),
            finished_at=_minute(info.finished_at, tz),
            timezone=tz,
            elapsed=duration(max(info.finished_at - info.started_at, timedelta(0)), loc),
        )
    if info.started_at:
        return render("notify.times.started", loc, started_at=_minute(info.started_at, tz), timezone=tz)
    return None


def event_message(info: EventInfo, locale: str, public_url: str | None = None) -> Message:
    """Title, text and generic payload fields of one event notification."""
    loc = locale
    title = render(
        TITLES.get(info.status, f"notify.title.{info.event}"), loc, schedule=info.schedule, run=info.short_id
    )
    lines = [status_line(info, loc)]
    for extra in (kind_line(info, loc), times_line(info, loc)):
        if extra:
            lines.append(extra)
    fields: dict[str, object] = {
        "event": info.event,
        "schedule": info.schedule,
        "run_id": info.run_id,
        "status": info.status,
        "segment": info.segment,
        "kind": info.kind,
        "fire_at": _iso(info.fire_at),
        "started_at": _iso(info.started_at),
        "finished_at": _iso(info.finished_at),
        "error": info.error,
        "idempotency_key": info.idempotency_key,
    }
    return Message(
        title=title,
        lines=tuple(lines),
        locale=loc,
        link=run_link(public_url, info.run_id),
        color=COLORS.get(info.status, "blue"),
        fields=fields,
    )


def test_message(
    schedule: str, timezone: str, now: datetime, locale: str, *, signed: bool, public_url: str | None = None
) -> Message:
    """The message `agentlab-sched notify test` sends."""
    loc = locale
    lines = [render("notify.test.body", loc, schedule=schedule, time=_minute(now, timezone), timezone=timezone)]
    if signed:
        lines.append(render("notify.test.signed_line", loc))
    fields: dict[str, object] = {
        "event": "test",
        "schedule": schedule,
        "run_id": None,
        "status": None,
        "segment": None,
        "kind": None,
        "fire_at": None,
        "started_at": None,
        "finished_at": None,
        "error": None,
        "idempotency_key": f"agentlab-sched:test:{schedule}:{int(now.timestamp())}",
    }
    return Message(
        title=render("notify.test.title", loc, schedule=schedule),
        lines=tuple(lines),
        locale=loc,
        link=public_url.rstrip("/") if public_url else None,
        color="blue",
        fields=fields,
    )
