"""Every command and every option of the CLI, walked from its command tree, given bad values: each answer is
a message and an exit status, never a Python traceback. A command or option added later is swept too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from psycopg import conninfo
from typer.testing import CliRunner

from agentlab_sched.cli import app

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
BAD = ["", "abc", "-1", "99999999999999999999", "2026-13-45T25:61", "@/nonexistent/file", "bad name\x1b[31m"]
#: The values swept in Chinese too (the messages differ, the paths to them mostly not).
BAD_ZH = ["abc", "99999999999999999999"]

#: Commands that run until stopped when their options are good (a worker, the demo, the dashboard) or hand
#: the terminal to another program (psql), or act on the embedded server (db stop): swept only with values
#: they must refuse before starting (a number or a choice that is not one, an app path that is no path).
LONG_RUNNING = {"worker", "dev", "web", "db psql", "db stop"}
REFUSED_AT_START = {"--concurrency", "--metrics-port", "--log-format", "--app", "--duration", "--port"}

#: Plausible values for what a command needs before its other options are looked at.
REQUIRED = {
    "--cron": "0 9 * * *", "--task": "demo.echo", "--command": "SELECT 1", "--older-than": "30d",
    "--app": "nope.app", "--from": "2026-01-01T00:00", "--to": "2026-01-02T00:00",
}  # fmt: skip
ARGUMENTS = {"name": "daily", "run": "abc123"}


def _walk(command: Any, path: list[str], ctx: Any) -> Iterator[tuple[list[str], Any]]:
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            yield from _walk(command.get_command(ctx, name), [*path, name], ctx)
    else:
        yield path, command


def _cases() -> list[tuple[list[str], list[str], str, str]]:
    root = typer.main.get_command(app)
    cases = []
    for path, command in _walk(root, [], None):
        long_running = " ".join(path) in LONG_RUNNING or path[0] in LONG_RUNNING
        options = [p for p in command.params if p.param_type_name == "option" and not getattr(p, "is_flag", False)]
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        required = [p for p in options if p.required]
        base = [*path]
        for argument in arguments:
            base.append(ARGUMENTS.get(argument.name or "", "x"))
        for option in required:
            base += [option.opts[0], REQUIRED.get(option.opts[0], "x")]
        for option in options:
            name = option.opts[0]
            if long_running and name not in REFUSED_AT_START:
                continue
            for value in ["abc"] if long_running else BAD:
                args = [a for a in base]
                if option.required:  # replace the plausible value
                    at = args.index(name)
                    args[at + 1] = value
                else:
                    args += [name, value]
                cases.append((path, args, value, f"{' '.join(path)} {name}={value!r}"))
        if arguments and not long_running:
            for value in BAD:
                args = [*path, *(value for _ in arguments), *base[len(path) + len(arguments) :]]
                cases.append((path, args, value, f"{' '.join(path)} argument={value!r}"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def url(pg_server: str, template_db: str) -> Iterator[str]:
    name = f"sweep_{os.getpid()}"
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    url = conninfo.make_conninfo(pg_server, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.schedule('daily', '0 9 * * *', 'demo.echo')")
    yield url
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_sweep_reaches_every_command() -> None:
    swept = {" ".join(path) for path, _, _, _ in CASES}
    assert {"schedules add", "schedules edit", "import pg-cron", "runs approve", "worker", "fires"} <= swept
    assert len(CASES) > 400


COMMANDS = sorted({" ".join(path) for path, _, _, _ in CASES})


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
@pytest.mark.parametrize("command", COMMANDS)
def test_no_bad_value_ends_in_a_traceback(url: str, tmp_path: Path, command: str, locale: str) -> None:
    runner = CliRunner(env={**ENV, "AGENTLAB_SCHED_DATA_DIR": str(tmp_path / "data"), "AGENTLAB_SCHED_LOCALE": locale})
    broken = []
    for path, args, value, label in CASES:
        if " ".join(path) != command or (locale != "en" and value not in BAD_ZH):
            continue
        result = runner.invoke(app, ["--database-url", url, *args], input="")
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or "Traceback" in result.output or result.exit_code not in (0, 1, 2, 3):
            broken.append(f"{label}: exit {result.exit_code}: {result.exception!r}: {result.output[-300:]}")
    assert broken == [], "\n".join(broken[:40]) + f"\n({len(broken)} in all)"
