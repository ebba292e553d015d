"""The SQL check of due times (sql/23_cron_match.sql, cron_not_due()) against the Python core's evaluation.

For a cron expression, a zone, the DST policies and a seed, every instant of a window is a due time for
SQL exactly when Python's evaluator (``Cron.iter_from``) gives it: fields, H values, day rules, seven
fields with a year, intervals with anchors, and DST gaps and repeated hours in zones that shift by an
hour, half an hour, a whole day (Apia 2011) or backwards (Dublin).
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlab_sched.core import cron as cronlib
from agentlab_sched.errors import ValidationError
from tests.support.rows import SyncConn, fetched

#: (zone, an instant near a transition of it).
TRANSITIONS = [
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),  # 02:00 -> 03:00
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),  # 02:00 -> 01:00
    ("Europe/Berlin", datetime(2026, 3, 29, 1, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, tzinfo=UTC)),  # back by 30 minutes
    ("Australia/Lord_Howe", datetime(2026, 10, 3, 15, 30, tzinfo=UTC)),  # forward by 30 minutes
    ("Pacific/Apia", datetime(2011, 12, 30, 10, tzinfo=UTC)),  # the whole of 30 December skipped
    ("Europe/Dublin", datetime(2026, 10, 25, 1, tzinfo=UTC)),
    ("America/Santiago", datetime(2026, 4, 5, 3, tzinfo=UTC)),
    ("Asia/Kolkata", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("UTC", datetime(2026, 3, 8, 7, tzinfo=UTC)),
]


def python_due(cron: cronlib.Cron, tz: str, start: datetime, end: datetime) -> set[datetime]:
    due: set[datetime] = set()
    for at in cron.iter_from(start, tz, inclusive=True):
        if at > end or len(due) > 5000:
            break
        due.add(at)
    return due


def sql_due(conn: SyncConn, row: dict[str, Any], instants: list[datetime]) -> set[datetime]:
    """The instants SQL finds due, one check each."""
    rows = conn.execute(
        "SELECT u.t FROM unnest(%(times)s::timestamptz[]) u(t)"
        " WHERE agentlab_sched.cron_not_due(%(cron)s, %(timezone)s, %(dst_gap)s, %(dst_repeat)s, %(name)s,"
        " ARRAY[u.t]) IS NULL",
        {**row, "times": instants},
    ).fetchall()
    return {r["t"].astimezone(UTC) for r in rows}


def check(conn: SyncConn, row: dict[str, Any], start: datetime, end: datetime, every: timedelta) -> None:
    """SQL and Python agree on every instant of [start, end] on a grid of `every`, and around each due time."""
    cron = cronlib.parse(row["cron"], dst_gap=row["dst_gap"], dst_repeat=row["dst_repeat"], seed=row["name"])
    due = python_due(cron, row["timezone"], start, end)
    instants = {start + k * every for k in range(int((end - start) / every) + 1)}
    for at in due:
        instants |= {at, at - timedelta(seconds=1), at + timedelta(seconds=1), at + timedelta(hours=1)}
    instants = {t for t in instants if start <= t <= end}
    got = sql_due(conn, row, sorted(instants))
    assert sorted(got) == sorted(t for t in instants if t in due), row
    if due:  # the batch form: every due time at once, and one that is not
        times = sorted(due)
        assert (
            fetched(
                conn.execute(
                    "SELECT agentlab_sched.cron_not_due(%(cron)s, %(timezone)s, %(dst_gap)s, %(dst_repeat)s, %(name)s,"
                    " %(times)s::timestamptz[]) AS k",
                    {**row, "times": times},
                ).fetchone()
            )["k"]
            is None
        )


def _row(expr: str, tz: str, gap: str = "shift", repeat: str = "first", name: str = "s") -> dict[str, Any]:
    return {"cron": expr, "timezone": tz, "dst_gap": gap, "dst_repeat": repeat, "name": name}


HOURS = st.sampled_from(["2", "1", "0-3", "1,2,3", "2,14", "*", "*/2", "1-3/2", "H", "H(1-3)", "H/3", "23", "0"])
MINUTES = st.sampled_from(["0", "30", "15", "*/15", "0,30", "H", "H/20", "H(10-20)", "45", "*/7", "59"])
SECONDS = st.sampled_from(["", "0", "30", "*/20", "H", "0,59"])
POLICIES = st.tuples(st.sampled_from(cronlib.DST_GAP), st.sampled_from(cronlib.DST_REPEAT))
NAMES = st.sampled_from(["s", "nightly report", "报表", "x" * 40])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(TRANSITIONS), HOURS, MINUTES, SECONDS, POLICIES, NAMES)
def test_sql_and_python_agree_around_dst_transitions(
    sql: SyncConn,
    transition: tuple[str, datetime],
    hours: str,
    minutes: str,
    seconds: str,
    policies: tuple[str, str],
    name: str,
) -> None:
    tz, at = transition
    expr = f"{minutes} {hours} * * *" + (f" {seconds}" if seconds else "")
    span = timedelta(hours=30 if tz == "Pacific/Apia" else 3)
    grid = timedelta(seconds=30) if seconds else timedelta(minutes=1)
    if tz == "Pacific/Apia":
        grid *= 15
    check(sql, _row(expr, tz, *policies, name=name), at - span, at + span, grid)


DOM = st.sampled_from(
    ["*", "?", "1", "15", "31", "L", "LW", "L-3", "15W", "1W", "31W", "1-7", "*/10", "H", "29", "1,L"]
)
MONTHS = st.sampled_from(["*", "2", "FEB", "1-6", "*/3", "H", "12", "apr,jun"])
DOW = st.sampled_from(["*", "?", "MON", "1-5", "SAT-SUN", "5L", "FRI#2", "0#5", "7", "mon-0", "H", "6L,1#1"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DOM, MONTHS, DOW, st.sampled_from(["UTC", "Europe/Berlin", "Asia/Tokyo"]), NAMES)
def test_sql_and_python_agree_on_day_rules(sql: SyncConn, dom: str, month: str, dow: str, tz: str, name: str) -> None:
    expr = f"0 9 {dom} {month} {dow}"
    try:
        cronlib.parse(expr)
    except ValidationError:
        return  # days that never come: not an expression a schedule can have
    start = datetime(2027, 12, 20, tzinfo=UTC)
    check(sql, _row(expr, tz, name=name), start, start + timedelta(days=800), timedelta(days=1))


@pytest.mark.parametrize(
    "expr",
    [
        "0 30 9 * * ? 2027",  # Quartz: seconds first, a year
        "15 0 12 L * ? 2027,2029",
        "0 0 0 29 2 ? 2028-2036/4",
        "@hourly",
        "@weekly",
        "@yearly",
        "@daily",
        "0 0 * * * 30",  # six fields: seconds last
    ],
)
def test_sql_and_python_agree_on_years_macros_and_seconds(sql: SyncConn, expr: str) -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    check(sql, _row(expr, "Europe/Berlin"), start, start + timedelta(days=30), timedelta(minutes=30))
    check(
        sql, _row(expr, "UTC"), datetime(2028, 2, 20, tzinfo=UTC), datetime(2028, 3, 5, tzinfo=UTC), timedelta(hours=1)
    )


@pytest.mark.parametrize(
    "expr",
    [
        "@every 90m",
        "@every 1h30m from 00:15",
        "@every 1d from 2026-03-08 02:30",  # an anchor in New York's gap
        "@every 45m from 2026-11-01T01:30",  # an anchor in New York's repeated hour
        "@every 7s",
        "20 seconds",
        "@EVERY 2h from 23:59:59",
    ],
)
@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Australia/Lord_Howe"])
def test_sql_and_python_agree_on_intervals(sql: SyncConn, expr: str, tz: str) -> None:
    at = datetime(2026, 3, 8, 7, tzinfo=UTC)
    check(sql, _row(expr, tz), at - timedelta(hours=3), at + timedelta(hours=3), timedelta(seconds=5))


def test_the_first_time_that_is_not_due_is_named(sql: SyncConn) -> None:
    times = [datetime(2026, 1, 1, h, tzinfo=UTC) for h in (0, 1, 2)] + [datetime(2026, 1, 1, 2, 30, tzinfo=UTC)]
    ask = "SELECT agentlab_sched.cron_not_due('0 * * * *', 'UTC', 'shift', 'first', 's', %s::timestamptz[]) AS k"
    assert fetched(sql.execute(ask, (times,)).fetchone())["k"] == 4
    assert fetched(sql.execute(ask, (times[:3],)).fetchone())["k"] is None
    assert fetched(sql.execute(ask, ([datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC)],)).fetchone())["k"] == 1


def test_checking_a_whole_backfill_is_cheap(sql: SyncConn) -> None:
    """The most a backfill can name (the limit's 1000 due times), checked in one call."""
    cron = cronlib.parse("H 2 * * *", seed="s")
    times = list(itertools.islice(cron.iter_from(datetime(2026, 1, 1, tzinfo=UTC), "America/New_York"), 1000))
    t0 = time.perf_counter()
    k = fetched(
        sql.execute(
            "SELECT agentlab_sched.cron_not_due('H 2 * * *', 'America/New_York', 'shift', 'first', 's',"
            " %s::timestamptz[]) AS k",
            (times,),
        ).fetchone()
    )["k"]
    cost = time.perf_counter() - t0
    assert k is None
    assert cost < 1.0, f"1000 due times: {cost * 1000:.0f} ms"
