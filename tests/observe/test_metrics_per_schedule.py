"""Metrics for alerting: per schedule, its consecutive failures and when a run of it last succeeded; the
process's own metrics; no ``_created`` series beside the counters."""

from __future__ import annotations

import uuid

from prometheus_client import generate_latest

from agentlab_sched.observe.metrics import Metrics
from tests.support.rows import SyncConn

S = "agentlab_sched"


def test_per_schedule_gauges_process_metrics_and_no_created_series(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute(f"SELECT {S}.schedule('good', '0 9 * * *', 'demo.echo')")
    sync_conn.execute(f"SELECT {S}.schedule('bad', '0 9 * * *', 'demo.echo')")
    good = sync_conn.execute(f"SELECT id FROM {S}.schedules WHERE name = 'good'").fetchone()
    assert good is not None
    sync_conn.execute(
        f"""INSERT INTO {S}.runs (id, schedule_id, task, status, started_by, finished_at)
            VALUES (%s, %s, 'demo.echo', 'succeeded', 'schedule', timestamptz '2026-03-01 09:00:05+00')""",
        (uuid.uuid4(), good["id"]),
    )
    sync_conn.execute(f"UPDATE {S}.schedules SET consecutive_failures = 4 WHERE name = 'bad'")
    metrics = Metrics(db_url)
    try:
        metrics.observe("fire", {"status": "started", "reason_code": None, "late_seconds": 0.2})
        scrape = generate_latest(metrics.registry).decode()
    finally:
        metrics.stop()
    lines = scrape.splitlines()
    assert 'agentlab_sched_schedule_consecutive_failures{schedule="bad"} 4.0' in lines
    assert 'agentlab_sched_schedule_consecutive_failures{schedule="good"} 0.0' in lines
    assert 'agentlab_sched_schedule_last_success_timestamp_seconds{schedule="good"} 1.772355605e+09' in lines
    assert not any(line.startswith('agentlab_sched_schedule_last_success_timestamp_seconds{schedule="bad"}')
                   for line in lines)  # fmt: skip
    assert any(line.startswith("process_cpu_seconds_total ") for line in lines), scrape[:2000]
    assert any(line.startswith("python_info") for line in lines)
    assert "_created" not in scrape
    assert 'agentlab_sched_fires_total{reason_code="",status="started"} 1.0' in lines


def test_suspended_runs_are_one_series_of_runs_by_status(db_url: str, sync_conn: SyncConn) -> None:
    """A suspended run is counted once, as ``agentlab_sched_runs{status="suspended"}``: no second metric of
    the same rows, and no metric family defined twice."""
    sync_conn.execute(
        f"INSERT INTO {S}.runs (id, task, status, started_by) VALUES (%s, 'demo.echo', 'suspended', 'schedule')",
        (uuid.uuid4(),),
    )
    metrics = Metrics(db_url)
    try:
        scrape = generate_latest(metrics.registry).decode()
    finally:
        metrics.stop()
    lines = scrape.splitlines()
    assert 'agentlab_sched_runs{status="suspended"} 1.0' in lines
    assert [line for line in lines if "suspended" in line and not line.startswith("#")] == [
        'agentlab_sched_runs{status="suspended"} 1.0'
    ]
    families = [line.split()[2] for line in lines if line.startswith("# TYPE ")]
    assert len(families) == len(set(families))
