"""The root's options work after the command too (`migrate --locale zh-CN`, as the docs write it), --version
says what runs, and --help lists each command once and names values as words, not Python types."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.cli.common import globals_first

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


def test_global_options_are_moved_before_the_command() -> None:
    assert globals_first(["migrate", "--locale", "zh-CN"]) == ["--locale", "zh-CN", "migrate"]
    assert globals_first(["schedules", "list", "--database-url=postgresql:///x", "--json"]) == [
        "--database-url=postgresql:///x", "schedules", "list", "--json"]  # fmt: skip
    assert globals_first(["schedules", "add", "x", "--", "--locale", "en"]) == [
        "schedules", "add", "x", "--", "--locale", "en"]  # fmt: skip


def test_locale_and_database_url_after_the_command(db_url: str) -> None:
    result = CliRunner(env=ENV).invoke(app, ["schedules", "list", "--database-url", db_url, "--locale", "zh-CN"])
    assert result.exit_code == 0, result.output
    assert re.search(r"[\u4e00-\u9fff]", result.stdout + result.stderr)
    after = CliRunner(env=ENV).invoke(app, ["migrate", "--locale", "zh-CN", "--database-url", db_url])
    assert after.exit_code == 0, after.output


def test_version() -> None:
    result = CliRunner(env=ENV).invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"agentlab-sched \S+ \(Procrastinate \S+, psycopg \S+\)\n", result.stdout), result.stdout


def test_help_lists_rotate_secrets_once_and_no_python_types() -> None:
    top = CliRunner(env=ENV).invoke(app, ["--help"]).stdout
    assert "rotate-secrets" not in top  # it is notify's; the top-level spelling still works, unlisted
    notify = CliRunner(env=ENV).invoke(app, ["notify", "--help"]).stdout
    assert notify.count("rotate-secrets") == 1
    for command in (["worker"], ["schedules", "edit"], ["import", "pg-cron"]):
        text = CliRunner(env=ENV).invoke(app, [*command, "--help"]).stdout
        assert "list[" not in text, text
    assert "--queue QUEUE" in CliRunner(env=ENV).invoke(app, ["worker", "--help"]).stdout
