"""Manual and backfill fires: requests a caller makes and the tick carries out.

``trigger()`` and ``backfill()`` write a request (``fire_requests``); the tick that claims it launches its
fires through the same ``launch()`` as scheduled ones, after running the task's resolver. A caller that may
carry out its own request does so at once (``_direct``); one that may not waits for a worker to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg

from agentlab_sched import errors, limits, messages
from agentlab_sched.core import planner
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.firing import hooks
from agentlab_sched.observe import events
from agentlab_sched.settings import Settings

if TYPE_CHECKING:
    from agentlab_sched.firing.tick import TickReport

logger = logging.getLogger(__name__)

#: Seconds a caller that may not carry out its own request (trigger_now only) waits for a worker to.
WAIT_FOR_WORKER = 30.0
#: Due times one backfill may fire at most; a larger range is refused.
BACKFILL_LIMIT = limits.LIMITS["backfill_times"]
#: Requests one tick carries out at most, and the seconds after which it starts no new one: due schedules
#: are fired first, and requests never hold up the next tick for long.
REQUESTS_PER_TICK = 20
REQUESTS_BUDGET = 2.0
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
        events.fire_told(schedule, {"fire_at": at, "kind": req["kind"], **(refused or {})}, fire, at, settings.locale)
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
            return await hooks.refusal_of(schedule, at, kind, settings, inputs)

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
