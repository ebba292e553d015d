"""One tick: claim what is due, plan it in Python, apply the plans in SQL.

`fire_due(conn, now)` is what the periodic task, the precise loop and the tests call. Per batch of
claimed schedules it costs a constant number of round trips (claim, apply, commit), whatever the batch
size: the planning runs in Python between the two statements, the ledger rows, runs and jobs are
written by one call of ``agentlab_sched.apply_plans``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched import errors, messages
from agentlab_sched.database import queries
from agentlab_sched.errors import NotFound, SchedError, ValidationError
from agentlab_sched.firing import hooks
from agentlab_sched.schedules import cron as cronlib
from agentlab_sched.schedules import planner
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Due times one backfill may fire at most; a larger range is refused with its count.
BACKFILL_LIMIT = 1000


@dataclass
class TickReport:
    """What one call of `fire_due` did."""

    now: datetime
    claimed: int = 0
    fires: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    round_trips: int = 0
    errors: int = 0

    def count(self, status: str) -> None:
        self.fires[status] = self.fires.get(status, 0) + 1


@dataclass(frozen=True)
class FireOutcome:
    """The outcome of one fire asked for directly (trigger, backfill)."""

    fire_id: int | None
    status: str
    run_id: str | None
    fire_at: datetime | None = None
    reason: str | None = None


async def db_now(conn: psycopg.AsyncConnection[Any]) -> datetime:
    """The database clock: one clock for all workers."""
    now: datetime = await queries.value(conn, "db_now")
    return now


async def fire_due(
    conn: psycopg.AsyncConnection[Any],
    now: datetime | None = None,
    *,
    settings: Settings | None = None,
) -> TickReport:
    """Fire everything due at ``now`` (the database clock by default); safe to run concurrently.

    Each batch is one transaction: schedules are claimed with FOR UPDATE SKIP LOCKED, planned in
    Python, and applied by SQL. An error applying a batch is retried with each schedule isolated, so
    one broken schedule records ``failed_to_start`` and never blocks the others.
    """
    settings = settings or Settings.from_env()
    if now is None:
        now = await db_now(conn)
    report = TickReport(now=now)
    window = timedelta(seconds=settings.on_time_window)
    await run_requests(conn, now, settings=settings, report=report)
    seen: set[int] = set()
    isolate = False
    while True:
        try:
            claimed = await _one_batch(conn, now, window, settings, report, seen, isolate=isolate)
        except psycopg.Error:
            if isolate:
                raise
            logger.warning("applying a tick batch failed; retrying it with each schedule isolated", exc_info=True)
            isolate = True
            continue
        isolate = False
        if claimed < settings.batch_size:
            return report


async def _one_batch(
    conn: psycopg.AsyncConnection[Any],
    now: datetime,
    window: timedelta,
    settings: Settings,
    report: TickReport,
    seen: set[int],
    *,
    isolate: bool,
) -> int:
    async with conn.transaction():
        rows = await queries.rows(conn, "claim_due", {"now": now, "batch": settings.batch_size})
        # BEGIN, claim, apply, COMMIT: psycopg sends BEGIN as a query of its own (a libpq trace shows it).
        report.round_trips += 4
        if not rows:
            report.round_trips -= 1
            return 0
        # A schedule claimed twice in one tick means its plan did not move it (it cannot happen unless
        # the database disagrees with the planner): stop rather than loop.
        fresh = [r for r in rows if r["id"] not in seen]
        if not fresh:
            return 0
        plans = [await _plan_one(row, now, window, settings.locale) for row in fresh]
        outcomes = await queries.value(
            conn, "apply_plans", {"plans": json.dumps(plans), "now": now, "isolate": isolate}
        )
    seen.update(r["id"] for r in fresh)  # only once committed: a failed batch is retried isolated
    report.batches += 1
    report.claimed += len(fresh)
    for outcome in outcomes or []:
        if "error" in outcome:
            report.errors += 1
            logger.error(
                "firing schedule %s failed: %s (SQLSTATE %s)",
                outcome["schedule_id"],
                outcome["error"]["message"],
                outcome["error"]["sqlstate"],
            )
        for fire in outcome.get("fires", []):
            report.count(fire["status"])
    return len(rows)


async def _plan_one(row: dict[str, Any], now: datetime, window: timedelta, locale: str) -> dict[str, Any]:
    """Plan one claimed schedule and run the resolvers of its launches; never raises."""
    try:
        plan = planner.plan(planner.ScheduleState.from_row(row), now, window)
        data = plan.as_json()
        for fire in data["fires"]:
            if fire["action"] == "launch":
                refusal = await _resolve(row, datetime.fromisoformat(fire["fire_at"]), fire["kind"], locale)
                if refusal:
                    fire.update(action="fail", **refusal)
            elif fire["reason_code"]:
                fire["reason"] = messages.render(fire["reason_code"], locale, **fire["reason_params"])
        return data
    except Exception:
        logger.exception("planning schedule %s (%s) failed", row["id"], row["name"])
        at = row["next_run_at"] or now
        return {
            "schedule_id": row["id"],
            "claimed_next_run_at": row["next_run_at"].isoformat() if row["next_run_at"] else None,
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


def _safe_next(row: dict[str, Any], now: datetime) -> str | None:
    try:
        due = cronlib.parse(row["cron"]).next_after(now, row["timezone"])
        return due.isoformat() if due else None
    except Exception:
        return None


async def _resolve(
    row: dict[str, Any], at: datetime, kind: str, locale: str, inputs: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Run the task's resolver: None to launch, else the refusal to record."""
    if not hooks.has_resolver(row["task"]):
        return None
    request = hooks.LaunchRequest(row["id"], row["name"], row["task"], at, kind, inputs or row["inputs"])
    try:
        await hooks.resolve(request)
    except hooks.LaunchRefused as refused:
        return {"reason_code": "launch.refused", "reason_params": {}, "reason": refused.reason}
    except Exception:
        logger.exception("the resolver of task %s failed for schedule %s", row["task"], row["name"])
        return {
            "reason_code": "launch.error",
            "reason_params": {},
            "reason": messages.render("launch.error", locale),
        }
    return None


async def replan(conn: psycopg.AsyncConnection[Any], ids: list[int] | None = None, now: datetime | None = None) -> int:
    """Compute next_run_at for schedules whose ``replan`` is set (created or changed); returns how many.

    Only the next due time is computed here; a due time that is already past is left for the tick to
    fire through the usual rules.
    """
    if now is None:
        now = await db_now(conn)
    async with conn.transaction():
        rows = await queries.rows(conn, "lock_replans", {"ids": ids})
        updates = []
        for row in rows:
            state = planner.ScheduleState.from_row(row)
            try:
                nxt = planner.next_after_change(state, now)
            except SchedError:
                nxt = None
            updates.append({"next_run_at": nxt, "id": row["id"], "replan": row["replan"]})
        if updates:
            await queries.execute_many(conn, "set_next_run", updates)
    return len(rows)


async def register_tasks(conn: psycopg.AsyncConnection[Any], names: list[str]) -> None:
    """Record that a live worker runs these tasks (a fire for an unregistered task is refused)."""
    await queries.execute(conn, "register_tasks", {"names": sorted(set(names))})


async def run_requests(
    conn: psycopg.AsyncConnection[Any],
    now: datetime,
    *,
    settings: Settings | None = None,
    report: TickReport | None = None,
    request_id: int | None = None,
) -> list[dict[str, Any]]:
    """Carry out pending manual and backfill requests (from SQL `trigger()` / `backfill()`)."""
    settings = settings or Settings.from_env()
    results = []
    pending = await queries.rows(conn, "pending_requests", {"request_id": request_id})
    if report is not None:
        report.round_trips += 1
    for req in pending:
        results.append(await _carry_out(conn, req, settings))
    return results


async def _carry_out(conn: psycopg.AsyncConnection[Any], req: dict[str, Any], settings: Settings) -> dict[str, Any]:
    schedule = req["schedule"]
    refusal: str | None = None
    times: list[datetime] = []
    if req["kind"] == "manual":
        times = [req["fire_at"]]
    else:
        try:
            times = backfill_times(schedule["cron"], schedule["timezone"], req["fire_at"], req["until"])
        except SchedError as err:
            refusal = err.message(settings.locale)
    refusals: list[dict[str, Any] | None] = []
    for at in times:
        refusals.append(await _resolve(schedule, at, req["kind"], settings.locale, req["inputs"]))
    result: dict[str, Any] | None = await queries.value(
        conn,
        "carry_out_request",
        {"id": req["id"], "times": times, "refusals": json.dumps(refusals), "refusal": refusal},
    )
    return result or {"request_id": req["id"], "fires": [], "error": None}


def backfill_times(expr: str, tz: str, start: datetime, end: datetime, limit: int = BACKFILL_LIMIT) -> list[datetime]:
    """The due times of ``expr`` in [start, end]; more than ``limit`` is refused with the count."""
    if start >= end:
        raise ValidationError(
            "backfill.bad_range",
            "from",
            start=messages.local_time(start, tz),
            end=messages.local_time(end, tz),
        )
    cron = cronlib.parse(expr)
    times: list[datetime] = []
    for at in cron.iter_from(start, tz, inclusive=True):
        if at > end:
            break
        times.append(at)
        if len(times) > limit:
            count = len(times) + sum(1 for _ in _until(cron.iter_from(at, tz), end))
            raise ValidationError(
                "backfill.too_many",
                "to",
                start=messages.local_time(start, tz),
                end=messages.local_time(end, tz),
                count=count,
                limit=limit,
            )
    return times


def _until(times: Any, end: datetime) -> Any:
    for at in times:
        if at > end:
            return
        yield at


async def _request(conn: psycopg.AsyncConnection[Any], name: str, params: dict[str, Any]) -> int:
    """Write a fire request (statement ``name``); its id."""
    with errors.translated():
        request_id: int = await queries.value(conn, name, params)
    return request_id


async def trigger(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    inputs: dict[str, Any] | None = None,
    *,
    requested_by: str | None = None,
    settings: Settings | None = None,
) -> FireOutcome:
    """Fire schedule ``name`` now (``kind = manual``) through the same rules as every fire; return the outcome."""
    settings = settings or Settings.from_env()
    async with conn.transaction():
        rid = await _request(
            conn, "request_trigger", {"name": name, "inputs": json.dumps(inputs) if inputs is not None else None}
        )
        if requested_by:
            await queries.execute(conn, "set_requested_by", {"requested_by": requested_by, "id": rid})
        [result] = await run_requests(conn, datetime.min, settings=settings, request_id=rid)
    return (await _outcomes(conn, result))[0]


async def backfill(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    start: datetime,
    end: datetime,
    *,
    requested_by: str | None = None,
    settings: Settings | None = None,
) -> list[FireOutcome]:
    """Fire one ``backfill`` fire per due time of ``name`` in [start, end]; refuse a range that is too large."""
    settings = settings or Settings.from_env()
    row = await queries.one(conn, "schedule_cron", {"name": name})
    if row is None:
        raise NotFound("schedule.not_found", "name", name=name)
    backfill_times(row["cron"], row["timezone"], start, end)  # refuse before writing anything
    async with conn.transaction():
        rid = await _request(conn, "request_backfill", {"name": name, "start": start, "end": end})
        if requested_by:
            await queries.execute(conn, "set_requested_by", {"requested_by": requested_by, "id": rid})
        [result] = await run_requests(conn, datetime.min, settings=settings, request_id=rid)
    return await _outcomes(conn, result)


async def _outcomes(conn: psycopg.AsyncConnection[Any], result: dict[str, Any]) -> list[FireOutcome]:
    ids = [f["fire_id"] for f in result["fires"] if f.get("fire_id")]
    return await queries.rows(conn, "fire_outcomes", {"ids": ids}, FireOutcome)
