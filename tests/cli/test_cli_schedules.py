"""`agentlab-sched` (migrate, schedules, db) through typer's CliRunner against the test database: exit codes,
what is printed on stdout and stderr, the locale, and never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.cli import ENV, add, cli, ok, refused


@pytest.fixture(scope="module")
def shared_url(pg_server: str, template_db: str) -> Iterator[str]:
    """One database for the tests that only check refusals (each asserts nothing was written)."""
    name = f"c_{os.getpid()}_{id(object())}"
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield conninfo.make_conninfo(pg_server, dbname=name)
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_every_command_says_which_database_it_uses(db_url: str) -> None:
    result = ok(db_url, "schedules", "list")
    first = result.stderr.splitlines()[0]
    assert first.startswith("database: postgresql://") and first.endswith("(--database-url)")
    assert "password" not in first


def test_add_list_show(db_url: str) -> None:
    result = add(db_url, "daily", "--tz", "Asia/Shanghai", "--inputs", '{"day": "{{ schedule.date }}"}',
                 "--misfire-grace", "10m", "--timeout", "1h30m", "--overlap", "allow_all")  # fmt: skip
    assert result.stdout.startswith('added schedule "daily" (id ')
    assert "next run: " in result.stdout and "(Asia/Shanghai)" in result.stdout

    listed = ok(db_url, "schedules", "list").stdout
    assert listed.splitlines()[0].split() == ["name", "cron", "timezone", "task", "next", "run", "last", "fire", "last",
                                              "run", "failures"]  # fmt: skip
    assert "daily" in listed and "0 9 * * *" in listed and "Asia/Shanghai" in listed

    rows = json.loads(ok(db_url, "schedules", "list", "--json").stdout)
    assert [r["name"] for r in rows] == ["daily"]
    assert rows[0]["next_run_at"].endswith("+00:00") and rows[0]["webhook"] is None

    shown = json.loads(ok(db_url, "schedules", "show", "daily", "--json").stdout)
    assert (shown["inputs"], shown["misfire_grace"], shown["timeout"], shown["overlap"]) == (
        {"day": "{{ schedule.date }}"}, 600.0, 5400.0, "allow_all")  # fmt: skip
    assert shown["version"] == 1 and shown["last_fire_at"] is None
    text = ok(db_url, "schedules", "show", "daily").stdout
    assert "misfire_grace" in text and "10 minutes" in text and "1 hour 30 minutes" in text


def test_add_refuses_an_existing_name_unless_update(db_url: str) -> None:
    add(db_url)
    assert refused(db_url, "schedules", "add", "daily", "--cron", "0 10 * * *", "--task", "demo.echo") == (
        'a schedule named "daily" already exists; change it with schedules edit, or add --update'
    )
    result = ok(db_url, "schedules", "add", "daily", "--cron", "0 10 * * *", "--task", "demo.echo", "--update")
    assert result.stdout.startswith('updated schedule "daily" (version 2)')


@pytest.mark.parametrize(
    ("args", "en", "zh"),
    [
        (["--cron", "0 25 * * *"], "hour: 25 is outside 0-23", "「时」的取值 25 超出 0-23"),
        (["--tz", "Mars/Olympus"],
         "timezone: Mars/Olympus is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)",
         "时区 Mars/Olympus 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)"),
        (["--inputs", "[1]"], "inputs: must be a JSON object (names and values), not an array",
         "「输入」必须是 JSON 对象(名称和值),而不是数组"),
        (["--inputs", "{oops"], "inputs: not valid JSON (line 1, column 2)", "「输入」不是有效的 JSON(第 1 行第 2 列)"),
        (["--misfire-grace", "soon"], 'misfire_grace: "soon" is not a duration; write it like 90s, 10m, 1h30m, 2d or 0',
         "「错过后的补跑宽限」「soon」不是时长;请写成 90s、10m、1h30m、2d 或 0 这样的形式"),
        (["--misfire-grace", "-1h"], "misfire_grace: -01:00:00 is negative; give 0 or more",
         "「错过后的补跑宽限」的取值 -01:00:00 是负数;请填 0 或更大的值"),
        (["--overlap", "never"],
         'overlap: "never" is not allowed; choose one of skip, buffer_one, buffer_all, allow_all, cancel_other',
         "「重叠策略」的取值「never」无效;可选:skip、buffer_one、buffer_all、allow_all、cancel_other"),
        (["--starts-at", "tomorrow"],
         "starts_at: \"tomorrow\" is not a date and time; write it like 2026-03-01 09:00 (in the schedule's time zone)"
         " or 2026-03-01T09:00+08:00",
         "「开始时间」「tomorrow」不是日期时间;请写成 2026-03-01 09:00(按定时任务的时区)"
         "或 2026-03-01T09:00+08:00 这样的形式"),
    ],
)  # fmt: skip
def test_bad_input_prints_the_message_in_the_locale_and_exits_2(
    shared_url: str, args: list[str], en: str, zh: str
) -> None:
    base = ["schedules", "add", "daily", "--cron", "0 9 * * *", "--task", "demo.echo"]
    argv = base + args
    if args[0] == "--cron":
        argv = ["schedules", "add", "daily", "--task", "demo.echo", *args]
    assert refused(shared_url, *argv) == en
    assert refused(shared_url, "--locale", "zh-CN", *argv) == zh
    assert refused(shared_url, *argv, env={"AGENTLAB_SCHED_LOCALE": "zh-CN"}) == zh
    assert json.loads(ok(shared_url, "schedules", "list", "--json").stdout) == []


def test_a_bad_name_is_refused(db_url: str) -> None:
    assert refused(db_url, "schedules", "add", " daily", "--cron", "0 9 * * *", "--task", "demo.echo") == (
        'name: " daily" begins or ends with a space; remove it'
    )


def test_edit(db_url: str) -> None:
    add(db_url)
    result = ok(db_url, "schedules", "edit", "daily", "--cron", "30 9 * * *", "--timeout", "5m")
    assert result.stdout.startswith('updated schedule "daily" (version 2); next run: ')
    assert "09:30 (UTC)" in result.stdout
    assert ok(db_url, "schedules", "edit", "daily", "--cron", "30 9 * * *").stdout.startswith(
        'schedule "daily" is unchanged (version 2)'
    )
    shown = json.loads(ok(db_url, "schedules", "edit", "daily", "--clear", "timeout", "--rename", "morning",
                          "--json").stdout)  # fmt: skip
    assert (shown["name"], shown["timeout"], shown["version"]) == ("morning", None, 3)
    assert refused(db_url, "schedules", "edit", "morning", "--cron", "0 8 * * *", "--expected-version", "2") == (
        'schedule "morning" was changed meanwhile (it is at version 3, you expected 2); reload it and try again'
    )
    assert (
        refused(db_url, "schedules", "edit", "morning") == "nothing to change: give at least one option, such as --cron"
    )
    assert refused(db_url, "schedules", "edit", "nope", "--cron", "0 8 * * *") == 'no schedule named "nope"'
    assert (
        refused(db_url, "--locale", "zh-CN", "schedules", "edit", "nope", "--task", "x") == "没有名为「nope」的定时任务"
    )


def test_edit_disabled_and_enabled(db_url: str) -> None:
    add(db_url)
    ok(db_url, "schedules", "edit", "daily", "--disabled")
    assert json.loads(ok(db_url, "schedules", "show", "daily", "--json").stdout)["enabled"] is False
    ok(db_url, "schedules", "edit", "daily", "--enabled")
    shown = json.loads(ok(db_url, "schedules", "show", "daily", "--json").stdout)
    assert shown["enabled"] is True and shown["next_run_at"] is not None


def test_pause_resume_rm(db_url: str) -> None:
    add(db_url)
    assert ok(db_url, "schedules", "pause", "daily", "--reason", "holiday").stdout == 'paused schedule "daily"\n'
    assert ok(db_url, "schedules", "pause", "daily").stdout == 'schedule "daily" was already paused\n'
    assert "paused" in ok(db_url, "schedules", "list").stdout
    shown = json.loads(ok(db_url, "schedules", "show", "daily", "--json").stdout)
    assert (shown["enabled"], shown["paused_reason"], shown["next_run_at"]) == (False, "holiday", None)
    assert ok(db_url, "schedules", "resume", "daily").stdout.startswith('resumed schedule "daily"; next run: ')
    assert ok(db_url, "schedules", "resume", "daily").stdout.startswith('schedule "daily" was not paused')
    assert ok(db_url, "--locale", "zh-CN", "schedules", "pause", "daily").stdout == "已暂停定时任务「daily」\n"
    assert ok(db_url, "schedules", "rm", "daily").stdout == 'removed schedule "daily"\n'
    assert refused(db_url, "schedules", "rm", "daily") == 'no schedule named "daily"'
    assert ok(db_url, "schedules", "rm", "daily", "--missing-ok").stdout == ""
    assert refused(db_url, "schedules", "pause", "daily") == 'no schedule named "daily"'


def test_next_shows_utc_and_local_times_with_dst_notes(db_url: str) -> None:
    # Sundays in March at 02:30 New York time: the second Sunday is the spring-forward day, every year.
    ok(db_url, "schedules", "add", "spring", "--cron", "30 2 * 3 0", "--task", "demo.echo", "--tz", "America/New_York")
    rows = json.loads(ok(db_url, "schedules", "next", "spring", "-n", "6", "--json").stdout)
    assert len(rows) == 6
    gaps = [r for r in rows if r["note"] == "dst_gap"]
    assert gaps and all(r["local"][11:16] == "03:00" for r in gaps)
    assert all(r["local"][11:16] == "02:30" for r in rows if r["note"] is None)
    table = ok(db_url, "schedules", "next", "spring", "-n", "6").stdout
    assert "local (America/New_York)" in table and "EDT -0400" in table
    assert "moved: this time does not exist on that day (DST gap)" in table
    zh = ok(db_url, "--locale", "zh-CN", "schedules", "next", "spring", "-n", "6").stdout
    assert "顺延:当天因夏令时跳过了这个时刻" in zh
    # Sundays in November at 01:30: the first is the fall-back day, whose 01:30 happens twice.
    ok(db_url, "schedules", "add", "fall", "--cron", "30 1 * 11 0", "--task", "demo.echo", "--tz", "America/New_York")
    rows = json.loads(ok(db_url, "schedules", "next", "fall", "-n", "6", "--json").stdout)
    assert any(r["note"] == "dst_repeat" for r in rows)
    assert (
        "repeated hour (DST): fires once, the first time" in ok(db_url, "schedules", "next", "fall", "-n", "6").stdout
    )
    assert refused(db_url, "schedules", "next", "spring", "-n", "0") == "count: 0 is less than 1"


def test_edit_webhook_is_stored_encrypted_and_shown_masked(db_url: str) -> None:
    from cryptography.fernet import Fernet

    add(db_url)
    url = "https://open.feishu.cn/open-apis/bot/v2/hook/0123456789abcdef"
    env = {"AGENTLAB_SCHED_SECRET_KEY": Fernet.generate_key().decode()}
    result = ok(db_url, "schedules", "edit", "daily", "--webhook-url", url, "--webhook-secret", "s3cret",
                "--webhook-events", "finished,failed", env=env)  # fmt: skip
    assert result.stdout.startswith('updated schedule "daily"')
    shown = ok(db_url, "schedules", "show", "daily", env=env).stdout
    assert "feishu" in shown and "secret set" in shown
    dumped = ok(db_url, "schedules", "show", "daily", "--json", env=env).stdout
    for output in (shown, dumped, ok(db_url, "schedules", "list", "--json").stdout):
        assert "0123456789abcdef" not in output and "s3cret" not in output and "gAAAAA" not in output
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT webhook_url_enc, webhook_secret_enc FROM agentlab_sched.schedules").fetchone()
    assert row is not None and row[0].startswith("gAAAAA") and row[1].startswith("gAAAAA")
    # Changing only the events keeps the URL.
    ok(db_url, "schedules", "edit", "daily", "--webhook-events", "failed", env=env)
    shown = json.loads(ok(db_url, "schedules", "show", "daily", "--json", env=env).stdout)
    assert (shown["webhook_configured"], shown["webhook_events"]) == (True, ["failed"])


def test_an_unmigrated_database_says_to_migrate(empty_db_url: str) -> None:
    result = cli(empty_db_url, "schedules", "list")
    assert result.exit_code == 1
    assert "this database has no agentlab-sched schema yet; run agentlab-sched migrate first" in result.stderr


def test_migrate_then_up_to_date(empty_db_url: str) -> None:
    first = ok(empty_db_url, "migrate")
    assert first.stdout.startswith("migrated: procrastinate/schema.sql, 0001_schema.sql")
    assert ok(empty_db_url, "migrate").stdout == "the database is up to date\n"
    assert ok(empty_db_url, "schedules", "list").stdout.startswith("no schedules yet")


def test_migrate_records_the_locale_chosen(empty_db_url: str) -> None:
    ok(empty_db_url, "--locale", "zh-CN", "migrate")
    with psycopg.connect(empty_db_url) as conn:
        row = conn.execute("SELECT value FROM agentlab_sched.config WHERE key = 'locale'").fetchone()
    assert row == ("zh-CN",)


def test_an_unreachable_database_exits_1_without_a_traceback() -> None:
    result = cli("postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2", "schedules", "list")
    assert result.exit_code == 1
    assert "cannot connect to the database: " in result.stderr


def test_db_stop_without_an_embedded_server(tmp_path: Any) -> None:
    where = str(tmp_path / "pgdata")
    result = CliRunner(env=ENV).invoke(app, ["--data-dir", where, "db", "stop"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"no embedded PostgreSQL in {where}\n"


def test_usage_errors_exit_2(db_url: str) -> None:
    result = cli(db_url, "schedules", "add", "daily", "--task", "demo.echo")  # no --cron
    assert result.exit_code == 2 and "--cron" in result.output
