"""The pure planning core: what one tick must do for one schedule at a given ``now``.

No I/O and no clock: the caller passes ``now`` (the database clock in production, any instant in
tests). The plan says which due times to launch (and as which kind), which to record as skipped and
why, and where ``next_run_at`` moves to. The database applies it (``agentlab_sched.apply_plans``):
overlap rules, rendering of inputs, ledger rows, runs and jobs.

The rules are those of ``docs/semantics.md``. With ``T0`` the pending due time and ``L`` the latest due time ``<= now``:
on time (``L == T0`` within the on-time window) -> ``scheduled``; late within ``misfire_grace`` ->
``L`` once as ``misfire``; beyond grace -> one ``skipped_misfire`` row; a backlog before ``L`` is one
skip row, whatever its length (cron is walked backwards from ``now``, never through the backlog).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from agentlab_sched.core import cron as cronlib
from agentlab_sched.errors import SchedError
from agentlab_sched.messages import local_time, seconds, term

Kind = Literal["scheduled", "misfire", "manual", "backfill"]
Action = Literal["launch", "skip_misfire", "fail"]


@dataclass(frozen=True)
class ScheduleState:
    """What the tick reads of one claimed schedule."""

    id: int
    name: str
    cron: str
    timezone: str
    enabled: bool
    next_run_at: datetime | None
    replan: str | None
    misfire_grace: timedelta
    catchup: str = "latest"
    max_catchup: int = 10
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    remaining_runs: int | None = None
    dst_gap: cronlib.DstGap = "shift"
    dst_repeat: cronlib.DstRepeat = "first"
    #: When the re-plan was asked for (the moment of the change), if the row says.
    replan_at: datetime | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ScheduleState:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__ if name in row})

    def parsed(self) -> cronlib.Cron:
        """The cron expression, parsed with the schedule's DST policies."""
        return cronlib.parse(self.cron, dst_gap=self.dst_gap, dst_repeat=self.dst_repeat, seed=self.name)


def cron_of(schedule: Mapping[str, Any]) -> cronlib.Cron:
    """A schedule row's cron expression, parsed with its DST policies (the defaults where it has none) and
    its name as the seed of ``H`` fields."""
    return cronlib.parse(
        schedule["cron"],
        dst_gap=schedule.get("dst_gap") or "shift",
        dst_repeat=schedule.get("dst_repeat") or "first",
        seed=schedule.get("name"),
    )


@dataclass(frozen=True)
class PlannedFire:
    """One ledger row to write: a launch, a misfire skip, or a refusal."""

    fire_at: datetime
    kind: Kind
    action: Action
    reason_code: str | None = None
    reason_params: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "fire_at": self.fire_at.isoformat(),
            "kind": self.kind,
            "action": self.action,
            "reason_code": self.reason_code,
            "reason_params": self.reason_params,
        }


@dataclass(frozen=True)
class Plan:
    """Everything one tick does to one schedule."""

    schedule_id: int
    #: The next_run_at the tick claimed: the advance is conditional on it (a second guard).
    claimed_next_run_at: datetime | None
    fires: tuple[PlannedFire, ...]
    next_run_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "schedule_id": self.schedule_id,
            "claimed_next_run_at": self.claimed_next_run_at.isoformat() if self.claimed_next_run_at else None,
            "next_run_at": self.next_run_at.isoformat() if self.next_run_at else None,
            "fires": [f.as_json() for f in self.fires],
        }


def first_due(cron: cronlib.Cron, state: ScheduleState, after: datetime, *, inclusive: bool) -> datetime | None:
    """The first due time after ``after`` (or at it), inside the validity window, or None."""
    start = after
    incl = inclusive
    if state.starts_at is not None and state.starts_at > after:
        start, incl = state.starts_at, True
    due = cron.next_after(start, state.timezone, inclusive=incl)
    if due is None or (state.ends_at is not None and due > state.ends_at):
        return None
    return due


def next_after_change(state: ScheduleState, now: datetime) -> datetime | None:
    """The pending due time of a schedule created or changed (``replan`` set); may be <= now.

    Planned from the moment of the change (``replan_at``; ``now`` when the row does not say, or says a
    later instant than ``now``), not from the tick that happens to plan it, so a due time in between is
    fired (or recorded as missed) like any other. ``replan = 'now'`` (created, enabled, resumed): the first
    due time after the change, so a pause is never replayed. ``replan = 'pending'`` (cron, time zone or
    window changed): the pending due time itself when it was already past at the change and the new
    definition still has it (a missed fire the change still covers); otherwise the new definition's first
    due time after the change.
    """
    if not state.enabled or state.remaining_runs == 0:
        return None
    cron = state.parsed()
    changed = state.replan_at if state.replan_at is not None and state.replan_at <= now else now
    pending = state.next_run_at
    if state.replan == "pending" and pending is not None and pending <= changed:
        if first_due(cron, state, pending, inclusive=True) == pending:
            return pending
    return first_due(cron, state, changed, inclusive=False)


def plan(state: ScheduleState, now: datetime, on_time_window: timedelta) -> Plan:
    """Plan one tick for one schedule (pure). Never raises for a bad cron: that becomes a refusal."""
    claimed = state.next_run_at
    if not state.enabled or state.remaining_runs == 0:
        return Plan(state.id, claimed, (), None)
    try:
        cron = state.parsed()
        pending = next_after_change(state, now) if state.replan else claimed
    except SchedError as err:
        at = claimed or now.replace(microsecond=0)
        refusal = PlannedFire(at, "scheduled", "fail", "fire.cron_invalid", {"problem": term(err.code, **err.params)})
        return Plan(state.id, claimed, (refusal,), None)
    if pending is None or pending > now:  # nothing due: a replan, or a stale claim
        return Plan(state.id, claimed, (), pending)

    fires = _due_fires(cron, state, pending, now, on_time_window)
    return Plan(state.id, claimed, tuple(fires), first_due(cron, state, now, inclusive=False))


def _due_fires(
    cron: cronlib.Cron, state: ScheduleState, t0: datetime, now: datetime, on_time: timedelta
) -> list[PlannedFire]:
    tz = state.timezone
    horizon = now if state.ends_at is None else min(now, state.ends_at)
    latest = cron.latest_at_or_before(horizon, tz)
    if latest is None or latest < t0:
        latest = t0
    grace = max(state.misfire_grace, on_time)

    def kind_of(at: datetime) -> Kind:
        return "scheduled" if now - at <= on_time else "misfire"

    def skip(first: datetime, last: datetime, code: str) -> PlannedFire:
        params: dict[str, Any] = {
            "first": local_time(first, tz),
            "last": local_time(last, tz),
            "grace": seconds(state.misfire_grace),
            "timezone": tz,
        }
        if first == last:
            code += "_one"
        return PlannedFire(first, "misfire", "skip_misfire", code, params)

    if state.catchup == "all":
        # The most recent due times within grace, at most max_catchup, launched oldest first; everything
        # older is one skip row. Walk backwards from `latest`: bounded work whatever the backlog.
        # Scheduled and caught-up fires never exceed remaining_runs (plan() returns nothing at 0).
        most = state.max_catchup if state.remaining_runs is None else min(state.max_catchup, state.remaining_runs)
        launch: list[datetime] = []
        at: datetime | None = latest
        while at is not None and at >= t0 and now - at <= grace and len(launch) < most:
            launch.append(at)
            at = cron.previous_before(at, tz)
        launch.reverse()
        fires: list[PlannedFire] = []
        if at is not None and at >= t0:
            code = "misfire.backlog" if launch else "misfire.beyond_grace"
            fires.append(skip(t0, at, code))
        fires.extend(PlannedFire(a, kind_of(a), "launch") for a in launch)
        return fires

    late = now - latest
    launchable = late <= on_time if state.catchup == "none" else late <= grace
    if not launchable:
        return [skip(t0, latest, "misfire.beyond_grace" if state.catchup == "latest" else "misfire.no_catchup")]
    fires = []
    if latest > t0:
        before = cron.previous_before(latest, tz) or t0
        fires.append(skip(t0, max(before, t0), "misfire.backlog"))
    fires.append(PlannedFire(latest, kind_of(latest), "launch"))
    return fires
