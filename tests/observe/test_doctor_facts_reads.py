"""doctor_facts() reads what it reports, not every schedule nor the whole outbox: its checks go by partial
indexes (migration 0014), and the parts rewritten for that say exactly what they said before."""

from __future__ import annotations

from typing import Any

from agentlab_sched.limits import LIMITS
from tests.support.outbox_rows import failed_run_notification
from tests.support.rows import SyncConn, fetched

S = "agentlab_sched"

#: The parts as they were written before they went by index: the reference the rewritten ones must match.
BEFORE_UNREGISTERED = f"""
    SELECT coalesce((
        SELECT jsonb_agg(jsonb_build_object('task', u.task, 'schedules', u.names) ORDER BY u.task)
        FROM (SELECT s.task, jsonb_agg(s.name ORDER BY s.name) AS names FROM {S}.schedules s
              WHERE s.enabled AND s.task IN (
                  SELECT t.task FROM (SELECT DISTINCT e.task FROM {S}.schedules e WHERE e.enabled OFFSET 0) t
                  WHERE NOT {S}.task_registered(t.task))
              GROUP BY s.task) u), '[]'::jsonb) AS v"""
BEFORE_OUTBOX = f"""
    SELECT jsonb_build_object(
               'pending', count(*) FILTER (WHERE o.status = 'pending'),
               'retrying', count(*) FILTER (WHERE o.status = 'pending' AND o.attempts > 0),
               'oldest_seconds', extract(epoch FROM %(now)s::timestamptz
                                               - min(o.created_at) FILTER (WHERE o.status = 'pending')),
               'failed', count(*) FILTER (WHERE o.status = 'failed'
                                            AND o.created_at > %(now)s::timestamptz - interval '1 day'))
           AS v
    FROM {S}.outbox o WHERE o.status IN ('pending', 'failed')"""
BEFORE_FAILING = f"""
    SELECT coalesce((
        SELECT jsonb_agg(jsonb_build_object('schedule', s.name, 'status', o.status, 'attempts', o.attempts,
                                            'error', o.last_error, 'event', o.event) ORDER BY o.id DESC)
        FROM (SELECT * FROM {S}.outbox o
              WHERE (o.status = 'pending' AND o.attempts > 0)
                 OR (o.status = 'failed' AND o.created_at > %(now)s::timestamptz - interval '1 day')
              ORDER BY o.id DESC LIMIT 20) o
        LEFT JOIN {S}.schedules s ON s.id = o.schedule_id), '[]'::jsonb) AS v"""


def _facts(conn: SyncConn) -> dict[str, Any]:
    facts: dict[str, Any] = fetched(conn.execute(f"SELECT {S}.doctor_facts() AS f").fetchone())["f"]
    return facts


def _before(conn: SyncConn, statement: str, now: str) -> Any:
    return fetched(conn.execute(statement, {"now": now}).fetchone())["v"]


def _cut(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The former unregistered tasks, each with every name, as doctor_facts() gives them now: the first
    names a finding shows, and how many there are."""
    return [{**t, "schedules": t["schedules"][: LIMITS["names_shown"]], "count": len(t["schedules"])} for t in tasks]


def _schedules(conn: SyncConn, count: int, *, task: str = "demo.echo", prefix: str = "s") -> None:
    """``count`` planned schedules, inserted set-based as the owner (valid by construction)."""
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(
            f"""INSERT INTO {S}.schedules (name, cron, task, timezone, next_run_at, replan)
                SELECT %(prefix)s || lpad(g::text, 6, '0'), '0 * * * *', %(task)s, 'UTC',
                       now() + interval '1 hour', NULL
                FROM generate_series(1, %(count)s) g""",
            {"prefix": prefix, "task": task, "count": count},
        )


def test_unregistered_tasks_each_once_with_their_enabled_schedules_by_name(sync_conn: SyncConn) -> None:
    sync_conn.execute(f"SELECT {S}.register_tasks(ARRAY['demo.echo'])")
    _schedules(sync_conn, 3, task="reports.weekly", prefix="w")
    _schedules(sync_conn, 2, task="a.first", prefix="a")
    _schedules(sync_conn, 2, task="demo.echo", prefix="e")
    _schedules(sync_conn, 1, task="z.off", prefix="z")
    sync_conn.execute(f"UPDATE {S}.schedules SET enabled = false WHERE task = 'z.off' OR name = 'w000002'")
    assert _facts(sync_conn)["unregistered_tasks"] == [
        {"task": "a.first", "schedules": ["a000001", "a000002"], "count": 2},
        {"task": "reports.weekly", "schedules": ["w000001", "w000003"], "count": 2},
    ]
    assert _cut(_before(sync_conn, BEFORE_UNREGISTERED, "now")) == _facts(sync_conn)["unregistered_tasks"]
    sync_conn.execute(f"UPDATE {S}.schedules SET enabled = false")
    assert _facts(sync_conn)["unregistered_tasks"] == []


def test_an_unregistered_task_of_many_schedules_gives_its_first_names_and_their_count(sync_conn: SyncConn) -> None:
    shown = LIMITS["names_shown"]
    _schedules(sync_conn, shown + 5, task="reports.weekly", prefix="w")
    sync_conn.execute(f"ANALYZE {S}.schedules")
    [task] = _facts(sync_conn)["unregistered_tasks"]
    assert task == {
        "task": "reports.weekly",
        "schedules": [f"w{n:06}" for n in range(1, shown + 1)],
        "count": shown + 5,
    }
    assert _cut(_before(sync_conn, BEFORE_UNREGISTERED, "now")) == [task]


def test_outbox_counts_and_the_twenty_newest_failing_notifications(sync_conn: SyncConn) -> None:
    for i in range(15):
        failed_run_notification(sync_conn, "pending", 2, f"{i + 1} minutes", f"HTTP 50{i % 10}")
    failed_run_notification(sync_conn, "pending", 0, "30 minutes")
    for i in range(10):
        failed_run_notification(sync_conn, "failed", 8, f"{i + 2} hours", f"gave up {i}")
    failed_run_notification(sync_conn, "failed", 8, "3 days", "too old to count")
    failed_run_notification(sync_conn, "sent", 1, "1 minute")
    facts = _facts(sync_conn)
    now = str(facts["now"])
    assert {k: v for k, v in facts["outbox"].items() if k != "oldest_seconds"} == {
        "pending": 16,
        "retrying": 15,
        "failed": 10,
    }
    assert facts["outbox"] == _before(sync_conn, BEFORE_OUTBOX, now)
    failing = facts["failing_notifications"]
    # Ids DESC: the failed rows were written last, so all ten come first, then ten of the retrying ones.
    assert [(n["status"], n["error"]) for n in failing] == [("failed", f"gave up {i}") for i in range(9, -1, -1)] + [
        ("pending", f"HTTP 50{i % 10}") for i in range(14, 4, -1)
    ]
    assert failing == _before(sync_conn, BEFORE_FAILING, now)


#: The indexes doctor's checks go by (migration 0014; outbox_pending_idx before it), each used in one call.
INDEXES = ["schedules_disabled_idx", "schedules_failing_idx", "schedules_webhook_idx", "schedules_task_idx",
           "outbox_failed_idx", "outbox_pending_idx"]  # fmt: skip


def test_each_check_goes_by_its_partial_index(sync_conn: SyncConn) -> None:
    """Thousands of healthy schedules and sent notifications: each check reads the partial index of what
    it looks for (the outbox's in every partition), not the table. Sequential scans are made dearer than
    any index so that the plan is the one a large table gets, whatever the size here."""
    sync_conn.execute(f"SELECT {S}.register_tasks(ARRAY['demo.echo'])")
    _schedules(sync_conn, 5000)
    for _ in range(3):
        failed_run_notification(sync_conn, "sent", 1, "1 minute")
    sync_conn.execute(f"SELECT {S}.schedule('off', '0 9 * * *', 'demo.echo', enabled => false)")
    sync_conn.execute("ANALYZE")
    with sync_conn.transaction():
        sync_conn.execute("SET LOCAL enable_seqscan = off")
        facts = _facts(sync_conn)
        used = {
            r["name"]: r["scans"]
            for r in sync_conn.execute(
                """SELECT p.relname AS name, sum(pg_stat_get_xact_numscans(coalesce(i.inhrelid, p.oid))) AS scans
                   FROM pg_class p
                   JOIN pg_namespace n ON n.oid = p.relnamespace AND n.nspname = 'agentlab_sched'
                   LEFT JOIN pg_inherits i ON i.inhparent = p.oid
                   WHERE p.relname = ANY(%s) GROUP BY p.relname""",
                (INDEXES,),
            ).fetchall()
        }
    assert (facts["schedules"], facts["enabled"], facts["paused"], facts["unregistered_tasks"]) == (
        5001, 5000, 1, []
    )  # fmt: skip
    assert {name: used.get(name, 0) > 0 for name in INDEXES} == dict.fromkeys(INDEXES, True), used
