"""The SQL admin API of schedules (sql/30_schedules.sql) and the views (sql/70_views.sql), against PostgreSQL.

Every refusal is checked with its SQLSTATE, the field it names (COLUMN), its exact message in en and in
zh-CN, the same message rebuilt in Python (errors.from_database), and nothing half-written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched import errors
from tests.support.rows import fetched

S = "agentlab_sched"


@dataclass
class Refusal:
    sqlstate: str
    field: str
    en: str
    zh: str


def refusal(conn: psycopg.Connection[DictRow], query: str, params: Any = None) -> Refusal:
    """Run a statement that must be refused, in en and in zh-CN; check Python rebuilds the same error."""
    with pytest.raises(psycopg.Error) as first:
        conn.execute(query, params)
    conn.execute("SET agentlab_sched.locale = 'zh-CN'")
    try:
        with pytest.raises(psycopg.Error) as second:
            conn.execute(query, params)
    finally:
        conn.execute("RESET agentlab_sched.locale")
    exc = first.value
    rebuilt = errors.from_database(exc)
    assert rebuilt is not None, exc
    assert rebuilt.message("en") == exc.diag.message_primary
    assert rebuilt.message("zh-CN") == second.value.diag.message_primary
    assert rebuilt.field == exc.diag.column_name
    return Refusal(exc.sqlstate or "", exc.diag.column_name or "", exc.diag.message_primary or "",
                   second.value.diag.message_primary or "")  # fmt: skip


def state(conn: psycopg.Connection[DictRow]) -> tuple[list[dict[str, Any]], int]:
    """Everything a refused call must leave as it was: the schedules and the audit trail."""
    rows = conn.execute(f"SELECT * FROM {S}.schedules ORDER BY id").fetchall()
    changes = fetched(conn.execute(f"SELECT count(*) AS n FROM {S}.schedule_changes").fetchone())
    return rows, changes["n"]


def one(conn: psycopg.Connection[DictRow], name: str = "daily") -> dict[str, Any]:
    row = conn.execute(f"SELECT * FROM {S}.schedules WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return row


def make(conn: psycopg.Connection[DictRow], name: str = "daily", cron: str = "0 9 * * *", **kwargs: Any) -> int:
    args = "".join(f", {k} => %({k})s" for k in kwargs)
    row = fetched(
        conn.execute(
            f"SELECT {S}.schedule(%(name)s, %(cron)s, 'demo.echo'{args}) AS id", {"name": name, "cron": cron, **kwargs}
        ).fetchone()
    )
    return row["id"]


@pytest.fixture(scope="module")
def shared_url(pg_server: str, template_db: str) -> Iterator[str]:
    """One database for the tests that only check refusals (each asserts it is left as it was): a clone
    per test would cost more than the test."""
    name = f"s_{os.getpid()}_{id(object())}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    url = conninfo.make_conninfo(pg_server, dbname=name)
    with db.connect_sync(url) as conn:
        make(conn, "existing", starts_at="2020-01-01 00:00+00")
    yield url
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def shared(shared_url: str) -> Iterator[psycopg.Connection[DictRow]]:
    """An autocommit connection (locale en) to the shared database."""
    with db.connect_sync(shared_url, locale="en") as conn:
        yield conn


def planned(conn: psycopg.Connection[DictRow], name: str = "daily", at: str = "2026-03-01 09:00+00") -> None:
    """What a worker does after a change: next_run_at filled, replan cleared (bookkeeping)."""
    conn.execute(f"UPDATE {S}.schedules SET next_run_at = %s, replan = NULL WHERE name = %s", (at, name))


# ------------------------------------------------------------------------------------------ schedule()


def test_schedule_creates_with_defaults_and_asks_for_a_plan(sync_conn: psycopg.Connection[DictRow]) -> None:
    sid = make(sync_conn)
    row = one(sync_conn)
    assert row["id"] == sid
    assert (row["cron"], row["timezone"], row["task"], row["inputs"]) == ("0 9 * * *", "UTC", "demo.echo", {})
    assert (row["queue"], row["priority"], row["overlap"], row["catchup"], row["max_catchup"]) == (
        "default", 0, "skip", "latest", 10)  # fmt: skip
    assert str(row["misfire_grace"]) == "1:00:00" and row["timeout"] is None
    assert row["enabled"] is True and row["context"] == "isolated"
    assert (row["version"], row["replan"], row["next_run_at"]) == (1, "now", None)
    changes = sync_conn.execute(f"SELECT * FROM {S}.schedule_changes").fetchall()
    assert [(c["operation"], c["schedule_id"], c["schedule_name"]) for c in changes] == [("insert", sid, "daily")]


def test_schedule_with_every_option(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, inputs=json.dumps({"day": "{{ schedule.date }}"}), timezone="Asia/Shanghai", queue="reports",
         priority=5, overlap="buffer_one", misfire_grace="10 minutes", timeout="30 minutes", enabled=False,
         catchup="all", max_catchup=3, starts_at="2026-01-01 00:00+08", ends_at="2027-01-01 00:00+08",
         remaining_runs=10, pause_after_failures=3, context="persistent")  # fmt: skip
    row = one(sync_conn)
    assert row["inputs"] == {"day": "{{ schedule.date }}"}
    assert (row["timezone"], row["queue"], row["priority"], row["overlap"]) == (
        "Asia/Shanghai", "reports", 5, "buffer_one")  # fmt: skip
    assert (str(row["misfire_grace"]), str(row["timeout"])) == ("0:10:00", "0:30:00")
    assert (row["catchup"], row["max_catchup"], row["remaining_runs"], row["pause_after_failures"]) == ("all", 3, 10, 3)
    assert row["context"] == "persistent"
    # Created disabled: nothing to plan, and it says since when it is paused.
    assert (row["enabled"], row["replan"], row["next_run_at"]) == (False, None, None)
    assert row["paused_at"] is not None


def test_schedule_again_updates_the_same_schedule_like_alter(sync_conn: psycopg.Connection[DictRow]) -> None:
    sid = make(sync_conn, overlap="allow_all", timezone="Asia/Shanghai")
    planned(sync_conn)
    sync_conn.execute(f"SELECT {S}.pause('daily', 'holiday')")
    again = make(sync_conn, cron="0 10 * * *", timezone="Asia/Shanghai")
    row = one(sync_conn)
    assert again == sid
    assert row["cron"] == "0 10 * * *"
    # Arguments left NULL keep what the schedule has: still allow_all, still paused for the holiday.
    assert (row["overlap"], row["enabled"], row["paused_reason"]) == ("allow_all", False, "holiday")
    assert row["version"] == 3  # create, pause, this change
    # inputs and timezone are always set from the call, as their defaults when not given.
    make(sync_conn, cron="0 10 * * *")
    assert one(sync_conn)["timezone"] == "UTC"


def test_schedule_declared_again_unchanged_changes_nothing(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    before = state(sync_conn)
    make(sync_conn, cron="0  9 * *   *")  # the same expression, other spacing
    assert state(sync_conn) == before


def test_schedule_requires_what_it_always_sets(shared: psycopg.Connection[DictRow]) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule('x', NULL, 'demo.echo')")
    assert (r.sqlstate, r.field, r.en, r.zh) == ("22023", "cron", "cron: must be given", "「cron 表达式」必须填写")
    r = refusal(shared, f"SELECT {S}.schedule('x', '0 9 * * *', 'demo.echo', NULL)")
    assert (r.field, r.en, r.zh) == ("inputs", "inputs: must be given", "「输入」必须填写")
    r = refusal(shared, f"SELECT {S}.schedule('x', '0 9 * * *', 'demo.echo', '{{}}', NULL)")
    assert (r.field, r.en, r.zh) == ("timezone", "timezone: must be given", "「时区」必须填写")
    assert state(shared) == before


# ------------------------------------------------------------------------------------- bad input

CRON_ERRORS = [
    ("60 * * * *", "minute: 60 is outside 0-59", "「分」的取值 60 超出 0-59"),
    ("* 25 * * *", "hour: 25 is outside 0-23", "「时」的取值 25 超出 0-23"),
    ("* * 32 * *", "day-of-month: 32 is outside 1-31", "「日」的取值 32 超出 1-31"),
    ("* * * 13 *", "month: 13 is outside 1-12", "「月」的取值 13 超出 1-12"),
    ("* * * * 8", "day-of-week: 8 is outside 0-7", "「周」的取值 8 超出 0-7"),
    ("* * * * * 60", "second: 60 is outside 0-59", "「秒」的取值 60 超出 0-59"),
    ("", "cron: the expression is empty", "cron 表达式为空"),
    (
        "0 9 * *",
        'cron: expected 5, 6 or 7 fields, got 4 in "0 9 * *"',
        "cron 表达式应有 5、6 或 7 个字段,「0 9 * *」有 4 个",
    ),
]


@pytest.mark.parametrize(("cron", "en", "zh"), CRON_ERRORS)
def test_a_bad_value_in_each_cron_field_is_refused_naming_it(
    shared: psycopg.Connection[DictRow], cron: str, en: str, zh: str
) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule('daily', %s, 'demo.echo')", (cron,))
    assert (r.sqlstate, r.field, r.en, r.zh) == ("22023", "cron", en, zh)
    assert state(shared) == before


def test_a_bad_cron_in_alter_leaves_the_schedule_as_it_was(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    before = state(sync_conn)
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('daily', cron => '0 25 * * *')")
    assert (r.field, r.en) == ("cron", "hour: 25 is outside 0-23")
    assert state(sync_conn) == before


def test_a_bad_time_zone_is_refused(shared: psycopg.Connection[DictRow]) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo', timezone => 'Mars/Olympus')")
    assert (r.sqlstate, r.field) == ("22023", "timezone")
    assert r.en == (
        "timezone: Mars/Olympus is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)"
    )
    assert r.zh == "时区 Mars/Olympus 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)"
    assert state(shared) == before


NAME_ERRORS = [
    ("", "name: must not be empty", "「名称」不能为空"),
    ("x" * 201, "name: 201 characters is more than the 200 allowed", "「名称」有 201 个字符,超过上限 200"),
    ("daily\nreport", "name: character 6 is an invisible control character (U+000A); remove it",
     "「名称」的第 6 个字符是不可见的控制字符(U+000A),请删除"),
    ("tab\there", "name: character 4 is an invisible control character (U+0009); remove it",
     "「名称」的第 4 个字符是不可见的控制字符(U+0009),请删除"),
    ("zero\u200bwidth", "name: character 5 is an invisible control character (U+200B); remove it",
     "「名称」的第 5 个字符是不可见的控制字符(U+200B),请删除"),
    (" daily", 'name: " daily" begins or ends with a space; remove it', "「名称」「 daily」的开头或结尾有空格,请删除"),
    ("daily\u3000", 'name: "daily\u3000" begins or ends with a space; remove it',
     "「名称」「daily\u3000」的开头或结尾有空格,请删除"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "en", "zh"), NAME_ERRORS)
def test_bad_names_are_refused(shared: psycopg.Connection[DictRow], name: str, en: str, zh: str) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule(%s, '0 9 * * *', 'demo.echo')", (name,))
    assert (r.sqlstate, r.field, r.en, r.zh) == ("22023", "name", en, zh)
    assert state(shared) == before


def test_a_name_of_200_characters_and_any_script_is_fine(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, name="x" * 200)
    make(sync_conn, name="门店周报 daily report")
    assert fetched(sync_conn.execute(f"SELECT count(*) AS n FROM {S}.schedules").fetchone())["n"] == 2


OPTION_ERRORS = [
    ("'demo echo'", "task", 'task: "demo echo" contains a space; write it as one word, such as demo.echo',
     "「任务」「demo echo」含有空格;请写成一个词,例如 demo.echo"),
    ("'demo.echo', inputs => '[1, 2]'", "inputs", "inputs: must be a JSON object (names and values), not an array",
     "「输入」必须是 JSON 对象(名称和值),而不是数组"),
    ("'demo.echo', inputs => '\"text\"'", "inputs", "inputs: must be a JSON object (names and values), not a string",
     "「输入」必须是 JSON 对象(名称和值),而不是字符串"),
    ("'demo.echo', inputs => '42'", "inputs", "inputs: must be a JSON object (names and values), not a number",
     "「输入」必须是 JSON 对象(名称和值),而不是数字"),
    ("'demo.echo', overlap => 'never'", "overlap",
     'overlap: "never" is not allowed; choose one of skip, buffer_one, buffer_all, allow_all, cancel_other',
     "「重叠策略」的取值「never」无效;可选:skip、buffer_one、buffer_all、allow_all、cancel_other"),
    ("'demo.echo', catchup => 'sometimes'", "catchup",
     'catchup: "sometimes" is not allowed; choose one of latest, none, all',
     "「补跑方式」的取值「sometimes」无效;可选:latest、none、all"),
    ("'demo.echo', context => 'shared'", "context",
     'context: "shared" is not allowed; choose one of isolated, persistent',
     "「上下文」的取值「shared」无效;可选:isolated、persistent"),
    ("'demo.echo', misfire_grace => '-1 hour'", "misfire_grace", "misfire_grace: -01:00:00 is negative; give 0 or more",
     "「错过后的补跑宽限」的取值 -01:00:00 是负数;请填 0 或更大的值"),
    ("'demo.echo', timeout => '0'", "timeout", "timeout: must be more than 0 (leave it unset for none), not 00:00:00",
     "「超时」必须大于 0(不需要时请不填),而不是 00:00:00"),
    ("'demo.echo', timeout => '-5 minutes'", "timeout", "timeout: -00:05:00 is negative; give 0 or more",
     "「超时」的取值 -00:05:00 是负数;请填 0 或更大的值"),
    ("'demo.echo', max_catchup => 0", "max_catchup", "max_catchup: 0 is outside 1-1000",
     "「最多补跑次数」的取值 0 超出 1-1000"),
    ("'demo.echo', max_catchup => 1001", "max_catchup", "max_catchup: 1001 is outside 1-1000",
     "「最多补跑次数」的取值 1001 超出 1-1000"),
    ("'demo.echo', remaining_runs => -1", "remaining_runs", "remaining_runs: -1 is less than 0",
     "「剩余执行次数」的取值 -1 小于 0"),
    ("'demo.echo', pause_after_failures => 0", "pause_after_failures", "pause_after_failures: 0 is less than 1",
     "「连续失败多少次后暂停」的取值 0 小于 1"),
    ("'demo.echo', queue => ''", "queue", "queue: must not be empty", "「队列」不能为空"),
    ("'demo.echo', timezone => 'Asia/Shanghai', starts_at => '2026-03-02 09:00+08', "
     "ends_at => '2026-03-01 09:00+08'", "ends_at",
     "ends_at: 2026-03-01 09:00 is not after starts_at 2026-03-02 09:00 (Asia/Shanghai)",
     "「结束时间」2026-03-01 09:00 不晚于「开始时间」2026-03-02 09:00(Asia/Shanghai)"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "field", "en", "zh"), OPTION_ERRORS)
def test_bad_options_are_refused_naming_the_field_and_value(
    shared: psycopg.Connection[DictRow], args: str, field: str, en: str, zh: str
) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule('daily', '0 9 * * *', {args})")
    assert (r.sqlstate, r.field, r.en, r.zh) == ("22023", field, en, zh)
    assert state(shared) == before


def test_an_unknown_placeholder_in_inputs_is_refused_when_saved(shared: psycopg.Connection[DictRow]) -> None:
    before = state(shared)
    r = refusal(shared, f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo', '{{\"d\": \"{{{{ today }}}}\"}}')")
    assert (r.sqlstate, r.field) == ("22023", "inputs")
    assert "{{ today }}" in r.en and "{{ today }}" in r.zh
    assert state(shared) == before


# --------------------------------------------------------------------------------- alter_schedule()


def test_alter_changes_only_what_is_given_and_bumps_the_version(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, timezone="Asia/Shanghai", overlap="allow_all", timeout="1 hour")
    before = one(sync_conn)
    version = fetched(
        sync_conn.execute(
            f"SELECT {S}.alter_schedule('daily', inputs => '{{\"a\": 1}}', misfire_grace => '5 minutes') AS v"
        ).fetchone()
    )["v"]
    after = one(sync_conn)
    assert version == after["version"] == 2
    assert after["inputs"] == {"a": 1} and str(after["misfire_grace"]) == "0:05:00"
    for column in ("cron", "timezone", "task", "overlap", "timeout", "queue", "enabled", "created_at"):
        assert after[column] == before[column], column
    assert after["updated_at"] >= before["updated_at"]


def test_alter_with_equal_values_is_no_change(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, misfire_grace="1 day")
    before = state(sync_conn)
    version = fetched(
        sync_conn.execute(
            f"""SELECT {S}.alter_schedule('daily', cron => ' 0 9 * * * ', misfire_grace => '24 hours',
                                      inputs => '{{}}', enabled => true) AS v"""
        ).fetchone()
    )["v"]
    assert version == 1
    assert state(sync_conn) == before


def test_every_field_alter_takes(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    sync_conn.execute(
        f"""SELECT {S}.alter_schedule('daily', cron => '*/5 * * * *', timezone => 'Europe/Berlin',
               task => 'demo.sleep', inputs => '{{"seconds": 1}}', enabled => false, overlap => 'buffer_all',
               misfire_grace => '0', timeout => '10 minutes', queue => 'slow', priority => -3, catchup => 'none',
               max_catchup => 7, starts_at => '2026-01-01 00:00+00', ends_at => '2026-12-31 00:00+00',
               remaining_runs => 4, pause_after_failures => 2, context => 'persistent', new_name => 'renamed')"""
    )
    row = one(sync_conn, "renamed")
    assert (row["cron"], row["timezone"], row["task"], row["inputs"]) == (
        "*/5 * * * *", "Europe/Berlin", "demo.sleep", {"seconds": 1})  # fmt: skip
    assert (row["enabled"], row["overlap"], str(row["misfire_grace"]), str(row["timeout"])) == (
        False, "buffer_all", "0:00:00", "0:10:00")  # fmt: skip
    assert (row["queue"], row["priority"], row["catchup"], row["max_catchup"]) == ("slow", -3, "none", 7)
    assert (row["remaining_runs"], row["pause_after_failures"], row["context"]) == (4, 2, "persistent")
    assert row["version"] == 2  # one change, however many fields


def test_alter_clears_optional_fields(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, timeout="1 hour", remaining_runs=3, pause_after_failures=2,
         starts_at="2026-01-01 00:00+00", ends_at="2027-01-01 00:00+00")  # fmt: skip
    sync_conn.execute(
        f"SELECT {S}.alter_schedule('daily', clear => ARRAY['timeout', 'remaining_runs', 'pause_after_failures',"
        " 'starts_at', 'ends_at'])"
    )
    row = one(sync_conn)
    assert [row[c] for c in ("timeout", "remaining_runs", "pause_after_failures", "starts_at", "ends_at")] == [None] * 5


def test_alter_refuses_what_cannot_be_cleared(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    before = state(sync_conn)
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('daily', clear => ARRAY['cron'])")
    assert (r.sqlstate, r.field) == ("22023", "clear")
    assert r.en == 'clear: "cron" cannot be cleared; only timeout, starts_at, ends_at, remaining_runs, ' \
                   "pause_after_failures can"  # fmt: skip
    assert (
        r.zh
        == "「清空」不能清空「cron」;可清空的只有 timeout、starts_at、ends_at、remaining_runs、pause_after_failures"
    )
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('daily', timeout => '1 hour', clear => ARRAY['timeout'])")
    assert (r.field, r.en, r.zh) == (
        "timeout", "timeout: given a value and also asked to clear it; do one or the other",
        "「超时」既给了新值又要求清空;只能二选一")  # fmt: skip
    assert state(sync_conn) == before


def test_alter_an_unknown_schedule(sync_conn: psycopg.Connection[DictRow]) -> None:
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('nope', cron => '0 9 * * *')")
    assert (r.sqlstate, r.field, r.en, r.zh) == (
        "P0002",
        "name",
        'no schedule named "nope"',
        "没有名为「nope」的定时任务",
    )
    assert isinstance(errors.from_database(_raised(sync_conn, f"SELECT {S}.alter_schedule('nope')")), errors.NotFound)


def _raised(conn: psycopg.Connection[DictRow], query: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as err:
        conn.execute(query)
    return err.value


def test_rename_onto_an_existing_name_is_refused(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, "a")
    make(sync_conn, "b")
    before = state(sync_conn)
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('a', new_name => 'b')")
    assert (r.sqlstate, r.field, r.en, r.zh) == (
        "23505", "new_name", 'a schedule named "b" already exists', "已有名为「b」的定时任务")  # fmt: skip
    assert state(sync_conn) == before


def test_a_stale_expected_version_is_refused_and_nothing_changes(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', inputs => '{{\"a\": 1}}', expected_version => 1)")
    before = state(sync_conn)
    r = refusal(sync_conn, f"SELECT {S}.alter_schedule('daily', inputs => '{{\"a\": 2}}', expected_version => 1)")
    assert (r.sqlstate, r.field) == ("40001", "expected_version")
    assert (
        r.en == 'schedule "daily" was changed meanwhile (it is at version 2, you expected 1); reload it and try again'
    )
    assert r.zh == "定时任务「daily」已被他人修改(当前版本 2,你基于的版本是 1);请重新读取后再改"
    assert state(sync_conn) == before
    stale = _raised(sync_conn, f"SELECT {S}.alter_schedule('daily', expected_version => 1)")
    assert isinstance(errors.from_database(stale), errors.Conflict)


def test_two_sessions_altering_at_once_exactly_one_wins(db_url: str, sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    results: dict[str, object] = {}
    first = db.connect_sync(db_url, locale="en", autocommit=False)
    second = db.connect_sync(db_url, locale="en")
    try:
        # The first session changes the schedule and holds its transaction open.
        first.execute(f"SELECT {S}.alter_schedule('daily', inputs => '{{\"by\": 1}}', expected_version => 1)")

        def other() -> None:
            try:
                second.execute(f"SELECT {S}.alter_schedule('daily', inputs => '{{\"by\": 2}}', expected_version => 1)")
                results["second"] = "won"
            except psycopg.Error as exc:
                results["second"] = exc

        thread = threading.Thread(target=other)
        thread.start()
        _wait_until_blocked(sync_conn)
        first.commit()
        thread.join(10)
    finally:
        first.close()
        second.close()
    err = results["second"]
    assert isinstance(err, psycopg.Error) and err.sqlstate == "40001"
    assert err.diag.message_primary == (
        'schedule "daily" was changed meanwhile (it is at version 2, you expected 1); reload it and try again'
    )
    row = one(sync_conn)
    assert (row["version"], row["inputs"]) == (2, {"by": 1})
    ops = sync_conn.execute(f"SELECT operation FROM {S}.schedule_changes ORDER BY id").fetchall()
    assert [o["operation"] for o in ops] == ["insert", "update"]


def _wait_until_blocked(conn: psycopg.Connection[DictRow]) -> None:
    """Until another session of this database waits for a row lock."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = fetched(
            conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
        )
        if row["n"]:
            return
        time.sleep(0.01)
    raise AssertionError("the second session never waited for the lock")


# ------------------------------------------------------------------------------- replan (next_run_at)


def test_a_real_cron_change_continues_from_the_pending_due_time(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    planned(sync_conn, at="2026-03-01 09:00+00")
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', cron => '0 9,10 * * *')")
    row = one(sync_conn)
    # The worker continues from the pending due time (inclusive), so 09:00 still fires if still covered.
    assert (row["replan"], str(row["next_run_at"])) == ("pending", "2026-03-01 09:00:00+00:00")


def test_a_time_zone_change_continues_from_the_pending_due_time(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    planned(sync_conn)
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', timezone => 'Asia/Shanghai')")
    assert one(sync_conn)["replan"] == "pending"


@pytest.mark.parametrize(
    "change",
    ["inputs => '{\"a\": 1}'", "overlap => 'allow_all'", "misfire_grace => '5 minutes'", "timeout => '1 hour'",
     "task => 'demo.sleep'", "cron => '0 9 * * *'", "cron => '0  9 * * *'", "timezone => 'UTC'"],
)  # fmt: skip
def test_no_replan_without_a_real_change_of_when(sync_conn: psycopg.Connection[DictRow], change: str) -> None:
    make(sync_conn)
    planned(sync_conn)
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', {change})")
    row = one(sync_conn)
    assert (row["replan"], str(row["next_run_at"])) == (None, "2026-03-01 09:00:00+00:00")


def test_a_window_change_or_more_runs_replans(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, remaining_runs=0)
    planned(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = NULL")  # out of runs: a worker stopped it
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', remaining_runs => 5)")
    assert one(sync_conn)["replan"] == "now"
    planned(sync_conn)
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', ends_at => '2027-01-01 00:00+00')")
    assert one(sync_conn)["replan"] == "pending"


def test_disabling_clears_the_pending_fire_and_enabling_plans_from_now(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    planned(sync_conn)
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', enabled => false)")
    row = one(sync_conn)
    assert (row["enabled"], row["next_run_at"], row["replan"]) == (False, None, None)
    assert row["paused_at"] is not None
    # A cron change while disabled plans nothing; enabling does, from now.
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', cron => '0 10 * * *')")
    assert one(sync_conn)["replan"] is None
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', enabled => true)")
    row = one(sync_conn)
    assert (row["enabled"], row["next_run_at"], row["replan"], row["paused_at"]) == (True, None, "now", None)


# ----------------------------------------------------------------------- unschedule, pause, resume


def test_unschedule(sync_conn: psycopg.Connection[DictRow]) -> None:
    sid = make(sync_conn)
    assert fetched(sync_conn.execute(f"SELECT {S}.unschedule('daily') AS ok").fetchone())["ok"] is True
    assert fetched(sync_conn.execute(f"SELECT {S}.unschedule('daily') AS ok").fetchone())["ok"] is False
    last = fetched(sync_conn.execute(f"SELECT * FROM {S}.schedule_changes ORDER BY id DESC LIMIT 1").fetchone())
    assert (last["operation"], last["schedule_id"], last["new_values"]) == ("delete", sid, None)
    assert last["old_values"]["name"] == "daily"
    r = refusal(sync_conn, f"SELECT {S}.unschedule('')")
    assert (r.field, r.en) == ("name", "name: must not be empty")


def test_pause_and_resume(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    planned(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET consecutive_failures = 2")
    assert fetched(sync_conn.execute(f"SELECT {S}.pause('daily', 'holiday') AS ok").fetchone())["ok"] is True
    row = one(sync_conn)
    assert (row["enabled"], row["paused_reason"], row["next_run_at"], row["replan"]) == (False, "holiday", None, None)
    paused_at = row["paused_at"]
    assert paused_at is not None
    # Paused again: false; a new reason replaces the old one, paused_at stays.
    assert fetched(sync_conn.execute(f"SELECT {S}.pause('daily') AS ok").fetchone())["ok"] is False
    assert one(sync_conn)["paused_reason"] == "holiday"
    assert fetched(sync_conn.execute(f"SELECT {S}.pause('daily', 'audit') AS ok").fetchone())["ok"] is False
    assert (one(sync_conn)["paused_reason"], one(sync_conn)["paused_at"]) == ("audit", paused_at)

    assert fetched(sync_conn.execute(f"SELECT {S}.resume('daily') AS ok").fetchone())["ok"] is True
    row = one(sync_conn)
    # Resumed: the next fire is planned after now (replan = 'now'), never the paused time replayed.
    assert (row["enabled"], row["replan"], row["next_run_at"]) == (True, "now", None)
    assert (row["paused_reason"], row["paused_at"], row["consecutive_failures"]) == (None, None, 0)
    assert fetched(sync_conn.execute(f"SELECT {S}.resume('daily') AS ok").fetchone())["ok"] is False


@pytest.mark.parametrize("call", ["pause('nope')", "resume('nope')"])
def test_pause_and_resume_an_unknown_schedule(sync_conn: psycopg.Connection[DictRow], call: str) -> None:
    r = refusal(sync_conn, f"SELECT {S}.{call}")
    assert (r.sqlstate, r.field, r.en, r.zh) == (
        "P0002",
        "name",
        'no schedule named "nope"',
        "没有名为「nope」的定时任务",
    )


# ------------------------------------------------------------------- raw INSERT / UPDATE, constraints


def test_raw_insert_and_update_are_validated_the_same_way(sync_conn: psycopg.Connection[DictRow]) -> None:
    r = refusal(
        sync_conn, f"INSERT INTO {S}.schedules (name, cron, task, overlap) VALUES ('x', '0 9 * * *', 't', 'no')"
    )
    assert (r.field, r.en) == (
        "overlap",
        'overlap: "no" is not allowed; choose one of skip, buffer_one, buffer_all, allow_all, cancel_other',
    )
    r = refusal(sync_conn, f"INSERT INTO {S}.schedules (name, cron, task) VALUES ('x', '0 25 * * *', 't')")
    assert (r.field, r.en) == ("cron", "hour: 25 is outside 0-23")
    make(sync_conn)
    before = state(sync_conn)
    r = refusal(sync_conn, f"UPDATE {S}.schedules SET inputs = '[]'")
    assert (r.field, r.en) == ("inputs", "inputs: must be a JSON object (names and values), not an array")
    r = refusal(sync_conn, f"UPDATE {S}.schedules SET enabled = NULL")
    assert (r.field, r.en, r.zh) == ("enabled", "enabled: must be given", "「启用」必须填写")
    r = refusal(sync_conn, f"UPDATE {S}.schedules SET webhook_events = ARRAY['finished', 'exploded']")
    assert (r.field, r.en) == (
        "webhook_events",
        'webhook_events: "exploded" is not allowed; choose one of finished, failed, awaiting_approval',
    )
    r = refusal(sync_conn, f"UPDATE {S}.schedules SET webhook_format = 'slack'")
    assert r.field == "webhook_format"
    assert state(sync_conn) == before


@pytest.mark.parametrize(
    ("column", "field"), [("webhook_url_enc", "webhook_url"), ("webhook_secret_enc", "webhook_secret")]
)
def test_plaintext_webhook_secrets_are_refused_in_sql(
    sync_conn: psycopg.Connection[DictRow], column: str, field: str
) -> None:
    make(sync_conn)
    before = state(sync_conn)
    r = refusal(sync_conn, f"UPDATE {S}.schedules SET {column} = 'https://open.feishu.cn/hook/abc'")
    assert (r.sqlstate, r.field) == ("22023", field)
    assert r.en == (
        f"{field}: refused, the database stores only encrypted webhook URLs and secrets and does not hold the key; "
        "set it with agentlab-sched schedules edit NAME --webhook-url URL (or the Python API)"
    )
    assert r.zh.startswith(f"「{'通知地址' if field == 'webhook_url' else '通知密钥'}」被拒绝:数据库只保存加密后的")
    assert state(sync_conn) == before


CONSTRAINTS = [
    ("name", "''", "schedules_name_check"),
    ("name", "' x'", "schedules_name_check"),
    ("task", "'a b'", "schedules_task_check"),
    ("inputs", "'[]'", "schedules_inputs_check"),
    ("queue", "''", "schedules_queue_check"),
    ("overlap", "'never'", "schedules_overlap_check"),
    ("catchup", "'x'", "schedules_catchup_check"),
    ("context", "'x'", "schedules_context_check"),
    ("misfire_grace", "'-1 hour'", "schedules_misfire_grace_check"),
    ("timeout", "'0'", "schedules_timeout_check"),
    ("max_catchup", "0", "schedules_max_catchup_check"),
    ("remaining_runs", "-1", "schedules_remaining_runs_check"),
    ("pause_after_failures", "0", "schedules_pause_after_failures_check"),
    ("ends_at", "'2000-01-01'", "schedules_window_check"),
    ("webhook_format", "'slack'", "schedules_webhook_format_check"),
    ("webhook_events", "ARRAY['x']", "schedules_webhook_events_check"),
    ("webhook_url_enc", "'https://x'", "schedules_webhook_ciphertext_check"),
]


@pytest.mark.parametrize(("column", "value", "constraint"), CONSTRAINTS)
def test_check_constraints_are_the_last_line_of_defence(
    shared_url: str, column: str, value: str, constraint: str
) -> None:
    with db.connect_sync(shared_url, autocommit=False) as conn:
        conn.execute(f"ALTER TABLE {S}.schedules DISABLE TRIGGER schedules_before_write")
        with pytest.raises(psycopg.errors.CheckViolation) as err:
            conn.execute(f"UPDATE {S}.schedules SET {column} = {value} WHERE name = 'existing'")
        assert err.value.diag.constraint_name == constraint
        conn.rollback()


# --------------------------------------------------------------------------------- audit, NOTIFY


def test_audit_rows_say_who_and_what_with_secrets_masked(sync_conn: psycopg.Connection[DictRow]) -> None:
    sync_conn.execute("SET application_name = 'audit-test'")
    sid = make(sync_conn)
    sync_conn.execute(
        f"""UPDATE {S}.schedules SET webhook_format = 'feishu', webhook_url_hint = 'open.feishu.cn',
               webhook_url_enc = 'gAAAAAurl-ciphertext', webhook_secret_enc = 'gAAAAAsecret-ciphertext'"""
    )
    sync_conn.execute(f"SELECT {S}.alter_schedule('daily', cron => '0 10 * * *')")
    sync_conn.execute(f"SELECT {S}.unschedule('daily')")
    rows = sync_conn.execute(f"SELECT * FROM {S}.schedule_changes ORDER BY id").fetchall()
    assert [r["operation"] for r in rows] == ["insert", "update", "update", "delete"]
    user = fetched(sync_conn.execute("SELECT current_user AS u").fetchone())["u"]
    for r in rows:
        assert (r["schedule_id"], r["schedule_name"], r["db_role"], r["application_name"]) == (
            sid, "daily", user, "audit-test")  # fmt: skip
        assert r["changed_at"] is not None
    assert rows[0]["old_values"] is None and rows[0]["new_values"]["cron"] == "0 9 * * *"
    assert rows[1]["old_values"]["webhook_url_enc"] is None
    assert rows[1]["new_values"]["webhook_url_enc"] == "***" and rows[1]["new_values"]["webhook_secret_enc"] == "***"
    assert (rows[2]["old_values"]["cron"], rows[2]["new_values"]["cron"]) == ("0 9 * * *", "0 10 * * *")
    assert rows[3]["old_values"]["webhook_secret_enc"] == "***" and rows[3]["new_values"] is None
    dump = json.dumps([dict(r, changed_at=None) for r in rows])
    assert "ciphertext" not in dump and "gAAAAA" not in dump


def test_bookkeeping_by_the_scheduler_is_not_a_change(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn)
    before = one(sync_conn)
    sync_conn.execute(
        f"""UPDATE {S}.schedules SET next_run_at = '2026-03-01 09:00+00', replan = NULL,
               consecutive_failures = 1, session_key = 'abc'"""
    )
    after = one(sync_conn)
    assert (after["version"], after["updated_at"]) == (before["version"], before["updated_at"])
    assert fetched(sync_conn.execute(f"SELECT count(*) AS n FROM {S}.schedule_changes").fetchone())["n"] == 1
    # Nor can the version be set by hand: refused with a message, not silently ignored.
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"^version: cannot be set \(asked for 99\)"):
        sync_conn.execute(f"UPDATE {S}.schedules SET version = 99")
    assert one(sync_conn)["version"] == before["version"]


def test_every_change_notifies_the_workers(db_url: str, sync_conn: psycopg.Connection[DictRow]) -> None:
    with db.connect_sync(db_url) as listener:
        listener.execute("LISTEN agentlab_sched_schedules")
        sid = make(sync_conn)
        planned(sync_conn)  # bookkeeping: no notification
        sync_conn.execute(f"SELECT {S}.alter_schedule('daily', cron => '0 10 * * *')")
        sync_conn.execute(f"SELECT {S}.pause('daily')")
        sync_conn.execute(f"SELECT {S}.resume('daily')")
        planned(sync_conn)
        sync_conn.execute(f"UPDATE {S}.schedules SET replan = 'now'")  # re-plan asked for by hand: notified
        sync_conn.execute(f"SELECT {S}.unschedule('daily')")
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=2, stop_after=6)]
    assert got == [("agentlab_sched_schedules", str(sid))] * 6


# -------------------------------------------------------------------------------------------- views


def _fire(
    conn: psycopg.Connection[DictRow], sid: int, at: str, status: str = "started", run: Any = None, **kw: Any
) -> int:
    row = fetched(
        conn.execute(
            f"""INSERT INTO {S}.fires (schedule_id, fire_at, kind, status, reason_code, reason, run_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id""",
            (sid, at, kw.get("kind", "scheduled"), status, kw.get("reason_code"), kw.get("reason"), run),
        ).fetchone()
    )
    return row["id"]


def _run(conn: psycopg.Connection[DictRow], sid: int, status: str, created: str) -> Any:
    return fetched(
        conn.execute(
            f"""INSERT INTO {S}.runs (schedule_id, task, status, started_by, created_at)
            VALUES (%s, 'demo.echo', %s, 'schedule:daily', %s) RETURNING id""",
            (sid, status, created),
        ).fetchone()
    )["id"]


def test_schedule_status_shows_next_and_last_with_the_webhook_masked(sync_conn: psycopg.Connection[DictRow]) -> None:
    sid = make(sync_conn, timezone="Asia/Shanghai")
    make(sync_conn, "quiet")
    planned(sync_conn, at="2026-03-02 01:00+00")
    old_run = _run(sync_conn, sid, "succeeded", "2026-02-28 01:00+00")
    new_run = _run(sync_conn, sid, "failed", "2026-03-01 01:00+00")
    _fire(sync_conn, sid, "2026-02-28 01:00+00", run=old_run)
    _fire(sync_conn, sid, "2026-03-01 01:00+00", run=new_run)
    _fire(sync_conn, sid, "2026-02-27 01:00+00", "skipped_misfire", kind="backfill", reason_code="x", reason="late")
    sync_conn.execute(
        f"""UPDATE {S}.schedules SET webhook_format = 'feishu', webhook_url_hint = 'open.feishu.cn',
               webhook_url_enc = 'gAAAAAurl', webhook_secret_enc = 'gAAAAAsecret', consecutive_failures = 1
            WHERE id = %s""",
        (sid,),
    )
    rows = sync_conn.execute(f"SELECT * FROM {S}.schedule_status ORDER BY name").fetchall()
    assert [r["name"] for r in rows] == ["daily", "quiet"]
    daily, quiet = rows
    assert (str(daily["next_run_at"]), daily["timezone"], daily["enabled"]) == (
        "2026-03-02 01:00:00+00:00", "Asia/Shanghai", True)  # fmt: skip
    assert (str(daily["last_fire_at"]), daily["last_fire_kind"], daily["last_fire_status"]) == (
        "2026-03-01 01:00:00+00:00", "scheduled", "started")  # fmt: skip
    assert (daily["last_run_id"], daily["last_run_status"], daily["consecutive_failures"]) == (new_run, "failed", 1)
    assert (daily["webhook"], daily["webhook_has_secret"], daily["webhook_events"]) == (
        "feishu open.feishu.cn", True, ["finished", "failed"])  # fmt: skip
    assert "gAAAAA" not in json.dumps(rows, default=str)
    assert (quiet["last_fire_id"], quiet["last_run_id"], quiet["webhook"], quiet["next_run_at"]) == (
        None, None, None, None)  # fmt: skip
    assert quiet["replan"] == "now"


def test_fire_history_is_the_ledger_with_run_outcomes_newest_first(sync_conn: psycopg.Connection[DictRow]) -> None:
    sid = make(sync_conn)
    run = _run(sync_conn, sid, "running", "2026-03-01 09:00+00")
    first = _fire(sync_conn, sid, "2026-03-01 09:00+00", run=run)
    second = _fire(sync_conn, sid, "2026-03-02 09:00+00", "skipped_overlap", reason_code="overlap.running",
                   reason="still in progress")  # fmt: skip
    rows = sync_conn.execute(f"SELECT * FROM {S}.fire_history").fetchall()
    assert [r["fire_id"] for r in rows] == [second, first]
    assert (rows[0]["schedule_name"], rows[0]["status"], rows[0]["reason"], rows[0]["run_id"]) == (
        "daily", "skipped_overlap", "still in progress", None)  # fmt: skip
    assert (rows[1]["run_id"], rows[1]["run_status"], rows[1]["kind"]) == (run, "running", "scheduled")


def test_overdue_shows_schedules_nothing_is_firing(sync_conn: psycopg.Connection[DictRow]) -> None:
    make(sync_conn, "late")
    make(sync_conn, "on-time")
    make(sync_conn, "paused")
    make(sync_conn, "unplanned")
    make(sync_conn, "fresh")
    sync_conn.execute(
        f"UPDATE {S}.schedules SET next_run_at = now() - interval '5 minutes', replan = NULL WHERE name = 'late'"
    )
    sync_conn.execute(
        f"UPDATE {S}.schedules SET next_run_at = now() - interval '30 seconds', replan = NULL WHERE name = 'on-time'"
    )
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() - interval '1 day' WHERE name = 'paused'")
    sync_conn.execute(f"SELECT {S}.pause('paused')")
    sync_conn.execute(f"UPDATE {S}.schedules SET updated_at = now() - interval '10 minutes' WHERE name = 'unplanned'")
    rows = sync_conn.execute(f"SELECT * FROM {S}.overdue ORDER BY name").fetchall()
    assert [(r["name"], r["problem"]) for r in rows] == [("late", "late"), ("unplanned", "unplanned")]
    assert 299 <= rows[0]["late_by"].total_seconds() < 360
    assert rows[0]["on_time_window"].total_seconds() == 60
    # A smaller on-time window (deployment setting) makes the 30 s one overdue too.
    sync_conn.execute(f"UPDATE {S}.config SET value = '10' WHERE key = 'on_time_window_seconds'")
    names = [r["name"] for r in sync_conn.execute(f"SELECT name FROM {S}.overdue ORDER BY name").fetchall()]
    assert names == ["late", "on-time", "unplanned"]
