"""The policy windows (abort grace, stall window, known-task window) have one definition, limits.POLICY.

SQL reads them from the database's copy (``agentlab_sched.policy_interval(name)``), Python from
``agentlab_sched.limits``; each place that says a number of its own is named.
"""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg.rows import DictRow

from agentlab_sched import limits

PACKAGE = Path(__file__).resolve().parents[2] / "agentlab_sched"
SQL_DIRS = ("database/sql", "database/queries")

#: A literal interval in SQL, and the words that make a line about one of the policies.
_INTERVAL = re.compile(r"interval\s+'(\d+)\s*(second|seconds|minute|minutes|s|min)'", re.IGNORECASE)
_POLICY_WORDS = re.compile(r"abort|grace|stall|heartbeat|seen_at|known_task", re.IGNORECASE)


def sql_disagreements(files: dict[str, str]) -> list[str]:
    """Lines of functions and queries (``name -> text``) about a policy that write its window literally."""
    seconds = {v: k for k, v in limits.POLICY.items()}
    found = []
    for name, text in sorted(files.items()):
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("--") or not _POLICY_WORDS.search(line):
                continue
            for amount, unit in _INTERVAL.findall(line):
                value = int(amount) * (60 if unit.lower().startswith("min") else 1)
                if value in seconds:
                    found.append(
                        f"{name}:{number}: interval '{amount} {unit}': "
                        f"use agentlab_sched.policy_interval('{seconds[value]}')"
                    )
    return found


def python_disagreements() -> list[str]:
    """The Python constants and defaults that carry a policy window, where they differ from limits."""
    from agentlab_sched.runs import housekeeping, lifecycle
    from agentlab_sched.worker import middleware

    places: list[tuple[str, object, timedelta]] = [
        (
            "agentlab_sched/worker/middleware.py ABORT_GRACE_SECONDS",
            timedelta(seconds=middleware.ABORT_GRACE_SECONDS),
            limits.ABORT_GRACE,
        ),
        ("agentlab_sched/runs/housekeeping.py ABORT_GRACE", housekeeping.ABORT_GRACE, limits.ABORT_GRACE),
        ("agentlab_sched/runs/housekeeping.py STALLED_AFTER", housekeeping.STALLED_AFTER, limits.STALL_WINDOW),
        (
            "agentlab_sched/runs/lifecycle.py detect_suspended(stalled_after=)",
            inspect.signature(lifecycle.detect_suspended).parameters["stalled_after"].default,
            limits.STALL_WINDOW,
        ),
        (
            "agentlab_sched/runs/lifecycle.py enforce_timeouts(abort_grace=)",
            inspect.signature(lifecycle.enforce_timeouts).parameters["abort_grace"].default,
            limits.ABORT_GRACE,
        ),
    ]
    return [f"{where}: {value}, limits.py says {expected}" for where, value, expected in places if value != expected]


def test_the_database_has_the_policy_windows(sync_conn: psycopg.Connection[DictRow]) -> None:
    for name, seconds in limits.POLICY.items():
        row = sync_conn.execute("SELECT agentlab_sched.policy_interval(%s) AS window", (name,)).fetchone()
        assert row == {"window": timedelta(seconds=seconds)}, name
    assert limits.KNOWN_TASK_WINDOW == timedelta(minutes=10)
    assert (limits.ABORT_GRACE, limits.STALL_WINDOW) == (timedelta(seconds=10), timedelta(seconds=30))


def test_sql_defaults_follow_the_definition(sync_conn: psycopg.Connection[DictRow]) -> None:
    """The functions whose window may be given take the definition's when it is not."""
    rows = sync_conn.execute(
        """SELECT p.proname AS name, pg_get_function_arguments(p.oid) AS args FROM pg_proc p
           WHERE p.pronamespace = 'agentlab_sched'::regnamespace
             AND p.proname IN ('housekeeping', 'detect_suspended', 'enforce_timeouts', 'time_out_run',
                               'finish_after_abort', 'doctor_facts')
           ORDER BY 1"""
    ).fetchall()
    assert len(rows) == 6
    for row in rows:
        for arg, policy in (
            ("abort_grace", "abort_grace_seconds"),
            ("stalled_after", "stall_seconds"),
            ("stall", "stall_seconds"),
        ):
            match = re.search(rf"\b{arg} interval DEFAULT ([^,]+(?:\([^)]*\))?)", row["args"])
            if match:
                assert match.group(1) == f"agentlab_sched.policy_interval('{policy}'::text)", row


def test_no_sql_or_python_says_a_window_of_its_own() -> None:
    files = {
        str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
        for d in SQL_DIRS
        for p in sorted((PACKAGE / d).glob("*.sql"))
    }
    assert sql_disagreements(files) + python_disagreements() == []


def test_a_window_of_its_own_is_named() -> None:
    planted = {
        "database/sql/99_planted.sql": (
            "-- a comment about the stall window of interval '30 seconds' is words\n"
            "    WHERE w.last_heartbeat < now() - interval '30 seconds'\n"
            "    AND k.seen_at > clock_timestamp() - interval '10 minutes'\n"
            "    AND r.created_at > now() - interval '10 minutes'\n"  # not about a policy
        )
    }
    assert sql_disagreements(planted) == [
        "database/sql/99_planted.sql:2: interval '30 seconds': use agentlab_sched.policy_interval('stall_seconds')",
        "database/sql/99_planted.sql:3: interval '10 minutes': "
        "use agentlab_sched.policy_interval('known_task_seconds')",
    ]
