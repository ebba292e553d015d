"""`agentlab-sched schedules trigger|backfill|next` through typer's CliRunner: exit codes, JSON, what is said."""

from __future__ import annotations

import json

import psycopg

from tests.support.cli import add, cli, ok, refused


def _register(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")


def test_trigger_exits_3_when_the_fire_failed_to_start_and_its_json_times_carry_offsets(db_url: str) -> None:
    add(db_url, "daily", "--timezone", "Asia/Shanghai")
    result = cli(db_url, "schedules", "trigger", "daily", "--json")  # no worker registered demo.echo
    assert result.exit_code == 3, result.output
    [row] = json.loads(result.stdout)
    assert (row["status"], row["reason_code"], row["timezone"], row["paused"]) == (
        "failed_to_start",
        "launch.unknown_task",
        "Asia/Shanghai",
        False,
    )
    assert row["fire_at"].endswith("+00:00") and row["local"].endswith("+08:00")
    _register(db_url)
    [row] = json.loads(ok(db_url, "schedules", "trigger", "daily", "--json").stdout)
    assert row["status"] == "started" and row["run_id"]


def test_trigger_on_a_paused_schedule_says_so_and_fires_only_when_asked(db_url: str) -> None:
    add(db_url, "daily")
    _register(db_url)
    ok(db_url, "schedules", "pause", "daily")
    assert refused(db_url, "schedules", "trigger", "daily") == (
        'schedule "daily" is paused; resume it first, or fire it anyway with even_if_paused (CLI: --even-if-paused)'
    )
    assert refused(db_url, "--locale", "zh-CN", "schedules", "trigger", "daily").startswith("定时任务「daily」已暂停")
    result = ok(db_url, "schedules", "trigger", "daily", "--even-if-paused")
    assert 'note: schedule "daily" is paused; it was fired anyway (even_if_paused) and stays paused' in result.stderr
    assert "started" in result.stdout


def test_backfill_takes_an_overlap_and_says_what_was_not_launched(db_url: str) -> None:
    add(db_url, "weekly", "--cron", "0 9 * * 1")
    _register(db_url)
    span = ("--from", "2026-09-07T00:00", "--to", "2026-09-28T23:00")
    result = ok(db_url, "schedules", "backfill", "weekly", *span, "--overlap", "skip")
    assert "backfill: 1 of 4 fires launched; not launched: 3 skipped_overlap" in result.stdout
    data = json.loads(ok(db_url, "schedules", "backfill", "weekly", *span, "--overlap", "allow_all", "--json").stdout)
    # The four due times are already backfilled: nothing new, and it says so.
    assert (data["launched"], data["not_launched"], data["counts"]) == (0, 4, {"duplicate": 4})
    result = ok(db_url, "schedules", "backfill", "weekly", "--from", "2026-08-01", "--to", "2026-08-31", "--json")
    data = json.loads(result.stdout)
    assert (data["launched"], data["not_launched"], data["counts"]) == (4, 0, {"started": 4})  # 08-03 to 08-24
    assert data["fires"][0]["local"] == "2026-08-03T09:00:00+00:00"
    assert refused(db_url, "schedules", "backfill", "weekly", *span, "--overlap", "never").startswith(
        'overlap: "never"'
    )


def test_next_refuses_a_count_over_the_limit(db_url: str) -> None:
    add(db_url, "daily")
    assert refused(db_url, "schedules", "next", "daily", "-n", "1000000") == "count: 1000000 is outside 1-1000"
