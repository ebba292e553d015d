"""Terminal escapes (docs/security.md): text from the database reaches `schedules show`, `fires`, `runs
list/show` and `dev` with its control characters escaped, and is never read as rich markup."""

from __future__ import annotations

import io
import json

import psycopg
from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.rows import fetched

#: An OSC 52 clipboard write, a window title, a CSI clear screen, an 8-bit CSI and a bidi override.
HOSTILE = "bad \x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;owned\x07 \x1b[2J \x9b31m \u202eevil"
ESCAPED = "bad \\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b]0;owned\\x07 \\x1b[2J \\x9b31m \\u202eevil"


def cli(url: str, *args: str) -> str:
    result = CliRunner(env={"AGENTLAB_SCHED_LOCALE": None}).invoke(app, ["--database-url", url, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def seed(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        sid = fetched(
            conn.execute(
                """INSERT INTO agentlab_sched.schedules (name, cron, task, enabled, paused_reason)
               VALUES ('x[/bold] [red]', '0 9 * * *', 'demo.echo', false, %s) RETURNING id""",
                (HOSTILE,),
            ).fetchone()
        )[0]
        fire = fetched(
            conn.execute(
                """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, reason_code, reason)
               VALUES (%s, now(), 'scheduled', 'failed_to_start', 'launch.refused', %s) RETURNING id""",
                (sid, HOSTILE),
            ).fetchone()
        )[0]
        run = fetched(
            conn.execute(
                """INSERT INTO agentlab_sched.runs (schedule_id, fire_id, task, started_by, status, error)
               VALUES (%s, %s, 'demo.echo', 'schedule:x', 'failed', %s) RETURNING id::text""",
                (sid, fire, HOSTILE),
            ).fetchone()
        )[0]
    return run


def test_control_characters_from_the_database_never_reach_the_terminal(db_url: str) -> None:
    run = seed(db_url)
    outputs = {
        "schedules show": cli(db_url, "schedules", "show", "x[/bold] [red]"),
        "fires": cli(db_url, "fires"),
        "runs list": cli(db_url, "runs", "list"),
        "runs show": cli(db_url, "runs", "show", run[:8]),
    }
    for command, out in outputs.items():
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out, command
        assert ESCAPED in "".join(out.split("\n")) or ESCAPED.split(" ")[1] in out, (command, out)
    assert "x[/bold] [red]" in outputs["schedules show"]  # a name is shown as written, not as markup
    data = json.loads(cli(db_url, "runs", "show", run[:8], "--json"))
    assert data["error"] == HOSTILE  # JSON keeps the value, escaped as JSON
    raw = cli(db_url, "runs", "show", run[:8], "--json")
    assert "\x9b" not in raw and "\u202e" not in raw


def test_dev_shows_a_name_with_markup_as_written() -> None:
    """The worker's and dev's lines: a name with markup as written, control characters escaped."""
    from datetime import UTC, datetime

    from agentlab_sched.cli import common
    from agentlab_sched.observe import events, output

    screen = io.StringIO()
    with output.configure("lines", locale="en", stream=screen, clean=common.safe):
        events.fire_recorded(
            schedule="x[/bold] [red]", fire_id=1, fire_at=datetime(2026, 3, 1, 9, tzinfo=UTC), kind="scheduled",
            status="failed_to_start", timezone="UTC", reason_code="launch.refused", reason_params={"reason": HOSTILE},
            reason=HOSTILE,
        )  # fmt: skip
    shown = screen.getvalue()
    assert "x[/bold] [red] scheduled fire: failed_to_start" in shown
    assert "\x07" not in shown and "\x1b" not in shown and "\\x1b]0;owned\\x07" in shown
