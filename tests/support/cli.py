"""`agentlab-sched` through typer's CliRunner: the result, or the refusal's message (exit 2, nothing on
stdout); never a traceback."""

from __future__ import annotations

import asyncio
from typing import Any

from typer.testing import CliRunner, Result

from agentlab_sched import database as db
from agentlab_sched.cli import app

#: The environment a command runs with: none of the user's settings leak in.
ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


def cli(url: str, *args: str, env: dict[str, str | None] | None = None) -> Result:
    """The command's result, whatever its exit code."""
    result = CliRunner(env={**ENV, **(env or {})}).invoke(app, ["--database-url", url, *args])
    assert "Traceback" not in result.output, result.output
    return result


def ok(url: str, *args: str, **kwargs: Any) -> Result:
    """A command that must succeed."""
    result = cli(url, *args, **kwargs)
    assert result.exit_code == 0, result.output
    return result


def out(url: str, *args: str, **kwargs: Any) -> str:
    """What a command that must succeed prints on stdout."""
    return ok(url, *args, **kwargs).stdout


#: How the line naming the database starts, in each locale (every command prints it first, on stderr).
DATABASE_LINE = ("database: ", "数据库:")


def is_database_line(line: str) -> bool:
    """Whether ``line`` is the line naming the database, in either language."""
    return line.startswith(DATABASE_LINE)


def refused(url: str, *args: str, **kwargs: Any) -> str:
    """A command refused for bad input: exit 2, the message on stderr, nothing on stdout."""
    result = cli(url, *args, **kwargs)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not is_database_line(line)]
    return "\n".join(lines)


def add(url: str, name: str = "daily", *extra: str) -> Result:
    """``schedules add`` of a daily demo.echo schedule."""
    return ok(url, "schedules", "add", name, "--cron", "0 9 * * *", "--task", "demo.echo", *extra)


def setup(url: str, fn: Any) -> Any:
    """Run ``await fn(conn)`` on a connection of its own (the CLI runs its own event loop)."""

    async def main() -> Any:
        conn = await db.connect(url, locale="en")
        try:
            return await fn(conn)
        finally:
            await conn.close()

    return asyncio.run(main())
