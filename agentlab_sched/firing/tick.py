"""One tick: claim what is due, plan it in Python, apply the plans in SQL.

`fire_due(conn, now)` is what the periodic task, the precise loop and the tests call. Per batch of
claimed schedules it costs a constant number of round trips (claim, apply, commit), whatever the batch
size: the planning runs in Python between the two statements, the ledger rows, runs and jobs are
written by one call of ``agentlab_sched.apply_plans``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched import errors, limits, messages
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.firing import hooks
from agentlab_sched.observe import events
from agentlab_sched.observe.events import fields
from agentlab_sched.schedules import planner
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)

#: Seconds a caller that may not carry out its own request (trigger_now only) waits for a worker to.
WAIT_FOR_WORKER = 30.0
#: Schedules claimed by the first batch of a tick (later ones claim Settings.batch_size).
FIRST_BATCH = 100
#: Due times one backfill may fire at most; a larger range is refused.
BACKFILL_LIMIT = 1000
#: Requests one tick carries out at most, and the seconds after which it starts no new one: due schedules
#: are fired first, and requests never hold up the next tick for long.
REQUESTS_PER_TICK = 20
REQUESTS_BUDGET = 2.0
#: Seconds a schedule's lease outlasts the resolver timeout (its resolvers run outside any transaction; if
#: the worker stops meanwhile, another one fires the schedule once the lease ends).
LEASE_MARGIN = 5.0
#: Resolvers one backfill request runs at once.
RESOLVERS_AT_ONCE = 16
#: Tries of trigger() / backfill() from Python when they meet a transient conflict.
DIRECT_ATTEMPTS = 4
#: Errors that say "try again" (a serialization failure, a deadlock, a lock taken with NOWAIT): retried,
#: never recorded as a failed fire.
TRANSIENT = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)


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


@dataclass(frozen=True)
class FireOutcome:
    """The outcome of one fire asked for directly (trigger, backfill)."""

    fire_id: int | None
    status: str
    run_id: str | None
    fire_at: datetime | None = None
    reason: str | None = None
    reason_code: str | None = None
    #: The schedule was paused when it fired (trigger with ``even_if_paused``; a backfill); it stays paused.
    paused: bool = False

    @property
    def started(self) -> bool:
        return self.status == "started"


@dataclass(frozen=True)
class BackfillResult:
    """What one backfill did: each fire's outcome (a sequence of :class:`FireOutcome`) and their count."""

    request_id: int
    fires: tuple[FireOutcome, ...]
    #: Fires by status, e.g. ``{"started": 3, "skipped_overlap": 1}``.
    counts: dict[str, int]

    @property
    def launched(self) -> int:
        return self.counts.get("started", 0)

    @property
    def not_launched(self) -> int:
        return sum(n for status, n in self.counts.items() if status != "started")

    def __iter__(self) -> Iterator[FireOutcome]:
        return iter(self.fires)

    def __len__(self) -> int:
        return len(self.fires)

    def __getitem__(self, index: int) -> FireOutcome:
        return self.fires[index]


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
    began = time.perf_counter()
    try:
        return await _fire_due(conn, now, settings)
    finally:
        events.worker_event("tick", seconds=time.perf_counter() - began)


async def _fire_due(conn: psycopg.AsyncConnection[Any], now: datetime | None, settings: Settings) -> TickReport:
    if now is None:
        now = await db_now(conn)
    report = TickReport(now=now)
    window = timedelta(seconds=settings.on_time_window)
    seen: set[int] = set()
    isolate = False
    while True:
        # The first batch is small: the first jobs of a storm are committed (and can start) at once.
        size = settings.batch_size if report.batches else min(settings.batch_size, FIRST_BATCH)
        try:
            claimed = await _one_batch(conn, now, window, settings, report, seen, size, isolate=isolate)
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
    # Requests after the schedules: a due schedule never waits behind a request.
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
    *,
    isolate: bool,
) -> int:
    """Claim, plan and apply one batch; returns how many rows the claim returned.

    Plans whose launches a resolver must check are not applied under the claim's row locks: they are
    leased (``resolving_until``: other workers skip them meanwhile), the claim commits with the other
    plans, the resolvers run outside any transaction, and then :func:`_apply_resolved` applies them with
    the conditional advance. A slow resolver delays only its own schedule.
    """
    async with conn.transaction():
        rows = await queries.rows(conn, "claim_due", {"now": now, "batch": size})
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
        plans = [_plan_one(row, now, window, settings.locale) for row in fresh]
        ready = [p for row, p in zip(fresh, plans, strict=True) if not _needs_resolver(row, p)]
        held = [(row, p) for row, p in zip(fresh, plans, strict=True) if _needs_resolver(row, p)]
        if held:
            lease = now + timedelta(seconds=settings.resolver_timeout + LEASE_MARGIN)
            await queries.execute(conn, "lease_schedules", {"ids": [row["id"] for row, _ in held], "until": lease})
        outcomes = await _apply(conn, "apply_plans", ready, now, isolate) if ready else []
    seen.update(r["id"] for r in fresh)  # only once committed: a failed batch is retried isolated
    report.batches += 1
    report.claimed += len(fresh)
    rows_by_id = {r["id"]: r for r in fresh}
    _tally(report, outcomes, rows_by_id, {p["schedule_id"]: p for p in ready}, now, settings.locale)
    if held:
        await _apply_resolved(conn, held, now, settings, report)
    return len(rows)


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
            break
        except psycopg.Error:
            if isolate:
                raise
            logger.warning("applying resolved plans failed; retrying with each schedule isolated", exc_info=True)
            isolate = True
    report.round_trips += 3
    rows_by_id = {row["id"]: row for row, _ in held}
    _tally(report, outcomes, rows_by_id, {p["schedule_id"]: p for p in plans}, now, settings.locale)


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
                _tell(row, plan, fire, now, locale)


def _tell(row: dict[str, Any], plan: dict[str, Any], fire: dict[str, Any], now: datetime, locale: str) -> None:
    """The event of one fire this tick recorded (nothing for a duplicate, which wrote nothing)."""
    if fire.get("status") == "duplicate" or not fire.get("fire_id"):
        return
    at = datetime.fromisoformat(plan["fire_at"]) if isinstance(plan["fire_at"], str) else plan["fire_at"]
    code = fire.get("reason_code") or plan.get("reason_code")
    params = fire.get("reason_params") if fire.get("reason_code") else plan.get("reason_params")
    events.fire_recorded(
        schedule=row["name"], fire_id=fire["fire_id"], fire_at=at, kind=plan["kind"], status=fire["status"],
        timezone=row["timezone"], run_id=fire.get("run_id"), reason_code=code, reason_params=params,
        reason=plan.get("reason"), late_seconds=max(0.0, (now - at).total_seconds()), locale=locale,
    )  # fmt: skip


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
        *(_resolve(row, datetime.fromisoformat(f["fire_at"]), f["kind"], settings) for f in launches)
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


#: The longest reason recorded from a resolver, in characters.
REASON_MAX = 2000


def _reason_text(refused: hooks.LaunchRefused, locale: str) -> str:
    """A resolver's reason as text we can store, whatever it handed us (a lazy translation, any object)."""
    try:
        value = refused.reason
        text = value if isinstance(value, str) else str(value)
        if not isinstance(text, str):
            raise TypeError("str() did not return text")
    except Exception:
        logger.warning("a resolver's refusal reason could not be turned into text", exc_info=True)
        text = ""
    text = text.replace("\x00", "").strip()
    if not text:
        return messages.render("launch.refused_no_reason", locale)
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


async def _resolve(
    row: dict[str, Any], at: datetime, kind: str, settings: Settings, inputs: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Run the task's resolver (bounded by the resolver timeout): None to launch, else the refusal to record.

    Never raises: a refusal, a timeout and an unexpected error each become the fire's reason.
    """
    if not hooks.has_resolver(row["task"]):
        return None
    locale = settings.locale
    request = hooks.LaunchRequest(row["id"], row["name"], row["task"], at, kind, inputs or row["inputs"])
    try:
        await asyncio.wait_for(hooks.resolve(request), settings.resolver_timeout)
    except hooks.LaunchRefused as refused:
        reason = _reason_text(refused, locale)
        return {"reason_code": "launch.refused", "reason_params": {"reason": reason}, "reason": reason}
    except TimeoutError:
        logger.error(
            "the resolver of task %s did not answer within %s s for schedule %s",
            row["task"],
            settings.resolver_timeout,
            row["name"],
        )
        params = {"task": row["task"], "timeout": messages.seconds(settings.resolver_timeout)}
        return {
            "reason_code": "launch.resolver_timeout",
            "reason_params": params,
            "reason": messages.render("launch.resolver_timeout", locale, **params),
        }
    except (Exception, asyncio.CancelledError) as exc:
        current = asyncio.current_task()
        if isinstance(exc, asyncio.CancelledError) and current is not None and current.cancelling():
            raise  # we are being stopped: not the resolver's doing
        logger.exception(
            "the resolver of task %s failed for schedule %s", row["task"], row["name"],
            extra=fields(row["name"], reason_code="launch.error", task=row["task"]),
        )  # fmt: skip
        return {
            "reason_code": "launch.error",
            "reason_params": {},
            "reason": messages.render("launch.error", locale),
        }
    return None


async def replan(conn: psycopg.AsyncConnection[Any], ids: list[int] | None = None, now: datetime | None = None) -> int:
    """Compute next_run_at for schedules whose ``replan`` is set (created or changed); returns how many.

    Only the next due time is computed here; a due time that is already past is left for the tick to
    fire through the usual rules. An explicit ``now`` (the Python API's) is the moment of the change;
    without one, each row's ``replan_at`` says when it was changed.
    """
    explicit = now is not None
    if now is None:
        now = await db_now(conn)
    async with conn.transaction():
        rows = await queries.rows(conn, "lock_replans", {"ids": ids})
        updates = []
        for row in rows:
            state = planner.ScheduleState.from_row(row)
            if explicit:
                state = dataclasses.replace(state, replan_at=now)
            try:
                nxt = planner.next_after_change(state, now)
            except SchedError:
                nxt = None
            updates.append((row["id"], nxt, row["replan"]))
        if updates:
            ids, nexts, replans = (list(column) for column in zip(*updates, strict=True))
            await queries.execute(conn, "set_next_runs", {"ids": ids, "nexts": nexts, "replans": replans})
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
    limit: int = REQUESTS_PER_TICK,
    budget: float = REQUESTS_BUDGET,
) -> list[dict[str, Any]]:
    """Carry out pending manual and backfill requests (from SQL `trigger()` / `backfill()`), each alone.

    Each request is claimed (SKIP LOCKED) and carried out in a transaction of its own. A request that
    cannot be carried out is marked failed with its reason and never tried again; one whose schedule is
    locked by someone else, or that meets a transient conflict, is left for a later tick. At most
    ``limit`` requests, and no new one after ``budget`` seconds, so requests never hold up the schedules.
    """
    settings = settings or Settings.from_env()
    results: list[dict[str, Any]] = []
    later: list[int] = []
    deadline = time.monotonic() + budget
    while len(results) + len(later) < limit and time.monotonic() < deadline:
        rid: int | None = None
        try:
            async with conn.transaction():
                req = await _next_request(conn, skip=later)
                if report is not None:
                    report.round_trips += 1
                if req is None:
                    break
                rid = req["id"]
                result = await _carry_out(conn, req, settings, wait=False)
        except TRANSIENT:
            if rid is None:
                raise
            logger.info("fire request %s meets a lock or a conflict; leaving it for a later tick", rid)
            later.append(rid)
            continue
        except Exception as exc:
            if rid is None:
                raise
            result = await _fail_request(conn, rid, exc)
        if report is not None:
            report.requests += 1
        results.append(result)
    return results


async def _next_request(
    conn: psycopg.AsyncConnection[Any], *, only: int | None = None, skip: list[int] | None = None
) -> dict[str, Any] | None:
    return await queries.one(conn, "next_request", {"id": only, "skip": skip or []})


async def _fail_request(conn: psycopg.AsyncConnection[Any], rid: int, exc: Exception) -> dict[str, Any]:
    """Mark request ``rid`` failed, saying why: the refusal's own words, or a generic reason (and the log)."""
    if isinstance(exc, SchedError):
        code, params = exc.code, exc.params
        logger.warning("fire request %s refused: %s", rid, exc.message("en"))
    else:
        code, params = "request.error", {}
        logger.error("fire request %s failed", rid, exc_info=exc)
    result: dict[str, Any] = await queries.value(
        conn, "fail_request", {"id": rid, "code": code, "params": json.dumps(params, default=str)}
    )
    return result


async def _carry_out(
    conn: psycopg.AsyncConnection[Any], req: dict[str, Any], settings: Settings, *, wait: bool
) -> dict[str, Any]:
    """Expand one claimed request into its due times, run the resolvers, and apply it (may raise)."""
    schedule = req["schedule"]
    if req["kind"] == "manual":
        times = [req["fire_at"]]
    else:
        times = backfill_times(schedule, req["fire_at"], req["until"])
    refusals = await _resolve_all(schedule, times, req["kind"], settings, req["inputs"])
    result: dict[str, Any] | None = await queries.value(
        conn, "carry_out_request", {"id": req["id"], "times": times, "refusals": json.dumps(refusals), "wait": wait}
    )
    for at, refused, fire in zip(times, refusals, (result or {}).get("fires") or [], strict=False):
        _tell(schedule, {"fire_at": at, "kind": req["kind"], **(refused or {})}, fire, at, settings.locale)
    return result or {"request_id": req["id"], "fires": [], "outcome": {}, "error": None}


async def _resolve_all(
    schedule: dict[str, Any], times: list[datetime], kind: str, settings: Settings, inputs: dict[str, Any] | None
) -> list[dict[str, Any] | None]:
    """The resolver's answer for each time, a few at once (each bounded by the resolver timeout)."""
    if not hooks.has_resolver(schedule["task"]):
        return [None] * len(times)
    gate = asyncio.Semaphore(RESOLVERS_AT_ONCE)

    async def one(at: datetime) -> dict[str, Any] | None:
        async with gate:
            return await _resolve(schedule, at, kind, settings, inputs)

    return list(await asyncio.gather(*(one(at) for at in times)))


def backfill_times(
    schedule: Mapping[str, Any], start: datetime, end: datetime, limit: int = BACKFILL_LIMIT
) -> list[datetime]:
    """The due times of a schedule (its cron, zone and DST policies) in [start, end]; more than ``limit``
    is refused.

    Counting stops at the first due time past the limit, so a refusal costs the same whatever the range.
    """
    tz = schedule["timezone"]
    if start >= end:
        raise ValidationError(
            "backfill.bad_range",
            "from",
            start=messages.local_time(start, tz),
            end=messages.local_time(end, tz),
        )
    cron = planner.cron_of(schedule)
    times: list[datetime] = []
    for at in cron.iter_from(start, tz, inclusive=True):
        if at > end:
            break
        if len(times) == limit:
            raise ValidationError(
                "backfill.too_many",
                "to",
                start=messages.local_time(start, tz),
                end=messages.local_time(end, tz),
                limit=limit,
            )
        times.append(at)
    return times


async def _request(conn: psycopg.AsyncConnection[Any], name: str, params: dict[str, Any]) -> int:
    """Write a fire request (statement ``name``); its id."""
    with errors.translated():
        request_id: int = await queries.value(conn, name, params)
    return request_id


async def _direct(
    conn: psycopg.AsyncConnection[Any],
    statement: str,
    params: dict[str, Any],
    requested_by: str | None,
    settings: Settings,
) -> tuple[int, dict[str, Any] | None]:
    """Make a request (statement ``statement``) and carry it out at once, in one transaction (waiting for
    its schedule); a transient conflict (a deadlock, a serialization failure, a job being finished right
    now under cancel_other) rolls it back and tries again, a few times.

    The outcome is None when this session may not carry requests out (a role granted only
    ``trigger_now``): a worker does, within a tick (`_wait_for_worker`).
    """
    for attempt in range(DIRECT_ATTEMPTS):
        try:
            async with conn.transaction():
                rid = await _request(conn, statement, params)
                if requested_by:
                    await queries.execute(conn, "set_requested_by", {"requested_by": requested_by, "id": rid})
                if not await queries.value(conn, "may_carry_out"):
                    return rid, None
                req = await _next_request(conn, only=rid)
                assert req is not None  # made in this transaction: nobody else can see it yet
                return rid, await _carry_out(conn, req, settings, wait=True)
        except TRANSIENT:
            if attempt == DIRECT_ATTEMPTS - 1:
                raise
            logger.info("a fire request met a transient conflict; trying again")
            await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


async def _wait_for_worker(conn: psycopg.AsyncConnection[Any], rid: int, seconds: float) -> dict[str, Any]:
    """The outcome of request ``rid`` once a worker has carried it out; `Conflict` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        state = await queries.one(conn, "request_state", {"id": rid})
        if state is not None and state["done_at"] is not None:
            error = {"code": state["error_code"], "params": state["error_params"]} if state["error_code"] else None
            return {"request_id": rid, "fires": [{"fire_id": f} for f in state["fire_ids"] or []], "error": error}
        if time.monotonic() >= deadline:
            raise errors.error("trigger.not_carried_out", None, request=rid, seconds=int(seconds))
        await asyncio.sleep(0.2)


def _refusal(error: dict[str, Any]) -> SchedError:
    return errors.error(error["code"], None, **(error.get("params") or {}))


async def trigger(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    inputs: dict[str, Any] | None = None,
    *,
    even_if_paused: bool = False,
    requested_by: str | None = None,
    settings: Settings | None = None,
) -> FireOutcome:
    """Fire schedule ``name`` now (``kind = manual``) through the same rules as every fire; return the outcome.

    Every call gets a fire of its own. A paused schedule is refused (:class:`Conflict`,
    ``trigger.paused``) unless ``even_if_paused``; then it fires and stays paused, and the outcome says
    ``paused``. A manual fire does not count against ``remaining_runs`` and is allowed at 0.
    """
    settings = settings or Settings.from_env()
    if inputs is not None:
        limits.check_inputs(inputs, limit="trigger_inputs_bytes")  # before sending it
    if inputs is None:  # a privilege of its own: fire as defined
        statement, params = "request_trigger_now", {"name": name, "even_if_paused": even_if_paused}
    else:
        statement = "request_trigger"
        params = {"name": name, "inputs": json.dumps(inputs), "even_if_paused": even_if_paused}
    rid, result = await _direct(conn, statement, params, requested_by, settings)
    if result is None:
        result = await _wait_for_worker(conn, rid, WAIT_FOR_WORKER)
    if result.get("error"):
        raise _refusal(result["error"])
    outcomes = await _outcomes(conn, result)
    if not outcomes:  # cannot happen: every request has an instant of its own
        raise errors.error("request.error")
    return outcomes[0]


async def backfill(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    start: datetime,
    end: datetime,
    *,
    overlap: str = "buffer_all",
    requested_by: str | None = None,
    settings: Settings | None = None,
) -> BackfillResult:
    """Fire one ``backfill`` fire per due time of ``name`` in [start, end] under ``overlap`` (buffer_all by
    default: one after another, none dropped); report what was launched and what was not.

    A range with more than ``BACKFILL_LIMIT`` due times, or outside what a backfill can cover, is refused
    (:class:`ValidationError`) before anything is written. Backfill fires do not count against
    ``remaining_runs``; a paused schedule can be backfilled.
    """
    settings = settings or Settings.from_env()
    params = {"name": name, "start": start, "end": end, "overlap": overlap}
    rid, result = await _direct(conn, "request_backfill", params, requested_by, settings)
    if result is None:
        result = await _wait_for_worker(conn, rid, WAIT_FOR_WORKER)
    if result.get("error"):
        raise _refusal(result["error"])
    fires = await _outcomes(conn, result)
    return BackfillResult(rid, tuple(fires), dict(result.get("outcome") or {}))


async def _outcomes(conn: psycopg.AsyncConnection[Any], result: dict[str, Any]) -> list[FireOutcome]:
    ids = [f["fire_id"] for f in result["fires"] if f.get("fire_id")]
    found = await queries.rows(conn, "fire_outcomes", {"ids": ids}, FireOutcome)
    if result.get("paused"):
        return [dataclasses.replace(o, paused=True) for o in found]
    return found
