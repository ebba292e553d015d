"""What a task knows about the run it is executing: ``agentlab_sched.current_run()``.

The run middleware (:mod:`agentlab_sched.worker.middleware`) looks the run up when a worker starts its job and
sets it here, for async and sync tasks alike (sync tasks run in a thread that inherits the context)::

    import agentlab_sched

    @app.task(name="reports.weekly")
    async def weekly(**inputs):
        run = agentlab_sched.current_run()
        if run.approval is None:                      # first segment: ask a person
            raise agentlab_sched.AwaitApproval("Send the weekly report?", state={"draft": make_draft(inputs)})
        draft = run.state["draft"]                    # second segment: the state handed back
        return send(draft, note=run.approval.comment)
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError

if TYPE_CHECKING:
    import procrastinate

__all__ = ["Approval", "NoRunContext", "RunContext", "current_run", "current_run_or_none", "renew_session"]


class NoRunContext(SchedError, LookupError):
    """``current_run()`` was called outside a run (or on a worker without the run middleware)."""

    default_code = "run.no_context"


@dataclass(frozen=True)
class Approval:
    """One approval point of a run: what the task asked, and what a person decided."""

    id: int
    run_id: UUID
    #: The segment that asked (the run continues in ``segment + 1`` once approved).
    segment: int
    title: str
    #: The state the task passed to ``AwaitApproval``.
    state: Any
    #: ``pending``, ``approved`` or ``rejected``.
    status: str
    #: The database role that decided (its login role, recorded by the database).
    decided_by: str | None
    decided_at: datetime | None
    comment: str | None
    created_at: datetime
    #: The name the decider gave (``runs approve --by``), kept as a label beside ``decided_by``.
    decided_label: str | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Approval:
        """From a database row or its JSON form."""
        return cls(
            id=int(data["id"]),
            run_id=_uuid(data["run_id"]),
            segment=int(data["segment"]),
            title=data["title"],
            state=data.get("state"),
            status=data["status"],
            decided_by=data.get("decided_by"),
            decided_label=data.get("decided_label"),
            decided_at=_time(data.get("decided_at")),
            comment=data.get("comment"),
            created_at=_time(data["created_at"]),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class RunContext:
    """The run a task is executing, as the scheduler recorded it when its job started."""

    run_id: UUID
    #: The ledger row that launched it, its nominal time and kind (scheduled, misfire, manual, backfill).
    fire_id: int | None
    fire_at: datetime | None
    kind: str | None
    #: The schedule's id and name (None for a run without a schedule).
    schedule_id: int | None
    schedule: str | None
    #: The execution segment: 1, then +1 after each approval.
    segment: int
    #: ``persistent`` schedules: the same key for every run of the schedule (until the host renews it);
    #: ``isolated``: a fresh key per run.
    session_key: str | None
    #: The state the task passed to ``AwaitApproval`` in the previous segment (None in segment 1).
    state: Any
    #: The decision that let this segment start (None in segment 1).
    approval: Approval | None
    task: str
    inputs: dict[str, Any]
    started_by: str
    #: The schedule's timeout for each segment, if any.
    timeout: timedelta | None

    @property
    def short_id(self) -> str:
        """The first 6 characters of the run id, as the ledger and CLI show it (``#1a2b3c``)."""
        return str(self.run_id)[:6]

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RunContext:
        """From the JSON of ``agentlab_sched.run_context(job)``."""
        approval = data.get("approval")
        timeout = data.get("timeout_seconds")
        return cls(
            run_id=_uuid(data["run_id"]),
            fire_id=data.get("fire_id"),
            fire_at=_time(data.get("fire_at")),
            kind=data.get("kind"),
            schedule_id=data.get("schedule_id"),
            schedule=data.get("schedule"),
            segment=int(data["segment"]),
            session_key=data.get("session_key"),
            state=data.get("state"),
            approval=Approval.from_data(approval) if approval else None,
            task=data["task"],
            inputs=data.get("inputs") or {},
            started_by=data["started_by"],
            timeout=timedelta(seconds=float(timeout)) if timeout is not None else None,
        )


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


_current: ContextVar[RunContext | None] = ContextVar("agentlab_sched_run", default=None)
_app: ContextVar[procrastinate.App | None] = ContextVar("agentlab_sched_run_app", default=None)


def current_run() -> RunContext:
    """The run the calling task executes; raises :class:`NoRunContext` outside one."""
    run = _current.get()
    if run is None:
        raise NoRunContext()
    return run


def current_run_or_none() -> RunContext | None:
    """The run the calling task executes, or None (a job the scheduler did not start, a test)."""
    return _current.get()


async def renew_session() -> str:
    """The host found the state behind the run's session gone: a new session key, returned and used
    from now on (``current_run().session_key``). A persistent schedule keeps the new key for its next
    runs; an isolated run just gets a fresh one. Only in async tasks."""
    run = current_run()
    app = _app.get()
    if app is None:
        raise NoRunContext()
    row = await queries.connector_one(app.connector, "renew_session", run=str(run.run_id))
    key = str(row["key"])
    _current.set(replace(run, session_key=key))
    return key


def _set(run: RunContext | None, app: procrastinate.App | None) -> tuple[Any, Any]:
    """Set the run of the current job (the middleware's part); returns tokens for :func:`_reset`."""
    return _current.set(run), _app.set(app)


def _reset(tokens: tuple[Any, Any]) -> None:
    _current.reset(tokens[0])
    _app.reset(tokens[1])


def dumps(value: Any) -> str:
    """JSON text for the database (UTF-8 as is)."""
    return json.dumps(value, ensure_ascii=False)
