"""One tick: claim what is due, plan it in Python, apply the plans in SQL.

`fire_due(conn, now)` is what the periodic task, the precise loop and the tests call. Per batch of
claimed schedules it costs a constant number of round trips (claim, apply, commit), whatever the batch
size: the planning runs in Python between the two statements, the ledger rows, runs and jobs are
written by one call of ``agentlab_sched.apply_plans``. Manual and backfill requests are carried out at
the end of each tick (:mod:`.requests`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched import messages
from agentlab_sched.core import planner
from agentlab_sched.database import queries
from agentlab_sched.database.clock import db_now
from agentlab_sched.firing import hooks
from agentlab_sched.firing.requests import TRANSIENT, run_requests
from agentlab_sched.observe import events
from agentlab_sched.observe.events import fields
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Schedules claimed by the first batch of a tick (later ones claim Settings.batch_size).
FIRST_BATCH = 100
#: The first batch when more than FIRST_BATCH are due (a storm): its jobs are committed, and can start,
#: after a few fires are recorded. Not when fewer are due: those are recorded in one transaction, as a
#: second one would make the last of them later.
STORM_FIRST_BATCH = 10
#: Seconds a schedule's lease outlasts the resolver timeout (its resolvers run outside any transaction; if
#: the worker stops meanwhile, another one fires the schedule once the lease ends).
RESOLVER_LEASE_MARGIN = 5.0


@dataclass
class TickReport:
    """What one call of `fire_due` did."""

    now: datetime
    claimed: int = 0
    fires: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    round_trips: int = 0
    errors: int = 0
    #: Fire requests carried out (or marked failed).
    requests: int = 0
    #: Schedules left due after a transient conflict (serialization failure, deadlock, a lock taken with
    #: NOWAIT): the next tick fires them.
    retries: int = 0

    def count(self, status: str) -> None:
        self.fires[status] = self.fires.get(status, 0) + 1


class _Hold:
    """Commits held back until a due time on the database's clock (``fire_due``'s ``commit_not_before``)."""

    def __init__(self, until: datetime | None) -> None:
        self.until = until
        #: Seconds spent waiting (not the tick's work: left out of its duration).
        self.waited = 0.0
        #: The database's clock when the wait ended: how late the fires committed after it are.
        self.woke: datetime | None = None

    def late_from(self, now: datetime) -> datetime:
        """The instant a fire's lateness is counted to: the tick's ``now``, or the end of the wait if later."""
        return max(now, self.woke) if self.woke is not None else now

    async def wait(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Before a commit that writes fires: wait (on the server, in its clock) until the due time; once
        waited, every later commit of the tick is past it."""
        if self.until is not None:
            began = time.perf_counter()
            self.woke = await queries.value(conn, "wait_until", {"at": self.until})
            self.waited = time.perf_counter() - began
            self.until = None


async def fire_due(
    conn: psycopg.AsyncConnection[Any],
    now: datetime | None = None,
    *,
    settings: Settings | None = None,
    commit_not_before: datetime | None = None,
) -> TickReport:
    """Fire everything due at ``now`` (the database clock by default); safe to run concurrently.

    Each batch is one transaction: schedules are claimed with FOR UPDATE SKIP LOCKED, planned in
    Python, and applied by SQL. An error applying a batch is retried with each schedule isolated, so
    one broken schedule records ``failed_to_start`` and never blocks the others.

    ``commit_not_before`` (the precise loop's due time, a few milliseconds ahead): claim, plan and write
    the fires of ``now`` ahead of it, and commit them at that instant of the database's clock, not before,
    so their jobs can start the moment they are due. Until the commit the claimed schedules stay locked
    (another worker skips them; a change to them waits) and nothing is visible.
    """
    settings = settings or Settings.from_env()
    began = time.perf_counter()
    hold = _Hold(commit_not_before)
    try:
        return await _fire_due(conn, now, settings, hold)
    finally:
        events.worker_event("tick", seconds=time.perf_counter() - began - hold.waited)


async def _fire_due(
    conn: psycopg.AsyncConnection[Any], now: datetime | None, settings: Settings, hold: _Hold
) -> TickReport:
    if now is None:
        now = await db_now(conn)
    report = TickReport(now=now)
    window = timedelta(seconds=settings.on_time_window)
    seen: set[int] = set()
    isolate = False
    while True:
        # The first batch is small: the first jobs of a storm are committed (and can start) at once.
        first = not report.batches
        size = min(settings.batch_size, FIRST_BATCH) if first else settings.batch_size
        try:
            claimed, size = await _one_batch(
                conn, now, window, settings, report, seen, size, hold, isolate=isolate, probe=first and not isolate
            )
        except psycopg.Error as exc:
            if conn.broken or conn.closed:
                raise  # the connection failed, not a schedule: the caller connects again and retries
            if isolate:
                if isinstance(exc, TRANSIENT):
                    # Even the claim met a conflict: leave the rest for the next tick, record nothing.
                    logger.info("a tick batch met a transient conflict (%s); the next tick goes on", exc.sqlstate)
                    report.retries += 1
                    break
                raise
            logger.warning("applying a tick batch failed; retrying it with each schedule isolated", exc_info=True)
            isolate = True
            continue
        isolate = False
        if claimed < size:
            break
    # Requests after the schedules: a due schedule never waits behind a request. Not ahead of time either.
    await hold.wait(conn)
    await run_requests(conn, now, settings=settings, report=report)
    return report


async def _one_batch(
    conn: psycopg.AsyncConnection[Any],
    now: datetime,
    window: timedelta,
    settings: Settings,
    report: TickReport,
    seen: set[int],
    size: int,
    hold: _Hold,
    *,
    isolate: bool,
    probe: bool = False,
) -> tuple[int, int]:
    """Claim, plan and apply one batch; returns how many rows the claim returned, and how many it asked for.

    With ``probe`` (the first batch of a tick), when more than ``size`` schedules are due it claims only
    STORM_FIRST_BATCH (one statement: ``claim_due_first``).

    Plans whose launches a resolver must check are not applied under the claim's row locks: they are
    leased (``resolving_until``: other workers skip them meanwhile), the claim commits with the other
    plans, the resolvers run outside any transaction, and then :func:`_apply_resolved` applies them with
    the conditional advance. A slow resolver delays only its own schedule.
    """
    async with conn.transaction():
        if probe and size > STORM_FIRST_BATCH:
            params = {"now": now, "batch": size, "storm_batch": STORM_FIRST_BATCH}
            rows = await queries.rows(conn, "claim_due_first", params)
            if rows and rows[0]["storm"]:
                size = STORM_FIRST_BATCH
        else:
            rows = await queries.rows(conn, "claim_due", {"now": now, "batch": size})
        # BEGIN, claim, apply, COMMIT: psycopg sends BEGIN as a query of its own (a libpq trace shows it).
        report.round_trips += 4
        if not rows:
            report.round_trips -= 1
            return 0, size
        # A schedule claimed twice in one tick means its plan did not move it (it cannot happen unless
        # the database disagrees with the planner): stop rather than loop.
        fresh = [r for r in rows if r["id"] not in seen]
        if not fresh:
            return 0, size
        plans = [_plan_one(row, now, window, settings.locale) for row in fresh]
        ready = [p for row, p in zip(fresh, plans, strict=True) if not _needs_resolver(row, p)]
        held = [(row, p) for row, p in zip(fresh, plans, strict=True) if _needs_resolver(row, p)]
        if held:
            lease = now + timedelta(seconds=settings.resolver_timeout + RESOLVER_LEASE_MARGIN)
            await queries.execute(conn, "lease_schedules", {"ids": [row["id"] for row, _ in held], "until": lease})
        outcomes = await _apply(conn, "apply_plans", ready, now, isolate) if ready else []
        await hold.wait(conn)
    seen.update(r["id"] for r in fresh)  # only once committed: a failed batch is retried isolated
    report.batches += 1
    report.claimed += len(fresh)
    rows_by_id = {r["id"]: r for r in fresh}
    _tally(report, outcomes, rows_by_id, {p["schedule_id"]: p for p in ready}, hold.late_from(now), settings.locale)
    if held:
        await _apply_resolved(conn, held, now, settings, report, hold)
    return len(rows), size


async def _apply(
    conn: psycopg.AsyncConnection[Any], statement: str, plans: list[dict[str, Any]], now: datetime, isolate: bool
) -> list[dict[str, Any]]:
    # default=str: whatever a resolver handed back can always be written (it is text by then anyway).
    outcomes: list[dict[str, Any]] | None = await queries.value(
        conn, statement, {"plans": json.dumps(plans, default=str), "now": now, "isolate": isolate}
    )
    return outcomes or []


async def _apply_resolved(
    conn: psycopg.AsyncConnection[Any],
    held: list[tuple[dict[str, Any], dict[str, Any]]],
    now: datetime,
    settings: Settings,
    report: TickReport,
    hold: _Hold,
) -> None:
    """Run the resolvers of leased plans (no transaction open), then apply them under a new lock.

    ``apply_resolved`` locks each schedule again and applies its plan only if it is still as claimed (same
    ``next_run_at`` and version: not paused, altered or fired by another worker meanwhile); the unique key
    of the ledger keeps it once-only whatever happens.
    """
    plans = await asyncio.gather(*(_resolve_plan(row, plan, settings) for row, plan in held))
    isolate = False
    while True:
        try:
            async with conn.transaction():
                outcomes = await _apply(conn, "apply_resolved", list(plans), now, isolate)
                await hold.wait(conn)
            break
        except psycopg.Error:
            if isolate:
                raise
            logger.warning("applying resolved plans failed; retrying with each schedule isolated", exc_info=True)
            isolate = True
    report.round_trips += 3
    rows_by_id = {row["id"]: row for row, _ in held}
    _tally(report, outcomes, rows_by_id, {p["schedule_id"]: p for p in plans}, hold.late_from(now), settings.locale)


def _tally(
    report: TickReport,
    outcomes: list[dict[str, Any]],
    rows: Mapping[int, dict[str, Any]],
    plans: Mapping[int, dict[str, Any]],
    now: datetime,
    locale: str,
) -> None:
    """Count the outcomes of applied plans, log what went wrong, and tell each fire written (its event)."""
    for outcome in outcomes:
        row = rows.get(outcome["schedule_id"])
        name = row["name"] if row else None
        if outcome.get("retry"):
            report.retries += 1
            logger.info(
                "firing schedule %s met a transient conflict (SQLSTATE %s); the next tick tries again",
                name or outcome["schedule_id"],
                outcome.get("sqlstate"),
                extra=fields(name),
            )
        for error in [outcome.get("error")] + [f.get("error") for f in outcome.get("fires", [])]:
            if error:
                report.errors += 1
                logger.error(
                    "firing schedule %s failed: %s (SQLSTATE %s)",
                    name or outcome["schedule_id"],
                    error["message"],
                    error["sqlstate"],
                    extra=fields(name, status="failed_to_start", reason_code="launch.error"),
                )
        planned = (plans.get(outcome["schedule_id"]) or {}).get("fires", [])
        for fire, plan in zip(outcome.get("fires", []), planned, strict=False):
            report.count(fire["status"])
            if row is not None:
                events.fire_told(row, plan, fire, now, locale)


def _needs_resolver(row: dict[str, Any], plan: dict[str, Any]) -> bool:
    return hooks.has_resolver(row["task"]) and any(f["action"] == "launch" for f in plan["fires"])


def _plan_one(row: dict[str, Any], now: datetime, window: timedelta, locale: str) -> dict[str, Any]:
    """Plan one claimed schedule (pure: no resolver runs here); never raises."""
    try:
        plan = planner.plan(planner.ScheduleState.from_row(row), now, window)
        data = plan.as_json()
        data["claimed_version"] = row["version"]
        for fire in data["fires"]:
            if fire["action"] != "launch" and fire["reason_code"]:
                fire["reason"] = messages.render(fire["reason_code"], locale, **fire["reason_params"])
        return data
    except Exception:
        logger.exception(
            "planning schedule %s (%s) failed",
            row["id"],
            row["name"],
            extra=fields(row["name"], reason_code="launch.error"),
        )
        at = row["next_run_at"] or now
        return {
            "schedule_id": row["id"],
            "claimed_next_run_at": row["next_run_at"].isoformat() if row["next_run_at"] else None,
            "claimed_version": row["version"],
            "next_run_at": _safe_next(row, now),
            "fires": [
                {
                    "fire_at": at.isoformat(),
                    "kind": "scheduled",
                    "action": "fail",
                    "reason_code": "launch.error",
                    "reason_params": {},
                    "reason": messages.render("launch.error", locale),
                }
            ],
        }


async def _resolve_plan(row: dict[str, Any], plan: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The plan with each launch a resolver refused (or that timed out) turned into a refusal."""
    launches = [f for f in plan["fires"] if f["action"] == "launch"]
    refusals = await asyncio.gather(
        *(hooks.refusal_of(row, datetime.fromisoformat(f["fire_at"]), f["kind"], settings) for f in launches)
    )
    for fire, refusal in zip(launches, refusals, strict=True):
        if refusal:
            fire.update(action="fail", **refusal)
    return plan


def _safe_next(row: dict[str, Any], now: datetime) -> str | None:
    try:
        due = planner.cron_of(row).next_after(now, row["timezone"])
        return due.isoformat() if due else None
    except Exception:
        return None


async def register_tasks(conn: psycopg.AsyncConnection[Any], names: list[str]) -> None:
    """Record that a live worker runs these tasks (a fire for an unregistered task is refused)."""
    await queries.execute(conn, "register_tasks", {"names": sorted(set(names))})
