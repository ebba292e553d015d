"""A streaming hot standby of the primary, made with pg_basebackup: what reads works there (the reader
role, the views, `fires`, `runs list`, `schedules list`, `doctor`), and a command that must write says
that it is on a standby instead of PostgreSQL's "cannot execute ... in a read-only transaction"."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app as cli_app

STANDBY_EN = (
    "this database is a read-only hot standby (in recovery): this command writes, so run it against the primary"
)
STANDBY_ZH = "该数据库是只读的热备库(正在恢复中):这个命令需要写入,请对主库运行"


def cli(url: str, *args: str, locale: str = "en") -> Any:
    env = {"AGENTLAB_SCHED_LOCALE": locale, "AGENTLAB_SCHED_DATABASE_URL": url}
    return CliRunner(env=env).invoke(cli_app, list(args))


@pytest.fixture(scope="module")
def replicated(pg15: Any, pg15_template: str, cluster_tools: Any) -> Any:
    """A database on the primary with a schedule, a manual fire and its queued run, the roles and a
    reader login, replayed by a fresh standby: (primary, standby, database name)."""
    name = cluster_tools.new_database(pg15, pg15_template)
    url = pg15.url(name)
    pg15.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])", dbname=name)  # as a worker would
    for args in (
        ("schedules", "add", "nightly", "--cron", "0 3 * * *", "--task", "demo.echo"),
        ("schedules", "trigger", "nightly"),
        ("roles", "create"),
    ):
        result = cli(url, *args)
        assert result.exit_code == 0, (args, result.stderr)
    pg15.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alice') THEN "
        "CREATE ROLE alice LOGIN IN ROLE agentlab_sched_reader; END IF; END $$"
    )
    with cluster_tools.standby_of(pg15) as standby:
        cluster_tools.wait_replayed(pg15, standby)
        yield pg15, standby, name
    pg15.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_standby_is_in_recovery_and_has_the_data(replicated: Any) -> None:
    _, standby, name = replicated
    assert standby.rows("SELECT pg_is_in_recovery()") == [(True,)]
    assert standby.rows("SELECT name, cron FROM agentlab_sched.schedules", dbname=name) == [("nightly", "0 3 * * *")]


def test_reading_commands_and_views_work_on_the_standby_as_the_reader(replicated: Any) -> None:
    _, standby, name = replicated
    reader = standby.url(name, user="alice")
    fires = cli(reader, "fires")
    assert fires.exit_code == 0, fires.stderr
    assert "nightly" in fires.stdout and "manual" in fires.stdout
    runs = cli(reader, "runs", "list")
    assert runs.exit_code == 0, runs.stderr
    assert "nightly" in runs.stdout and "queued" in runs.stdout
    listed = cli(reader, "schedules", "list")
    assert listed.exit_code == 0 and "nightly" in listed.stdout
    with psycopg.connect(reader, autocommit=True) as conn:
        status = conn.execute("SELECT name, enabled FROM agentlab_sched.schedule_status").fetchall()
        history = conn.execute("SELECT kind, status FROM agentlab_sched.fire_history").fetchall()
        jobs = conn.execute("SELECT jobname, schedule FROM agentlab_sched.cron_job").fetchall()
    assert status == [("nightly", True)]
    assert history == [("manual", "started")]
    assert jobs == [("nightly", "0 3 * * *")]


def test_doctor_reads_the_standby(replicated: Any) -> None:
    _, standby, name = replicated
    result = cli(standby.url(name), "doctor")
    assert result.exit_code in (0, 1), result.stderr  # 1: findings (no worker runs), said, not a crash
    assert "Traceback" not in result.stderr and "read-only" not in result.stderr + result.stdout
    assert "worker" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("schedules", "add", "other", "--cron", "0 4 * * *", "--task", "demo.echo"),
        ("schedules", "trigger", "nightly"),
        ("schedules", "pause", "nightly"),
        ("migrate",),
    ],
    ids=["add", "trigger", "pause", "migrate"],
)
def test_a_command_that_writes_says_it_is_on_a_standby(replicated: Any, args: tuple[str, ...]) -> None:
    _, standby, name = replicated
    result = cli(standby.url(name), *args)
    assert result.exit_code == 1
    assert STANDBY_EN in result.stderr
    assert "read-only transaction" not in result.stderr and "Traceback" not in result.stderr


def test_the_standby_refusal_in_chinese(replicated: Any) -> None:
    _, standby, name = replicated
    result = cli(standby.url(name), "schedules", "pause", "nightly", locale="zh-CN")
    assert result.exit_code == 1 and STANDBY_ZH in result.stderr


def test_a_worker_on_the_standby_says_so(replicated: Any) -> None:
    _, standby, name = replicated
    result = cli(standby.url(name), "worker", "--quiet")
    assert result.exit_code == 2
    assert "is a read-only hot standby (in recovery): a worker writes" in result.stderr
    assert "Traceback" not in result.stderr
    chinese = cli(standby.url(name), "worker", "--quiet", locale="zh-CN")
    assert chinese.exit_code == 2 and "是只读的热备库(正在恢复中):worker 需要写入" in chinese.stderr
