"""Notification outbox rows made directly, for the tests that read how doctor and its facts count them."""

from __future__ import annotations

from tests.support.rows import SyncConn, fetched


def failed_run_notification(conn: SyncConn, status: str, attempts: int, age: str, error: str | None = None) -> None:
    """An outbox row of a failed run (made for it), ``age`` old (an interval's text), in ``status`` after
    ``attempts`` deliveries that ended in ``error``."""
    # Its day has a partition even when the test runs just after midnight (doctor would see a DEFAULT row).
    conn.execute("SELECT agentlab_sched.ensure_partitions(now() - %s::interval)", (age,))
    run = fetched(
        conn.execute(
            "INSERT INTO agentlab_sched.runs (task, status, started_by) VALUES ('demo.echo', 'failed', 'test')"
            " RETURNING id"
        ).fetchone()
    )["id"]
    conn.execute(
        """INSERT INTO agentlab_sched.outbox (run_id, event, status, attempts, last_error, created_at, run_created_at)
           VALUES (%s, 'failed', %s, %s, %s, now() - %s::interval, now() - %s::interval)""",
        (run, status, attempts, error, age, age),
    )
