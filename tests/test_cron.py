"""The cron language in Python: exact errors, names, macros, seconds, DOM/DOW, DST (docs/cron.md).

Pure: no database. ``BAD`` is shared with ``test_cron_sql.py``, which holds the SQL validator to it.
"""

from __future__ import annotations

import bisect
import itertools
import json
import string
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlab_sched import messages
from agentlab_sched.errors import ValidationError
from agentlab_sched.schedules import cron
from agentlab_sched.schedules.cron import Upcoming, check_timezone, parse

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

UNSUPPORTED_EN = (
    "is not supported (L, W, # and ? are not part of this cron language; use numbers, names, ranges, lists and steps)"
)
UNSUPPORTED_ZH = "(本系统的 cron 不支持 L、W、# 和 ?,请使用数字、名称、范围、列表和步长)"
MALFORMED_EN = "is malformed (write a, a-b, */n, a-b/n or a/n)"
MALFORMED_ZH = "格式不对(应写作 a、a-b、*/n、a-b/n 或 a/n)"
MACROS_EN = "(known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)"
MACROS_ZH = "(可用:@yearly、@annually、@monthly、@weekly、@daily、@midnight、@hourly)"

#: (expression, code, English, Chinese)
BAD: list[tuple[str, str, str, str]] = [
    # out of range, each field
    ("0 25 * * *", "cron.out_of_range", "hour: 25 is outside 0-23", "「时」的取值 25 超出 0-23"),
    ("60 * * * *", "cron.out_of_range", "minute: 60 is outside 0-59", "「分」的取值 60 超出 0-59"),
    ("0 0 0 * *", "cron.out_of_range", "day-of-month: 0 is outside 1-31", "「日」的取值 0 超出 1-31"),
    ("0 0 32 * *", "cron.out_of_range", "day-of-month: 32 is outside 1-31", "「日」的取值 32 超出 1-31"),
    ("0 0 * 0 *", "cron.out_of_range", "month: 0 is outside 1-12", "「月」的取值 0 超出 1-12"),
    ("0 0 * 13 *", "cron.out_of_range", "month: 13 is outside 1-12", "「月」的取值 13 超出 1-12"),
    ("0 0 * * 8", "cron.out_of_range", "day-of-week: 8 is outside 0-7", "「周」的取值 8 超出 0-7"),
    ("* * * * * 60", "cron.out_of_range", "second: 60 is outside 0-59", "「秒」的取值 60 超出 0-59"),
    ("0 9-24 * * *", "cron.out_of_range", "hour: 24 is outside 0-23", "「时」的取值 24 超出 0-23"),
    ("0 1,2,99 * * *", "cron.out_of_range", "hour: 99 is outside 0-23", "「时」的取值 99 超出 0-23"),
    (
        "99999999999999999999 * * * *",
        "cron.out_of_range",
        "minute: 99999999999999999999 is outside 0-59",
        "「分」的取值 99999999999999999999 超出 0-59",
    ),
    # not a number
    ("x * * * *", "cron.not_a_number", "minute: x is not a number", "「分」的取值 x 不是数字"),
    ("0 MON * * *", "cron.not_a_number", "hour: MON is not a number", "「时」的取值 MON 不是数字"),
    ("0 0 1.5 * *", "cron.not_a_number", "day-of-month: 1.5 is not a number", "「日」的取值 1.5 不是数字"),
    ("* * * * * x", "cron.not_a_number", "second: x is not a number", "「秒」的取值 x 不是数字"),
    ("０ * * * *", "cron.not_a_number", "minute: ０ is not a number", "「分」的取值 ０ 不是数字"),
    ("*-5 * * * *", "cron.not_a_number", "minute: * is not a number", "「分」的取值 * 不是数字"),
    # names
    (
        "0 0 * FOO *",
        "cron.name_unknown",
        "month: FOO is neither a number nor a known name (JAN-DEC)",
        "「月」的取值 FOO 既不是数字,也不是可用的名称(JAN-DEC)",
    ),
    (
        "0 0 * * Monday",
        "cron.name_unknown",
        "day-of-week: Monday is neither a number nor a known name (SUN-SAT)",
        "「周」的取值 Monday 既不是数字,也不是可用的名称(SUN-SAT)",
    ),
    # ranges
    (
        "30-10 * * * *",
        "cron.range_reversed",
        "minute: range 30-10 starts after it ends",
        "「分」的范围 30-10 起点大于终点",
    ),
    (
        "0 0 * * FRI-MON",
        "cron.range_reversed",
        "day-of-week: range FRI-MON starts after it ends",
        "「周」的范围 FRI-MON 起点大于终点",
    ),
    ("1-2-3 * * * *", "cron.malformed", f"minute: 1-2-3 {MALFORMED_EN}", f"「分」的 1-2-3 {MALFORMED_ZH}"),
    ("0 5- * * *", "cron.malformed", f"hour: 5- {MALFORMED_EN}", f"「时」的 5- {MALFORMED_ZH}"),
    ("0 0 * * -1", "cron.malformed", f"day-of-week: -1 {MALFORMED_EN}", f"「周」的 -1 {MALFORMED_ZH}"),
    ("/5 * * * *", "cron.malformed", f"minute: /5 {MALFORMED_EN}", f"「分」的 /5 {MALFORMED_ZH}"),
    # steps
    (
        "*/x * * * *",
        "cron.step_not_number",
        "minute: the step in */x is not a whole number",
        "「分」的 */x 中步长不是整数",
    ),
    ("0 */ * * *", "cron.step_not_number", "hour: the step in */ is not a whole number", "「时」的 */ 中步长不是整数"),
    (
        "1/2/3 * * * *",
        "cron.step_not_number",
        "minute: the step in 1/2/3 is not a whole number",
        "「分」的 1/2/3 中步长不是整数",
    ),
    ("*/0 * * * *", "cron.step_out_of_range", "minute: step 0 is outside 1-59", "「分」的步长 0 超出 1-59"),
    ("*/60 * * * *", "cron.step_out_of_range", "minute: step 60 is outside 1-59", "「分」的步长 60 超出 1-59"),
    ("0 */24 * * *", "cron.step_out_of_range", "hour: step 24 is outside 1-23", "「时」的步长 24 超出 1-23"),
    ("0 0 1-20/32 * *", "cron.step_out_of_range", "day-of-month: step 32 is outside 1-31", "「日」的步长 32 超出 1-31"),
    # lists
    ("1,,2 * * * *", "cron.list_empty_item", "minute: 1,,2 has an empty list item", "「分」的取值 1,,2 中有空的列表项"),
    (
        "0 0 * * MON,",
        "cron.list_empty_item",
        "day-of-week: MON, has an empty list item",
        "「周」的取值 MON, 中有空的列表项",
    ),
    # Quartz extensions
    ("0 0 L * *", "cron.unsupported", f"day-of-month: L {UNSUPPORTED_EN}", f"「日」不支持 L{UNSUPPORTED_ZH}"),
    ("0 0 lw * *", "cron.unsupported", f"day-of-month: lw {UNSUPPORTED_EN}", f"「日」不支持 lw{UNSUPPORTED_ZH}"),
    ("0 0 15W * *", "cron.unsupported", f"day-of-month: 15W {UNSUPPORTED_EN}", f"「日」不支持 15W{UNSUPPORTED_ZH}"),
    ("0 0 * * 5L", "cron.unsupported", f"day-of-week: 5L {UNSUPPORTED_EN}", f"「周」不支持 5L{UNSUPPORTED_ZH}"),
    (
        "0 0 * * MON#2",
        "cron.unsupported",
        f"day-of-week: MON#2 {UNSUPPORTED_EN}",
        f"「周」不支持 MON#2{UNSUPPORTED_ZH}",
    ),
    ("0 0 ? * MON", "cron.unsupported", f"day-of-month: ? {UNSUPPORTED_EN}", f"「日」不支持 ?{UNSUPPORTED_ZH}"),
    # days that never come
    (
        "0 0 30 2 *",
        "cron.day_never",
        "day-of-month: 30 never occurs in month 2",
        "「日」的取值 30 在月份 2 中从不出现",
    ),
    (
        "0 0 31 APR,JUN */2",
        "cron.day_never",
        "day-of-month: 31 never occurs in month APR,JUN",
        "「日」的取值 31 在月份 APR,JUN 中从不出现",
    ),
    # the expression as a whole
    (
        "* * *",
        "cron.field_count",
        'cron: expected 5 or 6 fields, got 3 in "* * *"',
        "cron 表达式应有 5 或 6 个字段,「* * *」有 3 个",
    ),
    (
        " 0 0 * * * * * ",
        "cron.field_count",
        'cron: expected 5 or 6 fields, got 7 in "0 0 * * * * *"',
        "cron 表达式应有 5 或 6 个字段,「0 0 * * * * *」有 7 个",
    ),
    ("", "cron.empty", "cron: the expression is empty", "cron 表达式为空"),
    (" \t ", "cron.empty", "cron: the expression is empty", "cron 表达式为空"),
    (
        "@reboot",
        "cron.macro_unknown",
        f"cron: unknown macro @reboot {MACROS_EN}",
        f"cron 表达式中的 @reboot 不是可用的宏{MACROS_ZH}",
    ),
    (
        "@daily 1",
        "cron.macro_unknown",
        f"cron: unknown macro @daily 1 {MACROS_EN}",
        f"cron 表达式中的 @daily 1 不是可用的宏{MACROS_ZH}",
    ),
]


def problem_of(expr: str) -> dict[str, object] | None:
    """What Python says about ``expr``, in the shape of SQL's ``cron_problem`` (params as JSON)."""
    try:
        parse(expr)
    except ValidationError as err:
        return {"code": err.code, "field": err.field, "params": json.loads(json.dumps(err.params))}
    return None


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
    assert problem_of(None) == {"code": "cron.empty", "field": "cron", "params": {}}  # type: ignore[arg-type]


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


def test_canonical_form_for_cronsim() -> None:
    assert parse("*/15 9-11 * JAN-MAR MON-FRI").canonical == "0 */15 9,10,11 * 1,2,3 1,2,3,4,5"
    assert parse("0 0 * * * */10").canonical == "*/10 0 0 * * *"
    assert parse("0 0 */2,15 * 5").canonical == "0 0 0 */2,15 * 5"


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
    assert c.next_after(nine, "UTC").tzinfo is UTC


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
# DST (docs/cron.md): fixed times once, at the first instant after a gap and the first occurrence in a
# repeated hour; wildcard and stepped hours follow real elapsed time. Never twice, never skipped.
# --------------------------------------------------------------------------------------------------

# 2026 transitions: New York 03-08 07:00 UTC (02:00 EST -> 03:00 EDT), 11-01 06:00 UTC (02:00 EDT ->
# 01:00 EST); Berlin 03-29 01:00 UTC (02:00 CET -> 03:00 CEST), 10-25 01:00 UTC (03:00 CEST -> 02:00 CET).
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
    # several fixed times in the gap fire once, at the jump; in the repeated hour, the first half only
    ("0,30 2 * * *", NY, "2026-03-08 06:00", ["03-08 07:00:00", "03-09 06:00:00"]),
    ("*/20 1 * * *", NY, "2026-11-01 04:00", ["11-01 05:00:00", "11-01 05:20:00", "11-01 05:40:00", "11-02 06:00:00"]),
]


@pytest.mark.parametrize(("expr", "tz", "start", "expected"), DST_FIXED)
def test_fixed_time_at_dst(expr: str, tz: str, start: str, expected: list[str]) -> None:
    assert parse(expr).fixed_time
    assert fmt(take(expr, tz, utc(start), len(expected))) == expected


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


# The rule, checked by brute force over every minute of both transition days in both zones.

MATCHERS: dict[str, Callable[[int, int], bool]] = {  # (hour, minute) -> due?
    "30 2 * * *": lambda h, m: (h, m) == (2, 30),
    "30 1 * * *": lambda h, m: (h, m) == (1, 30),
    "15 2,3 * * *": lambda h, m: m == 15 and h in (2, 3),
    "*/10 1-2 * * *": lambda h, m: m % 10 == 0 and h in (1, 2),
    "*/30 * * * *": lambda h, m: m % 30 == 0,
    "0 * * * *": lambda h, m: m == 0,
    "45 * * * *": lambda h, m: m == 45,
    "0 */2 * * *": lambda h, m: m == 0 and h % 2 == 0,
    "20 1-23/2 * * *": lambda h, m: m == 20 and h % 2 == 1,
    "0 0 * * *": lambda h, m: (h, m) == (0, 0),
    "30 23 * * *": lambda h, m: (h, m) == (23, 30),
}
SECOND = timedelta(seconds=1)
TRANSITIONS = [(NY, "2026-03-08"), (NY, "2026-11-01"), (BERLIN, "2026-03-29"), (BERLIN, "2026-10-25")]
TRANSITIONS += [("Australia/Lord_Howe", "2026-04-05"), ("Australia/Lord_Howe", "2026-10-04")]  # 30-minute DST
TRANSITIONS += [("America/Santiago", "2026-04-05"), ("America/Santiago", "2026-09-06")]  # at midnight


def expected_fires(expr: str, tz: str, day: str) -> list[datetime]:
    """Fires from the local midnight before ``day`` to the one after, by the rule of docs/cron.md."""
    zone = ZoneInfo(tz)
    due = MATCHERS[expr]
    begin = local(f"{day} 00:00", tz) - timedelta(days=1)
    end = local(f"{day} 00:00", tz) + timedelta(days=2)
    real_minutes = (end.astimezone(UTC) - begin.astimezone(UTC)) // timedelta(minutes=1)
    minutes = [begin.astimezone(UTC) + timedelta(minutes=i) for i in range(real_minutes)]
    if not parse(expr).fixed_time:  # real time: every instant whose local time matches
        return [t for t in minutes if due(t.astimezone(zone).hour, t.astimezone(zone).minute)]
    walls = [t.astimezone(zone).replace(tzinfo=None) for t in minutes]
    first: dict[datetime, datetime] = {}
    for t, wall in zip(minutes, walls, strict=True):
        first.setdefault(wall, t)
    highest = list(itertools.accumulate(walls, max))  # the clock's highest reading so far
    fires: set[datetime] = set()
    first_day = begin.replace(tzinfo=None)
    for i in range(3 * 24 * 60):  # every wall-clock minute of the three days
        wall = first_day + timedelta(minutes=i)
        if not due(wall.hour, wall.minute):
            continue
        if wall in first:  # exists: its first occurrence
            fires.add(first[wall])
        else:  # in a gap: the first instant after the jump
            fires.add(minutes[bisect.bisect_right(highest, wall)])
    return sorted(f for f in fires if begin <= f < end)


@pytest.mark.parametrize("expr", list(MATCHERS))
@pytest.mark.parametrize(("tz", "day"), TRANSITIONS)
def test_dst_rule_by_brute_force(expr: str, tz: str, day: str) -> None:
    expected = expected_fires(expr, tz, day)
    begin = local(f"{day} 00:00", tz) - timedelta(days=1)
    c = parse(expr)
    got = []
    for t in c.iter_from(begin, tz, inclusive=True):
        if t >= expected[-1] + timedelta(minutes=1):
            break
        got.append(t)
    assert fmt(got) == fmt(expected)
    assert len(set(got)) == len(got)  # never twice
    # next/latest/previous agree with the sequence from any instant around the transition (every 7
    # minutes of the day's first 6 real hours, and on each fire there and a second either side of it)
    night = local(f"{day} 00:00", tz).astimezone(UTC)
    probes = [night + timedelta(minutes=7 * i) for i in range(6 * 60 // 7)]
    probes += [
        f + d for f in expected if night <= f < night + timedelta(hours=6) for d in (-SECOND, 0 * SECOND, SECOND)
    ]
    for t in probes:
        after = [f for f in expected if f > t]
        if after and after[0] < expected[-1]:
            assert c.next_after(t, tz) == after[0], t
            assert c.next_after(t, tz, inclusive=True) == ([f for f in expected if f >= t] or [None])[0], t
        before = [f for f in expected if f <= t]
        if before and before[0] > expected[0]:
            assert c.latest_at_or_before(t, tz) == before[-1], t
            assert c.previous_before(t, tz) == [f for f in expected if f < t][-1], t


# --------------------------------------------------------------------------------------------------
# upcoming: notes for times moved by a gap or in a repeated hour
# --------------------------------------------------------------------------------------------------


def test_upcoming_marks_dst_gap_and_repeat() -> None:
    ny = ZoneInfo(NY)
    gap = parse("30 2 * * *").upcoming(utc("2026-03-07 12:00"), NY, 2)
    assert gap == [
        Upcoming(at=utc("2026-03-08 07:00"), local=utc("2026-03-08 07:00").astimezone(ny), note="dst_gap"),
        Upcoming(at=utc("2026-03-09 06:30"), local=utc("2026-03-09 06:30").astimezone(ny), note=None),
    ]
    assert gap[0].local.strftime("%Y-%m-%d %H:%M %Z") == "2026-03-08 03:00 EDT"
    repeat = parse("30 1 * * *").upcoming(utc("2026-10-31 12:00"), NY, 2)
    assert [(u.local.strftime("%m-%d %H:%M %Z"), u.note) for u in repeat] == [
        ("11-01 01:30 EDT", "dst_repeat"),
        ("11-02 01:30 EST", None),
    ]
    real = parse("*/30 * * * *").upcoming(utc("2026-11-01 04:45"), NY, 6)
    assert [(u.local.strftime("%H:%M %Z"), u.note) for u in real] == [
        ("01:00 EDT", "dst_repeat"),
        ("01:30 EDT", "dst_repeat"),
        ("01:00 EST", "dst_repeat"),
        ("01:30 EST", "dst_repeat"),
        ("02:00 EST", None),
        ("02:30 EST", None),
    ]
    assert parse("*/30 * * * *").upcoming(utc("2026-03-08 06:15"), NY, 2)[1].note is None  # 03:00 EDT: real
    assert parse("0 9 * * *").upcoming(START, SHANGHAI, 0) == []
    assert all(u.at.tzinfo is UTC for u in gap + repeat + real)


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
    # a step over a one-value range: croniter and cronsim both misread it
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
    # Quartz L: both libraries accept it, the project does not
    ("0 0 L * *", "UTC", "2026-01-01 00:00", "01-31 00:00, 02-28 00:00", "01-31 00:00, 02-28 00:00", E),
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


@pytest.mark.parametrize(("expr", "tz", "start", "by_croniter", "by_cronsim", "by_us"), COMPARISON)
def test_croniter_cronsim_and_the_project(
    expr: str, tz: str, start: str, by_croniter: str, by_cronsim: str, by_us: str
) -> None:
    begin = local(start, tz)
    n = max(len(by.split(", ")) for by in (by_croniter, by_cronsim, by_us))
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


VALID = [
    "* * * * *",
    "*/7 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "15 1,2,3 * * *",
    "0 */3 * * *",
    "*/20 9-17 * * MON-FRI",
    "0 0 1,15 * *",
    "0 12 13 * FRI",
    "0 0 29 2 *",
    "10 * * * * */15",
    "30 1 * * * 30",
    "@hourly",
    "@weekly",
]


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


def test_template_and_constructed_cronsim_agree() -> None:
    c = parse("*/15 9-17 * * MON-FRI")
    constructed = cron.Cron(c.expr, c.has_seconds, c.fixed_time, c.canonical, None)
    t = utc("2026-03-06 20:00")
    assert list(zip(range(40), c.iter_from(t, NY), strict=False)) == list(
        zip(range(40), constructed.iter_from(t, NY), strict=False)
    )
    assert c.latest_at_or_before(t, NY) == constructed.latest_at_or_before(t, NY)
