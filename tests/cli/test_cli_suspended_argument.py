"""`runs abandon 1a2b3c --suspended` (a run id where --suspended wants a schedule's name) says what the
argument is and how to settle that run, in either language."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.cli import is_database_line

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


@pytest.mark.parametrize(
    ("command", "locale", "line"),
    [
        ("abandon", "en", 'no schedule named "1a2b3c": with --suspended the argument is a schedule\'s name; to '
                          "settle the run 1a2b3c, leave out --suspended"),
        ("resume", "zh-CN", "没有名为「1a2b3c」的定时任务:使用 --suspended 时参数是定时任务名称;要处理运行 1a2b3c,"
                            "请去掉 --suspended"),
    ],
)  # fmt: skip
def test_a_run_id_given_with_suspended(db_url: str, command: str, locale: str, line: str) -> None:
    result = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": locale}).invoke(
        app, ["--database-url", db_url, "runs", command, "1a2b3c", "--suspended"]
    )
    assert result.exit_code == 2, result.output
    assert [x for x in result.stderr.splitlines() if x.strip() and not is_database_line(x)] == [line]


def test_an_unknown_schedule_name_is_still_said_as_such(db_url: str) -> None:
    result = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": "en"}).invoke(
        app, ["--database-url", db_url, "runs", "abandon", "nightly", "--suspended"]
    )
    assert result.exit_code == 2
    assert 'no schedule named "nightly"' in result.stderr and "--suspended" not in result.stderr
