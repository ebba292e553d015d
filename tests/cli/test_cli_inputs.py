"""Easy mistakes on the command line: each gets exit 2, one clear line on stderr in the reader's language,
nothing on stdout, never a traceback or the command-line library's English usage block."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.cli import is_database_line

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
CJK = re.compile(r"[\u4e00-\u9fff]")
ADD = ["schedules", "add", "x", "--cron", "0 9 * * *", "--task", "demo.echo"]


@pytest.fixture(scope="module")
def url(pg_server: str, template_db: str) -> Iterator[str]:
    """One database with one schedule ("daily"); every command below is refused and writes nothing."""
    name = f"i_{os.getpid()}_{id(object())}"
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    url = conninfo.make_conninfo(pg_server, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.schedule('daily', '0 9 * * *', 'demo.echo')")
    yield url
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def refusal(url: str, args: list[str], locale: str, stdin: str | None = None) -> str:
    """The one line a refused command prints (exit 2, nothing on stdout, no traceback)."""
    runner = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": locale})
    result = runner.invoke(app, ["--database-url", url, *args], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, (args, result.output)
    assert result.stdout == "", (args, result.stdout)
    assert "Traceback" not in result.stderr and "Usage:" not in result.stderr and "Error:" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not is_database_line(line)]
    assert len(lines) == 1, (args, result.stderr)
    return lines[0]


#: (arguments, a word the English message must contain, the same for the Chinese one)
BAD_INPUTS: list[tuple[list[str], str, str]] = [
    (["--locale", "fr", "schedules", "list"], '"fr" is not a language', "「fr」不是支持的语言"),
    ([*ADD, "--priority", "high"], '--priority: "high" is not a whole number', "「--priority」的取值「high」不是整数"),
    ([*ADD, "--inputs", "@missing.json"], "inputs: there is no file missing.json", "文件 missing.json 不存在"),
    ([*ADD, "--inputs", "{oops"], "inputs: not valid JSON", "不是有效的 JSON"),
    ([*ADD, "--misfire-grace", "soon"], 'misfire_grace: "soon" is not a duration', "不是时长"),
    (["schedules", "add", "x", "--cron", "0 25 * * *", "--task", "demo.echo"], "hour: 25 is outside 0-23", "超出 0-23"),
    (["schedules", "backfill", "daily", "--from", "last week", "--to", "2026-01-01"],
     'from: "last week" is not a date and time', "「起始时间」「last week」不是日期时间"),
    (["schedules", "list", "--bogus"], "there is no option --bogus", "没有选项 --bogus"),
    (["schedules", "lst"], '"lst" is not a command of agentlab-sched schedules', "「lst」不是"),
    (["schedules", "add", "x", "--task", "demo.echo"], "--cron must be given", "必须给出 --cron"),
    (["schedules", "show"], "the schedule name (NAME) is missing", "缺少参数 定时任务名称(NAME)"),
    (["schedules", "show", "daily", "extra"], 'unexpected argument "extra"', "多了参数「extra」"),
    (["schedules", "show", "nope"], 'no schedule named "nope"', "没有名为「nope」的定时任务"),
    (["schedules", "next", "daily", "-n"], "-n needs a value", "-n 后面需要跟一个值"),
    (["schedules", "next", "daily", "-n", "1000000"], "count: 1000000 is outside 1-1000", "1000000 超出 1-1000"),
    (["schedules", "list", "--json=yes"], "--json takes no value", "--json 不接受取值"),
    (["schedules", "edit", "daily"], "nothing to change", "没有要修改的内容"),
    (["fires", "--limit", "0"], "--limit: 0 is less than 1", "「--limit」的取值 0 小于 1"),
    (["fires", "--since", "the other day"], 'since: "the other day" is neither a time', "既不是时间"),
    (["runs", "show", "zz"], '"zz" is not a run id', "「zz」不是运行编号"),
    (["prune", "--older-than", "soon"], "older_than", "保留时长"),
    (["worker", "--app", "myproject.procrastinate.app"], "there is no module myproject", "找不到模块 myproject"),
    (["worker", "--app", "myapp"], '"myapp" is not a dotted path', "不是点分路径"),
    (["worker", "--app", "agentlab_sched.demo.make_app"], "not a procrastinate.App", "不是 procrastinate.App"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "en", "zh"), BAD_INPUTS, ids=[" ".join(a[0])[:60] for a in BAD_INPUTS])
def test_a_bad_input_is_one_clear_line_in_either_language(url: str, args: list[str], en: str, zh: str) -> None:
    english = refusal(url, args, "en")
    assert en in english
    assert not CJK.search(english)
    chinese = refusal(url, args, "zh-CN")
    assert zh in chinese
    assert CJK.search(chinese)


def test_the_locale_from_the_environment_is_checked_too(url: str) -> None:
    line = refusal(url, ["schedules", "list"], "fr")
    assert line == 'AGENTLAB_SCHED_LOCALE: "fr" is not a language this tool speaks; choose one of en, zh-CN'


def test_locale_aliases_are_accepted(url: str) -> None:
    for alias in ("zh", "zh_CN", "zh-cn.UTF-8", "en_US"):
        result = CliRunner(env=ENV).invoke(app, ["--database-url", url, "--locale", alias, "schedules", "list"])
        assert result.exit_code == 0, (alias, result.output)


def test_setting_the_version_in_sql_is_refused(url: str) -> None:
    with psycopg.connect(url, autocommit=True, options="-c agentlab_sched.locale=en") as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            conn.execute("UPDATE agentlab_sched.schedules SET version = 99 WHERE name = 'daily'")
        assert str(refused.value).startswith("version: cannot be set (asked for 99)")
        assert refused.value.diag.column_name == "version"
        assert conn.execute("SELECT version FROM agentlab_sched.schedules WHERE name = 'daily'").fetchone() == (1,)
        conn.execute("SET agentlab_sched.locale = 'zh-CN'")
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            conn.execute("UPDATE agentlab_sched.schedules SET version = 99 WHERE name = 'daily'")
        assert str(refused.value).startswith("「版本」不能直接设置(收到 99)")
        # The trigger's own bookkeeping still moves it.
        conn.execute("UPDATE agentlab_sched.schedules SET cron = '0 10 * * *' WHERE name = 'daily'")
        assert conn.execute("SELECT version FROM agentlab_sched.schedules WHERE name = 'daily'").fetchone() == (2,)


def test_the_app_in_the_current_directory_is_found(url: str, tmp_path: Any, monkeypatch: Any) -> None:
    """`--app myproject.app` from the project's directory imports it (as `python -m` would)."""
    from agentlab_sched.cli.common import load_app

    (tmp_path / "myproject_i12").mkdir()
    (tmp_path / "myproject_i12" / "__init__.py").write_text(
        "import procrastinate\nimport procrastinate.testing\n"
        "app = procrastinate.App(connector=procrastinate.testing.InMemoryConnector())\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    loaded = load_app("myproject_i12.app", url)
    assert type(loaded).__name__ == "App"
