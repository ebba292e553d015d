"""`doctor` sees what stops firing: schedules that keep failing (with the last error), schedules whose every
recent fire is refused, a task check that needs a live worker, and the embedded server's superuser owner
said once as information."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentlab_sched.observe import health
from agentlab_sched.settings import Settings
from tests.support.rows import Conn, SyncConn

S = "agentlab_sched"


async def findings(conn: Conn, **kwargs: Any) -> list[health.Finding]:
    return await health.examine(conn, Settings.from_env(), **kwargs)


def by_code(found: list[health.Finding], code: str) -> list[health.Finding]:
    return [f for f in found if f.code == code]


def live_worker(conn: SyncConn) -> None:
    conn.execute(
        f"""INSERT INTO {S}.workers (name, kind, host, pid, queues, concurrency, fires, notifies, clock_skew)
            VALUES ('w1', 'agentlab-sched', 'h', 1, NULL, 10, true, true, 0)"""
    )


def schedule(conn: SyncConn, name: str) -> int:
    conn.execute(f"SELECT {S}.register_tasks(ARRAY['demo.echo'])")
    conn.execute(f"SELECT {S}.schedule(%s, '0 9 * * *', 'demo.echo')", (name,))
    conn.execute(f"UPDATE {S}.schedules SET next_run_at = now() + interval '1 hour', replan = NULL WHERE name = %s",
                 (name,))  # fmt: skip
    row = conn.execute(f"SELECT id FROM {S}.schedules WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row["id"])


async def test_a_schedule_failing_eight_times_in_a_row_is_a_finding_with_its_last_error(
    sync_conn: SyncConn, conn: Conn
) -> None:
    live_worker(sync_conn)
    sid = schedule(sync_conn, "nightly")
    schedule(sync_conn, "fine")
    for i in range(8):
        sync_conn.execute(
            f"""INSERT INTO {S}.runs (id, schedule_id, task, status, error, started_by, created_at, finished_at)
                VALUES (%s, %s, 'demo.echo', 'failed', %s, 'schedule', now() - make_interval(mins => 10 - %s),
                        now() - make_interval(mins => 10 - %s))""",
            (uuid.uuid4(), sid, f"ValueError: bad input {i}", i, i),
        )
    sync_conn.execute(f"UPDATE {S}.schedules SET consecutive_failures = 8 WHERE id = %s", (sid,))
    found = await findings(conn)
    [failing] = by_code(found, "doctor.failing")
    assert failing.level == "warning"
    assert failing.message("en") == "failing: nightly failed 8 times in a row; last error: ValueError: bad input 7"
    assert failing.message("zh-CN") == "持续失败:nightly 已连续失败 8 次;最近的错误:ValueError: bad input 7"


async def test_a_schedule_whose_fires_are_all_refused_is_a_finding(sync_conn: SyncConn, conn: Conn) -> None:
    live_worker(sync_conn)
    sid = schedule(sync_conn, "orphan")
    for minutes in (3, 2, 1):
        sync_conn.execute(
            f"""INSERT INTO {S}.fires (schedule_id, fire_at, kind, status, reason_code, reason_params)
                VALUES (%s, now() - make_interval(mins => %s), 'scheduled', 'failed_to_start', 'fire.task_unknown',
                        '{{"task": "demo.echo"}}')""",
            (sid, minutes),
        )
    found = await findings(conn)
    [refused] = by_code(found, "doctor.fires_refused")
    assert refused.level == "warning"
    assert refused.message("en").startswith("refused: every recent fire of orphan was refused; last reason: ")
    # One fire that started among the last three: not all refused.
    sync_conn.execute(
        f"""INSERT INTO {S}.fires (schedule_id, fire_at, kind, status) VALUES (%s, now(), 'manual', 'started')""",
        (sid,),
    )
    assert by_code(await findings(conn), "doctor.fires_refused") == []


async def test_registrations_of_a_dead_worker_do_not_pass_the_task_check(sync_conn: SyncConn, conn: Conn) -> None:
    schedule(sync_conn, "daily")  # registered a moment ago, by a worker that is gone
    found = await findings(conn)
    assert [f.code for f in found if f.check == "workers"] == ["doctor.workers_none"]
    assert by_code(found, "doctor.tasks_ok") == []
    [unchecked] = by_code(found, "doctor.tasks_no_worker")
    assert unchecked.level == "info"
    live_worker(sync_conn)
    assert [f.level for f in by_code(await findings(conn), "doctor.tasks_ok")] == ["ok"]


@pytest.mark.parametrize("embedded", [False, True])
async def test_a_superuser_owner_is_information_once(db_url: str, conn: Conn, embedded: bool) -> None:
    owner = await (await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).fetchone()
    assert owner is not None
    if not owner["rolsuper"]:
        pytest.skip("the test server's user is no superuser: nothing to say")
    found = await findings(conn, url=db_url, embedded=embedded)
    said = [f for f in found if "superuser" in f.message("en")]
    assert len(said) == 1 and said[0].level == "info"
    expected = "doctor.embedded_superuser_owner" if embedded else "roles.superuser_owner"
    assert said[0].code == expected
    if embedded:
        assert not said[0].message("en").startswith("warning")
