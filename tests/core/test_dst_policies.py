"""Per-schedule DST policies (dst_gap, dst_repeat) and the repeated-hour rule, through the database, the
tick, the Python API and `schedules next` (docs/cron.md, "Daylight saving time")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.firing.tick import fire_due
from agentlab_sched.schedules import admin
from tests.support.cli import ok, refused
from tests.support.firing_helpers import EN, fires, make_schedule, next_of

NY = "America/New_York"
RIGA = "Europe/Riga"
# New York 2026: 11-01 01:30 EDT = 05:30 UTC, 01:30 EST = 06:30 UTC; 03-08 02:30 does not exist.
FIRST, SECOND = datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC)


async def _tick(conn: psycopg.AsyncConnection[DictRow], at: datetime) -> None:
    await fire_due(conn, at + timedelta(seconds=5), settings=EN)


async def test_dst_repeat_both_fires_a_fixed_time_in_both_copies_of_the_hour(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    both = await make_schedule(
        conn, "both", cron="30 1 * * *", timezone=NY, next_run_at=FIRST, dst_repeat="both", overlap="allow_all"
    )
    once = await make_schedule(conn, "once", cron="30 1 * * *", timezone=NY, next_run_at=FIRST)
    await _tick(conn, FIRST)
    assert await next_of(conn, both) == SECOND
    assert await next_of(conn, once) == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)
    await _tick(conn, SECOND)
    assert [(f["fire_at"], f["status"]) for f in await fires(conn, both)] == [(FIRST, "started"), (SECOND, "started")]
    assert [(f["fire_at"], f["status"]) for f in await fires(conn, once)] == [(FIRST, "started")]


async def test_dst_repeat_last_waits_for_the_second_copy(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(
        conn, "last", cron="30 1 * * *", timezone=NY, next_run_at=None, replan="now", dst_repeat="last"
    )
    await fire_due(conn, datetime(2026, 10, 31, 12, tzinfo=UTC), settings=EN)  # plans it
    assert await next_of(conn, sid) == SECOND  # 01:30 EST, not 01:30 EDT


async def test_dst_gap_skip_does_not_fire_on_the_day_the_time_does_not_exist(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    skip = await make_schedule(conn, "skip", cron="30 2 * * *", timezone=NY, next_run_at=None, replan="now")
    shift = await make_schedule(conn, "shift", cron="30 2 * * *", timezone=NY, next_run_at=None, replan="now")
    await conn.execute("UPDATE agentlab_sched.schedules SET dst_gap = 'skip' WHERE id = %s", (skip,))
    await fire_due(conn, datetime(2026, 3, 7, 12, tzinfo=UTC), settings=EN)
    assert await next_of(conn, shift) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT, moved
    assert await next_of(conn, skip) == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)  # the next day's 02:30 EDT


async def test_every_minute_in_fixed_hours_keeps_firing_in_the_second_copy(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    # Riga, 2026-10-25: 04:00 EEST -> 03:00 EET. After 03:59 EEST (00:59 UTC) comes 03:00 EET (01:00 UTC).
    last_first_copy = datetime(2026, 10, 25, 0, 59, tzinfo=UTC)
    sid = await make_schedule(conn, "riga", cron="* 1-6 * * *", timezone=RIGA, next_run_at=last_first_copy)
    await _tick(conn, last_first_copy)
    assert await next_of(conn, sid) == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    await _tick(conn, datetime(2026, 10, 25, 1, 0, tzinfo=UTC))
    assert [f["fire_at"].astimezone(UTC).strftime("%H:%M") for f in await fires(conn, sid)] == ["00:59", "01:00"]


async def test_changing_a_policy_replans_the_pending_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = datetime(2026, 10, 31, 12, tzinfo=UTC)
    s = await admin.schedule(conn, "p", "30 1 * * *", "demo.echo", timezone=NY, now=now)
    assert (s.next_run_at, s.dst_gap, s.dst_repeat) == (FIRST, "shift", "first")
    s = await admin.alter(conn, "p", dst_repeat="last", now=now)
    assert (s.next_run_at, s.dst_repeat, s.version) == (SECOND, "last", 2)
    s = await admin.alter(conn, "p", dst_repeat="last", now=now)
    assert s.version == 2  # the same value is no change
    times = await admin.upcoming(conn, "p", 2, after=now)
    assert [(t.at, t.note, t.fold) for t in times] == [(SECOND, "dst_repeat", 1), (SECOND + timedelta(days=1), None, 0)]


@pytest.mark.parametrize(
    ("locale", "words"),
    [
        ("en", 'dst_repeat: "twice" is not allowed; choose one of first, last, both'),
        ("zh-CN", "「夏令时重复的时段」的取值「twice」无效;可选:first、last、both"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field(
    sync_conn: psycopg.Connection[DictRow], locale: str, words: str
) -> None:
    sync_conn.execute("SELECT set_config('agentlab_sched.locale', %s, false)", (locale,))
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        sync_conn.execute("SELECT agentlab_sched.schedule('x', '30 1 * * *', 'demo.echo', dst_repeat => 'twice')")
    assert caught.value.diag.message_primary == words
    assert caught.value.diag.column_name == "dst_repeat"


def test_schedules_next_shows_the_policy_and_what_each_fire_does(db_url: str) -> None:
    # Sundays in March at 02:30 New York time: the second Sunday is the spring-forward day, every year.
    add = ("schedules", "add", "gap", "--cron", "30 2 * 3 0", "--task", "demo.echo", "--tz", NY, "--dst-gap", "skip")
    ok(db_url, *add)
    rows = json.loads(ok(db_url, "schedules", "next", "gap", "-n", "6", "--json").stdout)
    skipped = [r for r in rows if r["note"] == "dst_skipped"]
    assert len(rows) == 6 + len(skipped) and skipped and all(r["nominal"][11:16] == "02:30" for r in skipped)
    assert all(r["local"][11:16] == "03:00" for r in skipped)  # listed at the instant after the jump
    result = ok(db_url, "schedules", "next", "gap", "-n", "6")
    assert "not fired: 02:30 does not exist on that day (DST gap, dst_gap = skip)" in result.stdout
    assert "DST: dst_gap = skip, dst_repeat = first (docs/cron.md)" in result.stderr
    zh = ok(db_url, "--locale", "zh-CN", "schedules", "next", "gap", "-n", "6")
    assert "不执行:当天因夏令时没有 02:30 这个时刻(dst_gap = skip)" in zh.stdout
    assert "夏令时:dst_gap = skip,dst_repeat = first(见 docs/cron.md)" in zh.stderr
    # Sundays in November at 01:30: the first is the fall-back day; with both, it fires twice.
    ok(db_url, "schedules", "add", "fall", "--cron", "30 1 * 11 0", "--task", "demo.echo", "--tz", NY)
    ok(db_url, "schedules", "edit", "fall", "--dst-repeat", "both")
    assert json.loads(ok(db_url, "schedules", "show", "fall", "--json").stdout)["dst_repeat"] == "both"
    rows = json.loads(ok(db_url, "schedules", "next", "fall", "-n", "6", "--json").stdout)
    repeated = [(r["local"][11:16], r["fold"]) for r in rows if r["note"] == "dst_repeat"]
    assert repeated[:2] == [("01:30", 0), ("01:30", 1)]
    table = ok(db_url, "schedules", "next", "fall", "-n", "6").stdout
    assert "the first of two fires (dst_repeat = both)" in table and "the second of two fires" in table
    # a zone without DST: no policy line
    ok(db_url, "schedules", "add", "sh", "--cron", "30 1 * * *", "--task", "demo.echo", "--tz", "Asia/Shanghai")
    assert "DST:" not in ok(db_url, "schedules", "next", "sh").stderr
    assert refused(db_url, "schedules", "edit", "fall", "--dst-repeat", "twice") == (
        'dst_repeat: "twice" is not allowed; choose one of first, last, both'
    )


async def test_schedules_next_notes_at_the_transitions(conn: psycopg.AsyncConnection[DictRow]) -> None:
    from agentlab_sched.cli.schedules import _dst_note
    from agentlab_sched.core import planner

    rows = {
        "gap": ("30 2 * * *", "skip", "first", datetime(2026, 3, 7, 12, tzinfo=UTC)),
        "last": ("30 1 * * *", "shift", "last", datetime(2026, 10, 31, 12, tzinfo=UTC)),
        "both": ("30 1 * * *", "shift", "both", datetime(2026, 10, 31, 12, tzinfo=UTC)),
        "often": ("*/30 1 * * *", "shift", "first", datetime(2026, 11, 1, 5, 10, tzinfo=UTC)),
    }
    notes = {}
    for name, (cron, gap, repeat, after) in rows.items():
        s = await admin.schedule(conn, name, cron, "demo.echo", timezone=NY, dst_gap=gap, dst_repeat=repeat, now=after)
        times = await admin.upcoming(conn, name, 3, after=after, skipped=True)
        notes[name] = [_dst_note(planner.cron_of(vars(s)), t, "en") for t in times]
    assert notes["gap"] == ["not fired: 02:30 does not exist on that day (DST gap, dst_gap = skip)", "", "", ""]
    assert notes["last"][0] == "repeated hour (DST): fires once, the second time (dst_repeat = last)"
    assert notes["both"][:2] == [
        "repeated hour (DST): the first of two fires (dst_repeat = both)",
        "repeated hour (DST): the second of two fires (dst_repeat = both)",
    ]
    assert notes["often"] == [
        "repeated hour (DST): its first copy; a schedule firing more often than hourly runs through both",
        "repeated hour (DST): its second copy",
        "repeated hour (DST): its second copy",
    ]
