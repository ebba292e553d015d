"""The Python admin API (agentlab_sched.schedules.admin) against PostgreSQL: typed results, next_run_at planned at
once, the optimistic lock, and refusals that read the same as the SQL API's."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.errors import Conflict, NotFound, SchedError, ValidationError
from agentlab_sched.schedules import admin

T0 = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, second, tzinfo=UTC)


@pytest.fixture(scope="module")
def shared_url(pg_server: str, template_db: str) -> Iterator[str]:
    """One database for the tests that only check refusals (each asserts nothing was written)."""
    name = f"a_{os.getpid()}_{id(object())}"
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield conninfo.make_conninfo(pg_server, dbname=name)
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def shared(shared_url: str) -> AsyncIterator[psycopg.AsyncConnection[DictRow]]:
    """An async autocommit connection (dict rows, locale en) to the shared database."""
    connection = await db.connect(shared_url, locale="en")
    try:
        yield connection
    finally:
        await connection.close()


async def changes(conn: psycopg.AsyncConnection[DictRow]) -> int:
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedule_changes")
    row = await cur.fetchone()
    assert row is not None
    return row["n"]


# ----------------------------------------------------------------------------------- create, update


async def test_schedule_returns_a_typed_schedule_with_its_next_fire_planned(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    s = await admin.schedule(
        conn, "daily", "0 9 * * *", "demo.echo", {"day": "{{ schedule.date }}"}, timezone="Asia/Shanghai", now=T0
    )
    assert isinstance(s, admin.Schedule)
    assert (s.name, s.cron, s.timezone, s.task, s.inputs) == (
        "daily", "0 9 * * *", "Asia/Shanghai", "demo.echo", {"day": "{{ schedule.date }}"})  # fmt: skip
    assert (s.overlap, s.misfire_grace, s.timeout, s.enabled, s.version) == ("skip", timedelta(hours=1), None, True, 1)
    # 09:00 in Shanghai is 01:00 UTC; planned before the call returned, not left to a worker.
    assert (s.next_run_at, s.replan) == (at(1, 1), None)
    assert (s.webhook_configured, s.webhook_has_secret, s.webhook_events) == (False, False, ("finished", "failed"))
    json.dumps(s.as_dict())  # plain data for scripts
    assert s.as_dict()["misfire_grace"] == 3600.0


async def test_schedule_again_updates_in_place(conn: psycopg.AsyncConnection[DictRow]) -> None:
    first = await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", overlap="allow_all", now=T0)
    second = await admin.create_or_update(conn, "daily", "0 10 * * *", "demo.echo", now=T0)
    assert second.id == first.id
    assert (second.cron, second.overlap, second.version, second.next_run_at) == (
        "0 10 * * *",
        "allow_all",
        2,
        at(1, 10),
    )


async def test_schedule_with_options(conn: psycopg.AsyncConnection[DictRow]) -> None:
    s = await admin.schedule(
        conn, "limited", "*/15 * * * *", "demo.echo", queue="q", priority=3, overlap="buffer_all",
        misfire_grace=timedelta(minutes=5), timeout=timedelta(minutes=10), catchup="all", max_catchup=4,
        starts_at=at(2, 0), ends_at=at(3, 0), remaining_runs=2, pause_after_failures=3, context="persistent", now=T0,
    )  # fmt: skip
    assert (s.queue, s.priority, s.overlap, s.misfire_grace, s.timeout) == (
        "q", 3, "buffer_all", timedelta(minutes=5), timedelta(minutes=10))  # fmt: skip
    assert (s.catchup, s.max_catchup, s.starts_at, s.ends_at) == ("all", 4, at(2, 0), at(3, 0))
    assert (s.remaining_runs, s.pause_after_failures, s.context) == (2, 3, "persistent")
    assert s.next_run_at == at(2, 0)  # nothing before starts_at


async def test_create_refuses_a_name_that_exists(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.create(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    before = await admin.get(conn, "daily")
    with pytest.raises(Conflict) as err:
        await admin.create(conn, "daily", "0 10 * * *", "demo.echo", now=T0)
    assert (err.value.code, err.value.field) == ("schedule.name_taken", "name")
    assert err.value.message("en") == 'a schedule named "daily" already exists'
    assert err.value.message("zh-CN") == "已有名为「daily」的定时任务"
    assert await admin.get(conn, "daily") == before
    with pytest.raises(TypeError):
        await admin.create(conn, "other", "0 9 * * *", "demo.echo", colour="blue")


async def test_a_disabled_schedule_has_no_next_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    s = await admin.schedule(conn, "off", "0 9 * * *", "demo.echo", enabled=False, now=T0)
    assert (s.enabled, s.next_run_at, s.replan) == (False, None, None)


# ---------------------------------------------------------------------------------------- alter


async def test_a_cron_change_continues_from_the_pending_due_time(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    # 09:00 is due and not fired yet (no worker ran). A change that still covers 09:00 keeps it.
    s = await admin.alter(conn, "daily", cron="0 9,10 * * *", now=at(1, 9, 0, 30))
    assert (s.next_run_at, s.version) == (at(1, 9), 2)
    # One that does not continues with its first due time at or after 09:00.
    s = await admin.alter(conn, "daily", cron="0 10 * * *", now=at(1, 9, 0, 30))
    assert s.next_run_at == at(1, 10)
    s = await admin.alter(conn, "daily", cron="0 8 * * *", now=at(1, 9, 0, 30))
    assert s.next_run_at == at(2, 8)


async def test_a_time_zone_change_moves_the_next_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    # Pending: 09:00 UTC on 03-01, in the future at the change (00:00 UTC). 09:00 in Shanghai that day
    # (01:00 UTC) is the new definition's first due time after the change: no day is skipped.
    s = await admin.alter(conn, "daily", timezone="Asia/Shanghai", now=T0)
    assert s.next_run_at == at(1, 1)


async def test_alter_without_a_change_of_when_keeps_the_next_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    s = await admin.alter(conn, "daily", inputs={"a": 1}, overlap="allow_all", now=at(5, 0))
    assert (s.next_run_at, s.inputs, s.overlap, s.version) == (at(1, 9), {"a": 1}, "allow_all", 2)
    same = await admin.alter(conn, "daily", inputs={"a": 1})
    assert same.version == 2


async def test_alter_clears_and_renames(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", timeout=timedelta(hours=1), now=T0)
    s = await admin.alter(conn, "daily", clear=["timeout"], new_name="morning")
    assert (s.name, s.timeout) == ("morning", None)
    with pytest.raises(NotFound):
        await admin.get(conn, "daily")
    await admin.schedule(conn, "evening", "0 18 * * *", "demo.echo", now=T0)
    with pytest.raises(Conflict) as err:
        await admin.alter(conn, "morning", new_name="evening")
    assert (err.value.code, err.value.field, str(err.value)) == (
        "schedule.name_taken", "new_name", 'a schedule named "evening" already exists')  # fmt: skip


async def test_enabling_plans_from_now_and_never_replays_the_pause(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    s = await admin.pause(conn, "daily", "holiday")
    assert (s.enabled, s.paused_reason, s.next_run_at) == (False, "holiday", None)
    assert s.paused_at is not None
    s = await admin.resume(conn, "daily", now=at(5, 12))
    assert (s.enabled, s.paused_reason, s.paused_at, s.next_run_at) == (True, None, None, at(6, 9))
    await admin.alter(conn, "daily", enabled=False)
    s = await admin.alter(conn, "daily", enabled=True, now=at(7, 8))
    assert s.next_run_at == at(7, 9)
    # Resuming what runs already is a no-op.
    assert (await admin.resume(conn, "daily", now=at(9, 0))).version == s.version


async def test_a_stale_expected_version_is_a_conflict_and_changes_nothing(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    s = await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    s2 = await admin.alter(conn, "daily", inputs={"a": 1}, expected_version=s.version)
    with pytest.raises(Conflict) as err:
        await admin.alter(conn, "daily", inputs={"a": 2}, expected_version=s.version)
    assert (err.value.code, err.value.field) == ("schedule.stale_version", "expected_version")
    assert err.value.message("en") == (
        'schedule "daily" was changed meanwhile (it is at version 2, you expected 1); reload it and try again'
    )
    assert err.value.message("zh-CN") == "定时任务「daily」已被他人修改(当前版本 2,你基于的版本是 1);请重新读取后再改"
    assert await admin.get(conn, "daily") == s2


async def test_two_sessions_altering_at_once_exactly_one_wins(
    conn: psycopg.AsyncConnection[DictRow], db_url: str
) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    a = await db.connect(db_url, locale="en")
    b = await db.connect(db_url, locale="en")
    try:
        async with a.transaction():
            await admin.alter(a, "daily", inputs={"by": "a"}, expected_version=1)
            other = asyncio.create_task(admin.alter(b, "daily", inputs={"by": "b"}, expected_version=1))
            await _until_blocked(conn)
        with pytest.raises(Conflict):
            await other
    finally:
        await a.close()
        await b.close()
    s = await admin.get(conn, "daily")
    assert (s.version, s.inputs) == (2, {"by": "a"})


async def _until_blocked(conn: psycopg.AsyncConnection[DictRow]) -> None:
    for _ in range(1000):
        cur = await conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        row = await cur.fetchone()
        if row and row["n"]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the second session never waited for the lock")


# -------------------------------------------------------------------------------------- refusals

SAME_REFUSALS = [
    ("0 25 * * *", "UTC"),
    ("60 * * * *", "UTC"),
    ("* * 0 * *", "UTC"),
    ("* * * JANUARY *", "UTC"),
    ("* * * * 1-9", "UTC"),
    ("* * * * * 61", "UTC"),
    ("@sometimes", "UTC"),
    ("0 9 * * *", "Europe/Atlantis"),
    ("0 9 * * *", "EST5EDT+1"),
]


@pytest.mark.parametrize(("cron", "tz"), SAME_REFUSALS)
async def test_python_and_sql_refuse_cron_and_time_zone_with_the_same_message(
    shared: psycopg.AsyncConnection[DictRow], cron: str, tz: str
) -> None:
    with pytest.raises(ValidationError) as err:
        await admin.schedule(shared, "x", cron, "demo.echo", timezone=tz)
    messages = []
    for locale in ("en", "zh-CN"):
        await shared.execute("SELECT set_config('agentlab_sched.locale', %s, false)", (locale,))
        with pytest.raises(psycopg.Error) as sql_err:
            await shared.execute("SELECT agentlab_sched.schedule('x', %s, 'demo.echo', timezone => %s)", (cron, tz))
        messages.append(sql_err.value.diag.message_primary)
        assert sql_err.value.diag.column_name == err.value.field
    assert [err.value.message("en"), err.value.message("zh-CN")] == messages
    assert await admin.list_schedules(shared) == []


@pytest.mark.parametrize(
    ("kwargs", "field", "en"),
    [
        ({"name": ""}, "name", "name: must not be empty"),
        ({"name": "a\tb"}, "name", "name: character 2 is an invisible control character (U+0009); remove it"),
        ({"inputs": [1]}, "inputs", "inputs: must be a JSON object (names and values), not an array"),
        ({"overlap": "sometimes"}, "overlap",
         'overlap: "sometimes" is not allowed; choose one of skip, buffer_one, buffer_all, allow_all, cancel_other'),
        ({"misfire_grace": timedelta(minutes=-1)}, "misfire_grace",
         "misfire_grace: -00:01:00 is negative; give 0 or more"),
        ({"max_catchup": 0}, "max_catchup", "max_catchup: 0 is outside 1-1000"),
    ],
)  # fmt: skip
async def test_the_database_refusals_arrive_as_validation_errors(
    shared: psycopg.AsyncConnection[DictRow], kwargs: dict[str, Any], field: str, en: str
) -> None:
    args: dict[str, Any] = {"name": "daily", "cron": "0 9 * * *", "task": "demo.echo", **kwargs}
    with pytest.raises(ValidationError) as err:
        await admin.schedule(shared, **args)
    assert (err.value.field, str(err.value), err.value.message("en")) == (field, en, en)
    assert await admin.list_schedules(shared) == []
    assert await changes(shared) == 0


@pytest.mark.parametrize("call", ["get", "status", "alter", "pause", "resume", "upcoming"])
async def test_an_unknown_name_is_not_found(shared: psycopg.AsyncConnection[DictRow], call: str) -> None:
    with pytest.raises(NotFound) as err:
        await getattr(admin, call)(shared, "nope")
    assert (err.value.code, err.value.field, str(err.value)) == (
        "schedule.not_found",
        "name",
        'no schedule named "nope"',
    )
    assert err.value.message("zh-CN") == "没有名为「nope」的定时任务"
    assert isinstance(err.value, SchedError)


async def test_unschedule(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "daily", "0 9 * * *", "demo.echo", now=T0)
    assert await admin.unschedule(conn, "daily") is True
    assert await admin.unschedule(conn, "daily") is False


# ---------------------------------------------------------------------------------- reading back


async def test_list_and_status(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "b-second", "0 9 * * *", "demo.echo", now=T0)
    await admin.schedule(conn, "a-first", "0 8 * * *", "demo.echo", timezone="Asia/Shanghai", now=T0)
    await conn.execute(
        """UPDATE agentlab_sched.schedules SET webhook_format = 'wecom', webhook_url_hint = 'qyapi.weixin.qq.com',
               webhook_url_enc = 'gAAAAAciphertext' WHERE name = 'a-first'"""
    )
    rows = await admin.list_schedules(conn)
    assert [r.name for r in rows] == ["a-first", "b-second"]
    assert all(isinstance(r, admin.ScheduleStatus) for r in rows)
    first = await admin.status(conn, "a-first")
    assert first == rows[0]
    assert (first.next_run_at, first.webhook, first.webhook_has_secret, first.last_fire_at) == (
        at(2, 0), "wecom qyapi.weixin.qq.com", False, None)  # fmt: skip
    s = await admin.get(conn, "a-first")
    assert (s.webhook_configured, s.webhook_format, s.webhook_url_hint) == (True, "wecom", "qyapi.weixin.qq.com")
    assert "gAAAAA" not in json.dumps([s.as_dict(), first.as_dict()])


async def test_upcoming_marks_dst_moves_and_repeats(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "spring", "30 2 * * *", "demo.echo", timezone="America/New_York", now=T0)
    times = await admin.upcoming(conn, "spring", 3, after=datetime(2026, 3, 7, 12, tzinfo=UTC))
    assert [(t.at, t.local.strftime("%m-%d %H:%M %Z"), t.note) for t in times] == [
        (datetime(2026, 3, 8, 7, 0, tzinfo=UTC), "03-08 03:00 EDT", "dst_gap"),
        (datetime(2026, 3, 9, 6, 30, tzinfo=UTC), "03-09 02:30 EDT", None),
        (datetime(2026, 3, 10, 6, 30, tzinfo=UTC), "03-10 02:30 EDT", None),
    ]
    await admin.schedule(conn, "fall", "30 1 * * *", "demo.echo", timezone="America/New_York", now=T0)
    times = await admin.upcoming(conn, "fall", 2, after=datetime(2026, 10, 31, 12, tzinfo=UTC))
    assert [(t.local.strftime("%m-%d %H:%M %Z"), t.note) for t in times] == [
        ("11-01 01:30 EDT", "dst_repeat"),
        ("11-02 01:30 EST", None),
    ]


async def test_upcoming_respects_the_window_and_the_run_limit(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "w", "0 9 * * *", "demo.echo", starts_at=at(3, 9), ends_at=at(5, 9), now=T0)
    times = await admin.upcoming(conn, "w", 5, after=T0)
    assert [t.at for t in times] == [at(3, 9), at(4, 9), at(5, 9)]
    await admin.alter(conn, "w", remaining_runs=2)
    assert len(await admin.upcoming(conn, "w", 5, after=T0)) == 2
    assert len(await admin.upcoming(conn, "w", 5)) <= 2  # from the database clock
    with pytest.raises(ValidationError) as err:
        await admin.upcoming(conn, "w", 0)
    assert (err.value.field, str(err.value)) == ("count", "count: 0 is less than 1")


async def test_a_value_of_the_wrong_type_or_an_unknown_argument_is_refused_clearly(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Python's own errors would say nothing useful (or nothing at all: a str for a timedelta reached the
    database as an interval text); these name the field, the value and what is expected, in both languages."""
    from datetime import datetime

    from agentlab_sched.errors import UnknownArgument

    with pytest.raises(ValidationError) as refused:
        await admin.schedule(conn, "x", "0 9 * * *", "demo.echo", misfire_grace=cast(Any, "1h"))
    assert refused.value.field == "misfire_grace"
    assert str(refused.value) == 'misfire_grace: "1h" is text (str), not a duration (datetime.timedelta)'
    assert refused.value.message("zh-CN") == (
        '「错过后的补跑宽限」的取值 "1h" 是文本(str),而不是时长(datetime.timedelta)'
    )
    not_an_option: dict[str, Any] = {"misfire": 60}
    with pytest.raises(UnknownArgument) as unknown:
        await admin.schedule(conn, "x", "0 9 * * *", "demo.echo", **not_an_option)
    assert isinstance(unknown.value, TypeError) and unknown.value.field == "misfire"
    assert str(unknown.value).startswith("schedule() has no argument misfire; its arguments are name, cron, task,")
    assert "misfire_grace" in str(unknown.value) and "可用的参数有" in unknown.value.message("zh-CN")
    with pytest.raises(UnknownArgument, match=r"^create\(\) has no argument colour"):
        await admin.create(conn, "x", "0 9 * * *", "demo.echo", colour="red")
    with pytest.raises(ValidationError, match=r"^priority: True is true or false"):
        await admin.alter(conn, "x", priority=True)
    with pytest.raises(ValidationError, match=r"^starts_at: 2026-03-01 09:00:00 has no time zone"):
        await admin.schedule(conn, "x", "0 9 * * *", "demo.echo", starts_at=datetime(2026, 3, 1, 9))
    with pytest.raises(ValidationError, match=r"^timezone: 8 is a whole number"):
        await admin.schedule(conn, "x", "0 9 * * *", "demo.echo", timezone=cast(Any, 8))
    assert await admin.list_schedules(conn) == []  # nothing written
