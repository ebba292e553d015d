"""The SQL validator (sql/20_cron_fields.sql, 21_cron.sql) against the Python parser: same language, codes and words.

One database for the module (cloned from the migrated template), one connection reused by every test,
including the property test.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.rows import DictRow

from agentlab_sched.core.cron import MACROS, check_timezone
from agentlab_sched.errors import ValidationError, from_database
from tests.support.cron_cases import BAD, BAD_ANCHORS, GOOD_ANCHORS, MALFORMED_INTERVALS, VALID, problem_of
from tests.support.rows import fetched


def sql_problem(conn: psycopg.Connection[DictRow], expr: str | None) -> dict[str, Any] | None:
    return fetched(conn.execute("SELECT agentlab_sched.cron_problem(%s) AS p", (expr,)).fetchone())["p"]


def refusal(conn: psycopg.Connection[DictRow], query: str, arg: str | None, locale: str) -> psycopg.Error:
    conn.execute("SELECT set_config('agentlab_sched.locale', %s, false)", (locale,))
    try:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(query, (arg,))
    finally:
        conn.execute("SELECT set_config('agentlab_sched.locale', 'en', false)")
    return caught.value


# --------------------------------------------------------------------------------------------------
# The same bad inputs as the Python tests: same code and params, same words in en and zh-CN
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "code", "en", "zh"), BAD, ids=[b[0] or "(empty)" for b in BAD])
def test_sql_refuses_what_python_refuses_with_the_same_words(
    sql: psycopg.Connection[DictRow], expr: str, code: str, en: str, zh: str
) -> None:
    problem = sql_problem(sql, expr)
    assert problem == problem_of(expr)
    assert problem is not None and problem["code"] == code
    for locale, words in (("en", en), ("zh-CN", zh)):
        err = refusal(sql, "SELECT agentlab_sched.check_cron(%s)", expr, locale)
        assert err.diag.message_primary == words
        assert (err.diag.sqlstate, err.diag.column_name) == ("22023", "cron")
        rebuilt = from_database(err)
        assert isinstance(rebuilt, ValidationError)
        assert (rebuilt.code, rebuilt.field, rebuilt.message("en"), rebuilt.message("zh-CN")) == (code, "cron", en, zh)


@pytest.mark.parametrize(
    "expr",
    [*VALID, *MACROS, "@DAILY", " 0 9 * * MON-FRI ", "0\t9 * * mon-fri", "0 0 31 2 MON", "0 0 L-30 2 MON", "@every 1s"],
)
def test_sql_accepts_what_python_accepts(sql: psycopg.Connection[DictRow], expr: str) -> None:
    assert problem_of(expr) is None
    assert sql_problem(sql, expr) is None
    sql.execute("SELECT agentlab_sched.check_cron(%s)", (expr,))


@pytest.mark.parametrize("expr", [*MALFORMED_INTERVALS, *BAD_ANCHORS, *GOOD_ANCHORS])
def test_sql_and_python_agree_on_these_intervals(sql: psycopg.Connection[DictRow], expr: str) -> None:
    assert sql_problem(sql, expr) == problem_of(expr)


def test_null_is_an_empty_expression(sql: psycopg.Connection[DictRow]) -> None:
    assert sql_problem(sql, None) == {"code": "cron.empty", "field": "cron", "params": {}}


def test_names_are_read_in_ascii_whatever_the_locale(sql: psycopg.Connection[DictRow]) -> None:
    # upper() and lower() run under COLLATE "C" in SQL and on ASCII letters only in Python
    assert sql_problem(sql, "0 0 * * fri") is None
    assert sql_problem(sql, "@Daily") is None
    for expr in ("0 0 * * frı", "0 0 * * ſun", "@daılY"):  # dotless i and long s upper-case to I and S
        problem = sql_problem(sql, expr)
        assert problem == problem_of(expr)
        assert problem is not None and problem["code"] in ("cron.not_a_number", "cron.macro_unknown")


# --------------------------------------------------------------------------------------------------
# Property: Python parse and SQL cron_problem agree on every expression, valid or broken
# --------------------------------------------------------------------------------------------------

_LO = [0, 0, 1, 1, 0, 0]
_HI = [59, 23, 31, 12, 7, 59]
_NAMES = [
    [],
    [],
    [],
    "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(),
    "SUN MON TUE WED THU FRI SAT".split(),
    [],
]
_ODD = [
    *("L", "LW", "l", "lw", "$", "$W", "$-2", "L-3", "L-0", "L-30", "L-31", "L-x", "L-", "L-3-1", "15W", "15w"),
    *("W15", "w1", "0W", "32W", "1W", "31W", "5L", "FRIL", "sunl", "7L", "8L", "L5", "LMON", "L#2", "5#2", "mon#5"),
    *("5#6", "5#0", "5#", "#2", "8#1", "FRI#1#2", "5#x", "?", "#", "H", "h/5", "H(0-29)", "R", "R/2", "HOT"),
    *("x", "1.5", "", "-", "０", "٣", "ı", "ſ", "Ⅻ", "ﬀ", "MONDAY", "*"),
]


def _value(idx: int) -> st.SearchStrategy[str]:
    names = _NAMES[idx]
    return st.one_of(
        st.integers(_LO[idx] - 2, _HI[idx] + 2).map(str),
        st.integers(_LO[idx], _HI[idx]).map(lambda v: f"0{v}"),
        st.sampled_from(["0000000000005", "9999999999", "4294967301", "99999999999999999999"]),
        st.sampled_from([f(n) for n in names or ["MON", "JAN"] for f in (str.upper, str.lower, str.title)]),
        st.sampled_from(_ODD),
    )


def _step(idx: int) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(0, _HI[idx] + 2).map(str), st.sampled_from(["", "x", "1/2", "-1", "*", "007"]))


def _item(idx: int) -> st.SearchStrategy[str]:
    v, s = _value(idx), _step(idx)
    return st.one_of(
        v,
        st.just("*"),
        st.tuples(v, v).map("-".join),
        s.map(lambda step: f"*/{step}"),
        st.tuples(v, v, s).map(lambda t: f"{t[0]}-{t[1]}/{t[2]}"),
        st.tuples(v, s).map("/".join),
        st.text(alphabet="0123456789*/-,#?LWMONJAx$HRSU", max_size=6),
    )


def _field(idx: int) -> st.SearchStrategy[str]:
    return st.lists(_item(idx), min_size=1, max_size=3).map(",".join)


def _valid_item(idx: int) -> st.SearchStrategy[str]:
    lo, hi = _LO[idx], _HI[idx]
    value = st.integers(lo, hi)
    forms: list[st.SearchStrategy[str]] = [
        value.map(str),
        st.just("*"),
        st.integers(1, hi).map(lambda s: f"*/{s}"),
        st.tuples(value, value, st.integers(1, hi)).map(lambda t: f"{min(t[:2])}-{max(t[:2])}/{t[2]}"),
        st.sampled_from(_NAMES[idx] or ["*"]),
    ]
    if idx == 2:  # day-of-month forms
        forms += [
            st.sampled_from(["L", "LW", "$", "l", "$w"]),
            st.integers(1, 30).map(lambda k: f"L-{k}"),
            st.integers(1, 31).map(lambda n: f"{n}W"),
        ]
    if idx == 4:  # day-of-week forms and ranges to Sunday
        day = st.one_of(st.integers(0, 7).map(str), st.sampled_from(["FRI", "sun", "Mon"]))
        forms += [
            st.tuples(day, st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
            day.map(lambda d: f"{d}L"),
            st.sampled_from(["SAT-SUN", "FRI-SUN", "MON-SUN", "mon-0", "6-0/1", "1-SUN/2", "SUN-SUN"]),
        ]
    return st.one_of(*forms)


FIELDS = [_field(i) for i in range(6)]
VALID_FIELDS = [st.lists(_valid_item(i), min_size=1, max_size=3).map(",".join) for i in range(6)]
SEPARATORS = st.sampled_from([" ", " ", "  ", "\t", " \t", "\u00a0", "\x0b", "\n", "\u2003"])


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """Cron-shaped text: 4 to 7 fields, each valid or broken in one of many ways."""
    count = draw(st.sampled_from([5, 5, 5, 6, 6, 4, 7]))
    kinds = VALID_FIELDS if draw(st.booleans()) else FIELDS
    text = draw(st.sampled_from(["", " ", "\t"]))
    for i in range(count):
        field = draw(kinds[min(i, 5)])
        if i in (2, 4) and draw(st.integers(0, 9)) == 0:
            field = "?"  # ? alone in a day field
        text += field + draw(SEPARATORS)
    return text


def _day_item(idx: int) -> st.SearchStrategy[str]:
    odd = st.sampled_from(_ODD)
    either = st.one_of(_valid_item(idx), odd)
    return st.one_of(
        _valid_item(idx),
        odd,
        st.tuples(either, either).map("-".join),
        st.tuples(either, _step(idx)).map("/".join),
    )


#: Built once: a strategy made inside a draw is built and validated again at every example (most of the
#: time of the tests that use these).
DAY_ITEMS = [st.lists(_day_item(i), min_size=1, max_size=3) for i in range(5)]
VALID_ITEMS = [st.lists(_valid_item(i), min_size=1, max_size=3) for i in range(5)]


@st.composite
def day_expressions(draw: st.DrawFn) -> str:
    """Five fields, spaces between, with the day forms (valid, misplaced, combined, misspelt) anywhere."""
    fields = []
    for idx in range(5):
        kind = draw(st.integers(0, 9))
        if kind < 6 or idx in (2, 4):
            field = draw(DAY_ITEMS[idx] if kind < 8 else VALID_ITEMS[idx])
            fields.append(",".join(field))
        else:
            fields.append(draw(VALID_FIELDS[idx]))
    if draw(st.integers(0, 5)) == 0:
        fields[draw(st.sampled_from([2, 4]))] = "?"
    return " ".join(fields)


DURATION = st.one_of(
    st.sampled_from(["90m", "1h30m", "45s", "1d", "2h", "7d", "366d"]),
    st.sampled_from(["90m", "1h30m", "45s", "1d", "2h", "7d", "366d"]),
    st.lists(
        st.tuples(
            st.sampled_from(["0", "1", "5", "30", "90", "366", "367", "8784", "99999999999"]),
            st.sampled_from("dhmsDHMSx"),
        ),
        min_size=1,
        max_size=4,
    ).map(lambda parts: "".join(n + u for n, u in parts)),
    st.sampled_from(["", "90", "1h30m", "1d1h1m1s", "-5m", "5m5", "1.5h"]),
)
ANCHOR = st.one_of(
    st.tuples(st.integers(0, 25), st.integers(0, 61), st.sampled_from(["", ":00", ":59", ":60", ":5"])).map(
        lambda t: f"{t[0]:02d}:{t[1]:02d}{t[2]}"
    ),
    st.tuples(
        st.sampled_from(["0000", "2000", "2026", "2028", "2100", "9999"]),
        st.integers(0, 13),
        st.integers(0, 32),
        st.sampled_from([" ", "T", "t", "  "]),
        st.sampled_from(["09:00", "23:59:59", "24:00", "9:00"]),
    ).map(lambda t: f"{t[0]}-{t[1]:02d}-{t[2]:02d}{t[3]}{t[4]}"),
    st.sampled_from(["noon", "9:5", "9:05", "7:30:15", "", "00:15 x", "2026-01-05", "123:00"]),
)


#: Mostly the separators that separate, sometimes one that does not.
SPACE = st.one_of(st.sampled_from([" ", " ", "  ", "\t"]), SEPARATORS)


@st.composite
def intervals(draw: st.DrawFn) -> str:
    """@every with a duration and maybe an anchor, and pg_cron's N seconds, valid or broken."""
    if draw(st.booleans()):
        number = draw(st.one_of(st.integers(-1, 61).map(str), st.sampled_from(["x", "05", "1.5", "0059", ""])))
        word = draw(st.sampled_from(["seconds", "second", "SECONDS", "Seconds", "secs", "ſeconds", "seconds x"]))
        return f"{number}{draw(SPACE)}{word}"
    head = draw(st.sampled_from(["@every", "@EVERY", "@Every", "@every5m"]))
    text = f"{head}{draw(SPACE)}{draw(DURATION)}"
    if draw(st.integers(0, 3)):
        word = draw(st.sampled_from(["from", "from", "FROM", "at", ""]))
        text += f"{draw(SPACE)}{word}{draw(SPACE)}{draw(ANCHOR)}"
    return text


MACRO_LIKE = st.sampled_from(
    [
        *MACROS,
        "@reboot",
        "@Daily",
        "@HOURLY",
        " @weekly ",
        "@daily x",
        "@",
        "@dailyı",
        "@ daily",
        "@every",
        "@everyı 5m",
    ]
)
ANY_TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=30)


@settings(max_examples=500, deadline=None)
@given(st.one_of(expressions(), expressions(), day_expressions(), day_expressions(), intervals(), MACRO_LIKE, ANY_TEXT))
def test_python_and_sql_agree_on_every_expression(sql: psycopg.Connection[DictRow], expr: str) -> None:
    assert sql_problem(sql, expr) == problem_of(expr)


@settings(max_examples=200, deadline=None)
@given(intervals())
def test_python_and_sql_agree_on_every_interval(sql: psycopg.Connection[DictRow], expr: str) -> None:
    assert sql_problem(sql, expr) == problem_of(expr)


# --------------------------------------------------------------------------------------------------
# Time zones
# --------------------------------------------------------------------------------------------------

ZONES = [
    *("UTC", "Etc/UTC", "America/New_York", "Europe/Berlin", "Asia/Shanghai", "US/Pacific", "EST5EDT", "EST"),
    *("GMT+0", "GMT0", "Etc/GMT+5", "Etc/GMT-14", "Factory", "Zulu", "UCT", "CET", "America/Argentina/Buenos_Aires"),
    # refused: abbreviations, POSIX strings, other spellings, files that are not zones, paths
    *("PST", "CEST", "UTC+3", "GMT+5", "EST5", "<+03>-3", "america/new_york", "AMERICA/NEW_YORK", "America"),
    *("America/", "/UTC", "../UTC", "./UTC", "UTC ", " UTC", "Asia/Shanghai\n", "", "localtime", "posixrules"),
    *("posix/UTC", "right/UTC", "Mars/Olympus", "Etc/GMT+15", "z", "utc"),
]


def python_zone_ok(name: str) -> bool:
    try:
        check_timezone(name)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", ZONES)
def test_sql_and_python_know_the_same_time_zones(sql: psycopg.Connection[DictRow], name: str) -> None:
    problem = fetched(sql.execute("SELECT agentlab_sched.timezone_problem(%s) AS p", (name,)).fetchone())["p"]
    assert (problem is None) == python_zone_ok(name)
    if problem is not None:
        assert problem == {"code": "timezone.unknown", "field": "timezone", "params": {"value": name}}


def test_every_zone_postgresql_lists_is_accepted_by_both(sql: psycopg.Connection[DictRow]) -> None:
    rows = sql.execute(
        "SELECT name, agentlab_sched.timezone_problem(name) IS NULL AS ok FROM pg_timezone_names"
    ).fetchall()
    assert len(rows) > 400
    refused_by_sql = [r["name"] for r in rows if not r["ok"]]
    refused_by_python = [r["name"] for r in rows if not python_zone_ok(r["name"])]
    assert refused_by_sql == []
    assert refused_by_python == []


def test_refused_time_zone_words(sql: psycopg.Connection[DictRow]) -> None:
    en = "timezone: PST is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)"
    zh = "时区 PST 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)"
    for locale, words in (("en", en), ("zh-CN", zh)):
        err = refusal(sql, "SELECT agentlab_sched.check_timezone(%s)", "PST", locale)
        assert err.diag.message_primary == words
        assert (err.diag.sqlstate, err.diag.column_name) == ("22023", "timezone")
        rebuilt = from_database(err)
        assert rebuilt is not None and (rebuilt.code, rebuilt.params) == ("timezone.unknown", {"value": "PST"})
    sql.execute("SELECT agentlab_sched.check_timezone('Asia/Shanghai')")


def test_checking_a_time_zone_leaves_the_session_time_zone_alone(sql: psycopg.Connection[DictRow]) -> None:
    sql.execute("SET TimeZone = 'Asia/Tokyo'")
    try:
        row = sql.execute(
            "SELECT agentlab_sched.timezone_problem('America/New_York') AS a,"
            " agentlab_sched.timezone_problem('Nowhere/Else') AS b, current_setting('TimeZone') AS tz"
        ).fetchone()
        assert row is not None
        assert (row["a"], row["b"]["code"], row["tz"]) == (None, "timezone.unknown", "Asia/Tokyo")
        with sql.transaction():
            sql.execute("SET LOCAL TimeZone = 'Europe/Berlin'")
            sql.execute("SELECT agentlab_sched.check_timezone('America/New_York')")
            assert fetched(sql.execute("SELECT current_setting('TimeZone') AS tz").fetchone())["tz"] == "Europe/Berlin"
        assert fetched(sql.execute("SELECT current_setting('TimeZone') AS tz").fetchone())["tz"] == "Asia/Tokyo"
    finally:
        sql.execute("RESET TimeZone")


# --------------------------------------------------------------------------------------------------
# Cost and volatility
# --------------------------------------------------------------------------------------------------


def test_validation_cost_per_schedule_write(sql: psycopg.Connection[DictRow]) -> None:
    # distinct arguments per row, so nothing is folded into a constant
    n = 2000
    t0 = time.perf_counter()
    sql.execute(
        "SELECT count(agentlab_sched.timezone_problem((ARRAY['Europe/Berlin', 'Asia/Shanghai'])[1 + i %% 2]"
        " || repeat('', i))) FROM generate_series(1, %s) AS i",
        (n,),
    )
    tz_cost = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    sql.execute(
        "SELECT count(agentlab_sched.cron_problem('*/15 9-17 * JAN-MAR MON-FRI' || repeat(' ', i %% 3)))"
        " FROM generate_series(1, %s) AS i",
        (n,),
    )
    cron_cost = (time.perf_counter() - t0) / n
    assert tz_cost < 0.001, f"timezone_problem: {tz_cost * 1e6:.0f} µs"
    assert cron_cost < 0.002, f"cron_problem: {cron_cost * 1e6:.0f} µs"


def test_volatility(sql: psycopg.Connection[DictRow]) -> None:
    rows = sql.execute(
        "SELECT proname, provolatile FROM pg_proc WHERE pronamespace = 'agentlab_sched'::regnamespace"
        " AND proname IN ('cron_problem', 'check_cron', 'timezone_problem', 'check_timezone',"
        " '_cron_field', '_cron_field_check', '_cron_every_problem', '_cron_value', '_cron_problem') ORDER BY proname"
    ).fetchall()
    assert {r["proname"]: r["provolatile"] for r in rows} == {
        "_cron_every_problem": "i",
        "_cron_field_check": "i",
        "_cron_problem": "i",
        "_cron_value": "i",
        "check_cron": "s",
        "check_timezone": "s",
        "cron_problem": "i",
        "timezone_problem": "s",
    }
