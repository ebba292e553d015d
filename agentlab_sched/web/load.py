"""The load page's heat map: how many fires fall in each minute of the next 24 hours, kept by the web process.

Exact: a schedule counts where ``schedules next`` puts its fires (its cron with ``H`` resolved from its name,
its zone and DST policies, its validity window, ``remaining_runs``). Cheap: the schedules are read grouped by
what decides their times, each distinct rule (a resolved cron in a zone) is evaluated once for a 48-hour
horizon, however many schedules share it, and a minute's counts are then a lookup of those times (bisect),
not an evaluation. The server keeps the result in the background: it re-counts when the minute turns (no
query), re-reads the schedules when a change is announced on the channel the live pages hear (evaluating
only rules it has not seen), and evaluates a new horizon, away from any request, every 12 hours. A request
only reads the result, or waits for a re-read a change asked for.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched.core import cron as cronlib
from agentlab_sched.core import planner
from agentlab_sched.database import connect, queries
from agentlab_sched.errors import SchedError
from agentlab_sched.waiting import wait_at_most

__all__ = ["DAY", "Group", "LoadMap", "Parsed", "counts", "evaluate", "groups_of", "heat_map"]

logger = logging.getLogger(__name__)

DAY = timedelta(hours=24)
#: How far ahead each rule's times are evaluated, and how old a horizon may get before a new one is evaluated
#: (in the background): a day's window stays inside the horizon for 24 hours after its start.
HORIZON = timedelta(hours=48)
ROLL_AFTER = timedelta(hours=12)
#: A rule: what decides the due times (``Cron.rule``, the ``H`` fields resolved, as a number: see
#: :class:`Parsed`) and the zone.
Rule = tuple[int, str]


@dataclass(frozen=True)
class Group:
    """Schedules that fire at the same instants: one rule, one validity window, one ``remaining_runs``."""

    rule: Rule
    cron: cronlib.Cron = field(compare=False)
    timezone: str
    starts_at: datetime | None
    ends_at: datetime | None
    remaining_runs: int | None


class Parsed:
    """The crons parsed, kept from one read to the next (100,000 schedules with ``H`` fields are 100,000
    parses), by what parsing takes (text, DST policies, the name where it has ``H`` fields), each with the
    number of its rule (equal rules, one number: a group's key then hashes fast)."""

    def __init__(self) -> None:
        self.crons: dict[tuple[str, str | None, str | None, str | None], tuple[cronlib.Cron, int] | None] = {}
        self.rules: dict[Hashable, int] = {}

    def get(self, row: Mapping[str, Any]) -> tuple[cronlib.Cron, int] | None:
        """The cron of a schedule row and its rule's number; None for one that no longer parses."""
        key = (row["cron"], row.get("name"), row["dst_gap"], row["dst_repeat"])
        if key not in self.crons:
            try:
                expr = planner.cron_of(row)
            except (SchedError, ValueError, KeyError):
                self.crons[key] = None
            else:
                self.crons[key] = (expr, self.rules.setdefault(expr.rule, len(self.rules)))
        return self.crons[key]


def groups_of(rows: Iterable[Mapping[str, Any]], parsed: Parsed | None = None) -> dict[Group, int]:
    """The groups of schedule rows (cron, timezone, DST policies, window, ``remaining_runs``, the name where
    the cron has ``H`` fields, and ``schedules``: how many rows it stands for), with their sizes. A cron that
    no longer parses is left out (the health page says so). ``parsed``: the crons parsed before."""
    out: dict[Group, int] = {}
    memo = Parsed() if parsed is None else parsed
    zones: dict[str, bool] = {}
    for row in rows:
        found = memo.get(row)
        tz = row["timezone"]
        if tz not in zones:
            try:
                zones[tz] = cronlib.check_timezone(tz) is not None
            except SchedError:
                zones[tz] = False
        if found is None or not zones[tz]:
            continue
        expr, number = found
        group = Group((number, tz), expr, tz, row["starts_at"], row["ends_at"], row["remaining_runs"])
        out[group] = out.get(group, 0) + int(row["schedules"])
    return out


def evaluate(rules: Iterable[tuple[Rule, cronlib.Cron]], since: datetime) -> dict[Rule, list[float]]:
    """Each rule's due times (POSIX seconds, increasing) from ``since`` (inclusive) for :data:`HORIZON`."""
    stop = since + HORIZON
    out: dict[Rule, list[float]] = {}
    for rule, expr in rules:
        if rule in out:
            continue
        times: list[float] = []
        for at in expr.iter_from(since, rule[1], inclusive=True):
            if at >= stop:
                break
            times.append(at.timestamp())
        out[rule] = times
    return out


def counts(groups: Mapping[Group, int], fires: Mapping[Rule, list[float]], now: datetime) -> list[int]:
    """Fires per minute for the 24 hours from ``now`` (a minute's start: 1,440 counts), as ``schedules next``
    gives them: from ``now`` on (or ``starts_at``), up to ``ends_at`` (inclusive), at most ``remaining_runs``."""
    out = [0] * 1440
    start, end = now.timestamp(), (now + DAY).timestamp()
    for group, size in groups.items():
        times = fires[group.rule]
        first = max(start, group.starts_at.timestamp()) if group.starts_at else start
        i = bisect.bisect_left(times, first)
        j = bisect.bisect_left(times, end)
        if group.ends_at is not None:
            j = min(j, bisect.bisect_right(times, group.ends_at.timestamp()))
        if group.remaining_runs is not None:
            j = min(j, i + group.remaining_runs)
        for at in times[i:j]:
            out[int((at - start) // 60)] += size
    return out


def heat_map(minute_counts: list[int], now: datetime) -> dict[str, Any]:
    """The load page's grid from the counts of the 24 hours from ``now``: a row per clock hour (UTC), a cell per
    minute 00-59 with its count and shade, so that a storm at :00 is a column; the cells of the first and last
    hour outside those 24 hours have no count (None)."""
    peak = max(minute_counts) if minute_counts else 0

    def level(c: int) -> int:
        return 0 if not c else min(4, 1 + int(4 * c / (peak + 1)))

    first = now.replace(minute=0, second=0, microsecond=0)
    hours = []
    for h in range(24 if now == first else 25):
        hour = first + timedelta(hours=h)
        cells: list[tuple[str, int | None, int]] = []
        for m in range(60):
            at = hour + timedelta(minutes=m)
            i = int((at - now).total_seconds() // 60)
            c = minute_counts[i] if 0 <= i < len(minute_counts) else None
            cells.append((at.strftime("%Y-%m-%d %H:%M"), c, level(c or 0)))
        hours.append({"label": hour.strftime("%H:%M"), "cells": cells})
    return {"hours": hours, "peak": peak, "total": sum(minute_counts)}


async def read_groups(conn: psycopg.AsyncConnection[Any], parsed: Parsed | None = None) -> dict[Group, int]:
    """The enabled schedules' groups: counted in SQL, except those whose cron has ``H`` fields (one row each,
    with the name that resolves them); parsed in a thread (the pages go on meanwhile)."""
    rows = await queries.rows(conn, "web_load_crons")
    hashed = sorted({row["cron"] for row in rows if cronlib.is_hashed(row["cron"])})
    plain = [row for row in rows if row["cron"] not in hashed]
    named = await queries.rows(conn, "web_load_hashed", {"crons": hashed}) if hashed else []
    return await asyncio.to_thread(groups_of, [*plain, *named], parsed)


def _minute(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(second=0, microsecond=0)


class LoadMap:
    """The heat map of one server process, kept up to date in the background (:meth:`run`)."""

    def __init__(self, url: str, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.url = url
        self.clock = clock
        self._groups: dict[Group, int] | None = None
        self._fires: dict[Rule, list[float]] = {}
        self._since: datetime | None = None
        self._grid: tuple[datetime, dict[str, Any]] | None = None
        self._parsed = Parsed()
        self._stale = True
        self._limited = False  # a schedule has remaining_runs: its fires change what it has left
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        #: What it did since the start (tests and the benchmark read them): schedule reads, rules evaluated,
        #: and the seconds of the longest read or evaluation.
        self.reads = 0
        self.evaluated = 0
        self.longest = 0.0

    def heard(self, why: set[str]) -> None:
        """The live hub heard ``why`` (channels, or the table the fires and runs triggers name)."""
        if "agentlab_sched_schedules" in why or "reconnected" in why or (self._limited and "fires" in why):
            self._stale = True
            self._wake.set()

    async def grid(self) -> dict[str, Any]:
        """The grid of the current minute: kept, else re-counted, after a re-read where a change asked for one."""
        minute = _minute(self.clock())
        async with self._lock:
            if self._stale or self._groups is None:
                await self._read()
            assert self._groups is not None
            if self._since is None or not self._since <= minute <= self._since + HORIZON - DAY:
                await self._evaluate(minute, self._groups)
            if self._grid is None or self._grid[0] != minute:
                self._grid = (minute, heat_map(counts(self._groups, self._fires, minute), minute))
            return self._grid[1]

    async def _read(self) -> None:
        self._stale = False  # before the read: a change announced during it asks for another
        started = asyncio.get_running_loop().time()
        conn = await connect(self.url, purpose="web load")
        try:
            groups = await read_groups(conn, self._parsed)
        finally:
            await conn.close()
        self.reads += 1
        self._groups, self._grid = groups, None
        self._limited = any(g.remaining_runs is not None for g in groups)
        if self._since is not None:
            new = [(g.rule, g.cron) for g in groups if g.rule not in self._fires]
            if new:
                self._fires = {**self._fires, **await asyncio.to_thread(evaluate, new, self._since)}
                self.evaluated += len(new)
        self.longest = max(self.longest, asyncio.get_running_loop().time() - started)

    async def _evaluate(self, since: datetime, groups: Mapping[Group, int]) -> None:
        """Every rule of ``groups`` for a new horizon from ``since`` (in a thread: the pages go on meanwhile)."""
        started = asyncio.get_running_loop().time()
        rules = {g.rule: g.cron for g in groups}
        fires = await asyncio.to_thread(evaluate, rules.items(), since)
        self._since, self._fires = since, fires
        self.evaluated += len(rules)
        self.longest = max(self.longest, asyncio.get_running_loop().time() - started)

    async def _roll(self) -> None:
        """A new horizon, evaluated outside the lock (pages read the old one meanwhile), then put in place."""
        minute = _minute(self.clock())
        if self._since is None or self._groups is None or minute - self._since < ROLL_AFTER:
            return
        groups = self._groups
        started = asyncio.get_running_loop().time()
        fires = await asyncio.to_thread(evaluate, ((g.rule, g.cron) for g in groups), minute)
        async with self._lock:
            missing = [(g.rule, g.cron) for g in self._groups or {} if g.rule not in fires]
            if missing:  # read while this evaluated
                fires.update(await asyncio.to_thread(evaluate, missing, minute))
            self._since, self._fires = minute, fires
            self.evaluated += len(fires)
        self.longest = max(self.longest, asyncio.get_running_loop().time() - started)

    async def run(self) -> None:
        """Keep the grid: at the start, when the minute turns, and when a change is heard."""
        while True:
            self._wake.clear()  # before the work: a change heard during it wakes the next round at once
            try:
                await self._roll()
                await self.grid()
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError) as exc:
                logger.warning("load page: reading the schedules failed (%s); trying again", type(exc).__name__)
                self._stale = True
                await asyncio.sleep(2)
                continue
            except Exception:  # the keeper goes on: a request still computes the map itself when it must
                logger.exception("load page: keeping the heat map failed; trying again")
                self._stale = True
                await asyncio.sleep(2)
                continue
            now = self.clock()
            turn = (_minute(now) + timedelta(minutes=1) - now).total_seconds()
            await wait_at_most(self._wake, turn + 0.05)
