"""`agentlab-sched web` on the command line, and the dashboard `dev` starts beside its worker."""

from __future__ import annotations

import re
import urllib.request

import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app


def test_web_help_and_a_bad_base_path(db_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["web", "--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--read-only", "--base-path", "--local"):
        assert option in result.stdout
    result = runner.invoke(app, ["--database-url", db_url, "web", "--base-path", "ops"])
    assert result.exit_code == 2
    assert "base_path: ops is not a path" in result.output
    result = runner.invoke(app, ["--database-url", db_url, "--locale", "zh-CN", "web", "--base-path", "ops"])
    assert "「base_path」ops 不是路径" in result.output


def test_dev_prints_the_dashboard_address_and_serves_it(db_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--database-url", db_url, "dev", "--duration", "4", "--quiet"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    found = [line for line in lines[:6] if line.startswith("Dashboard: http://127.0.0.1:")]
    assert found, lines[:6]
    url = re.search(r"http://127\.0\.0\.1:\d+/", found[0])
    assert url is not None
    with pytest.raises(OSError):  # stopped with the worker: nothing listens there any more
        urllib.request.urlopen(url.group(0) + "healthz", timeout=1)
