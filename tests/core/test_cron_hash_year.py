"""Jenkins' H fields (a value chosen by a stable hash of the schedule's name) and Quartz's seven fields
(seconds first, a year last): evaluation, spread, and the same acceptance in Python and SQL."""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.core import cron, planner
from agentlab_sched.errors import ValidationError
from tests.support.rows import fetched

T0 = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


def minute_of(name: str) -> int:
    """What the docs promise: the first 8 bytes of SHA-256 of the name and the field, modulo 60."""
    digest = hashlib.sha256(f"{name}\x00minute".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 60


def test_h_picks_the_minute_from_the_name_stably() -> None:
    for name in ("backup", "report-7", "用户-42"):
        expr = cron.parse("H * * * *", seed=name)
        due = expr.next_after(T0, "UTC")
        assert due == T0.replace(minute=minute_of(name)) or due == T0.replace(hour=1, minute=0)
        assert [t.minute for t in itertools.islice(expr.iter_from(T0, "UTC", inclusive=True), 3)] == [
            minute_of(name)
        ] * 3
        # The same name, the same minute, in another parse (no process-salted hash())
        assert cron.parse("H * * * *", seed=name).canonical == f"0 {minute_of(name)} * * * *"


def test_two_names_differ_and_the_cache_keeps_them_apart() -> None:
    minutes = {cron.parse("H * * * *", seed=f"s{i}").canonical for i in range(50)}
    assert len(minutes) > 20
    # Expressions without H share one entry whatever the seed
    assert cron.parse("0 * * * *", seed="a") is cron.parse("0 * * * *", seed="b")


def test_ten_thousand_hourly_h_schedules_spread_over_the_hour() -> None:
    def minute(seed: str) -> int:
        due = cron.parse("H * * * *", seed=seed).next_after(T0, "UTC", inclusive=True)
        assert due is not None
        return due.minute

    counts = collections.Counter(minute(f"tenant-{i}") for i in range(10_000))
    assert len(counts) == 60
    assert max(counts.values()) <= 10_000 // 40


def test_h_range_and_step() -> None:
    expr = cron.parse("H(0-29)/10 * * * *", seed="job")
    first = int.from_bytes(hashlib.sha256(b"job\x00minute").digest()[:8], "big") % 10
    assert expr.canonical == f"0 {first},{first + 10},{first + 20} * * * *"
    assert [u.at.minute for u in expr.upcoming(T0, "UTC", 3)] == [first, first + 10, first + 20]
    assert cron.parse("H(5-5) * * * *", seed="x").canonical == "0 5 * * * *"
    assert cron.parse("H/30 * * * *", seed="job").canonical.split()[1] in {f"{m},{m + 30}" for m in range(30)}


def test_h_h_daily_and_day_of_month_stays_within_28() -> None:
    expr = cron.parse("H H * * *", seed="nightly")
    _, minute, hour, *_ = expr.canonical.split()
    assert 0 <= int(minute) <= 59 and 0 <= int(hour) <= 23
    due = expr.next_after(T0, "UTC")
    assert due is not None and (due.hour, due.minute) == (int(hour), int(minute))
    days = {cron.parse("0 0 H * *", seed=f"m{i}").canonical.split()[3] for i in range(300)}
    assert {int(d) for d in days} <= set(range(1, 29)) and len(days) == 28


def test_the_planner_and_schedule_rows_seed_with_the_name() -> None:
    row = {"name": "tenant-1", "cron": "H * * * *", "timezone": "UTC"}
    assert planner.cron_of(row).canonical == f"0 {minute_of('tenant-1')} * * * *"


@pytest.mark.parametrize(
    ("expr", "code", "params"),
    [
        ("R * * * *", "cron.hashed", {"value": "R"}),
        ("H(1-2 * * * *", "cron.hash_malformed", {"value": "H(1-2"}),
        ("H(1) * * * *", "cron.hash_malformed", {"value": "H(1)"}),
        ("H(30-10) * * * *", "cron.range_reversed", {"value": "30-10"}),
        ("H(0-60) * * * *", "cron.out_of_range", {"value": "60", "min": 0, "max": 59}),
        ("H/0 * * * *", "cron.step_out_of_range", {"value": "0", "min": 1, "max": 59}),
        ("H/x * * * *", "cron.step_not_number", {"value": "H/x"}),
        ("0 0 0 * * ? H", "cron.special_misplaced", {"value": "H"}),
        ("0 0 0 * * ? 1969", "cron.out_of_range", {"value": "1969", "min": 1970, "max": 2199}),
        ("0 0 0 * * ? 2030-2027", "cron.range_reversed", {"value": "2030-2027"}),
        ("0 0 0 30 2 ? 2028", "cron.day_never", {"value": "30", "month": "2"}),
        ("0 0 0 30 H(2-2) ? 2028", "cron.day_never", {"value": "30", "month": "H(2-2)"}),
    ],
)
def test_refusals(expr: str, code: str, params: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as caught:
        cron.parse(expr, seed="any")
    assert caught.value.code == code
    assert {k: v for k, v in caught.value.params.items() if k != "field"} == params


def test_year_field_quartz_order() -> None:
    expr = cron.parse("0 30 9 1 1 ? 2028,2030")
    assert expr.canonical == "0 30 9 1 1 * 2028,2030"
    assert [u.at for u in expr.upcoming(T0, "UTC", 5)] == [
        datetime(2028, 1, 1, 9, 30, tzinfo=UTC),
        datetime(2030, 1, 1, 9, 30, tzinfo=UTC),
    ]
    assert expr.latest_at_or_before(datetime(2029, 6, 1, tzinfo=UTC), "UTC") == datetime(2028, 1, 1, 9, 30, tzinfo=UTC)
    assert expr.latest_at_or_before(datetime(2027, 6, 1, tzinfo=UTC), "UTC") is None
    # Far years are found without walking the minutes in between (more than cronsim's 50 years)
    far = cron.parse("0 0 0 1 1 ? 2150")
    assert far.next_after(T0, "UTC") == datetime(2150, 1, 1, tzinfo=UTC)
    # February 29th in a range of years: the leap year only
    leap = cron.parse("0 0 0 29 2 ? 2027-2030")
    assert [u.at for u in leap.upcoming(T0, "UTC", 3)] == [datetime(2028, 2, 29, tzinfo=UTC)]
    # A year in a zone with DST
    zoned = cron.parse("0 0 12 1 7 ? 2027")
    assert zoned.next_after(T0, "Europe/Riga") == datetime(2027, 7, 1, 9, 0, tzinfo=UTC)
    # Every year written as *: the same as six fields
    assert cron.parse("0 15 10 * * ? *").next_after(T0, "UTC") == datetime(2026, 3, 1, 10, 15, tzinfo=UTC)


REFUSED = [
    "R * * * *",
    "H(1-2 * * * *",
    "H(1) * * * *",
    "H() * * * *",
    "H(30-10) * * * *",
    "H(0-60) * * * *",
    "H/0 * * * *",
    "H/x * * * *",
    "H(1-2)x * * * *",
    "0 0 H(0-3) * *",
    "0 0 0 * * ? H",
    "0 0 0 * * ? 1969",
    "0 0 0 * * ? 2030-2027",
    "0 0 0 30 2 ? 2028",
    "0 0 0 30 H(2-2) ? 2028",
    "0 0 30 H(2-2) *",
    "0 0 0 * * L 2028",
    "0 0 0 * * * * *",
]
ACCEPTED = [
    "H * * * *",
    "H H * * *",
    "H(0-29)/10 * * * *",
    "h/15 H(9-17) * * MON-FRI",
    "0 0 H * *",
    "0 0 1 H *",
    "0 0 * * H",
    "0 0 * * H(MON-FRI)",
    "H * * * * H",
    "0 0 H(29-31) H *",
    "0 30 9 1 1 ? 2028,2030",
    "0 0 12 * * ? *",
    "H H H ? * MON 2027-2030/2",
    "0 0 0 L * ? 2099",
]


def python_problem(expr: str) -> dict[str, Any] | None:
    try:
        cron.parse(expr, seed="whatever")
    except ValidationError as err:
        return {"code": err.code, "field": err.field, "params": json.loads(json.dumps(err.params))}
    return None


@pytest.mark.parametrize("expr", REFUSED + ACCEPTED)
def test_sql_agrees(sql: psycopg.Connection[DictRow], expr: str) -> None:
    got = fetched(sql.execute("SELECT agentlab_sched.cron_problem(%s) AS p", (expr,)).fetchone())["p"]
    assert got == python_problem(expr)
    assert (got is None) == (expr in ACCEPTED)


def test_sql_message_of_a_malformed_h(sql: psycopg.Connection[DictRow]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        sql.execute("SELECT agentlab_sched.check_cron(%s)", ("H(1-2 * * * *",))
    assert caught.value.diag.message_primary == "minute: H(1-2 is malformed (write H, H/n, H(a-b) or H(a-b)/n)"
