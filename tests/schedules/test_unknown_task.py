"""A schedule for a task no live worker has registered is saved with a warning, in SQL, Python and the CLI."""

from __future__ import annotations

import warnings
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow
from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.errors import UnknownTaskWarning
from agentlab_sched.schedules import admin
from tests.support.rows import fetched

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
EN = (
    "warning: the task reports.weekly is not known to any live worker; the schedule is saved, but its fires are "
    "refused until a worker whose app has this task runs (agentlab-sched doctor lists such schedules)"
)


def _add(url: str, *args: str) -> Any:
    return CliRunner(env=ENV).invoke(
        app, ["--database-url", url, *args, "schedules", "add", "weekly", "--cron", "0 9 * * 1", "--task",
              "reports.weekly"],
    )  # fmt: skip


def test_the_cli_saves_it_and_warns_in_the_locale(db_url: str, sync_conn: psycopg.Connection[DictRow]) -> None:
    result = _add(db_url)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('added schedule "weekly"')
    assert EN in result.stderr.splitlines()
    sync_conn.execute("SELECT agentlab_sched.unschedule('weekly')")
    zh = _add(db_url, "--locale", "zh-CN")
    assert zh.exit_code == 0
    assert "注意:没有在线的 worker 注册过任务 reports.weekly;定时任务已保存" in zh.stderr


def test_no_warning_once_a_worker_registered_the_task(db_url: str, sync_conn: psycopg.Connection[DictRow]) -> None:
    sync_conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['reports.weekly'])")
    result = _add(db_url)
    assert result.exit_code == 0 and "warning" not in result.stderr


async def test_python_warns_with_the_task(conn: psycopg.AsyncConnection[DictRow]) -> None:
    with pytest.warns(UnknownTaskWarning) as caught:
        s = await admin.schedule(conn, "weekly", "0 9 * * 1", "reports.weekly")
    assert s.task == "reports.weekly"  # saved
    warning = caught[0].message
    assert isinstance(warning, UnknownTaskWarning)
    assert warning.task == "reports.weekly" and str(warning) == EN
    assert warning.message("zh-CN").startswith("注意:")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownTaskWarning)
        await admin.alter(conn, "weekly", cron="0 10 * * 1")  # the task did not change: no warning
    with pytest.warns(UnknownTaskWarning):
        await admin.alter(conn, "weekly", task="reports.monthly")


def test_sql_raises_a_warning_the_client_sees(sync_conn: psycopg.Connection[DictRow]) -> None:
    notices: list[tuple[str | None, str | None]] = []
    sync_conn.add_notice_handler(lambda n: notices.append((n.severity_nonlocalized, n.message_primary)))
    sync_conn.execute("SELECT agentlab_sched.schedule('weekly', '0 9 * * 1', 'reports.weekly')")
    assert notices == [("WARNING", EN)]
    assert fetched(sync_conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedules").fetchone())["n"] == 1
