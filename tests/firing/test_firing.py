"""The firing engine with an injected clock: exact ledger rows, runs and jobs (docs/semantics.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.firing import hooks
from agentlab_sched.firing.requests import trigger
from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, ZH, fires, job, make_schedule, next_of, runs_of, set_job_status
from tests.support.rows import fetched

# --------------------------------------------------------------------------------------------------
# On time, once
# --------------------------------------------------------------------------------------------------


async def test_due_schedule_launches_once_and_moves_on(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    report = await fire_due(conn, NINE + timedelta(seconds=10), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["kind"], fire["status"], fire["fire_at"], fire["reason"]) == (
        "scheduled",
        "started",
        NINE,
        None,
    )
    assert fire["inputs"] == {"stat_date": "2026-10-04"}
    [run] = await runs_of(conn, sid)
    assert (run["id"], run["fire_id"], run["status"], run["task"]) == (
        fire["run_id"],
        fire["id"],
        "queued",
        "demo.echo",
    )
    assert run["started_by"] == "schedule:store-report" and run["inputs"] == {"stat_date": "2026-10-04"}
    queued = await job(conn, run["job_id"])
    assert (queued["task_name"], queued["status"], queued["args"]) == (
        "demo.echo",
        "todo",
        {"stat_date": "2026-10-04"},
    )
    assert (queued["lock"], queued["queueing_lock"]) == (None, None)
    assert await next_of(conn, sid) == NINE + timedelta(days=1)
    assert report.fires == {"started": 1} and report.claimed == 1
    # The same instant again: already moved on to tomorrow, nothing fires.
    again = await fire_due(conn, NINE + timedelta(seconds=20), settings=EN)
    assert again.claimed == 0 and len(await fires(conn, sid)) == 1 and len(await runs_of(conn, sid)) == 1


async def _connections(db_url: str, n: int) -> list[psycopg.AsyncConnection[DictRow]]:
    return [await db.connect(db_url, locale="en") for _ in range(n)]


async def test_three_concurrent_ticks_fire_once(db_url: str, conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    others = await _connections(db_url, 3)
    try:
        now = NINE + timedelta(seconds=3)
        await asyncio.gather(*(fire_due(c, now, settings=EN) for c in others))
    finally:
        for c in others:
            await c.close()
    assert [(f["kind"], f["status"]) for f in await fires(conn, sid)] == [("scheduled", "started")]
    assert len(await runs_of(conn, sid)) == 1


async def test_concurrent_ticks_with_clocks_two_minutes_apart_fire_once(
    db_url: str, conn: psycopg.AsyncConnection[DictRow]
) -> None:
    """One tick on time, one two minutes late (it would call it a misfire, another kind): one fire only."""
    sid = await make_schedule(conn)
    a, b = await _connections(db_url, 2)
    try:
        await asyncio.gather(
            fire_due(a, NINE + timedelta(seconds=3), settings=EN),
            fire_due(b, NINE + timedelta(minutes=2), settings=EN),
        )
    finally:
        await a.close()
        await b.close()
    [fire] = await fires(conn, sid)
    [run] = await runs_of(conn, sid)
    assert fire["run_id"] == run["id"] and fire["status"] == "started"


async def test_a_fire_already_in_the_ledger_is_not_launched_again(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    launch = "SELECT agentlab_sched.launch(s, %s, 'scheduled') AS r FROM agentlab_sched.schedules s WHERE id = %s"
    first = fetched(await (await conn.execute(launch, (NINE, sid))).fetchone())
    second = fetched(await (await conn.execute(launch, (NINE, sid))).fetchone())
    assert first["r"]["status"] == "started" and second["r"] == {"status": "duplicate"}
    assert len(await fires(conn, sid)) == 1 and len(await runs_of(conn, sid)) == 1


async def test_disabled_schedule_never_fires(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, enabled=False)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert await fires(conn, sid) == [] and await runs_of(conn, sid) == []


# --------------------------------------------------------------------------------------------------
# Misfires and catch-up
# --------------------------------------------------------------------------------------------------


async def test_missed_within_grace_is_caught_up_once_with_inputs_of_its_own_day(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Down until 00:30 Shanghai on 10-06: the 09:00 fire of 10-05 is caught up; yesterday is still 10-04."""
    sid = await make_schedule(conn, grace=timedelta(days=1))
    await fire_due(conn, NINE + timedelta(hours=15, minutes=30), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["kind"], fire["status"], fire["fire_at"]) == ("misfire", "started", NINE)
    assert fire["inputs"] == {"stat_date": "2026-10-04"}
    assert await next_of(conn, sid) == NINE + timedelta(days=1)


async def test_backlog_is_one_skip_row_and_only_the_latest_is_caught_up(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Hourly, down 3h20m, grace 1h: 09:00-11:00 are one skip row, 12:00 is caught up."""
    sid = await make_schedule(conn, cron="0 * * * *", grace=timedelta(hours=1))
    await fire_due(conn, NINE + timedelta(hours=3, minutes=20), settings=EN)
    skipped, caught_up = await fires(conn, sid)
    assert (skipped["kind"], skipped["status"], skipped["fire_at"], skipped["run_id"]) == (
        "misfire",
        "skipped_misfire",
        NINE,
        None,
    )
    assert skipped["reason_code"] == "misfire.backlog"
    assert skipped["reason"] == (
        "missed 2026-10-05 09:00 to 2026-10-05 11:00 (Asia/Shanghai) while no worker was firing; "
        "only the latest due time is caught up"
    )
    assert (caught_up["kind"], caught_up["status"], caught_up["fire_at"]) == (
        "misfire",
        "started",
        NINE + timedelta(hours=3),
    )
    assert len(await runs_of(conn, sid)) == 1
    assert await next_of(conn, sid) == NINE + timedelta(hours=4)


async def test_missed_beyond_grace_is_skipped_without_launching(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, grace=timedelta(minutes=10))
    await fire_due(conn, NINE + timedelta(hours=2), settings=ZH)
    [fire] = await fires(conn, sid)
    assert (fire["kind"], fire["status"], fire["fire_at"], fire["run_id"]) == (
        "misfire",
        "skipped_misfire",
        NINE,
        None,
    )
    assert fire["reason_code"] == "misfire.beyond_grace_one"
    assert fire["reason"] == "错过了 2026-10-05 09:00(Asia/Shanghai)的触发,已超过补发宽限 10 分钟,不再补发"
    # The stored code and parameters render the same words in SQL, in either locale.
    cur = await conn.execute(
        "SELECT agentlab_sched.msg(reason_code, reason_params, 'zh-CN') AS zh, "
        "agentlab_sched.msg(reason_code, reason_params, 'en') AS en FROM agentlab_sched.fires WHERE id = %s",
        (fire["id"],),
    )
    assert await cur.fetchone() == {
        "zh": fire["reason"],
        "en": "missed 2026-10-05 09:00 (Asia/Shanghai), more than the misfire grace of 10 minutes ago; not caught up",
    }
    assert await runs_of(conn, sid) == []
    assert await next_of(conn, sid) == NINE + timedelta(days=1)


async def test_beyond_grace_in_english_names_the_grace(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, grace=timedelta(minutes=10))
    await fire_due(conn, NINE + timedelta(hours=2), settings=EN)
    [fire] = await fires(conn, sid)
    assert fire["reason"] == (
        "missed 2026-10-05 09:00 (Asia/Shanghai), more than the misfire grace of 10 minutes ago; not caught up"
    )


async def test_days_of_downtime_leave_one_skip_row(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, grace=timedelta(minutes=10), next_run_at=NINE - timedelta(days=4))
    await fire_due(conn, NINE + timedelta(hours=2), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["fire_at"], fire["reason_code"]) == (
        "skipped_misfire",
        NINE - timedelta(days=4),
        "misfire.beyond_grace",
    )
    assert "2026-10-01 09:00" in fire["reason"] and "2026-10-05 09:00" in fire["reason"]
    assert await runs_of(conn, sid) == [] and await next_of(conn, sid) == NINE + timedelta(days=1)


async def test_grace_zero_and_a_14_second_late_tick_is_still_on_time(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(conn, grace=timedelta(0))
    await fire_due(conn, NINE + timedelta(seconds=14), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["kind"], fire["status"]) == ("scheduled", "started")


async def test_per_second_schedule_down_30_days_costs_one_row_and_bounded_work(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(conn, cron="* * * * * *", timezone="UTC", next_run_at=NINE, grace=timedelta(minutes=1))
    now = NINE + timedelta(days=30)
    began = time.perf_counter()
    await fire_due(conn, now, settings=EN)
    elapsed = time.perf_counter() - began
    skipped, caught_up = await fires(conn, sid)
    assert (skipped["status"], skipped["fire_at"]) == ("skipped_misfire", NINE)
    assert (caught_up["kind"], caught_up["status"], caught_up["fire_at"]) == ("scheduled", "started", now)
    assert await next_of(conn, sid) == now + timedelta(seconds=1)
    assert elapsed < 2.0  # walking 2.6 million due times would take minutes


async def test_catchup_none_launches_nothing_late(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, cron="0 * * * *", catchup="none")
    await fire_due(conn, NINE + timedelta(hours=3, minutes=20), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["fire_at"], fire["reason_code"]) == (
        "skipped_misfire",
        NINE,
        "misfire.no_catchup",
    )
    assert "2026-10-05 09:00 to 2026-10-05 12:00" in fire["reason"]
    assert await runs_of(conn, sid) == []


async def test_catchup_all_launches_each_missed_time_within_grace_up_to_max(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(
        conn, cron="*/10 * * * *", catchup="all", max_catchup=3, overlap="allow_all", grace=timedelta(hours=1)
    )
    await fire_due(conn, NINE + timedelta(hours=2, minutes=1), settings=EN)
    rows = [(f["fire_at"] - NINE, f["kind"], f["status"]) for f in await fires(conn, sid)]
    assert rows == [
        (timedelta(0), "misfire", "skipped_misfire"),
        (timedelta(hours=1, minutes=40), "misfire", "started"),
        (timedelta(hours=1, minutes=50), "misfire", "started"),
        (timedelta(hours=2), "scheduled", "started"),
    ]
    assert "2026-10-05 09:00 to 2026-10-05 10:30" in (await fires(conn, sid))[0]["reason"]
    assert len(await runs_of(conn, sid)) == 3


# --------------------------------------------------------------------------------------------------
# Validity window and limits
# --------------------------------------------------------------------------------------------------


async def test_ends_at_and_remaining_runs_stop_the_schedule(conn: psycopg.AsyncConnection[DictRow]) -> None:
    ended = await make_schedule(conn, "ended", ends_at=NINE + timedelta(hours=12))
    limited = await make_schedule(conn, "limited", remaining_runs=1)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert await next_of(conn, ended) is None
    assert await next_of(conn, limited) is None
    assert [f["status"] for f in await fires(conn, ended)] == ["started"]
    cur = await conn.execute("SELECT remaining_runs, version FROM agentlab_sched.schedules WHERE id = %s", (limited,))
    # Counting down is bookkeeping: no new version (a user's expected_version stays valid), no audit row.
    assert (await cur.fetchone()) == {"remaining_runs": 0, "version": 1}
    cur = await conn.execute(
        "SELECT count(*) AS n FROM agentlab_sched.schedule_changes WHERE schedule_id = %s", (limited,)
    )
    assert fetched(await cur.fetchone())["n"] == 1  # the insert only


async def test_starts_at_defers_the_first_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, next_run_at=None, replan="now", starts_at=NINE + timedelta(days=2, hours=1))
    await fire_due(conn, NINE - timedelta(hours=1), settings=EN)
    assert await next_of(conn, sid) == NINE + timedelta(days=3)
    assert await fires(conn, sid) == []


async def test_resume_never_replays_the_paused_time(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """Paused over three due times, resumed (replan 'now'): the next fire is after now, nothing replayed."""
    sid = await make_schedule(conn, next_run_at=NINE - timedelta(days=3), replan="now")
    await fire_due(conn, NINE + timedelta(hours=2), settings=EN)
    assert await fires(conn, sid) == []
    assert await next_of(conn, sid) == NINE + timedelta(days=1)


async def test_a_cron_change_still_fires_the_pending_instant_it_covers(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await make_schedule(conn, cron="0 9,21 * * *", replan="pending")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["fire_at"], fire["status"]) == (NINE, "started")
    assert await next_of(conn, sid) == NINE + timedelta(hours=12)


# --------------------------------------------------------------------------------------------------
# Overlap
# --------------------------------------------------------------------------------------------------


async def _blocking_run(conn: psycopg.AsyncConnection[DictRow], sid: int, status: str) -> str:
    cur = await conn.execute(
        """INSERT INTO agentlab_sched.runs (schedule_id, task, status, started_by)
           VALUES (%s, 'demo.echo', %s, 'schedule:store-report') RETURNING id::text AS id""",
        (sid, status),
    )
    return fetched(await cur.fetchone())["id"]


@pytest.mark.parametrize(
    ("status", "code", "en", "zh"),
    [
        (
            "queued",
            "overlap.in_progress",
            "is still in progress; this fire was skipped",
            "仍在进行中,本次触发已跳过",
        ),
        (
            "running",
            "overlap.in_progress",
            "is still in progress; this fire was skipped",
            "仍在进行中,本次触发已跳过",
        ),
        (
            "awaiting_approval",
            "overlap.awaiting_approval",
            "is awaiting approval; this fire was skipped",
            "正在等待审批,本次触发已跳过",
        ),
        (
            "suspended",
            "overlap.suspended",
            "is suspended (usually after a worker restart): resume or abandon it in the run history; "
            "this fire was skipped",
            "已挂起(通常是服务重启所致),请在运行记录中继续运行或放弃这次运行,本次触发已跳过",
        ),
    ],
)
async def test_skip_names_the_blocking_run_and_why(
    conn: psycopg.AsyncConnection[DictRow], status: str, code: str, en: str, zh: str
) -> None:
    sid = await make_schedule(conn)
    busy = await _blocking_run(conn, sid, status)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["run_id"], fire["reason_code"]) == ("skipped_overlap", None, code)
    assert fire["reason"] == f"the previous run #{busy[:6]} {en}"
    assert [str(r["id"]) for r in await runs_of(conn, sid)] == [busy]
    assert await next_of(conn, sid) == NINE + timedelta(days=1)
    await conn.execute("SET agentlab_sched.locale = 'zh-CN'")
    cur = await conn.execute("SELECT agentlab_sched.msg(reason_code, reason_params) AS t FROM agentlab_sched.fires")
    assert fetched(await cur.fetchone())["t"] == f"上一次运行 #{busy[:6]} {zh}"


async def test_buffer_one_keeps_one_waiting_run(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC", overlap="buffer_one")
    for minute in range(3):
        await fire_due(conn, NINE + timedelta(minutes=minute, seconds=1), settings=EN)
    statuses = [(f["status"], f["reason_code"]) for f in await fires(conn, sid)]
    assert statuses == [
        ("started", None),
        ("skipped_overlap", "overlap.one_waiting"),
        ("skipped_overlap", "overlap.one_waiting"),
    ]
    [run] = await runs_of(conn, sid)
    queued = await job(conn, run["job_id"])
    # One at a time (lock); one waiting is checked under the schedule's row lock, not with a Procrastinate
    # queueing lock (a retry of the running job would collide with it).
    assert (queued["lock"], queued["queueing_lock"]) == (f"agentlab_sched:{sid}", None)
    # Once the waiting one started, one more may wait behind it.
    await set_job_status(conn, run["job_id"], "doing")
    await fire_due(conn, NINE + timedelta(minutes=3, seconds=1), settings=EN)
    assert [f["status"] for f in await fires(conn, sid)][-1] == "started"


async def test_buffer_all_and_allow_all_queue_every_fire(conn: psycopg.AsyncConnection[DictRow]) -> None:
    buffered = await make_schedule(conn, "buffered", cron="* * * * *", timezone="UTC", overlap="buffer_all")
    free = await make_schedule(conn, "free", cron="* * * * *", timezone="UTC", overlap="allow_all")
    for minute in range(3):
        await fire_due(conn, NINE + timedelta(minutes=minute, seconds=1), settings=EN)
    for sid, lock in ((buffered, f"agentlab_sched:{buffered}"), (free, None)):
        assert [f["status"] for f in await fires(conn, sid)] == ["started"] * 3
        jobs = [await job(conn, r["job_id"]) for r in await runs_of(conn, sid)]
        assert [(j["lock"], j["queueing_lock"]) for j in jobs] == [(lock, None)] * 3


async def test_cancel_other_aborts_the_running_one_then_starts(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC", overlap="cancel_other")
    await fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    [first] = await runs_of(conn, sid)
    await set_job_status(conn, first["job_id"], "doing")
    await fire_due(conn, NINE + timedelta(minutes=1, seconds=1), settings=EN)
    old, new = await runs_of(conn, sid)
    assert (await job(conn, old["job_id"]))["abort_requested"] is True
    assert old["abort_reason"] == "overlap.cancelled_by_newer"
    assert (await job(conn, new["job_id"]))["lock"] == f"agentlab_sched:{sid}"
    # The worker aborts it: the run ends cancelled, saying why.
    await set_job_status(conn, old["job_id"], "aborted")
    [old_now] = [r for r in await runs_of(conn, sid) if r["id"] == old["id"]]
    assert old_now["status"] == "cancelled"
    assert old_now["error"] == "cancelled: a newer fire of this schedule started (overlap cancel_other)"


# --------------------------------------------------------------------------------------------------
# Refusals are recorded, not raised
# --------------------------------------------------------------------------------------------------


async def test_a_task_no_worker_registered_is_refused_by_name(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, task="reports.weekly", register=False)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["run_id"], fire["reason_code"]) == (
        "failed_to_start",
        None,
        "launch.unknown_task",
    )
    assert fire["reason"] == "no live worker has registered the task reports.weekly; start a worker that includes it"
    assert await next_of(conn, sid) == NINE + timedelta(days=1)


async def test_a_resolver_refusal_is_recorded_verbatim(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, task="reports.weekly")

    @hooks.resolver("reports.weekly")
    async def refuse(request: hooks.LaunchRequest) -> None:
        raise hooks.LaunchRefused("「门店周报」还没有发布版本,请先在编排页发布")

    try:
        await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    finally:
        hooks.unregister("reports.weekly")
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["reason_code"], fire["reason"]) == (
        "failed_to_start",
        "launch.refused",
        "「门店周报」还没有发布版本,请先在编排页发布",
    )
    assert await runs_of(conn, sid) == []


async def test_an_unexpected_error_is_generic_logged_and_does_not_stop_others(
    conn: psycopg.AsyncConnection[DictRow], caplog: pytest.LogCaptureFixture
) -> None:
    broken = await make_schedule(conn, "broken", task="reports.broken")
    fine = await make_schedule(conn, "fine")

    @hooks.resolver("reports.broken")
    def explode(request: hooks.LaunchRequest) -> None:
        raise RuntimeError("database connection lost: sqlite busy")

    try:
        with caplog.at_level(logging.ERROR):
            await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    finally:
        hooks.unregister("reports.broken")
    [bad] = await fires(conn, broken)
    assert (bad["status"], bad["reason"]) == (
        "failed_to_start",
        "the run could not be started because of an internal error; details are in the worker log",
    )
    assert "database connection lost: sqlite busy" in caplog.text and "Traceback" in caplog.text
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]
    assert await next_of(conn, broken) == NINE + timedelta(days=1)


async def test_an_error_inside_sql_for_one_schedule_does_not_roll_back_the_others(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """A schedule whose queue name is too long for procrastinate_jobs: its insert fails in SQL."""
    broken = await make_schedule(conn, "broken", queue="q" * 150)
    fine = await make_schedule(conn, "fine")
    report = await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [bad] = await fires(conn, broken)
    assert (bad["status"], bad["reason_code"]) == ("failed_to_start", "launch.error")
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]
    assert report.errors == 1


async def test_a_cron_that_no_longer_parses_stops_that_schedule_only(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    broken = await make_schedule(conn, "broken")
    fine = await make_schedule(conn, "fine")
    # Written around the API (triggers off), as an old row or a hand edit would be.
    await conn.execute("SET session_replication_role = replica")
    await conn.execute("UPDATE agentlab_sched.schedules SET cron = '0 25 * * *' WHERE id = %s", (broken,))
    await conn.execute("SET session_replication_role = DEFAULT")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=ZH)
    [fire] = await fires(conn, broken)
    assert (fire["status"], fire["reason_code"]) == ("failed_to_start", "fire.cron_invalid")
    assert "「时」" in fire["reason"] and "25" in fire["reason"]
    assert await next_of(conn, broken) is None
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]


# --------------------------------------------------------------------------------------------------
# Runs follow their jobs; failures count
# --------------------------------------------------------------------------------------------------


async def test_runs_follow_their_jobs(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [run] = await runs_of(conn, sid)
    seen = []
    for status in ("doing", "failed", "todo", "doing", "succeeded"):
        await set_job_status(conn, run["job_id"], status)
        [now] = await runs_of(conn, sid)
        seen.append(now["status"])
    assert seen == ["running", "failed", "queued", "running", "succeeded"]
    [done] = await runs_of(conn, sid)
    assert done["started_at"] is not None and done["finished_at"] is not None


async def test_cancelling_with_procrastinate_is_seen(db_url: str, conn: psycopg.AsyncConnection[DictRow]) -> None:
    """The same call `procrastinate jobs cancel` makes."""
    from agentlab_sched.demo import make_app

    sid = await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [run] = await runs_of(conn, sid)
    app = make_app(db_url)
    async with app.open_async():
        await app.job_manager.cancel_job_by_id_async(run["job_id"])
    [cancelled] = await runs_of(conn, sid)
    assert cancelled["status"] == "cancelled"


async def test_failures_count_and_pause_the_schedule(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC", pause_after_failures=2, overlap="allow_all")
    for minute in range(2):
        await fire_due(conn, NINE + timedelta(minutes=minute, seconds=1), settings=EN)
    first, second = await runs_of(conn, sid)
    await set_job_status(conn, first["job_id"], "failed")
    cur = await conn.execute("SELECT * FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    row = fetched(await cur.fetchone())
    assert (row["consecutive_failures"], row["enabled"]) == (1, True)
    await set_job_status(conn, second["job_id"], "failed")
    cur = await conn.execute("SELECT * FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    row = fetched(await cur.fetchone())
    assert (row["consecutive_failures"], row["enabled"], row["next_run_at"]) == (2, False, None)
    assert (row["paused_reason"], row["paused_reason_code"]) == (None, "schedule.paused_after_failures")
    status = fetched(await (await conn.execute("SELECT paused_reason FROM agentlab_sched.schedule_status")).fetchone())
    assert status["paused_reason"].startswith("paused after 2 consecutive failures (since ")


# --------------------------------------------------------------------------------------------------
# Manual and backfill fires go through the same rules
# --------------------------------------------------------------------------------------------------


async def test_trigger_fires_now_through_the_same_rules(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    outcome = await trigger(conn, "store-report", requested_by="manual:alice", settings=EN)
    assert outcome.status == "started"
    [fire] = await fires(conn, sid)
    cur = await conn.execute("SELECT session_user AS role")
    role = fetched(await cur.fetchone())["role"]  # the login role is recorded; the name given is a label beside it
    assert (fire["kind"], fire["requested_by"]) == ("manual", f"manual:alice ({role})")
    [run] = await runs_of(conn, sid)
    assert run["started_by"] == f"manual:alice ({role})"
    # The run is still queued: a second manual fire is skipped by the overlap rule.
    again = await trigger(conn, "store-report", settings=EN)
    assert again.status == "skipped_overlap" and again.reason is not None and f"#{str(run['id'])[:6]}" in again.reason


async def test_sql_trigger_is_carried_out_by_the_next_tick(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    cur = await conn.execute("SELECT agentlab_sched.trigger('store-report', '{\"stat_date\": \"2026-01-01\"}')")
    request_id = fetched(await cur.fetchone())["trigger"]
    await fire_due(conn, NINE - timedelta(hours=1), settings=EN)
    [fire] = await fires(conn, sid)
    assert (fire["kind"], fire["status"], fire["inputs"]) == (
        "manual",
        "started",
        {"stat_date": "2026-01-01"},
    )
    cur = await conn.execute("SELECT fire_ids, done_at FROM agentlab_sched.fire_requests WHERE id = %s", (request_id,))
    req = fetched(await cur.fetchone())
    assert req["fire_ids"] == [fire["id"]] and req["done_at"] is not None


async def test_backfill_fires_each_due_time_with_its_own_inputs(conn: psycopg.AsyncConnection[DictRow]) -> None:
    from agentlab_sched.firing.requests import backfill

    sid = await make_schedule(conn, overlap="allow_all")
    outcomes = await backfill(conn, "store-report", NINE - timedelta(days=3), NINE - timedelta(days=1), settings=EN)
    assert [o.status for o in outcomes] == ["started"] * 3
    rows = await fires(conn, sid)
    assert [(f["kind"], f["inputs"]["stat_date"]) for f in rows] == [
        ("backfill", "2026-10-01"),
        ("backfill", "2026-10-02"),
        ("backfill", "2026-10-03"),
    ]


async def test_a_huge_backfill_is_refused_with_the_limit(conn: psycopg.AsyncConnection[DictRow]) -> None:
    from agentlab_sched.errors import ValidationError
    from agentlab_sched.firing.requests import backfill

    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC")
    with pytest.raises(ValidationError) as err:
        await backfill(conn, "store-report", NINE, NINE + timedelta(days=1), settings=EN)
    assert err.value.message("en") == (
        "backfill: the range 2026-10-05 01:00 to 2026-10-06 01:00 holds more than 1000 due times, the most one "
        "backfill fires; choose a shorter range"
    )
    assert err.value.message("zh-CN") == (
        "补跑:2026-10-05 01:00 至 2026-10-06 01:00 之间的触发时间超过 1000 个(一次补跑的上限),请缩短范围"
    )
    assert await fires(conn, sid) == []
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fire_requests")
    assert fetched(await cur.fetchone())["n"] == 0  # nothing half-written


async def test_inputs_render_every_placeholder_in_the_schedule_zone(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    cur = await conn.execute(
        "SELECT agentlab_sched.render_inputs(%s::jsonb, %s, 'Asia/Shanghai', 'r', 'scheduled') AS r",
        (
            '{"a": "{{ schedule.fire_at }}", "b": "{{schedule.date}} {{ schedule.week_start }}", '
            '"c": ["{{ schedule.month_start }}", {"d": "{{ schedule.tomorrow }}"}], "n": 3}',
            NINE,
        ),
    )
    assert fetched(await cur.fetchone())["r"] == {
        "a": "2026-10-05T09:00:00+08:00",
        "b": "2026-10-05 2026-10-05",
        "c": ["2026-10-01", {"d": "2026-10-06"}],
        "n": 3,
    }
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        await conn.execute("SELECT agentlab_sched.render_inputs('{\"a\": \"{{ os.system }}\"}', now(), 'UTC')")
    assert str(err.value).startswith("unknown placeholder {{ os.system }}; known: schedule.date, ")


async def test_cancel_other_also_cancels_an_approved_run_waiting_to_continue(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """Approved but not started again: its next job is still todo, and must not run after the newer fire."""
    sid = await make_schedule(conn, cron="* * * * *", timezone="UTC", overlap="cancel_other")
    cur = await conn.execute(
        """SELECT (procrastinate_defer_jobs_v1(ARRAY[ROW('default', 'demo.echo', 0, NULL, NULL, '{}'::jsonb,
                  NULL)::procrastinate_job_to_defer_v1]))[1] AS id"""
    )
    waiting_job = fetched(await cur.fetchone())["id"]
    await conn.execute(
        """INSERT INTO agentlab_sched.runs (schedule_id, task, status, started_by, job_id)
           VALUES (%s, 'demo.echo', 'awaiting_approval', 'schedule:store-report', %s)""",
        (sid, waiting_job),
    )
    await fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    assert (await job(conn, waiting_job))["status"] == "cancelled"
    statuses = sorted(r["status"] for r in await runs_of(conn, sid))
    assert statuses == ["cancelled", "queued"]


async def test_a_tick_stopped_mid_batch_rolls_back_and_the_next_one_fires_it(
    db_url: str, conn: psycopg.AsyncConnection[DictRow], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stopped while it holds a claimed batch: nothing is half-written, the next tick fires it."""
    from agentlab_sched.firing import tick as tick_module

    sid = await make_schedule(conn)
    planning = asyncio.Event()
    real_apply = tick_module._apply

    async def slow_apply(*args: Any, **kwargs: Any) -> Any:  # claimed and planned, not applied yet
        planning.set()
        await asyncio.sleep(30)
        return await real_apply(*args, **kwargs)

    monkeypatch.setattr(tick_module, "_apply", slow_apply)
    stopping = await db.connect(db_url, locale="en")
    try:
        task = asyncio.create_task(fire_due(stopping, NINE + timedelta(seconds=5), settings=EN))
        await asyncio.wait_for(planning.wait(), timeout=10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await stopping.close()
    assert await fires(conn, sid) == [] and await next_of(conn, sid) == NINE
    monkeypatch.setattr(tick_module, "_apply", real_apply)
    await fire_due(conn, NINE + timedelta(seconds=6), settings=EN)
    assert [(f["kind"], f["status"]) for f in await fires(conn, sid)] == [("scheduled", "started")]
