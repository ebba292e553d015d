"""`agentlab-sched import procrastinate --app ...`: @app.periodic tasks as schedules, croniter's dialect
rewritten where it reads differently (docs/coming-from.md, "Procrastinate periodic tasks")."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from croniter import croniter

from agentlab_sched.core.cron import parse
from agentlab_sched.errors import ValidationError
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.imports.periodic import from_croniter
from agentlab_sched.schedules import admin
from tests.support import periodic_app
from tests.support.cli import ok
from tests.support.firing_helpers import EN, job, runs_of
from tests.support.rows import Conn


def test_import_procrastinate_makes_paused_schedules_and_says_what_to_remove(db_url: str) -> None:
    out = ok(db_url, "import", "procrastinate", "--app", "tests.support.periodic_app.app").stdout
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as c:
        rows = c.execute(
            "SELECT name, cron, timezone, task, inputs, queue, priority, overlap, enabled, imported_from,"
            " agentlab_sched.paused_reason_text(paused_reason, paused_reason_code, paused_reason_params)"
            " AS paused_reason FROM agentlab_sched.schedules ORDER BY name"
        ).fetchall()
    got = {r["name"]: r for r in rows}
    assert set(got) == {"reports.weekly", "sync.fast:fast", "odd.or.monday", "last.friday"}
    weekly = got["reports.weekly"]
    assert (weekly["cron"], weekly["timezone"], weekly["task"], weekly["queue"], weekly["overlap"]) == (
        "0 9 * * 1",
        "UTC",
        "reports.weekly",
        "reports",
        "allow_all",
    )
    assert weekly["inputs"] == {"timestamp": "{{ schedule.timestamp }}"}
    assert weekly["enabled"] is False and weekly["paused_reason"].startswith(
        "imported from the periodic task reports.weekly; resume it"
    )
    assert weekly["imported_from"] == "procrastinate periodic task reports.weekly"
    fast = got["sync.fast:fast"]
    assert (fast["cron"], fast["overlap"], fast["imported_from"]) == (
        "*/5 * * * * 30",  # seconds last, as Procrastinate writes them
        "buffer_one",
        "procrastinate periodic task sync.fast (fast)",
    )
    assert (got["odd.or.monday"]["cron"], got["odd.or.monday"]["overlap"]) == ("0 0 1-31/2 * MON", "buffer_all")
    last = got["last.friday"]
    assert (last["cron"], last["priority"], last["inputs"]) == (
        "0 18 * * 5L",
        5,
        {"kind": "month-end", "timestamp": "{{ schedule.timestamp }}"},
    )
    assert "odd.or.monday: */2: croniter combines the two day fields with OR here; written 1-31/2" in out
    assert "last.friday: croniter's L5 (the last such weekday of the month) written 5L" in out
    assert "periodic task bad.step (*/90 * * * *) not imported: minute: step 90 is outside 1-59" in out
    assert "remove @app.periodic(...) from tests.support.periodic_app.weekly (" in out and "periodic_app.py:" in out
    again = json.loads(
        ok(db_url, "import", "procrastinate", "--app", "tests.support.periodic_app.app", "--json").stdout
    )
    assert {i["outcome"] for i in again["imported"]} == {"already"}
    enabled = json.loads(
        ok(db_url, "import", "procrastinate", "--app", "tests.support.periodic_app.app", "--enable", "--json").stdout
    )
    assert {(i["name"], i["enabled"], i["outcome"]) for i in enabled["imported"]} == {
        (name, True, "enabled") for name in got
    }


async def test_an_imported_periodic_task_gets_its_timestamp_as_a_number(conn: Conn) -> None:
    from agentlab_sched.imports.periodic import import_periodic

    await import_periodic(conn, periodic_app.app, enable=True)
    await conn.execute("SELECT agentlab_sched.register_tasks(%s)", (list(periodic_app.app.tasks),))
    monday = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    await conn.execute("UPDATE agentlab_sched.schedules SET next_run_at = %s WHERE name = 'reports.weekly'", (monday,))
    await fire_due(conn, monday + timedelta(seconds=2), settings=EN)
    sid = (await admin.get(conn, "reports.weekly")).id
    [run] = await runs_of(conn, sid)
    assert (await job(conn, run["job_id"]))["args"] == {"timestamp": int(monday.timestamp())}


def test_croniters_reading_is_kept() -> None:
    """The rewritten expression fires exactly when croniter fires the original (UTC, many cases)."""
    rng = random.Random(13)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    days = ["*/2", "*/3", "1,15", "L", "10-20", "W15", "*"]
    weekdays = ["MON", "L5", "1-5", "FRI-MON", "SAT-SUN", "*/2", "*", "5#2"]
    hours = ["0", "9", "22-2", "*/6"]
    compared = 0
    for _ in range(150):
        original = f"{rng.choice(['0', '30'])} {rng.choice(hours)} {rng.choice(days)} * {rng.choice(weekdays)}"
        try:
            rewritten, _ = from_croniter(original)
        except ValidationError as err:
            assert err.code == "import.croniter_and"  # croniter's AND around W and #: not expressible
            continue
        try:
            it = croniter(original, start)
            theirs = [it.get_next(datetime) for _ in range(12)]
        except Exception:
            continue  # croniter refuses it (or cannot mix the forms): nothing to keep
        ours = list(_first(parse(rewritten).iter_from(start, "UTC"), 12))
        assert ours == theirs, (original, rewritten)
        compared += 1
    assert compared > 80


def _first(it: Any, n: int) -> Any:
    for _, value in zip(range(n), it, strict=False):
        yield value


async def test_braces_in_a_periodic_tasks_kwargs_stay_text(conn: Conn) -> None:
    """kwargs written for Procrastinate are not templates: `{{ schedule.name }}` in them arrives as written."""
    import procrastinate
    from procrastinate.testing import InMemoryConnector

    from agentlab_sched.imports.periodic import import_periodic

    local = procrastinate.App(connector=InMemoryConnector())

    @local.periodic(cron="0 9 * * *", task_kwargs={"note": "{{ schedule.name }} {{x}}", "{{ schedule.kind }}": 1})
    @local.task(name="notes.daily")
    def daily(timestamp: int, note: str, **rest: int) -> None:
        return None

    await import_periodic(conn, local, enable=True)
    await conn.execute("SELECT agentlab_sched.register_tasks(%s)", (["notes.daily"],))
    nine = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    await conn.execute("UPDATE agentlab_sched.schedules SET next_run_at = %s WHERE name = 'notes.daily'", (nine,))
    await fire_due(conn, nine + timedelta(seconds=2), settings=EN)
    [run] = await runs_of(conn, (await admin.get(conn, "notes.daily")).id)
    assert (await job(conn, run["job_id"]))["args"] == {
        "note": "{{ schedule.name }} {{x}}",
        "{{ schedule.kind }}": 1,
        "timestamp": int(nine.timestamp()),
    }
