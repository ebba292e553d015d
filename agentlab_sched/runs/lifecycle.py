"""The Python API of the run lifecycle: approve, reject, resume, abandon, cancel, prune, and reading
runs and fires (the SQL API of sql/51_run_common.sql to 53_run_people.sql with typed results).

Every function takes an open psycopg ``AsyncConnection`` (any row factory; the work of one call is one
transaction, a savepoint inside the caller's) and returns a frozen dataclass or raises a
:class:`~agentlab_sched.errors.SchedError`: :class:`~agentlab_sched.errors.NotFound` for an unknown run,
:class:`~agentlab_sched.errors.Conflict` for a request the run's state does not allow (approving twice,
a stale segment, resuming a run that is not suspended; nothing is changed),
:class:`~agentlab_sched.errors.ValidationError` for bad input. A run is named by its id or by its first
characters (at least 4, ``#1a2b3c`` as the ledger shows it).

    from agentlab_sched import database as db
    from agentlab_sched.runs import lifecycle

    async with await db.connect(url) as conn:
        run = await lifecycle.approve(conn, "#1a2b3c", by="alice", comment="looks right")
        assert run.status == "awaiting_approval"      # until a worker starts segment 2
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched import errors, limits, messages
from agentlab_sched._plain import plain
from agentlab_sched.core import durations
from agentlab_sched.core.statuses import FINAL_RUNS, FIRE_STATUSES, RUN_STATUSES
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.runs.context import Approval

__all__ = [
    "FIRE_STATUSES",
    "RUN_STATUSES",
    "Approval",
    "Fire",
    "PruneReport",
    "Run",
    "abandon",
    "approvals",
    "approve",
    "cancel",
    "detect_suspended",
    "enforce_timeouts",
    "find_run",
    "fire_key",
    "get_run",
    "list_fires",
    "list_runs",
    "parse_age",
    "plain",
    "prune",
    "reject",
    "reset_session",
    "resume",
]


@dataclass(frozen=True)
class Run:
    """A run (docs/runs.md) with its schedule's name and the fire that launched it."""

    id: uuid.UUID
    schedule_id: int | None
    schedule_name: str | None
    timezone: str
    fire_id: int | None
    fire_at: datetime | None
    kind: str | None
    task: str
    inputs: Mapping[str, Any]
    status: str
    segment: int
    error: str | None
    error_code: str | None
    result: Any
    state: Any
    session_key: str | None
    started_by: str
    timeout: timedelta | None
    deadline_at: datetime | None
    abort_reason: str | None
    cancelled_by: str | None
    suspended_at: datetime | None
    job_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    #: The pending approval it waits on (awaiting_approval), if any.
    waiting_for: Approval | None = None

    def __post_init__(self) -> None:
        # The row carries the approval as JSON (to_jsonb of its row).
        if isinstance(self.waiting_for, dict):
            object.__setattr__(self, "waiting_for", Approval.from_data(self.waiting_for))

    @property
    def short_id(self) -> str:
        """``1a2b3c``: the first 6 characters of the id, as the ledger and CLI show it."""
        return str(self.id)[:6]

    @property
    def terminal(self) -> bool:
        return self.status in FINAL_RUNS

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` and scripts: times in ISO 8601, durations in seconds."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class Fire:
    """One row of the ledger (the ``fire_history`` view): a fire, launched or not, and its run."""

    fire_id: int
    schedule_id: int
    schedule_name: str
    fire_at: datetime
    kind: str
    status: str
    reason_code: str | None
    reason: str | None
    run_id: uuid.UUID | None
    run_status: str | None
    created_at: datetime
    requested_by: str | None
    timezone: str

    def as_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class PruneReport:
    """What one prune removed."""

    fires: int
    runs: int
    jobs: int
    requests: int
    #: Whole partitions of the history tables dropped.
    partitions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------------------------


async def find_run(conn: psycopg.AsyncConnection[Any], ref: str | uuid.UUID) -> uuid.UUID:
    """The id of the run ``ref`` names (an id, or its first characters); NotFound / ValidationError."""
    if isinstance(ref, uuid.UUID):
        return ref
    with errors.translated():
        run_id: uuid.UUID = await queries.value(conn, "find_run", {"ref": ref})
    return run_id


async def get_run(conn: psycopg.AsyncConnection[Any], ref: str | uuid.UUID) -> Run:
    """The run ``ref`` names."""
    run_id = await find_run(conn, ref)
    found = await queries.one(conn, "get_run", {"id": run_id}, Run)
    if found is None:
        raise errors.NotFound("run.not_found", "run_id", run=str(ref))
    return found


async def list_runs(
    conn: psycopg.AsyncConnection[Any],
    schedule: str | None = None,
    *,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    before: tuple[datetime, uuid.UUID] | None = None,
    limit: int = 50,
) -> list[Run]:
    """Runs, newest first: of one schedule, in one status, created in [since, until), older than ``before``
    (the ``(created_at, id)`` of the last run of the previous page)."""
    if status is not None and status not in RUN_STATUSES:
        raise ValidationError("run.bad_status", "status", value=status, choices=list(RUN_STATUSES))
    if schedule is not None:
        await _require_schedule(conn, schedule)
    params = {
        "schedule": schedule, "status": status, "since": since, "until": until,
        "before_at": before[0] if before else None, "before_id": before[1] if before else None,
        "limit": max(1, limit),
    }  # fmt: skip
    return await queries.rows(conn, "list_runs", params, Run)


async def approvals(conn: psycopg.AsyncConnection[Any], ref: str | uuid.UUID) -> list[Approval]:
    """Every approval point of a run, oldest first."""
    run_id = await find_run(conn, ref)
    return await queries.rows(conn, "run_approvals", {"id": run_id}, Approval)


async def list_fires(
    conn: psycopg.AsyncConnection[Any],
    schedule: str | None = None,
    *,
    status: str | None = None,
    since: datetime | None = None,
    before: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> list[Fire]:
    """The ledger, newest first (``fire_history``, by ``created_at`` then ``fire_id``): of one schedule, in
    one status, since a time, older than ``before`` (the ``(created_at, fire_id)`` of the last fire of the
    previous page: :func:`fire_key`)."""
    if status is not None and status not in FIRE_STATUSES:
        raise ValidationError("fire.bad_status", "status", value=status, choices=list(FIRE_STATUSES))
    if schedule is not None:
        await _require_schedule(conn, schedule)
    params = {
        "schedule": schedule, "status": status, "since": since,
        "before_at": before[0] if before else None, "before_id": before[1] if before else None,
        "limit": max(1, limit),
    }  # fmt: skip
    return await queries.rows(conn, "list_fires", params, Fire)


async def fire_key(conn: psycopg.AsyncConnection[Any], fire_id: int) -> tuple[datetime, int] | None:
    """The place of fire ``fire_id`` in the ledger's order, ``(created_at, fire_id)``: the ``before`` of
    :func:`list_fires` for the page after it; None when there is no such fire (pruned, or never written)."""
    created_at: datetime | None = await queries.value(conn, "fire_created_at", {"id": fire_id})
    return (created_at, fire_id) if created_at is not None else None


async def _require_schedule(conn: psycopg.AsyncConnection[Any], name: str) -> None:
    if not await queries.value(conn, "schedule_exists", {"name": name}):
        raise errors.NotFound("schedule.not_found", "name", name=name)


async def _act(conn: psycopg.AsyncConnection[Any], query: str, ref: str | uuid.UUID, params: dict[str, Any]) -> Any:
    """Resolve the run, run named query ``query`` on it in one transaction, return its value."""
    async with conn.transaction(), errors.translated():
        run_id = await find_run(conn, ref)
        return await queries.value(conn, query, {"run": run_id, **params})


async def approve(
    conn: psycopg.AsyncConnection[Any],
    run: str | uuid.UUID,
    by: str | None = None,
    comment: str | None = None,
    segment: int | None = None,
) -> Run:
    """Approve the pending approval of ``run`` (of ``segment``, when given): the run continues in a new
    job, its next segment receiving its state and this approval. Conflict when it is not waiting, was
    decided already, or waits on another segment.

    The approval records the connection's database role and the database clock; ``by`` (a person's name,
    say) is kept beside them as a label.
    """
    await _act(conn, "approve", run, {"by": by, "comment": comment, "segment": segment})
    return await get_run(conn, run)


async def reject(
    conn: psycopg.AsyncConnection[Any],
    run: str | uuid.UUID,
    by: str | None = None,
    comment: str | None = None,
    segment: int | None = None,
) -> Run:
    """Reject the pending approval of ``run``: the run is cancelled (its error says who and why); recorded
    as :func:`approve` records."""
    await _act(conn, "reject", run, {"by": by, "comment": comment, "segment": segment})
    return await get_run(conn, run)


async def resume(
    conn: psycopg.AsyncConnection[Any], run: str | uuid.UUID, by: str = "python", *, now: datetime | None = None
) -> Run:
    """Re-queue a suspended run (Procrastinate retry of its stalled job, or a new job)."""
    return await _by_someone(conn, "resume_run", run, by, now)


async def abandon(
    conn: psycopg.AsyncConnection[Any], run: str | uuid.UUID, by: str = "python", *, now: datetime | None = None
) -> Run:
    """Give up on a suspended run: it is cancelled."""
    return await _by_someone(conn, "abandon", run, by, now)


async def resume_suspended(
    conn: psycopg.AsyncConnection[Any], schedule: str | None = None, by: str = "python", *, now: datetime | None = None
) -> int:
    """Re-queue every suspended run of ``schedule`` (of every schedule when None), oldest first, each as
    `resume` does; how many."""
    async with conn.transaction(), errors.translated():
        return int(await queries.value(conn, "resume_suspended", {"name": schedule, "by": by, "now": now}))


async def abandon_suspended(
    conn: psycopg.AsyncConnection[Any], schedule: str | None = None, by: str = "python", *, now: datetime | None = None
) -> int:
    """Give up on every suspended run of ``schedule`` (of every schedule when None), each as `abandon`
    does; how many."""
    async with conn.transaction(), errors.translated():
        return int(await queries.value(conn, "abandon_suspended", {"name": schedule, "by": by, "now": now}))


async def _by_someone(
    conn: psycopg.AsyncConnection[Any], query: str, run: str | uuid.UUID, by: str, now: datetime | None
) -> Run:
    """Run named query ``query`` (run, by, now) and return the run."""
    await _act(conn, query, run, {"by": by, "now": now})
    return await get_run(conn, run)


async def cancel(
    conn: psycopg.AsyncConnection[Any], run: str | uuid.UUID, by: str = "python", *, now: datetime | None = None
) -> tuple[Run, str]:
    """Cancel a run that has not ended. Returns the run and what happened: ``cancelled`` (done), or
    ``abort_requested`` (a running run: it ends cancelled when its worker aborts the job)."""
    outcome = await _act(conn, "cancel_run", run, {"by": by, "now": now})
    return await get_run(conn, run), str(outcome)


async def reset_session(conn: psycopg.AsyncConnection[Any], schedule: str) -> str:
    """The host reports that the state behind persistent schedule ``schedule``'s session is gone: a new
    session key for its next runs (returned)."""
    async with conn.transaction(), errors.translated():
        return str(await queries.value(conn, "reset_session", {"name": schedule}))


async def detect_suspended(
    conn: psycopg.AsyncConnection[Any], *, now: datetime | None = None, stalled_after: timedelta = limits.STALL_WINDOW
) -> int:
    """Suspend the runs whose worker stopped heartbeating for ``stalled_after``; how many."""
    return int(await queries.value(conn, "detect_suspended", {"now": now, "after": stalled_after}))


async def enforce_timeouts(
    conn: psycopg.AsyncConnection[Any], *, now: datetime | None = None, abort_grace: timedelta = limits.ABORT_GRACE
) -> int:
    """Abort the runs past their deadline (and report those that ignore it); how many changed."""
    return int(await queries.value(conn, "enforce_timeouts", {"now": now, "grace": abort_grace}))


async def prune(
    conn: psycopg.AsyncConnection[Any], older_than: timedelta, *, now: datetime | None = None, batch: int | None = None
) -> PruneReport:
    """Remove history older than ``older_than`` by whole partitions (fires, runs with their approvals and
    notifications, their Procrastinate jobs; fire requests); never a partition holding a run that has not
    ended, a fire whose run has not ended or a notification still to send."""
    async with conn.transaction(), errors.translated():
        removed = await queries.value(conn, "prune", {"age": older_than, "now": now, "batch": batch})
    return PruneReport(**removed)


def parse_age(value: str, field: str = "older_than") -> timedelta:
    """``30d``, ``12h``, ``1w``, ``1d12h``, ``90 minutes``: a retention age (:mod:`agentlab_sched.core.durations`).
    ValidationError names ``field`` (``older_than``, ``since`` or ``retention``)."""
    if not value.strip():
        raise ValidationError("schedule.bad_duration", field, field=messages.term(f"run.field.{field}"), value=value)
    return durations.parse(value, field, messages.term(f"run.field.{field}"))


def describe_error(exc: SchedError, locale: str | None = None) -> str:
    """The message of a refusal in ``locale`` (for callers that render it themselves)."""
    return exc.message(locale)
