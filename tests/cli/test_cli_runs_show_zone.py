"""`runs show` says in which zone its times are (the schedule's), since a run shown alone has no zone
column beside it."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from agentlab_sched.cli import app
from tests.support.rows import SyncConn, fetched

ENV = {"AGENTLAB_SCHED_LOCALE": "en", "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


def test_runs_show_gives_each_time_with_its_zone(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('daily', '0 9 * * *', 'demo.echo', '{}', 'Asia/Shanghai')")
    sid = fetched(sync_conn.execute("SELECT id FROM agentlab_sched.schedules WHERE name = 'daily'").fetchone())["id"]
    run = uuid.uuid4()
    sync_conn.execute(
        """INSERT INTO agentlab_sched.runs (id, schedule_id, task, status, started_by, created_at, started_at,
                                            finished_at)
           VALUES (%s, %s, 'demo.echo', 'succeeded', 'schedule', timestamptz '2026-03-02 01:00:00+00',
                   timestamptz '2026-03-02 01:00:01+00', timestamptz '2026-03-02 01:00:03+00')""",
        (run, sid),
    )
    result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "runs", "show", str(run)[:8]])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split(None, 1)[1].strip() for line in result.stdout.splitlines() if line.strip()}
    assert lines["created"] == "2026-03-02 09:00 (Asia/Shanghai)"
    assert lines["started"] == "2026-03-02 09:00:01 (Asia/Shanghai)"
    assert lines["finished"] == "2026-03-02 09:00:03 (Asia/Shanghai)"
