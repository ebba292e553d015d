"""Every shell command of this CLI and every SQL block of README.md and docs/*.md runs as written, in the
order a reader meets them (one fresh migrated database per page), so a page that stops working fails
CI. What cannot run here is listed below with the reason; anything else that fails is a broken page."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ENV = {"AGENTLAB_SCHED_LOCALE": "en", "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
FENCE = re.compile(r"^```(sh|sql)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SQL_START = re.compile(r"\s*(--|SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|CREATE|GRANT|ALTER)\b", re.IGNORECASE)

#: agentlab-sched commands that are not run here: (page, the command's start) -> why.
SKIP_COMMANDS = {
    ("README.md", "agentlab-sched dev"): "runs the demo until Ctrl-C (tests/observe: dev's output)",
    ("README.md", "agentlab-sched worker"): "runs until Ctrl-C (tests/worker run workers)",
    ("README.md", "agentlab-sched web"): "serves the dashboard until Ctrl-C (tests/web)",
    ("operations.md", "agentlab-sched worker"): "runs until Ctrl-C, through PgBouncer (tests/cluster)",
    ("web.md", "agentlab-sched web"): "a synopsis with [options]; serves until Ctrl-C (tests/web)",
    ("web.md", "agentlab-sched dev"): "runs the demo until Ctrl-C",
    ("coming-from.md", "agentlab-sched import pg-cron"): "needs a real pg_cron (tests/imports/test_import_pg_cron.py)",
    ("coming-from.md", "agentlab-sched import procrastinate"): "a synopsis with [options] and the user's host.app",
    ("notifications.md", "agentlab-sched schedules edit"): "needs a key and a real chat webhook (tests/notify)",
    ("notifications.md", "agentlab-sched notify test"): "sends to a real chat webhook (tests/notify)",
    ("security.md", "agentlab-sched roles create"): "creates server-wide roles with fixed names that tests running "
    "beside it would share (tests/database: roles with names of their own)",
}
#: SQL blocks that are not run here: (page, the block's start) -> why.
SKIP_SQL = {
    ("sql.md", "SELECT agentlab_sched.schedule_sql("): "needs a database app and a role maintenance that may be run "
    "as (tests/tasks/test_sql_task.py)",
    ("security.md", "CREATE ROLE alice"): "server-wide login roles with a placeholder password",
    ("security.md", "GRANT agentlab_sched_reader TO oncall"): "needs the roles of roles create and a role oncall",
}


#: What a page's blocks take as given, run before each of its SQL blocks but the first: sql.md's tour
#: ends by removing the schedule the blocks after it go on using, at the version they show (4).
FIXTURES = {
    "sql.md": """DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM agentlab_sched.schedules WHERE name = 'daily-report') THEN
            PERFORM agentlab_sched.schedule('daily-report', '0 9 * * 1-5', 'reports.daily',
                                            timezone => 'Asia/Shanghai');
            PERFORM agentlab_sched.alter_schedule('daily-report', cron => '30 9 * * 1-5');
            PERFORM agentlab_sched.pause('daily-report', 'holiday week');
            PERFORM agentlab_sched.resume('daily-report');
        END IF;
    END $$""",
}


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def commands(block: str) -> list[list[str]]:
    """The agentlab-sched command lines of a sh block (continuations joined, comments dropped)."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[0].endswith("agentlab-sched"):
                found.append(["agentlab-sched", *words[1:]])
    return found


def _skipped(table: dict[tuple[str, str], str], page: Path, text: str) -> bool:
    return any(page.name == name and text.strip().startswith(start) for (name, start) in table)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_and_sql_block_of_the_page_runs(page: Path, db_url: str) -> None:
    runner = CliRunner(env=ENV)
    ran = 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo', 'reports.daily'])")
        sql_blocks = 0
        for kind, body in blocks(page):
            if kind == "sql":
                if not SQL_START.match(body) or _skipped(SKIP_SQL, page, body):
                    continue  # a signature, not a statement; or listed above
                try:
                    if page.name in FIXTURES and sql_blocks:
                        conn.execute(FIXTURES[page.name])
                    sql_blocks += 1
                    conn.execute(body)
                except psycopg.Error as exc:
                    pytest.fail(f"{page.name}: the SQL block starting {body.splitlines()[0]!r} fails: {exc}")
                ran += 1
                continue
            for words in commands(body):
                if _skipped(SKIP_COMMANDS, page, " ".join(words)):
                    continue
                result = runner.invoke(app, ["--database-url", db_url, *words[1:]], input="")
                assert "Traceback" not in result.output, result.output
                allowed = (0, 1) if words[1:2] == ["doctor"] else (0,)  # doctor exits 1 when something needs a person
                assert result.exit_code in allowed, f"{page.name}: {' '.join(words)}: {result.output}"
                ran += 1
    if page.name in ("README.md", "sql.md"):
        assert ran >= 5


def test_the_skip_lists_name_what_the_pages_hold() -> None:
    """An entry whose command or block left its page is stale: the lists stay exact."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in PAGES}
    for table in (SKIP_COMMANDS, SKIP_SQL):
        for name, start in table:
            flat = texts[name].replace(".venv/bin/", "")
            assert start in flat, (name, start)
