"""What a worker tells: one log record per fire it records and per run change it sees, with stable fields.

Every log record about a schedule, a fire or a run carries the same ``extra=`` fields (:data:`FIELDS`):
``schedule`` (its name), ``fire_id``, ``run_id`` (the full id, a string), ``status`` (the fire's or the
run's) and ``reason_code`` (the ledger's reason code), None where they do not apply; records of the
events below also carry ``event`` (:data:`EVENTS`) and what their line needs. Build them with
:func:`fields`; `agentlab-sched worker --log-format json` prints them as they are, the default output
renders each event as one line in the reader's language.

Listeners (the metrics) subscribe with :func:`subscribe` and get every event whatever the log level, so
``--quiet`` silences the output, not the counting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from agentlab_sched import messages
from agentlab_sched.core.statuses import TROUBLED_RUN_STATUSES

__all__ = [
    "EVENTS",
    "FIELDS",
    "FIRES",
    "RUNS",
    "WORKER",
    "fields",
    "fire_recorded",
    "run_changed",
    "subscribe",
    "unsubscribe",
    "worker_event",
]

#: The fields every record about a schedule, fire or run carries (None where they do not apply).
FIELDS = ("schedule", "fire_id", "run_id", "status", "reason_code")
#: The events: a fire recorded, a run that changed, the worker ready or stopped, one tick's duration.
EVENTS = ("fire", "run", "ready", "stopped", "tick")

FIRES = logging.getLogger("agentlab_sched.fires")
RUNS = logging.getLogger("agentlab_sched.runs")
WORKER = logging.getLogger("agentlab_sched.worker")

Listener = Callable[[str, Mapping[str, Any]], None]
_listeners: list[Listener] = []


def fields(
    schedule: str | None = None,
    fire_id: int | None = None,
    run_id: object | None = None,
    status: str | None = None,
    reason_code: str | None = None,
    **more: Any,
) -> dict[str, Any]:
    """The ``extra=`` of a log record about a schedule, a fire or a run."""
    return {
        "schedule": schedule,
        "fire_id": fire_id,
        "run_id": str(run_id) if run_id is not None else None,
        "status": status,
        "reason_code": reason_code,
        **more,
    }


def subscribe(listener: Listener) -> None:
    """Call ``listener(event, fields)`` for every event from now on."""
    _listeners.append(listener)


def unsubscribe(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _emit(
    logger: logging.Logger, event: str, data: dict[str, Any], message: Callable[[], str], level: int = logging.INFO
) -> None:
    """Tell the listeners, and log the line; the line is rendered only when it is logged (a tick of 50
    fires rendered 50 unlogged lines, about a millisecond, before the worker took their jobs)."""
    data["event"] = event
    for listener in list(_listeners):
        try:
            listener(event, data)
        except Exception:  # a broken listener never stops firing
            logging.getLogger(__name__).exception("an event listener failed")
    if logger.isEnabledFor(level):
        logger.log(level, "%s", message(), extra=data)


def fire_recorded(
    *,
    schedule: str,
    fire_id: int | None,
    fire_at: datetime,
    kind: str,
    status: str,
    timezone: str,
    run_id: object | None = None,
    reason_code: str | None = None,
    reason_params: Mapping[str, Any] | None = None,
    reason: str | None = None,
    late_seconds: float | None = None,
    locale: str = messages.DEFAULT_LOCALE,
) -> None:
    """A fire this worker wrote to the ledger (launched or not)."""
    data = fields(
        schedule, fire_id, run_id, status, reason_code,
        fire_at=fire_at.isoformat(), kind=kind, timezone=timezone, reason_params=dict(reason_params or {}),
        reason=reason, late_seconds=late_seconds,
    )  # fmt: skip
    level = logging.WARNING if status == "failed_to_start" else logging.INFO
    _emit(FIRES, "fire", data, lambda: fire_line(data, locale), level)


def run_changed(
    *,
    schedule: str | None,
    run_id: object,
    status: str,
    fire_id: int | None = None,
    task: str | None = None,
    error: str | None = None,
    late_seconds: float | None = None,
    locale: str = messages.DEFAULT_LOCALE,
) -> None:
    """A run this worker took changed status (running, then how it ended)."""
    data = fields(schedule, fire_id, run_id, status, None, task=task, error=error, late_seconds=late_seconds)
    level = logging.WARNING if status in TROUBLED_RUN_STATUSES else logging.INFO
    _emit(RUNS, "run", data, lambda: run_line(data, locale), level)


def worker_event(event: str, locale: str = messages.DEFAULT_LOCALE, **details: Any) -> None:
    """The worker is ready (what it runs) or stopped; ``tick``: how long one tick took (not logged)."""
    data = fields(**details)
    if event == "tick":
        data["event"] = event
        for listener in list(_listeners):
            listener(event, data)
        return
    _emit(WORKER, event, data, lambda: worker_line(event, data, locale))


# ------------------------------------------------------------------------------------------ lines


def _short(run_id: object | None) -> str:
    return str(run_id)[:6] if run_id else ""


def reason_text(data: Mapping[str, Any], locale: str) -> str:
    """A fire's reason in ``locale``: from its code and parameters, else as it was recorded."""
    code = data.get("reason_code")
    if code and code in messages.CATALOG and not (code == "launch.refused" and data.get("reason")):
        return messages.render(code, locale, **(data.get("reason_params") or {}))
    return str(data.get("reason") or "")


def fire_line(data: Mapping[str, Any], locale: str) -> str:
    """``09:00:00 daily-report scheduled fire: started, run #1a2b3c`` in ``locale``."""
    at = datetime.fromisoformat(str(data["fire_at"]))
    params = {
        "time": messages.local_time(at, str(data.get("timezone") or "UTC")),
        "schedule": data.get("schedule"),
        "kind": messages.term(f"fire.kind.{data.get('kind')}"),
        "status": messages.term(f"fire.status.{data.get('status')}"),
    }
    if data.get("run_id"):
        line = messages.render("event.fire_run", locale, run=_short(data["run_id"]), **params)
    else:
        line = messages.render("event.fire", locale, **params)
    why = reason_text(data, locale)
    return messages.render("event.because", locale, line=line, why=why) if why else line


def run_line(data: Mapping[str, Any], locale: str) -> str:
    """``daily-report run #1a2b3c: succeeded`` in ``locale`` (with the error of a failed run)."""
    line = messages.render(
        "event.run", locale, schedule=data.get("schedule") or data.get("task") or "",
        run=_short(data.get("run_id")), status=messages.term(f"run.status.{data.get('status')}"),
    )  # fmt: skip
    return messages.render("event.because", locale, line=line, why=data["error"]) if data.get("error") else line


def worker_line(event: str, data: Mapping[str, Any], locale: str) -> str:
    """The ready line (what this worker runs) or the stopped line, in ``locale``."""
    if event == "stopped":
        return messages.render("event.stopped", locale)
    queues = data.get("queues") or None
    return messages.render(
        "event.ready",
        locale,
        database=data.get("database"),
        queues=queues if queues else messages.term("event.all_queues"),
        tasks=len(data.get("tasks") or ()),
        task_names=list(data.get("tasks") or ()),
        concurrency=data.get("concurrency"),
        fires=messages.term("event.fires_yes" if data.get("fires") else "event.fires_no"),
        notifies=messages.term("event.notifies_yes" if data.get("notifies") else "event.notifies_no"),
        metrics=messages.term("event.metrics", port=data["metrics_port"])
        if data.get("metrics_port")
        else messages.term("event.no_metrics"),
    )


def fire_told(row: dict[str, Any], plan: dict[str, Any], fire: dict[str, Any], now: datetime, locale: str) -> None:
    """The event of one fire a tick recorded, from its plan and what SQL wrote (none for a duplicate)."""
    if fire.get("status") == "duplicate" or not fire.get("fire_id"):
        return
    at = datetime.fromisoformat(plan["fire_at"]) if isinstance(plan["fire_at"], str) else plan["fire_at"]
    code = fire.get("reason_code") or plan.get("reason_code")
    params = fire.get("reason_params") if fire.get("reason_code") else plan.get("reason_params")
    fire_recorded(
        schedule=row["name"], fire_id=fire["fire_id"], fire_at=at, kind=plan["kind"], status=fire["status"],
        timezone=row["timezone"], run_id=fire.get("run_id"), reason_code=code, reason_params=params,
        reason=plan.get("reason"), late_seconds=max(0.0, (now - at).total_seconds()), locale=locale,
    )  # fmt: skip
