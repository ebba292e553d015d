"""A run's error the system wrote is kept as a term (message code and parameters) and read in the reader's
language (the session's agentlab_sched.locale: SQL readers, the CLI in its own locale); a task's own
words read as the task wrote them, whoever reads them."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from agentlab_sched import database as db
from agentlab_sched.cli import app
from tests.support.rows import SyncConn, fetched

S = "agentlab_sched"
ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
CANCELLED = {"en": "cancelled by dave", "zh-CN": "已被 dave 取消"}
TIMED_OUT = {
    "en": "timed out: still running after the schedule's timeout of 30 seconds; it was aborted",
    "zh-CN": "运行超时:超过定时任务的超时上限 30 秒仍未结束,已中断",
}
THIRTY_SECONDS = {"timeout": {"duration": 30}}
OWN_WORDS = "disk full: /var/spool (errno 28)"


def _run(conn: SyncConn, day: str) -> tuple[str, int]:
    """One manual fire of the schedule 'daily': its run id and job id."""
    with conn.transaction():
        conn.execute(f"SELECT 1 FROM {S}.schedules WHERE name = 'daily' FOR UPDATE")
        out = fetched(
            conn.execute(
                f"SELECT {S}.launch(s, %s, 'manual', NULL, 'manual:test') AS r FROM {S}.schedules s"
                " WHERE name = 'daily'",
                (f"2026-03-{day} 09:00+00",),
            ).fetchone()
        )["r"]
    row = fetched(conn.execute(f"SELECT job_id FROM {S}.runs WHERE id = %s", (out["run_id"],)).fetchone())
    return str(out["run_id"]), row["job_id"]


def _written_by_a_zh_worker(url: str) -> dict[str, str]:
    """Three runs ended by a writer whose locale is zh-CN: cancelled, timed out, failed in the task's words."""
    with db.connect_sync(url, locale="zh-CN") as w:
        w.execute(f"SELECT {S}.register_tasks(ARRAY['demo.echo'])")
        w.execute(f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo')")
        w.execute(f"UPDATE {S}.schedules SET timeout = interval '30 seconds' WHERE name = 'daily'")
        cancelled, _ = _run(w, "01")
        w.execute(f"SELECT {S}.cancel_run(%s, 'dave')", (cancelled,))
        timed_out, tjob = _run(w, "02")
        w.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (tjob,))
        w.execute(f"UPDATE {S}.runs SET deadline_at = now() - interval '1 second' WHERE id = %s", (timed_out,))
        assert fetched(w.execute(f"SELECT {S}.time_out_run(%s) AS v", (timed_out,)).fetchone())["v"] == "aborted"
        w.execute("UPDATE procrastinate_jobs SET status = 'aborted' WHERE id = %s", (tjob,))
        failed, fjob = _run(w, "03")
        w.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (fjob,))
        w.execute(f"SELECT {S}.record_task_error(%s, %s, %s, 'run.task_failed')", (failed, fjob, OWN_WORDS))
        w.execute("UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %s", (fjob,))
    return {"cancelled": cancelled, "timed_out": timed_out, "failed": failed}


def _errors(url: str, locale: str, query: str) -> list[Any]:
    with db.connect_sync(url, locale=locale) as reader:
        return [tuple(r.values()) for r in reader.execute(query).fetchall()]


def test_a_system_error_is_stored_as_a_term_and_read_in_the_readers_language(db_url: str) -> None:
    ids = _written_by_a_zh_worker(db_url)
    stored = _errors(
        db_url, "en",
        f"SELECT status, error, error_code, error_term FROM {S}.runs ORDER BY created_at",
    )  # fmt: skip
    assert stored == [
        ("cancelled", CANCELLED["zh-CN"], "run.cancelled", {"msg": "run.cancelled_by", "params": {"by": "dave"}}),
        ("timed_out", TIMED_OUT["zh-CN"], "run.timed_out", {"msg": "run.timed_out", "params": THIRTY_SECONDS}),
        ("failed", OWN_WORDS, "run.task_failed", None),
    ]
    for locale in ("en", "zh-CN"):
        # The pg_cron compatibility view.
        assert _errors(db_url, locale, f"SELECT return_message FROM {S}.cron_job_run_details ORDER BY start_time") == [
            (CANCELLED[locale],), (TIMED_OUT[locale],), (OWN_WORDS,)
        ]  # fmt: skip
        listed = CliRunner(env=ENV).invoke(
            app, ["--database-url", db_url, "--locale", locale, "runs", "list", "--schedule", "daily", "--json"]
        )
        assert listed.exit_code == 0, listed.output
        assert sorted(r["error"] for r in json.loads(listed.stdout)) == sorted(
            [CANCELLED[locale], TIMED_OUT[locale], OWN_WORDS]
        )
        for key, words in (("cancelled", CANCELLED[locale]), ("timed_out", TIMED_OUT[locale]), ("failed", OWN_WORDS)):
            shown = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "runs", "show",
                                                    ids[key]])  # fmt: skip
            assert shown.exit_code == 0, shown.output
            assert words in shown.stdout, shown.stdout


def test_doctor_gives_the_last_error_of_a_failing_schedule_in_its_readers_language(db_url: str) -> None:
    ids = _written_by_a_zh_worker(db_url)
    with db.connect_sync(db_url, locale="en") as conn:  # the timed-out run is the latest failure
        conn.execute(f"DELETE FROM {S}.runs WHERE id = %s", (ids["failed"],))
        conn.execute(f"UPDATE {S}.schedules SET consecutive_failures = 3 WHERE name = 'daily'")
    for locale in ("en", "zh-CN"):
        result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "doctor"])
        assert TIMED_OUT[locale] in result.stdout, result.stdout
