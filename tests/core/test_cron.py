"""The cron language in Python: exact errors, names, day forms, macros, intervals, seconds, DOM/DOW, DST (docs/cron.md).

Pure: no database. ``BAD`` is shared with ``test_cron_sql.py``, which holds the SQL validator to it.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import importlib.metadata
import itertools
import random
import string
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple, cast
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlab_sched import messages
from agentlab_sched.core import cron
from agentlab_sched.core.cron import Upcoming, check_timezone, parse
from agentlab_sched.errors import ValidationError
from tests.support.cron_cases import (
    BAD,
    BAD_ANCHORS,
    GOOD_ANCHORS,
    MALFORMED_INTERVALS,
    VALID,
    problem_of,
)

NY = "America/New_York"
BERLIN = "Europe/Berlin"
SHANGHAI = "Asia/Shanghai"


def utc(text: str) -> datetime:
    """``"2026-03-08 07:00"`` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def local(text: str, tz: str, fold: int = 0) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz), fold=fold)


def fmt(times: list[datetime]) -> list[str]:
    return [t.astimezone(UTC).strftime("%m-%d %H:%M:%S") for t in times]


def take(expr: str, tz: str, start: datetime, n: int) -> list[datetime]:
    it = parse(expr).iter_from(start, tz)
    return [next(it) for _ in range(n)]


# --------------------------------------------------------------------------------------------------
# Errors: code, params, exact words in en and zh-CN (shared with the SQL validator's tests)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "code", "en", "zh"), BAD, ids=[b[0] or "(empty)" for b in BAD])
def test_bad_expressions_name_the_field_and_value(expr: str, code: str, en: str, zh: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse(expr)
    err = caught.value
    assert (err.code, err.field) == (code, "cron")
    assert err.message("en") == en
    assert err.message("zh-CN") == zh


def test_error_params_are_plain_values() -> None:
    assert problem_of("0 25 * * *") == {
        "code": "cron.out_of_range",
        "field": "cron",
        "params": {"field": {"msg": "cron.field.hour"}, "value": "25", "min": 0, "max": 23},
    }
    assert problem_of("* * *") == {"code": "cron.field_count", "field": "cron", "params": {"count": 3, "expr": "* * *"}}


def test_every_cron_message_exists_in_both_locales_with_the_same_placeholders() -> None:
    assert messages.check_catalog() == []
    codes = {b[1] for b in BAD}
    assert codes == {c for c in messages.CATALOG if c.startswith("cron.") and not c.startswith("cron.field.")}
    for key, zh in [
        ("minute", "分"),
        ("hour", "时"),
        ("day-of-month", "日"),
        ("month", "月"),
        ("day-of-week", "周"),
        ("second", "秒"),
    ]:
        assert messages.render(f"cron.field.{key}", "en") == key
        assert messages.render(f"cron.field.{key}", "zh-CN") == zh


def test_none_is_an_empty_expression() -> None:
    assert problem_of(cast(Any, None)) == {"code": "cron.empty", "field": "cron", "params": {}}


# --------------------------------------------------------------------------------------------------
# The language
# --------------------------------------------------------------------------------------------------

START = utc("2026-01-01 00:00")  # a Thursday


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@Daily", "0 0 * * *"),
        ("  @HOURLY\t", "0 * * * *"),
    ],
)
def test_macros_are_their_five_fields(macro: str, fields: str) -> None:
    assert parse(macro).canonical == parse(fields).canonical
    assert take(macro, NY, START, 3) == take(fields, NY, START, 3)
    assert parse(macro).has_seconds is False


def test_macro_times() -> None:
    assert fmt(take("@weekly", "UTC", START, 2)) == ["01-04 00:00:00", "01-11 00:00:00"]
    assert fmt(take("@monthly", "UTC", START, 2)) == ["02-01 00:00:00", "03-01 00:00:00"]
    assert fmt(take("@yearly", "UTC", START, 1)) == ["01-01 00:00:00"]  # 2027-01-01


@pytest.mark.parametrize(
    ("named", "numbered"),
    [
        ("0 0 * JAN,jul *", "0 0 * 1,7 *"),
        ("0 0 * mar-May *", "0 0 * 3-5 *"),
        ("0 0 * * MON-FRI", "0 0 * * 1-5"),
        ("0 0 * * sun", "0 0 * * 0"),
        ("0 0 * * 7", "0 0 * * 0"),
        ("0 0 * * SAT,7", "0 0 * * 6,0"),
        ("0 0 * * 0-7", "0 0 * * *"),
        ("0 0 * * Tue/2", "0 0 * * 2,4,6"),
        ("0 0 * * MON/2", "0 0 * * 1,3,5"),  # a/n runs to SAT: 7 only when written
        ("0 0 * * 1-7/2", "0 0 * * 1,3,5,0"),
        ("5-5/2 * * * *", "5 * * * *"),
        ("50/3 * * * *", "50,53,56,59 * * * *"),
        ("00,05 9 * * *", "0,5 9 * * *"),
        ("0 0\t* *  *", "0 0 * * *"),
    ],
)
def test_names_ranges_and_steps(named: str, numbered: str) -> None:
    assert take(named, "UTC", START, 12) == take(numbered, "UTC", START, 12)


def test_canonical_form() -> None:
    assert parse("*/15 9-11 * JAN-MAR MON-FRI").canonical == "0 */15 9,10,11 * 1,2,3 1,2,3,4,5"
    assert parse("0 0 * * * */10").canonical == "*/10 0 0 * * *"
    assert parse("0 0 */2,15 * 5").canonical == "0 0 0 */2,15 * 5"
    assert parse("0 0 l-3,$,lw,15w * ?").canonical == "0 0 0 L-3,L,LW,15W * *"
    assert parse("0 0 ? * fri#2,SUNL,7L,SAT-SUN").canonical == "0 0 0 * * 5#2,0L,0L,6,7"
    assert parse("@every 1h30m from 00:15").canonical == "@every 5400s from 2000-01-01T00:15:00"
    assert parse("30 seconds").canonical == "@every 30s from 2000-01-01T00:00:00"


def test_seconds_field_is_last() -> None:
    c = parse("30 9 * * * 15")
    assert c.has_seconds
    assert fmt(take("30 9 * * * 15", "UTC", START, 2)) == ["01-01 09:30:15", "01-02 09:30:15"]
    assert fmt(take("* * * * * */20", "UTC", START, 4)) == [
        "01-01 00:00:20",
        "01-01 00:00:40",
        "01-01 00:01:00",
        "01-01 00:01:20",
    ]
    assert parse("30 9 * * *").has_seconds is False


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    # 13th or Friday (Vixie OR): Jan 2026 Fridays are 2, 9, 16, 23, 30; the 13th is a Tuesday.
    days = [t.day for t in take("0 0 13 * FRI", "UTC", START, 6)]
    assert days == [2, 9, 13, 16, 23, 30]
    # either field starting with * makes it AND: Mondays that are odd days
    assert [t.date() for t in take("0 0 */2 * MON", "UTC", START, 3)] == [
        date(2026, 1, 5),
        date(2026, 1, 19),
        date(2026, 2, 9),
    ]
    # a restricted day-of-month with * day-of-week: only that day
    assert [t.date() for t in take("0 0 13 * *", "UTC", START, 2)] == [date(2026, 1, 13), date(2026, 2, 13)]
    # OR also makes an impossible day of month valid: Mondays in February
    assert [t.date() for t in take("0 0 31 2 MON", "UTC", START, 2)] == [date(2026, 2, 2), date(2026, 2, 9)]


def test_leap_day() -> None:
    assert [t.date() for t in take("0 0 29 2 *", "UTC", START, 2)] == [date(2028, 2, 29), date(2032, 2, 29)]


def test_parse_is_cached() -> None:
    assert parse("1 2 3 4 5") is parse("1 2 3 4 5")


def test_fixed_time_or_real_time() -> None:
    assert parse("30 2 * * *").fixed_time
    assert parse("*/5 2 * * *").fixed_time  # the hour is fixed
    assert parse("0 9-17 * * *").fixed_time
    assert parse("@daily").fixed_time
    assert not parse("0 * * * *").fixed_time
    assert not parse("0 */2 * * *").fixed_time
    assert not parse("0 1-23/2 * * *").fixed_time
    assert not parse("@hourly").fixed_time


# --------------------------------------------------------------------------------------------------
# Time: next, latest, previous, inclusive, microseconds
# --------------------------------------------------------------------------------------------------


def test_next_after_and_inclusive() -> None:
    c = parse("0 9 * * *")
    nine = utc("2026-05-01 09:00")
    assert c.next_after(nine, "UTC") == utc("2026-05-02 09:00")
    assert c.next_after(nine, "UTC", inclusive=True) == nine
    assert c.next_after(nine - timedelta(microseconds=1), "UTC") == nine
    assert c.next_after(nine + timedelta(microseconds=1), "UTC", inclusive=True) == utc("2026-05-02 09:00")
    assert c.next_after(nine.astimezone(ZoneInfo(SHANGHAI)), "UTC") == utc("2026-05-02 09:00")
    after = c.next_after(nine, "UTC")
    assert after is not None and after.tzinfo is UTC


def test_latest_and_previous() -> None:
    c = parse("0 9 * * *")
    nine = utc("2026-05-01 09:00")
    assert c.latest_at_or_before(nine, "UTC") == nine
    assert c.latest_at_or_before(nine + timedelta(microseconds=1), "UTC") == nine
    assert c.latest_at_or_before(nine - timedelta(microseconds=1), "UTC") == utc("2026-04-30 09:00")
    assert c.previous_before(nine, "UTC") == utc("2026-04-30 09:00")
    assert c.previous_before(nine + timedelta(microseconds=1), "UTC") == nine
    # a per-second cron after ten days of downtime: one step back, no walk through the backlog
    t0 = time.perf_counter()
    assert parse("* * * * * *").latest_at_or_before(utc("2026-05-11 09:00:00.5"), NY) == utc("2026-05-11 09:00")
    assert time.perf_counter() - t0 < 0.05


def test_shanghai_monday_nine_is_monday_one_utc() -> None:
    c = parse("0 9 * * 1")
    assert c.next_after(utc("2026-03-01 00:00"), SHANGHAI) == utc("2026-03-02 01:00")  # Monday
    assert fmt(take("0 9 * * 1", SHANGHAI, utc("2026-03-01 00:00"), 3)) == [
        "03-02 01:00:00",
        "03-09 01:00:00",
        "03-16 01:00:00",
    ]
    assert utc("2026-03-02 01:00").astimezone(ZoneInfo(SHANGHAI)).weekday() == 0
    assert c.latest_at_or_before(utc("2026-03-05 00:00"), SHANGHAI) == utc("2026-03-02 01:00")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse("* * * * *").next_after(datetime(2026, 1, 1), "UTC")
    with pytest.raises(ValueError, match="timezone-aware"):
        parse("* * * * *").latest_at_or_before(datetime(2026, 1, 1), NY)


def test_unknown_time_zone_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as caught:
        parse("* * * * *").next_after(START, "Mars/Olympus")
    assert caught.value.code == "timezone.unknown"


# --------------------------------------------------------------------------------------------------
# Time zones
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", NY, BERLIN, SHANGHAI, "Etc/GMT+5", "EST5EDT", "GMT0", "EST", "US/Pacific"])
def test_known_time_zones(name: str) -> None:
    assert check_timezone(name) == ZoneInfo(name)


@pytest.mark.parametrize(
    "name",
    [
        *("PST", "CEST", "UTC+3", "GMT+5", "america/new_york", "America", "", " UTC", "../etc/passwd"),
        *(
            "/etc/localtime",
            "localtime",
            "posixrules",
            "posix/UTC",
            "right/UTC",
            "Asia/Shanghai\n",
            "Europe/Berlin\x00",
        ),
    ],
)
def test_unknown_time_zones(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_timezone(name)
    err = caught.value
    assert (err.code, err.field, err.params) == ("timezone.unknown", "timezone", {"value": name})


def test_unknown_time_zone_message() -> None:
    with pytest.raises(ValidationError) as caught:
        check_timezone("PST")
    err = caught.value
    assert err.message("en") == (
        "timezone: PST is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)"
    )
    assert err.message("zh-CN") == "时区 PST 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)"


# --------------------------------------------------------------------------------------------------
# DST: a fixed hour's fires once, at the first instant after a gap and the first occurrence in a
# repeated hour (or as the schedule's dst_gap / dst_repeat say); a schedule that fires more often
# than hourly within the hour runs through both copies of a repeated hour (Vixie); wildcard and
# stepped hours follow real elapsed time. Never twice, never an hour of silence.
# --------------------------------------------------------------------------------------------------

# 2026 transitions: New York 03-08 07:00 UTC (02:00 EST -> 03:00 EDT), 11-01 06:00 UTC (02:00 EDT ->
# 01:00 EST); Berlin 03-29 01:00 UTC (02:00 CET -> 03:00 CEST), 10-25 01:00 UTC (03:00 CEST -> 02:00 CET);
# Riga 03-29 01:00 UTC (03:00 EET -> 04:00 EEST), 10-25 01:00 UTC (04:00 EEST -> 03:00 EET).
RIGA = "Europe/Riga"
DST_FIXED = [
    # (expression, zone, from (UTC), the next fires (UTC))
    ("30 2 * * *", NY, "2026-03-07 00:00", ["03-07 07:30:00", "03-08 07:00:00", "03-09 06:30:00"]),
    ("30 1 * * *", NY, "2026-10-31 00:00", ["10-31 05:30:00", "11-01 05:30:00", "11-02 06:30:00"]),
    ("30 2 * * *", NY, "2026-10-31 00:00", ["10-31 06:30:00", "11-01 07:30:00", "11-02 07:30:00"]),
    ("30 2 * * *", BERLIN, "2026-03-28 00:00", ["03-28 01:30:00", "03-29 01:00:00", "03-30 00:30:00"]),
    ("30 2 * * *", BERLIN, "2026-10-24 00:00", ["10-24 00:30:00", "10-25 00:30:00", "10-26 01:30:00"]),
    ("30 1 * * *", BERLIN, "2026-10-24 00:00", ["10-24 23:30:00", "10-26 00:30:00"]),
    # six fields (seconds last) follow the same rule
    ("30 2 * * * 0", NY, "2026-03-07 00:00", ["03-07 07:30:00", "03-08 07:00:00", "03-09 06:30:00"]),
    ("30 1 * * * 0", NY, "2026-10-31 00:00", ["10-31 05:30:00", "11-01 05:30:00", "11-02 06:30:00"]),
    # several fixed times in the gap fire once, at the jump
    ("0,30 2 * * *", NY, "2026-03-08 06:00", ["03-08 07:00:00", "03-09 06:00:00"]),
    # more often than hourly within the hour: both copies of the repeated hour (Vixie), an hour apart
    (
        "*/20 1 * * *",
        NY,
        "2026-11-01 04:00",
        ["11-01 05:00:00", "11-01 05:20:00", "11-01 05:40:00", "11-01 06:00:00", "11-01 06:20:00", "11-01 06:40:00"],
    ),
    ("0,30 1 * * *", NY, "2026-11-01 04:00", ["11-01 05:00:00", "11-01 05:30:00", "11-01 06:00:00", "11-01 06:30:00"]),
    ("30 1 * * * 0,30", NY, "2026-11-01 05:00", ["11-01 05:30:00", "11-01 05:30:30", "11-01 06:30:00"]),
]


@pytest.mark.parametrize(("expr", "tz", "start", "expected"), DST_FIXED)
def test_fixed_time_at_dst(expr: str, tz: str, start: str, expected: list[str]) -> None:
    assert parse(expr).fixed_time
    assert fmt(take(expr, tz, utc(start), len(expected))) == expected


def test_every_minute_in_fixed_hours_runs_through_both_copies_of_the_repeated_hour() -> None:
    # the case that went silent for an hour: * 1-6 * * * in Riga keeps firing through the second 03:xx
    c = parse("* 1-6 * * *")
    assert c.fixed_time and c.sub_hourly
    begin, end = local("2026-10-25 00:00", RIGA), local("2026-10-25 07:00", RIGA)
    fires = list(_until(c.iter_from(begin, RIGA), end))
    assert len(fires) == 7 * 60  # 01:00-06:59 is seven real hours that night: every minute of them
    assert {b - a for a, b in itertools.pairwise(fires)} == {timedelta(minutes=1)}
    second_copy = [t for t in fires if t.astimezone(ZoneInfo(RIGA)).fold == 1]
    assert len(second_copy) == 60 and second_copy[0] == utc("2026-10-25 01:00")  # 03:00 EET
    # the spring gap: 03:00-03:59 does not exist; the fires before and after it lose nothing real
    spring = list(_until(c.iter_from(local("2026-03-29 00:00", RIGA), RIGA), local("2026-03-29 07:00", RIGA)))
    assert len(spring) == 5 * 60 and spring[0] == local("2026-03-29 01:00", RIGA)
    assert fmt(spring[119:121]) == ["03-29 00:59:00", "03-29 01:00:00"]  # 02:59 EET, then 04:00 EEST


def _until(it: Iterator[datetime], end: datetime) -> Iterator[datetime]:
    for t in it:
        if t >= end:
            return
        yield t


def test_once_an_hour_or_more_often() -> None:
    assert not parse("30 1 * * *").sub_hourly
    assert not parse("30 1 * * * 15").sub_hourly
    assert not parse("30/59 1 * * *").sub_hourly  # one value, however written
    assert parse("*/20 1 * * *").sub_hourly
    assert parse("0,30 1 * * *").sub_hourly
    assert parse("30 1 * * * */10").sub_hourly
    assert parse("* 1-6 * * *").sub_hourly


DST_POLICY = [
    # (expression, zone, dst_gap, dst_repeat, from (UTC), the next fires (UTC))
    ("30 2 * * *", NY, "skip", "first", "2026-03-07 00:00", ["03-07 07:30:00", "03-09 06:30:00"]),
    ("0,30 2 * * *", NY, "skip", "first", "2026-03-08 00:00", ["03-09 06:00:00"]),
    ("30 1 * * *", NY, "shift", "last", "2026-10-31 12:00", ["11-01 06:30:00", "11-02 06:30:00"]),
    ("30 1 * * *", NY, "shift", "both", "2026-10-31 12:00", ["11-01 05:30:00", "11-01 06:30:00", "11-02 06:30:00"]),
    ("30 2 * * *", BERLIN, "shift", "last", "2026-10-24 12:00", ["10-25 01:30:00", "10-26 01:30:00"]),
    ("30 2 * * *", BERLIN, "skip", "both", "2026-03-28 12:00", ["03-30 00:30:00"]),
    # the policies are for fixed-time fires: real-time schedules and sub-hourly ones are unchanged
    ("0 */2 * * *", BERLIN, "skip", "last", "2026-10-24 21:30", ["10-24 22:00:00", "10-25 00:00:00", "10-25 01:00:00"]),
    ("*/30 1 * * *", NY, "shift", "first", "2026-11-01 05:10", ["11-01 05:30:00", "11-01 06:00:00", "11-01 06:30:00"]),
]


@pytest.mark.parametrize(("expr", "tz", "gap", "repeat", "start", "expected"), DST_POLICY)
def test_dst_gap_and_dst_repeat_policies(
    expr: str, tz: str, gap: cron.DstGap, repeat: cron.DstRepeat, start: str, expected: list[str]
) -> None:
    c = parse(expr, dst_gap=gap, dst_repeat=repeat)
    assert (c.dst_gap, c.dst_repeat) == (gap, repeat)
    assert fmt(list(itertools.islice(c.iter_from(utc(start), tz), len(expected)))) == expected


def test_dst_policy_is_part_of_the_parsed_expression() -> None:
    assert parse("30 1 * * *") is parse("30 1 * * *", dst_gap="shift", dst_repeat="first")
    assert parse("30 1 * * *", dst_repeat="both") is parse("30 1 * * *", dst_repeat="both")
    assert parse("30 1 * * *", dst_repeat="both") != parse("30 1 * * *")
    t = utc("2026-11-01 05:45")  # 01:45 EDT: the first 01:30 is behind, the second ahead
    assert parse("30 1 * * *").next_after(t, NY) == utc("2026-11-02 06:30")
    assert parse("30 1 * * *", dst_repeat="both").next_after(t, NY) == utc("2026-11-01 06:30")
    with pytest.raises(ValidationError) as refused:
        parse("30 1 * * *", dst_repeat=cast(Any, "twice"))
    assert (refused.value.code, refused.value.field) == ("schedule.unknown_value", "dst_repeat")


DST_REAL = [
    # (expression, zone, from (UTC), the next fires as local wall-clock times)
    (
        "0 */2 * * *",
        NY,
        "2026-03-08 04:00",
        ["00:00 EST", "04:00 EDT", "06:00 EDT"],  # 02:00 never shows on the clock that night
    ),
    ("0 */2 * * *", NY, "2026-11-01 03:00", ["00:00 EDT", "02:00 EST", "04:00 EST"]),
    ("0 */2 * * *", BERLIN, "2026-03-28 22:00", ["00:00 CET", "04:00 CEST", "06:00 CEST"]),
    # 02:00 shows twice, an hour apart: two real instants
    ("0 */2 * * *", BERLIN, "2026-10-24 21:00", ["00:00 CEST", "02:00 CEST", "02:00 CET", "04:00 CET"]),
    ("0 * * * *", NY, "2026-03-08 05:00", ["01:00 EST", "03:00 EDT", "04:00 EDT"]),
    ("0 * * * *", NY, "2026-11-01 04:00", ["01:00 EDT", "01:00 EST", "02:00 EST"]),
    ("*/30 * * * *", NY, "2026-03-08 06:00", ["01:30 EST", "03:00 EDT", "03:30 EDT"]),
    ("*/30 * * * *", NY, "2026-11-01 04:45", ["01:00 EDT", "01:30 EDT", "01:00 EST", "01:30 EST", "02:00 EST"]),
    ("*/30 * * * *", BERLIN, "2026-03-29 00:15", ["01:30 CET", "03:00 CEST", "03:30 CEST"]),
    ("*/30 * * * *", BERLIN, "2026-10-25 00:15", ["02:30 CEST", "02:00 CET", "02:30 CET", "03:00 CET"]),
]


@pytest.mark.parametrize(("expr", "tz", "start", "expected"), DST_REAL)
def test_wildcard_and_stepped_hours_follow_real_time_at_dst(
    expr: str, tz: str, start: str, expected: list[str]
) -> None:
    assert not parse(expr).fixed_time
    got = take(expr, tz, utc(start), len(expected))
    assert [t.astimezone(ZoneInfo(tz)).strftime("%H:%M %Z") for t in got] == expected


def test_wildcard_hours_keep_real_intervals_across_both_transitions() -> None:
    for tz, day in [(NY, "2026-03-08"), (NY, "2026-11-01"), (BERLIN, "2026-03-29"), (BERLIN, "2026-10-25")]:
        start = local(f"{day} 00:00", tz)
        for expr, step in [("*/30 * * * *", 30), ("0 * * * *", 60)]:
            times = take(expr, tz, start, 48 * 60 // step)
            assert {b - a for a, b in itertools.pairwise(times)} == {timedelta(minutes=step)}, (tz, expr)


# The rule, checked by brute force over every minute of both transition days in several zones.

#: expression -> ((hour, minute) -> due?, whether the hour field is fixed). Whether it fires more often
#: than hourly is read off the matcher, not the implementation.
MATCHERS: dict[str, tuple[Callable[[int, int], bool], bool]] = {
    "30 2 * * *": (lambda h, m: (h, m) == (2, 30), True),
    "30 1 * * *": (lambda h, m: (h, m) == (1, 30), True),
    "30 3 * * *": (lambda h, m: (h, m) == (3, 30), True),
    "15 2,3 * * *": (lambda h, m: m == 15 and h in (2, 3), True),
    "*/10 1-2 * * *": (lambda h, m: m % 10 == 0 and h in (1, 2), True),
    "0,30 1 * * *": (lambda h, m: m in (0, 30) and h == 1, True),
    "* 1-6 * * *": (lambda h, m: 1 <= h <= 6, True),
    "*/30 * * * *": (lambda h, m: m % 30 == 0, False),
    "0 * * * *": (lambda h, m: m == 0, False),
    "45 * * * *": (lambda h, m: m == 45, False),
    "0 */2 * * *": (lambda h, m: m == 0 and h % 2 == 0, False),
    "20 1-23/2 * * *": (lambda h, m: m == 20 and h % 2 == 1, False),
    "0 0 * * *": (lambda h, m: (h, m) == (0, 0), True),
    "30 23 * * *": (lambda h, m: (h, m) == (23, 30), True),
}
SECOND = timedelta(seconds=1)
TRANSITIONS = [(NY, "2026-03-08"), (NY, "2026-11-01"), (BERLIN, "2026-03-29"), (BERLIN, "2026-10-25")]
TRANSITIONS += [(RIGA, "2026-03-29"), (RIGA, "2026-10-25")]  # at 03:00 / 04:00 local
TRANSITIONS += [("Australia/Sydney", "2026-04-05"), ("Australia/Sydney", "2026-10-04")]  # southern hemisphere
TRANSITIONS += [("Australia/Lord_Howe", "2026-04-05"), ("Australia/Lord_Howe", "2026-10-04")]  # 30-minute DST
TRANSITIONS += [("America/Santiago", "2026-04-05"), ("America/Santiago", "2026-09-06")]  # at midnight
POLICIES: list[tuple[cron.DstGap, cron.DstRepeat]] = [("shift", "first"), ("skip", "last"), ("shift", "both")]


class ThreeDays(NamedTuple):
    """The oracle's view of the local midnight before a transition's day to the one after."""

    begin: datetime
    end: datetime
    #: Every real minute, and each one's wall-clock reading.
    minutes: list[datetime]
    walls: list[datetime]
    #: The clock's highest reading so far at each minute.
    highest: list[datetime]
    #: Each wall-clock reading, and the real minutes that showed it (none in a gap, two in a repeat).
    occurrences: dict[datetime, list[datetime]]
    #: Every wall-clock minute of the three days, in order.
    wall_minutes: list[datetime]


@functools.cache
def _three_days(tz: str, day: str) -> ThreeDays:
    """The same for every expression, so worked out once for each transition."""
    zone = ZoneInfo(tz)
    begin = local(f"{day} 00:00", tz) - timedelta(days=1)
    end = local(f"{day} 00:00", tz) + timedelta(days=2)
    real_minutes = (end.astimezone(UTC) - begin.astimezone(UTC)) // timedelta(minutes=1)
    minutes = [begin.astimezone(UTC) + timedelta(minutes=i) for i in range(real_minutes)]
    walls = [t.astimezone(zone).replace(tzinfo=None) for t in minutes]
    occurrences: dict[datetime, list[datetime]] = {}
    for t, wall in zip(minutes, walls, strict=True):
        occurrences.setdefault(wall, []).append(t)
    first_day = begin.replace(tzinfo=None)
    wall_minutes = [first_day + timedelta(minutes=i) for i in range(3 * 24 * 60)]
    return ThreeDays(begin, end, minutes, walls, list(itertools.accumulate(walls, max)), occurrences, wall_minutes)


def expected_fires(expr: str, tz: str, day: str, gap: str, repeat: str) -> list[datetime]:
    """Fires from the local midnight before ``day`` to the one after, by the rule in docs/cron.md."""
    due, fixed_hour = MATCHERS[expr]
    sub_hourly = any(sum(due(h, m) for m in range(60)) > 1 for h in range(24))
    days = _three_days(tz, day)
    if not fixed_hour:  # real time: every instant whose local time matches
        return [t for t, wall in zip(days.minutes, days.walls, strict=True) if due(wall.hour, wall.minute)]
    fires: set[datetime] = set()
    for wall in days.wall_minutes:
        if not due(wall.hour, wall.minute):
            continue
        seen = days.occurrences.get(wall)
        if seen and (len(seen) == 1 or sub_hourly or repeat == "both"):
            fires.update(seen)
        elif seen:
            fires.add(seen[0] if repeat == "first" else seen[-1])
        elif gap == "shift":  # in a gap: the first instant after the jump
            fires.add(days.minutes[bisect.bisect_right(days.highest, wall)])
    return sorted(f for f in fires if days.begin <= f < days.end)


#: The policies change fixed-hour schedules only: real-time ones are checked under the default.
BRUTE_FORCE = [
    (expr, tz, day, gap, repeat)
    for tz, day in TRANSITIONS
    for expr, (_, fixed_hour) in MATCHERS.items()
    for gap, repeat in (POLICIES if fixed_hour else POLICIES[:1])
]


@pytest.mark.parametrize(("expr", "tz", "day", "gap", "repeat"), BRUTE_FORCE)
def test_dst_rule_by_brute_force(expr: str, tz: str, day: str, gap: cron.DstGap, repeat: cron.DstRepeat) -> None:
    expected = expected_fires(expr, tz, day, gap, repeat)
    begin = local(f"{day} 00:00", tz) - timedelta(days=1)
    c = parse(expr, dst_gap=gap, dst_repeat=repeat)
    got = list(_until(c.iter_from(begin, tz, inclusive=True), expected[-1] + timedelta(minutes=1)))
    assert fmt(got) == fmt(expected)
    assert len(set(got)) == len(got)  # never twice
    # next/latest/previous agree with the sequence from any instant around the transition (every 7
    # minutes of the day's first 6 real hours, and on each fire there and a second either side of it)
    night = local(f"{day} 00:00", tz).astimezone(UTC)
    probes = [night + timedelta(minutes=7 * i) for i in range(6 * 60 // 7)]
    probes += [
        f + d for f in expected if night <= f < night + timedelta(hours=6) for d in (-SECOND, 0 * SECOND, SECOND)
    ][:: 7 if len(expected) > 1000 else 1]
    for t in probes:
        after = [f for f in expected if f > t]
        if after and after[0] < expected[-1]:
            assert c.next_after(t, tz) == after[0], t
            assert c.next_after(t, tz, inclusive=True) == next((f for f in expected if f >= t), None), t
        before = [f for f in expected if f <= t]
        if before and before[0] > expected[0]:
            assert c.latest_at_or_before(t, tz) == before[-1], t
            assert c.previous_before(t, tz) == [f for f in expected if f < t][-1], t


# --------------------------------------------------------------------------------------------------
# Intervals: @every <duration> [from <anchor>] and pg_cron's 'N seconds', in real elapsed time
# --------------------------------------------------------------------------------------------------


def test_every_ninety_minutes_from_a_quarter_past_midnight() -> None:
    c = parse("@every 90m from 00:15")
    assert (c.every, c.anchor) == (timedelta(minutes=90), datetime(2000, 1, 1, 0, 15))
    fires = take("@every 90m from 00:15", SHANGHAI, local("2026-05-01 00:00", SHANGHAI), 17)
    clock = [t.astimezone(ZoneInfo(SHANGHAI)).strftime("%H:%M") for t in fires]
    assert clock[:4] == ["00:15", "01:45", "03:15", "04:45"]
    assert fires[16].astimezone(ZoneInfo(SHANGHAI)).strftime("%m-%d %H:%M") == "05-02 00:15"  # 16 a day
    assert c.latest_at_or_before(local("2026-05-01 03:14", SHANGHAI), SHANGHAI) == local("2026-05-01 01:45", SHANGHAI)
    assert c.previous_before(local("2026-05-01 01:45", SHANGHAI), SHANGHAI) == local("2026-05-01 00:15", SHANGHAI)


def test_an_interval_keeps_real_time_through_dst() -> None:
    # Riga: 00:15 on the winter anchor date; real time through both transitions, an hour later in summer
    for day in ("2026-03-29", "2026-10-25"):
        fires = take("@every 90m", RIGA, local(f"{day} 00:00", RIGA), 40)
        assert {b - a for a, b in itertools.pairwise(fires)} == {timedelta(minutes=90)}
    summer = take("@every 90m from 00:15", RIGA, local("2026-07-01 00:00", RIGA), 1)[0]
    assert summer.astimezone(ZoneInfo(RIGA)).strftime("%H:%M %Z") == "01:15 EEST"
    winter = take("@every 90m from 00:15", RIGA, local("2026-12-01 00:00", RIGA), 1)[0]
    assert winter.astimezone(ZoneInfo(RIGA)).strftime("%H:%M %Z") == "00:15 EET"


def test_every_with_a_date_anchor() -> None:
    fires = take("@every 14d from 2026-01-05 09:00", SHANGHAI, utc("2026-01-01 00:00"), 3)
    assert [t.astimezone(ZoneInfo(SHANGHAI)).strftime("%a %m-%d %H:%M") for t in fires] == [
        "Mon 01-05 09:00",
        "Mon 01-19 09:00",
        "Mon 02-02 09:00",
    ]
    # before the anchor too: the anchor fixes the phase, it is not a start
    before = parse("@every 14d from 2026-01-05 09:00").previous_before(fires[0], SHANGHAI)
    assert before == fires[0] - timedelta(days=14)


@pytest.mark.parametrize(
    ("expr", "every"),
    [
        ("30 seconds", 30),
        ("1 second", 1),
        ("59 SECONDS", 59),
        ("  5\tseconds ", 5),
        ("@every 45s", 45),
        ("@EVERY 1d2h3m4s", 93784),
        ("@every 1h30m", 5400),
        ("@every 366d", 366 * 86400),
    ],
)
def test_interval_forms(expr: str, every: int) -> None:
    c = parse(expr)
    assert c.every == timedelta(seconds=every) and not c.fixed_time
    fires = take(expr, NY, utc("2026-03-08 06:59:50"), 3)
    assert {b - a for a, b in itertools.pairwise(fires)} == {timedelta(seconds=every)}
    assert all(int((f - utc("2000-01-01 05:00")).total_seconds()) % every == 0 for f in fires)  # anchored


def test_pg_cron_seconds_are_aligned_to_the_minute() -> None:
    assert fmt(take("30 seconds", BERLIN, utc("2026-01-01 00:00:10"), 3)) == [
        "01-01 00:00:30",
        "01-01 00:01:00",
        "01-01 00:01:30",
    ]
    # not */7 in the seconds field (which restarts every minute): 7 real seconds apart, counted from 2000-01-01
    assert fmt(take("7 seconds", "UTC", utc("2026-01-01 00:00"), 3)) == [
        "01-01 00:00:05",
        "01-01 00:00:12",
        "01-01 00:00:19",
    ]
    assert parse("10 seconds").upcoming(utc("2026-01-01 00:00"), NY, 2)[0].note is None


@pytest.mark.parametrize("expr", MALFORMED_INTERVALS)
def test_malformed_intervals(expr: str) -> None:
    assert (problem_of(expr) or {}).get("code") == "cron.every_malformed"


@pytest.mark.parametrize("expr", BAD_ANCHORS)
def test_bad_interval_anchors(expr: str) -> None:
    assert (problem_of(expr) or {}).get("code") == "cron.every_anchor"


@pytest.mark.parametrize("expr", GOOD_ANCHORS)
def test_good_interval_anchors(expr: str) -> None:
    assert problem_of(expr) is None


def test_interval_bounds() -> None:
    assert (problem_of("@every 367d") or {}).get("code") == "cron.every_out_of_range"
    assert (problem_of("@every 99999999999999999999s") or {}).get("code") == "cron.every_out_of_range"
    assert problem_of("@every 2028-02-29") is not None
    assert problem_of("@every 1d from 2028-02-29 00:00") is None  # a leap day
    assert (problem_of("0 seconds") or {}).get("code") == "cron.seconds_interval"
    assert (problem_of("90 seconds") or {}).get("code") == "cron.seconds_interval"
    assert problem_of("ſeconds 5") is not None and (problem_of("5 ſeconds") or {}).get("code") == "cron.field_count"


# --------------------------------------------------------------------------------------------------
# upcoming: notes for times moved by a gap or in a repeated hour
# --------------------------------------------------------------------------------------------------


def test_upcoming_marks_dst_gap_and_repeat() -> None:
    ny = ZoneInfo(NY)
    gap = parse("30 2 * * *").upcoming(utc("2026-03-07 12:00"), NY, 2)
    assert gap == [
        Upcoming(
            at=utc("2026-03-08 07:00"),
            local=utc("2026-03-08 07:00").astimezone(ny),
            note="dst_gap",
            nominal=datetime(2026, 3, 8, 2, 30),
        ),
        Upcoming(at=utc("2026-03-09 06:30"), local=utc("2026-03-09 06:30").astimezone(ny), note=None),
    ]
    assert gap[0].local.strftime("%Y-%m-%d %H:%M %Z") == "2026-03-08 03:00 EDT"
    repeat = parse("30 1 * * *").upcoming(utc("2026-10-31 12:00"), NY, 2)
    assert [(u.local.strftime("%m-%d %H:%M %Z"), u.note) for u in repeat] == [
        ("11-01 01:30 EDT", "dst_repeat"),
        ("11-02 01:30 EST", None),
    ]
    real = parse("*/30 * * * *").upcoming(utc("2026-11-01 04:45"), NY, 6)
    assert [(u.local.strftime("%H:%M %Z"), u.note, u.fold) for u in real] == [
        ("01:00 EDT", "dst_repeat", 0),
        ("01:30 EDT", "dst_repeat", 0),
        ("01:00 EST", "dst_repeat", 1),
        ("01:30 EST", "dst_repeat", 1),
        ("02:00 EST", None, 0),
        ("02:30 EST", None, 0),
    ]
    assert parse("*/30 * * * *").upcoming(utc("2026-03-08 06:15"), NY, 2)[1].note is None  # 03:00 EDT: real
    assert parse("0 9 * * *").upcoming(START, SHANGHAI, 0) == []
    assert all(u.at.tzinfo is UTC for u in gap + repeat + real)


def test_upcoming_lists_the_fires_a_gap_skips_when_asked() -> None:
    c = parse("30 2 * * *", dst_gap="skip")
    plain = c.upcoming(utc("2026-03-07 12:00"), NY, 2)
    assert [(fmt([u.at])[0], u.note) for u in plain] == [("03-09 06:30:00", None), ("03-10 06:30:00", None)]
    listed = c.upcoming(utc("2026-03-07 12:00"), NY, 2, skipped=True)
    assert [(fmt([u.at])[0], u.note, u.nominal) for u in listed] == [
        ("03-08 07:00:00", "dst_skipped", datetime(2026, 3, 8, 2, 30)),
        ("03-09 06:30:00", None, None),
        ("03-10 06:30:00", None, None),
    ]
    last = parse("30 1 * * *", dst_repeat="last").upcoming(utc("2026-10-31 12:00"), NY, 1)
    assert [(u.local.strftime("%H:%M %Z"), u.note, u.fold) for u in last] == [("01:30 EST", "dst_repeat", 1)]


# --------------------------------------------------------------------------------------------------
# croniter and cronsim on the same cases: what each gives, and where the project differs
# --------------------------------------------------------------------------------------------------

#: (expression, zone, from (local), croniter's fires, cronsim's fires, the project's fires), in UTC,
#: "MM-DD HH:MM" and comma-separated; cronsim is given the expression as it takes it (seconds moved
#: first); "error" when refused.
E = "error"
COMPARISON: list[tuple[str, str, str, str, str, str]] = [
    # a fixed time in a gap: all three move it to the jump
    (
        "30 2 * * *",
        NY,
        "2026-03-07 12:00",
        "03-08 07:00, 03-09 06:30",
        "03-08 07:00, 03-09 06:30",
        "03-08 07:00, 03-09 06:30",
    ),
    # a fixed time in a repeated hour: croniter fires it twice (the kubernetes #121594 bug)
    (
        "30 1 * * *",
        NY,
        "2026-10-31 12:00",
        "11-01 05:30, 11-01 06:30",
        "11-01 05:30, 11-02 06:30",
        "11-01 05:30, 11-02 06:30",
    ),
    # with a seconds field cronsim drops its DST rule: the gap's fire is skipped, the repeat fires twice
    (
        "30 2 * * * 0",
        NY,
        "2026-03-07 12:00",
        "03-08 07:00, 03-09 06:30",
        "03-09 06:30, 03-10 06:30",
        "03-08 07:00, 03-09 06:30",
    ),
    (
        "30 1 * * * 0",
        NY,
        "2026-10-31 12:00",
        "11-01 05:30, 11-01 06:30",
        "11-01 05:30, 11-01 06:30",
        "11-01 05:30, 11-02 06:30",
    ),
    # stepped hours in a gap: croniter moves 02:00 to 03:00; cronsim and the project follow real time
    (
        "0 */2 * * *",
        BERLIN,
        "2026-03-29 00:30",
        "03-29 01:00, 03-29 02:00",
        "03-29 02:00, 03-29 04:00",
        "03-29 02:00, 03-29 04:00",
    ),
    # stepped hours in a repeated hour: all three fire both 02:00s (real time)
    (
        "0 */2 * * *",
        BERLIN,
        "2026-10-25 00:30",
        "10-25 00:00, 10-25 01:00",
        "10-25 00:00, 10-25 01:00",
        "10-25 00:00, 10-25 01:00",
    ),
    # wildcard hours: all three follow real time
    (
        "*/30 * * * *",
        NY,
        "2026-11-01 01:10",
        "11-01 05:30, 11-01 06:00, 11-01 06:30",
        "11-01 05:30, 11-01 06:00, 11-01 06:30",
        "11-01 05:30, 11-01 06:00, 11-01 06:30",
    ),
    # a 30-minute shift (Lord Howe): cronsim's real-time mode jumps whole hours and misses the repeated 01:45
    (
        "45 * * * *",
        "Australia/Lord_Howe",
        "2026-04-05 01:00",
        "04-04 14:45, 04-04 15:15, 04-04 16:15",
        "04-04 14:45, 04-04 16:15, 04-04 17:15",
        "04-04 14:45, 04-04 15:15, 04-04 16:15",
    ),
    # */2 day-of-month with a day-of-week: croniter ORs; cronsim and the project AND (Vixie: it starts with *)
    (
        "0 0 */2 * MON",
        "UTC",
        "2026-01-01 00:00",
        "01-03 00:00, 01-05 00:00",
        "01-05 00:00, 01-19 00:00",
        "01-05 00:00, 01-19 00:00",
    ),
    # a step over a one-value range: croniter misreads it, cronsim did before 2.9 (CRONSIM_READS_SINCE)
    (
        "5-5/2 * * * *",
        "UTC",
        "2026-01-01 00:00",
        "01-01 00:02, 01-01 00:04",
        "01-01 00:05, 01-01 00:07",
        "01-01 00:05, 01-01 01:05",
    ),
    # a/n in day-of-week: cronsim runs it to 7 (Sunday again); croniter and the project to 6
    (
        "0 0 * * FRI/2",
        "UTC",
        "2026-01-01 00:00",
        "01-02 00:00, 01-09 00:00",
        "01-02 00:00, 01-04 00:00",
        "01-02 00:00, 01-09 00:00",
    ),
    # a wrap-around range: croniter accepts it; cronsim and the project refuse it
    ("0 0 * * FRI-MON", "UTC", "2026-01-01 00:00", "01-02 00:00, 01-03 00:00", E, E),
    # the day forms: L in all three; croniter writes the last Friday L5, cronsim and the project 5L
    (
        "0 0 L * *",
        "UTC",
        "2026-01-01 00:00",
        "01-31 00:00, 02-28 00:00",
        "01-31 00:00, 02-28 00:00",
        "01-31 00:00, 02-28 00:00",
    ),
    ("0 0 * * 5L", "UTC", "2026-01-01 00:00", E, "01-30 00:00, 02-27 00:00", "01-30 00:00, 02-27 00:00"),
    ("0 0 * * L5", "UTC", "2026-01-01 00:00", "01-30 00:00, 02-27 00:00", E, E),
    # LW: cronsim and the project; nW: croniter and the project; L-n: the project only
    ("0 0 LW * *", "UTC", "2026-01-01 00:00", E, "01-30 00:00, 02-27 00:00", "01-30 00:00, 02-27 00:00"),
    ("0 0 15W * *", "UTC", "2026-01-20 00:00", "02-16 00:00, 03-16 00:00", E, "02-16 00:00, 03-16 00:00"),
    ("0 0 L-3 * *", "UTC", "2026-01-01 00:00", E, E, "01-28 00:00, 02-25 00:00"),
    # 31W in a month without a 31st: croniter moves it to the 30th's weekday, the project skips the month
    ("0 0 31W * *", "UTC", "2026-04-01 00:00", "04-30 00:00, 05-29 00:00", E, "05-29 00:00, 07-31 00:00"),
    # d#n in all three; ? as * in croniter and the project
    (
        "0 0 * * 5#2",
        "UTC",
        "2026-01-01 00:00",
        "01-09 00:00, 02-13 00:00",
        "01-09 00:00, 02-13 00:00",
        "01-09 00:00, 02-13 00:00",
    ),
    ("0 0 ? * MON", "UTC", "2026-01-01 00:00", "01-05 00:00, 01-12 00:00", E, "01-05 00:00, 01-12 00:00"),
    # a range ending at Sunday: croniter and the project; cronsim refuses it as reversed
    ("0 0 * * SAT-SUN", "UTC", "2026-01-01 00:00", "01-03 00:00, 01-04 00:00", E, "01-03 00:00, 01-04 00:00"),
    # every 20 minutes in a fixed hour, in the repeated hour: both copies everywhere now (Vixie)
    (
        "*/20 1 * * *",
        NY,
        "2026-11-01 01:30",
        "11-01 05:40, 11-01 06:00, 11-01 06:20",
        "11-01 05:40, 11-01 06:00, 11-01 06:20",
        "11-01 05:40, 11-01 06:00, 11-01 06:20",
    ),
    # a step longer than the field: both libraries read */90 as 0, the project refuses it
    ("*/90 * * * *", "UTC", "2026-01-01 00:00", "01-01 01:00, 01-01 02:00", "01-01 01:00, 01-01 02:00", E),
    # macros: cronsim has none; the project expands them
    ("@daily", "UTC", "2026-01-01 00:30", "01-02 00:00, 01-03 00:00", E, "01-02 00:00, 01-03 00:00"),
]


def short(times: list[datetime]) -> str:
    return ", ".join(t.astimezone(UTC).strftime("%m-%d %H:%M") for t in times)


def _croniter(expr: str, start: datetime, n: int) -> object:
    from croniter import croniter  # a test extra, never imported by the package

    try:
        it = croniter(expr, start)
        return short([it.get_next(datetime) for _ in range(n)])
    except ValueError:  # croniter's errors derive from ValueError
        return E


def _cronsim(expr: str, start: datetime, n: int) -> object:
    from cronsim import CronSim, CronSimError

    parts = expr.split()
    if len(parts) == 6:
        parts = [parts[5], *parts[:5]]
    try:
        it = CronSim(" ".join(parts), start)
        return short([next(it) for _ in range(n)])
    except CronSimError:
        return E


def _project(expr: str, tz: str, start: datetime, n: int) -> object:
    try:
        return short(take(expr, tz, start, n))
    except ValidationError:
        return E


#: Readings cronsim changed in a release the project's range admits: (the release, its reading from then on).
CRONSIM_READS_SINCE = {"5-5/2 * * * *": ((2, 9), "01-01 00:05, 01-01 01:05")}
CRONSIM_RELEASE = tuple(int(part) for part in importlib.metadata.version("cronsim").split(".")[:2])


@pytest.mark.parametrize(("expr", "tz", "start", "by_croniter", "by_cronsim", "by_us"), COMPARISON)
def test_croniter_cronsim_and_the_project(
    expr: str, tz: str, start: str, by_croniter: str, by_cronsim: str, by_us: str
) -> None:
    begin = local(start, tz)
    n = max(len(by.split(", ")) for by in (by_croniter, by_cronsim, by_us))
    if expr in CRONSIM_READS_SINCE and CRONSIM_RELEASE >= CRONSIM_READS_SINCE[expr][0]:
        by_cronsim = CRONSIM_READS_SINCE[expr][1]
    assert (_croniter(expr, begin, n), _cronsim(expr, begin, n), _project(expr, tz, begin, n)) == (
        by_croniter,
        by_cronsim,
        by_us,
    )


# --------------------------------------------------------------------------------------------------
# Properties and speed
# --------------------------------------------------------------------------------------------------

ZONES = ["UTC", NY, BERLIN, SHANGHAI, "Australia/Lord_Howe", "America/Santiago"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parse_raises_only_validation_errors(text: str) -> None:
    try:
        parse(text)
    except ValidationError as err:
        for loc in ("en", "zh-CN"):  # every placeholder is filled, with plain values
            template = messages.CATALOG[err.code][loc]
            assert {f for _, f, _, _ in string.Formatter().parse(template) if f} <= set(err.params)
            assert all(isinstance(v, (str, int, dict)) for v in err.params.values())
            err.message(loc)


@settings(max_examples=250, deadline=None)
@given(
    st.sampled_from(VALID),
    st.sampled_from(ZONES),
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)),
)
def test_next_latest_previous_are_consistent(expr: str, tz: str, t: datetime) -> None:
    c = parse(expr)
    nxt = c.next_after(t, tz)
    assert nxt is not None and nxt > t
    assert c.next_after(t, tz, inclusive=True) in (nxt, t)
    latest = c.latest_at_or_before(t, tz)
    assert latest is not None and latest <= t
    assert c.next_after(latest, tz) == nxt  # nothing due between the latest and the next
    assert c.latest_at_or_before(nxt, tz) == nxt
    assert c.previous_before(nxt, tz) == latest
    assert c.next_after(latest, tz, inclusive=True) == latest
    it = c.iter_from(t, tz)
    assert next(it) == nxt
    assert next(it) == c.next_after(nxt, tz)


def test_speed_of_next_after() -> None:
    exprs = ["0 9 * * *", "*/5 * * * *", "0 */2 * * *", "30 8 * * MON-FRI", "0 0 1 * *"]
    t = utc("2026-06-01 12:00:00.123")
    for e in exprs:
        parse(e).next_after(t, NY)
    n = 2000
    t0 = time.perf_counter()
    for i in range(n):
        parse(exprs[i % len(exprs)]).next_after(t + timedelta(minutes=i), NY if i % 2 else "UTC")
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 0.001, f"{per_call * 1e6:.0f} µs per next_after"


# --------------------------------------------------------------------------------------------------
# The day forms (L, L-n, LW, nW, d#n, dL, ?, ranges to Sunday): by definition, and against croniter and
# cronsim on many generated expressions, wherever each library speaks the form
# --------------------------------------------------------------------------------------------------

DOM_ITEMS = st.one_of(
    st.integers(1, 31).map(str),
    st.sampled_from(["L", "LW", "$", "l", "lw"]),
    st.integers(1, 31).map(lambda n: f"{n}W"),
    st.integers(1, 30).map(lambda k: f"L-{k}"),
)
DOW_ITEMS = st.one_of(
    st.integers(0, 7).map(str),
    st.sampled_from(["MON", "sun", "SAT-SUN", "FRI-SUN", "MON-SUN", "1-5", "MON-FRI"]),
    st.tuples(st.sampled_from([*map(str, range(8)), "FRI", "mon"]), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
    st.sampled_from([*map(str, range(8)), "FRI", "sun"]).map(lambda d: f"{d}L"),
)
MONTHS = ["*", "*", "2", "JAN-MAR", "4,6,9,11", "2,12", "*/5"]


@st.composite
def day_expressions(draw: st.DrawFn) -> str:
    """``minute hour dom month dow`` with the day forms in one day field, the other, or both."""
    side = draw(st.sampled_from(["dom", "dow", "both"]))
    dom = "*" if side == "dow" else ",".join(draw(st.lists(DOM_ITEMS, min_size=1, max_size=3)))
    dow = "*" if side == "dom" else ",".join(draw(st.lists(DOW_ITEMS, min_size=1, max_size=3)))
    if draw(st.booleans()):
        dom, dow = ("?" if dom == "*" else dom), ("?" if dow == "*" else dow)
    minute = draw(st.sampled_from(["0", "30", "*/20", "5,35"]))
    hour = draw(st.sampled_from(["0", "9", "*/6", "9-17/4"]))
    return f"{minute} {hour} {dom} {draw(st.sampled_from(MONTHS))} {dow}"


@functools.cache
def _month_days(year: int, month: int) -> tuple[int, list[int]]:
    """The month's last day and its weekdays (Monday to Friday), asked for every day of every example."""
    end = calendar.monthrange(year, month)[1]
    return end, [x for x in range(1, end + 1) if date(year, month, x).weekday() < 5]


def _days_by_definition(dom: str, month: str, dow: str, first: date, last: date) -> list[date]:
    """The days ``dom month dow`` names, by the definitions in docs/cron.md (no cron library)."""
    months = set(range(1, 13)) if month in ("*", "?") else {m for m in range(1, 13) if _month_matches(month, m)}
    and_mode = dom in ("*", "?") or dow in ("*", "?")

    def dom_ok(d: date) -> bool:
        end, weekdays = _month_days(d.year, d.month)
        for item in dom.upper().replace("$", "L").split(","):
            if item in ("*", "?") or (item.isdigit() and int(item) == d.day):
                return True
            if (item == "L" and d.day == end) or (item == "LW" and d.day == weekdays[-1]):
                return True
            if item.startswith("L-") and d.day == end - int(item[2:]):
                return True
            if item.endswith("W") and item[:-1].isdigit() and int(item[:-1]) <= end:
                if d.day == min(weekdays, key=lambda x: abs(x - int(item[:-1]))):
                    return True
        return False

    def dow_ok(d: date) -> bool:
        end = calendar.monthrange(d.year, d.month)[1]
        weekday = (d.weekday() + 1) % 7
        names = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split())}

        def day(text: str) -> int:
            return names[text] if text in names else int(text) % 7

        for item in dow.upper().split(","):
            if item in ("*", "?"):
                return True
            if "#" in item:
                if day(item.split("#")[0]) == weekday and (d.day - 1) // 7 + 1 == int(item.split("#")[1]):
                    return True
            elif item.endswith("L"):
                if day(item[:-1]) == weekday and d.day + 7 > end:
                    return True
            elif "-" in item:
                a, b = (names.get(x, x) for x in item.split("-"))
                b = 7 if int(b) == 0 else int(b)
                if weekday in {v % 7 for v in range(int(a), b + 1)}:
                    return True
            elif day(item) == weekday:
                return True
        return False

    days = []
    d = first
    while d <= last:
        if d.month in months and ((dom_ok(d) and dow_ok(d)) if and_mode else (dom_ok(d) or dow_ok(d))):
            days.append(d)
        d += timedelta(days=1)
    return days


def _month_matches(month: str, m: int) -> bool:
    names = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
    for item in month.split(","):
        if item.startswith("*/"):
            if (m - 1) % int(item[2:]) == 0:
                return True
        elif "-" in item:
            a, b = (names.index(x) + 1 for x in item.split("-"))
            if a <= m <= b:
                return True
        elif int(item) == m:
            return True
    return False


DAY_FORMS = [
    # (expression, from (UTC), the next days)
    ("0 0 L * *", "2026-01-15", ["2026-01-31", "2026-02-28", "2026-03-31"]),
    ("0 0 $ * *", "2028-02-01", ["2028-02-29", "2028-03-31"]),  # pg_cron's $ is L; a leap year
    ("0 0 L-3 * *", "2026-01-15", ["2026-01-28", "2026-02-25", "2026-03-28"]),
    ("0 0 L-30 * *", "2026-01-15", ["2026-03-01", "2026-05-01", "2026-07-01"]),  # only in 31-day months
    ("0 0 LW * *", "2026-01-01", ["2026-01-30", "2026-02-27", "2026-03-31"]),  # Jan 31 is a Saturday
    ("0 0 LW 5 *", "2026-01-01", ["2026-05-29"]),  # May 31 2026 is a Sunday
    ("0 0 15W * *", "2026-02-01", ["2026-02-16", "2026-03-16", "2026-04-15"]),  # Feb 15 a Sunday, Mar 15 too
    ("0 0 1W * *", "2026-07-15", ["2026-08-03", "2026-09-01"]),  # Aug 1 a Saturday: Monday the 3rd, not July
    ("0 0 31W * *", "2026-04-01", ["2026-05-29", "2026-07-31", "2026-08-31"]),  # May 31 a Sunday: Friday the 29th
    ("0 0 28W 2 *", "2026-01-01", ["2026-02-27", "2027-02-26"]),  # Saturday the 28th, Sunday the 28th
    ("0 0 * * 5#2", "2026-01-01", ["2026-01-09", "2026-02-13", "2026-03-13"]),
    ("0 0 * * MON#5", "2026-01-01", ["2026-03-30", "2026-06-29", "2026-08-31"]),
    ("0 0 * * 7#1", "2026-01-01", ["2026-01-04", "2026-02-01"]),
    ("0 0 * * 5L", "2026-01-01", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    ("0 0 * * SUNL", "2026-01-01", ["2026-01-25", "2026-02-22"]),
    ("0 0 * * 5#2,5L", "2026-01-01", ["2026-01-09", "2026-01-30", "2026-02-13"]),
    ("0 0 1 * 5#2", "2026-01-01", ["2026-01-09", "2026-02-01", "2026-02-13"]),  # OR, as plain day fields
    ("0 0 ? * MON", "2026-01-01", ["2026-01-05", "2026-01-12"]),  # ? is *: AND, Mondays only
    ("0 0 13 * ?", "2026-01-01", ["2026-01-13", "2026-02-13"]),
    ("0 0 * * SAT-SUN", "2026-01-01", ["2026-01-03", "2026-01-04", "2026-01-10"]),
    ("0 0 * * FRI-SUN", "2026-01-01", ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-09"]),
    ("0 0 * * MON-SUN", "2026-01-01", ["2026-01-02", "2026-01-03", "2026-01-04"]),
    ("0 0 * * 6-0", "2026-01-01", ["2026-01-03", "2026-01-04", "2026-01-10"]),
    ("0 0 1,15,L * *", "2026-01-02", ["2026-01-15", "2026-01-31", "2026-02-01"]),
]


@pytest.mark.parametrize(("expr", "start", "days"), DAY_FORMS)
def test_day_forms(expr: str, start: str, days: list[str]) -> None:
    got = take(expr, "UTC", utc(f"{start} 00:00"), len(days))
    assert [t.date().isoformat() for t in got] == days
    assert problem_of(expr) is None


@settings(max_examples=150, deadline=None)
@given(day_expressions())
def test_day_forms_by_definition(expr: str) -> None:
    _, _, dom, month, dow = expr.split()
    try:
        c = parse(f"0 0 {dom} {month} {dow}")
    except ValidationError as err:
        assert err.code == "cron.day_never"
        assert _days_by_definition(dom, month, dow, date(2024, 1, 1), date(2031, 12, 31)) == []
        return
    first, last = date(2024, 1, 1), date(2027, 12, 31)
    expected = _days_by_definition(dom, month, dow, first, last)
    got = [t.date() for t in _until(c.iter_from(utc("2023-12-31 12:00"), "UTC"), utc("2028-01-01 00:00"))]
    assert got == expected


def _croniter_spelling(expr: str) -> str | None:
    """``expr`` as croniter writes it, or None where croniter lacks the form or reads it otherwise."""
    minute, hour, dom, month, dow = expr.split()
    dom_items, dow_items = dom.upper().split(","), dow.upper().split(",")
    if any(i in ("LW", "$") or i.startswith("L-") for i in dom_items):
        return None  # croniter has no LW, L-n or $
    if any(i.endswith("W") and (len(dom_items) > 1 or int(i[:-1]) > 28) for i in dom_items):
        return None  # croniter takes nW alone, and moves 31W into shorter months (they have no day 31)
    special_dow = [("#" in i or i.endswith("L")) for i in dow_items]
    if any(special_dow) and not all(special_dow):
        return None  # croniter does not mix d#n / Ld with plain days
    restricted = dom not in ("*", "?") and dow not in ("*", "?")
    if restricted and (any(special_dow) or any(i.endswith("W") for i in dom_items)):
        return None  # croniter intersects the two day fields there instead of OR
    if month == "*/5":
        return None
    names = "SUN MON TUE WED THU FRI SAT".split()
    dow = ",".join(f"L{names.index(i[:-1]) if i[:-1] in names else i[:-1]}" if i[-1] == "L" else i for i in dow_items)
    return f"{minute} {hour} {dom} {month} {dow}"


def _random_day_expression(rng: random.Random) -> str:
    """The shapes of ``day_expressions``, drawn from a seeded generator (the same cases every run)."""

    def dom_item() -> str:
        kind = rng.randrange(4)
        if kind == 0:
            return str(rng.randint(1, 31))
        if kind == 1:
            return rng.choice(["L", "LW", "$", "l", "lw"])
        return f"{rng.randint(1, 31)}W" if kind == 2 else f"L-{rng.randint(1, 30)}"

    def dow_item() -> str:
        kind = rng.randrange(4)
        day = rng.choice([*map(str, range(8)), "FRI", "mon", "sun"])
        if kind == 0:
            return rng.choice([day, "SAT-SUN", "FRI-SUN", "MON-SUN", "1-5", "MON-FRI"])
        return f"{day}#{rng.randint(1, 5)}" if kind == 1 else f"{day}L"

    side = rng.choice(["dom", "dow", "both"])
    dom = "*" if side == "dow" else ",".join(dom_item() for _ in range(rng.choice([1, 1, 2, 3])))
    dow = "*" if side == "dom" else ",".join(dow_item() for _ in range(rng.choice([1, 1, 2, 3])))
    if rng.random() < 0.3:
        dom, dow = ("?" if dom == "*" else dom), ("?" if dow == "*" else dow)
    minute, hour = rng.choice(["0", "30", "*/20", "5,35"]), rng.choice(["0", "9", "*/6", "9-17/4"])
    return f"{minute} {hour} {dom} {rng.choice(MONTHS)} {dow}"


def test_day_forms_agree_with_croniter_and_cronsim() -> None:
    from croniter import croniter
    from cronsim import CronSim

    rng = random.Random(13)
    compared = {"cronsim": 0, "croniter": 0}
    for _ in range(600):
        expr = _random_day_expression(rng)
        if problem_of(expr) is not None:
            continue
        c = parse(expr)
        start = datetime(2020, 1, 1) + timedelta(seconds=rng.randrange(10 * 365 * 86400))
        ours = [t.replace(tzinfo=None) for t in itertools.islice(c.iter_from(start.replace(tzinfo=UTC), "UTC"), 8)]
        if "W" not in c.canonical and "L-" not in c.canonical:  # cronsim has L, LW, d#n and dL
            sim = CronSim(c.canonical, start)
            assert [next(sim) for _ in range(8)] == ours, (expr, c.canonical)
            compared["cronsim"] += 1
        spelt = _croniter_spelling(expr)
        if spelt is not None:
            it = croniter(spelt, start)
            assert [it.get_next(datetime) for _ in range(8)] == ours, (expr, spelt)
            compared["croniter"] += 1
    assert compared["cronsim"] > 150 and compared["croniter"] > 150, compared
