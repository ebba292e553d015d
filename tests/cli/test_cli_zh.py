"""In zh-CN everything a person reads is Chinese: every command, walked over a database with schedules, fires,
runs and approvals in it, prints no English word outside names and values."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from agentlab_sched import database as db
from agentlab_sched import messages
from agentlab_sched.cli import app
from agentlab_sched.database.connections import display_url
from agentlab_sched.firing import requests, tick
from agentlab_sched.schedules.replan import replan
from tests.support.rows import SyncConn

ENV = {"AGENTLAB_SCHED_LOCALE": "zh-CN", "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}

#: Names and values the walk puts in the database or on the command line, and the technical names the
#: Chinese text keeps as they are (commands, options, variables, products, formats).
ALLOWED = {
    "daily", "weekly", "manual", "demo", "echo", "sleep", "reports", "Asia", "Shanghai", "America", "New_York",
    "UTC", "CST", "EST", "EDT", "JSON", "PostgreSQL", "cron", "worker", "tick", "psql", "NTP", "URL", "IANA",
    "agentlab-sched", "agentlab_sched", "procrastinate", "default", "skip", "latest", "isolated", "shift",
    "first", "postgres", "postgresql", "schedule", "yesterday", "date", "host", "tmp", "pgdata", "dev", "db",
    "schedules", "runs", "fires", "resume", "abandon", "edit", "doctor", "migrate", "stop", "APP", "app",
    "NAME", "RUN", "True", "False", "persistent", "allow_all", "buffer_all", "backfill", "trigger", "day", "holiday",
    "test", "dst_gap", "dst_repeat", "Webhook",
}  # fmt: skip


def english_words(text: str) -> set[str]:
    """The words of ``text`` that are English, once names, values and technical tokens are taken out."""
    for pattern in (
        r"postgresql://\S+",  # URLs
        r"agentlab-sched( [a-z][a-z-]*)+",  # commands
        r"SECURITY DEFINER",  # SQL
        r"--[a-z-]+",  # options
        r"\bAGENTLAB_SCHED_[A-Z_]+",  # environment variables
        r"#?[0-9a-f]{6,}(-[0-9a-f]+)*",  # run ids
        r"\d{4}-\d\d-\d\d( \d\d:\d\d(:\d\d)?)?",  # dates and times
        r"[+-]\d{4}\b",  # UTC offsets
        r"\{[^{}]*\}",  # JSON values
        r"\b[\w-]+/[\w./-]+",  # paths
        r"\b[\w.-]*\.[\w.-]+\b",  # dotted names (tasks, modules, hosts)
        r"\*|/\d+",  # cron
    ):
        text = re.sub(pattern, " ", text)
    return {w for w in re.findall(r"[A-Za-z][A-Za-z_-]+", text) if w not in ALLOWED}


def walk(url: str, *args: str, code: int | None = 0) -> str:
    result = CliRunner(env=ENV).invoke(app, ["--database-url", url, *args])
    assert "Traceback" not in result.output, result.output
    if code is not None:
        assert result.exit_code == code, (args, result.output)
    return result.output


async def _populate(url: str) -> str:
    conn = await db.connect(url, locale="en")
    try:
        await tick.register_tasks(conn, ["demo.echo", "demo.sleep"])
        await conn.execute(
            """SELECT agentlab_sched.schedule('daily', '30 2 * * *', 'demo.echo', '{"day": "{{ schedule.yesterday }}"}',
                                              'America/New_York')"""
        )
        await conn.execute("SELECT agentlab_sched.schedule('weekly', '0 9 * * 1', 'demo.sleep', '{}', 'Asia/Shanghai')")
        await replan(conn)
        first = await requests.trigger(conn, "daily", requested_by="test")
        await requests.trigger(conn, "daily", requested_by="test")  # skipped: the first is still queued
        await conn.execute("SELECT agentlab_sched.pause('weekly', 'holiday')")
        assert first.run_id is not None
        return first.run_id
    finally:
        await conn.close()


def test_every_command_reads_in_chinese(db_url: str, sync_conn: SyncConn) -> None:
    import asyncio

    run = asyncio.run(_populate(db_url))
    outputs = {
        "list": walk(db_url, "schedules", "list"),
        "show": walk(db_url, "schedules", "show", "daily"),
        "show paused": walk(db_url, "schedules", "show", "weekly"),
        "next": walk(db_url, "schedules", "next", "daily", "-n", "3"),
        "add": walk(db_url, "schedules", "add", "manual", "--cron", "0 8 * * *", "--task", "reports.weekly"),
        "edit": walk(db_url, "schedules", "edit", "manual", "--priority", "3"),
        "edit again": walk(db_url, "schedules", "edit", "manual", "--priority", "3"),
        "pause": walk(db_url, "schedules", "pause", "manual"),
        "resume": walk(db_url, "schedules", "resume", "manual"),
        "fires": walk(db_url, "fires"),
        "fires of one": walk(db_url, "fires", "daily"),
        "runs": walk(db_url, "runs", "list"),
        "run": walk(db_url, "runs", "show", run[:8]),
        "approve refused": walk(db_url, "runs", "approve", run[:8], code=2),
        "resume refused": walk(db_url, "runs", "resume", run[:8], code=2),
        "cancel": walk(db_url, "runs", "cancel", run[:8]),
        "prune": walk(db_url, "prune", "--older-than", "30d"),
        "rm": walk(db_url, "schedules", "rm", "manual"),
        "rm again": walk(db_url, "schedules", "rm", "manual", code=2),
        "notify": walk(db_url, "notify", "test", "daily", code=None),
        "doctor": walk(db_url, "doctor", code=1),
        "migrate": walk(db_url, "migrate"),
        "bad input": walk(
            db_url, "schedules", "add", "x", "--cron", "0 9 * * *", "--task", "t", "--priority", "x", code=2
        ),
    }
    english = {name: english_words(text) for name, text in outputs.items()}
    assert {name: words for name, words in english.items() if words} == {}, outputs
    assert [name for name, text in outputs.items() if not re.search(r"[\u4e00-\u9fff]", text)] == []


def test_the_database_line_is_chinese(db_url: str) -> None:
    """The line every command prints first names the database in the reader's language."""
    result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "schedules", "list"])
    first = result.stderr.splitlines()[0]
    assert first == f"数据库:{display_url(db_url)}(--database-url)", first
    assert english_words(first) == set()


def test_no_chinese_message_of_the_catalogue_is_english_prose() -> None:
    """What the walk cannot reach: no zh-CN template keeps English prose (three English words in a row, such
    as "is not allowed"); single technical names (SQL, cron, worker, Webhook) are names."""
    prose = re.compile(r"\b[a-z]{2,}(?:\s+[a-z]{2,}){2,}\b")
    found = {}
    for code, per in messages.CATALOG.items():
        text = re.sub(r"\{[a-z_]+\}", " \u3000 ", per["zh-CN"])  # a placeholder breaks a run of words
        text = re.sub(r"`[^`]*`|(agentlab-sched|procrastinate|apt|brew|pip)( [a-z-]+)*|--[a-z-]+", " \u3000 ", text)
        hits = prose.findall(text)
        if hits:
            found[code] = hits
    assert found == {}
