"""`agentlab-sched doctor`: exit 0 when nothing needs a person, 1 when something does, with one finding per
problem (text in either language, or --json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.outbox_rows import failed_run_notification
from tests.support.rows import SyncConn, fetched

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
S = "agentlab_sched"


def doctor(url: str, *, locale: str = "en", env: dict[str, str | None] | None = None) -> tuple[int, dict[str, Any]]:
    result = CliRunner(env={**ENV, **(env or {})}).invoke(
        app, ["--database-url", url, "--locale", locale, "doctor", "--json"]
    )
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)


def codes(report: dict[str, Any], *levels: str) -> set[str]:
    return {f["code"] for f in report["findings"] if not levels or f["level"] in levels}


def problems(report: dict[str, Any]) -> set[str]:
    return codes(report, "warning", "problem")


def finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    [found] = [f for f in report["findings"] if f["code"] == code]
    return found


def live_worker(conn: SyncConn, name: str = "w1", **values: Any) -> None:
    """A live `agentlab-sched worker` that fires, as its own report says."""
    row = {"kind": "agentlab-sched", "host": "h", "pid": 1, "queues": None, "concurrency": 10, "fires": True,
           "notifies": True, "clock_skew": 0.1, **values}  # fmt: skip
    conn.execute(
        f"""INSERT INTO {S}.workers (name, kind, host, pid, queues, concurrency, fires, notifies, clock_skew,
                                     procrastinate_worker_id)
            VALUES (%(name)s, %(kind)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(fires)s, %(notifies)s,
                    %(clock_skew)s, %(pw)s)""",
        {"name": name, "pw": values.get("procrastinate_worker_id"), **row},
    )


def healthy_schedule(conn: SyncConn, name: str = "daily", task: str = "demo.echo") -> None:
    conn.execute(f"SELECT {S}.register_tasks(ARRAY[%s])", (task,))
    conn.execute(f"SELECT {S}.schedule(%s, '0 9 * * *', %s)", (name, task))
    conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() + interval '1 hour', replan = NULL WHERE name = %s",
                 (name,))  # fmt: skip


def test_a_fresh_database_is_healthy(db_url: str) -> None:
    code, report = doctor(db_url)
    assert code == 0 and report["healthy"] is True and report["needs_attention"] == 0
    assert problems(report) == set()
    assert {"doctor.database", "doctor.migrations_ok", "doctor.workers_none_idle", "doctor.overdue_none",
            "doctor.suspended_none", "doctor.notifications_ok", "doctor.keys_no_webhooks"} <= codes(report)  # fmt: skip


def test_schedules_with_a_live_worker_that_fires_are_healthy(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn)
    code, report = doctor(db_url)
    assert (code, problems(report)) == (0, set())
    workers = finding(report, "doctor.workers")
    assert [w["name"] for w in workers["items"]] == ["w1"]
    assert workers["items"][0]["fires"] is True and workers["items"][0]["concurrency"] == 10


def test_text_output_marks_each_finding_and_exits_1_in_either_language(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() - interval '2 hours'")
    for locale, overdue, summary in (
        ("en", "✗ overdue schedules: 1 (daily): nothing fired them on time", "findings that need attention: "),
        ("zh-CN", "✗ 逾期的定时任务:1 个(daily):没有按时触发", "需要处理的问题:"),
    ):
        result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "doctor"])
        assert result.exit_code == 1, result.output
        assert overdue in result.stdout.splitlines()
        assert result.stdout.splitlines()[-1].startswith(summary)


def test_migrations_not_applied(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute(f"DELETE FROM {S}.schema_migrations WHERE name = '0001_schema.sql'")
    code, report = doctor(db_url)
    assert code == 1 and "doctor.migrations_pending" in problems(report)
    assert "0001_schema.sql" in finding(report, "doctor.migrations_pending")["message"]
    # SQL of an older version (its functions and messages): migrate is needed too.
    sync_conn.execute(f"UPDATE {S}.config SET value = 'older' WHERE key = 'schema_fingerprint'")
    sync_conn.execute(f"INSERT INTO {S}.schema_migrations (name, checksum) VALUES ('0001_schema.sql', 'x')")
    code, report = doctor(db_url)
    assert code == 1 and "schema: not up to date (sql/)" in finding(report, "doctor.migrations_pending")["message"]


def test_no_worker_while_schedules_wait(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    code, report = doctor(db_url)
    assert code == 1 and "doctor.workers_none" in problems(report)


def test_overdue_schedules(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() - interval '5 minutes'")
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.overdue"})
    assert [o["name"] for o in finding(report, "doctor.overdue")["items"]] == ["daily"]


def test_stopped_and_paused_after_failures(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn, "broken")
    healthy_schedule(sync_conn, "flaky")
    live_worker(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = NULL WHERE name = 'broken'")
    sync_conn.execute(
        f"""UPDATE {S}.schedules SET pause_after_failures = 2 WHERE name = 'flaky';
            UPDATE {S}.schedules SET consecutive_failures = 2, enabled = false WHERE name = 'flaky'"""
    )
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.stopped", "doctor.paused_after_failures"})
    assert "broken" in finding(report, "doctor.stopped")["message"]
    assert "flaky" in finding(report, "doctor.paused_after_failures")["message"]


def test_a_schedule_paused_by_a_person_needs_nobody(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    sync_conn.execute(f"SELECT {S}.pause('daily', 'holiday')")
    code, report = doctor(db_url)
    assert (code, problems(report)) == (0, set())
    assert finding(report, "doctor.paused")["level"] == "info"


def test_a_task_no_live_worker_registered(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn)
    sync_conn.execute(f"SELECT {S}.schedule('weekly', '0 9 * * 1', 'reports.weekly')")
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() + interval '1 day', replan = NULL")
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.unregistered"})
    assert finding(report, "doctor.unregistered")["items"] == [
        {"task": "reports.weekly", "schedules": ["weekly"], "count": 1}
    ]


def test_a_task_of_many_schedules_names_the_first_and_counts_the_rest(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn)
    sync_conn.execute(f"SELECT {S}.schedule('weekly-' || lpad(g::text, 2, '0'), '0 9 * * 1', 'reports.weekly')"
                      " FROM generate_series(1, 25) g")  # fmt: skip
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() + interval '1 day', replan = NULL")
    code, report = doctor(db_url)
    assert code == 1
    shown = finding(report, "doctor.unregistered")
    assert shown["items"] == [
        {"task": "reports.weekly", "schedules": [f"weekly-{n:02}" for n in range(1, 21)], "count": 25}
    ]
    assert "weekly-01, weekly-02," in shown["message"] and "weekly-20 and 5 more" in shown["message"]


def test_suspended_runs(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute(
        f"""INSERT INTO {S}.runs (id, task, status, started_by, suspended_at)
            VALUES ('1a2b3c4d-0000-0000-0000-000000000000', 'demo.echo', 'suspended', 'test', now())"""
    )
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.suspended"})
    assert "#1a2b3c" in finding(report, "doctor.suspended")["message"]


def test_failed_and_waiting_fire_requests(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn)
    sid = fetched(sync_conn.execute(f"SELECT id FROM {S}.schedules").fetchone())["id"]
    sync_conn.execute(
        f"""INSERT INTO {S}.fire_requests (schedule_id, kind, fire_at, until, requested_by, error, done_at)
            VALUES (%s, 'backfill', now(), now(), 'test', 'backfill: too many due times', now())""",
        (sid,),
    )
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.failed_requests"})
    sync_conn.execute(f"DELETE FROM {S}.fire_requests")
    sync_conn.execute(
        f"""INSERT INTO {S}.fire_requests (schedule_id, kind, fire_at, requested_by, requested_at)
            VALUES (%s, 'manual', now(), 'test', now() - interval '5 minutes')""",
        (sid,),
    )
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.waiting_requests"})


def test_failing_and_undelivered_notifications(db_url: str, sync_conn: SyncConn) -> None:
    failed_run_notification(sync_conn, "pending", 3, "1 minute", "HTTP 500")
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.notifications_failing"})
    assert "HTTP 500" in finding(report, "doctor.notifications_failing")["message"]
    sync_conn.execute(f"DELETE FROM {S}.outbox")
    failed_run_notification(sync_conn, "pending", 0, "10 minutes", None)
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.outbox_stuck"})
    sync_conn.execute(f"DELETE FROM {S}.outbox")
    failed_run_notification(sync_conn, "failed", 8, "1 hour", "gave up")
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.notifications_failing"})


def test_a_key_that_cannot_decrypt_the_webhooks(db_url: str, sync_conn: SyncConn) -> None:
    from agentlab_sched.notify.secrets import SecretBox

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sid = fetched(sync_conn.execute(f"SELECT {S}.schedule('hooked', '0 9 * * *', 'demo.echo') AS id").fetchone())["id"]
    url = SecretBox([old]).seal("https://hooks.example.com/x", schedule_id=sid, field="webhook_url")
    sync_conn.execute(f"UPDATE {S}.schedules SET enabled = false, webhook_url_enc = %s", (url,))
    code, report = doctor(db_url, env={"AGENTLAB_SCHED_SECRET_KEY": new})
    assert (code, problems(report)) == (1, {"doctor.keys_cannot_decrypt"})
    assert finding(report, "doctor.keys_cannot_decrypt")["items"] == [{"name": "hooked"}]
    code, report = doctor(db_url, env={"AGENTLAB_SCHED_SECRET_KEY": f"{new},{old}"})
    assert (code, problems(report)) == (0, set()) and "doctor.keys_ok" in codes(report)
    code, report = doctor(db_url)  # no key here: said, but nothing to fix here
    assert (code, problems(report)) == (0, set()) and finding(report, "doctor.keys_not_here")["level"] == "info"


def test_clock_skew_of_a_worker(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    live_worker(sync_conn, clock_skew=-42.0)
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.clock_worker"})
    assert finding(report, "doctor.clock_worker")["message"] == (
        "clock: worker w1 is 42 seconds behind the database; fix its time (NTP)"
    )


def _plain_worker(conn: SyncConn, name: str, queues: list[str] | None, concurrency: int) -> None:
    pid = fetched(conn.execute("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id").fetchone())["id"]
    live_worker(conn, name, kind="procrastinate", queues=queues, concurrency=concurrency, fires=False,
                notifies=False, procrastinate_worker_id=pid)  # fmt: skip


def test_a_plain_worker_that_never_fires_because_of_its_queues(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    _plain_worker(sync_conn, "reports-only", ["reports"], 10)
    code, report = doctor(db_url)
    assert code == 1
    assert {"doctor.nothing_fires", "doctor.never_fires"} <= problems(report)
    assert "takes only the queues reports" in finding(report, "doctor.never_fires")["message"]
    # Another worker fires: the queue worker is then only said, not a problem.
    live_worker(sync_conn)
    code, report = doctor(db_url)
    assert (code, problems(report)) == (0, set())
    assert finding(report, "doctor.never_fires")["level"] == "info"


def test_a_plain_worker_running_one_job_at_a_time_is_warned(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    _plain_worker(sync_conn, "default", None, 1)
    code, report = doctor(db_url)
    assert (code, problems(report)) == (1, {"doctor.one_at_a_time"})
    assert finding(report, "doctor.one_at_a_time")["level"] == "warning"


def test_a_tick_waiting_in_a_queue_nobody_takes(db_url: str, sync_conn: SyncConn) -> None:
    healthy_schedule(sync_conn)
    sync_conn.execute("INSERT INTO procrastinate_workers DEFAULT VALUES")  # alive, but never said what it runs
    job = fetched(
        sync_conn.execute(
            """INSERT INTO procrastinate_jobs (queue_name, task_name, queueing_lock, args)
           VALUES ('default', 'agentlab_sched:tick', 'agentlab_sched:tick', '{"timestamp": 0}') RETURNING id"""
        ).fetchone()
    )["id"]
    sync_conn.execute("UPDATE procrastinate_events SET at = now() - interval '5 minutes' WHERE job_id = %s", (job,))
    code, report = doctor(db_url)
    assert code == 1
    assert {"doctor.nothing_fires", "doctor.jobs_waiting"} <= problems(report)


def test_an_unmigrated_database_is_one_line_and_exit_1(empty_db_url: str) -> None:
    result = CliRunner(env=ENV).invoke(app, ["--database-url", empty_db_url, "doctor"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "this database has no agentlab-sched schema yet; run agentlab-sched migrate first"
    )


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_every_finding_reads_in_the_locale(db_url: str, sync_conn: SyncConn, locale: str) -> None:
    healthy_schedule(sync_conn)
    sync_conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() - interval '2 hours'")
    _, report = doctor(db_url, locale=locale)
    import re

    for f in report["findings"]:
        has_chinese = bool(re.search(r"[\u4e00-\u9fff]", f["message"]))
        assert has_chinese == (locale == "zh-CN"), f["message"]
