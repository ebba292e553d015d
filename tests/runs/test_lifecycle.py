"""The run lifecycle with an injected clock (docs/runs.md): approvals, suspended runs, cancelling,
timeouts, failure accounting, session keys, retention. Jobs are moved by hand here, as a worker would
move them (the job trigger makes runs follow); tests/worker/test_lifecycle_worker.py runs real workers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from agentlab_sched import messages
from agentlab_sched.errors import Conflict, NotFound, SchedError, ValidationError
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.runs import lifecycle
from agentlab_sched.runs.context import RunContext
from tests.support.firing_helpers import EN, NINE, ZH, fires, job, make_schedule, runs_of, set_job_status
from tests.support.rows import Conn, fetched
from tests.support.runs import approvals_of, ask, in_locale, launch, launch_outcome, run_row, schedule_row

# --------------------------------------------------------------------------------------------------
# Helpers: what a worker and its middleware would do
# --------------------------------------------------------------------------------------------------


async def snapshot(conn: Conn, rid: Any) -> tuple[Any, ...]:
    """Everything a refused request must leave as it was."""
    run = await run_row(conn, rid)
    cur = await conn.execute("SELECT count(*) AS n FROM procrastinate_jobs")
    return run, await approvals_of(conn, rid), fetched(await cur.fetchone())["n"]


async def add_worker(conn: Conn, heartbeat: Any) -> int:
    cur = await conn.execute(
        "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (%s) RETURNING id", (heartbeat,)
    )
    return fetched(await cur.fetchone())["id"]


async def start_on(conn: Conn, job_id: int, worker_id: int | None) -> None:
    """A worker fetches the job (todo -> doing), as procrastinate_fetch_job does."""
    await conn.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s WHERE id = %s", (worker_id, job_id)
    )


def both(exc: SchedError) -> tuple[str, str]:
    return exc.message("en"), exc.message("zh-CN")


# --------------------------------------------------------------------------------------------------
# Approvals
# --------------------------------------------------------------------------------------------------


async def test_approval_pauses_the_run_blocks_overlap_and_continues_in_segment_two(conn: Conn) -> None:
    sid = await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [run] = await runs_of(conn, sid)
    first_job = run["job_id"]
    await set_job_status(conn, first_job, "doing")
    assert (await run_row(conn, run["id"]))["status"] == "running"

    # The task raises AwaitApproval("Send the weekly report?", state={"draft": "v1"}); its job ends normally.
    assert await ask(conn, run, "Send the weekly report?", {"draft": "v1"}) == 1
    await set_job_status(conn, first_job, "succeeded")
    waiting = await run_row(conn, run["id"])
    assert (waiting["status"], waiting["segment"], waiting["state"], waiting["finished_at"]) == (
        "awaiting_approval",
        1,
        {"draft": "v1"},
        None,
    )
    [pending] = await approvals_of(conn, run["id"])
    assert (pending["segment"], pending["title"], pending["state"], pending["status"], pending["job_id"]) == (
        1,
        "Send the weekly report?",
        {"draft": "v1"},
        "pending",
        first_job,
    )
    assert (pending["decided_by"], pending["decided_at"], pending["comment"]) == (None, None, None)

    # While it waits, the next fire is skipped: awaiting approval, naming the run.
    await in_locale(conn, "zh-CN")
    await fire_due(conn, NINE + timedelta(days=1, seconds=5), settings=ZH)
    await in_locale(conn, "en")
    skipped = (await fires(conn, sid))[-1]
    short = str(run["id"])[:6]
    assert (skipped["status"], skipped["reason_code"]) == ("skipped_overlap", "overlap.awaiting_approval")
    assert skipped["reason"] == f"上一次运行 #{short} 正在等待审批,本次触发已跳过"

    # Approved (Python API): a new job for the same run; the run still waits until it starts. The decision
    # records the database role and the database clock; "alice" is the label the caller gave.
    cur = await conn.execute("SELECT session_user AS role, now() AS at")
    me = fetched(await cur.fetchone())
    approved = await lifecycle.approve(conn, f"#{short}", "alice", "looks right", segment=1)
    assert approved.job_id is not None
    assert (approved.status, approved.segment, approved.waiting_for) == ("awaiting_approval", 1, None)
    assert approved.job_id != first_job
    [decision] = await approvals_of(conn, run["id"])
    assert (decision["status"], decision["decided_by"], decision["decided_label"], decision["comment"]) == (
        "approved",
        me["role"],
        "alice",
        "looks right",
    )
    assert decision["decided_at"] >= me["at"]
    await conn.execute("UPDATE agentlab_sched.approvals SET decided_at = %s", (NINE + timedelta(minutes=30),))
    new_job = await job(conn, approved.job_id)
    assert (new_job["status"], new_job["task_name"], new_job["args"], new_job["queue_name"]) == (
        "todo",
        "demo.echo",
        run["inputs"],
        "default",
    )

    # Approved but not started again: still awaiting approval for overlap, never suspended.
    await fire_due(conn, NINE + timedelta(days=2, seconds=5), settings=EN)
    skipped = (await fires(conn, sid))[-1]
    assert skipped["reason"] == f"the previous run #{short} is awaiting approval; this fire was skipped"

    # Approving twice: a clear refusal, nothing changed.
    before = await snapshot(conn, run["id"])
    with pytest.raises(Conflict) as err:
        await lifecycle.approve(conn, run["id"], "bob")
    assert both(err.value) == (
        f"run #{short}: the approval of segment 1 was already approved by alice ({me['role']}) at 2026-10-05 09:30 "
        "(Asia/Shanghai); nothing was changed",
        f"运行 #{short}:第 1 段的审批已由 alice ({me['role']}) 于 2026-10-05 09:30(Asia/Shanghai)作出决定:已批准,"
        "未做任何改动",
    )
    assert await snapshot(conn, run["id"]) == before

    # The worker starts segment 2: it reads the state and the approval.
    await set_job_status(conn, approved.job_id, "doing")
    resumed = await run_row(conn, run["id"])
    assert (resumed["status"], resumed["segment"]) == ("running", 2)
    cur = await conn.execute("SELECT agentlab_sched.run_context(%s) AS c", (approved.job_id,))
    ctx = RunContext.from_data(fetched(await cur.fetchone())["c"])
    assert (ctx.run_id, ctx.segment, ctx.state, ctx.schedule, ctx.kind, ctx.fire_at) == (
        run["id"],
        2,
        {"draft": "v1"},
        "store-report",
        "scheduled",
        NINE,
    )
    assert ctx.approval is not None
    assert (ctx.approval.segment, ctx.approval.status, ctx.approval.decided_by, ctx.approval.comment) == (
        1,
        "approved",
        me["role"],
        "looks right",
    )
    assert ctx.approval.decided_label == "alice"

    # Approving a run that is not waiting: refused, nothing changed.
    before = await snapshot(conn, run["id"])
    with pytest.raises(Conflict) as err:
        await lifecycle.approve(conn, run["id"], "bob")
    assert both(err.value) == (
        f"run #{short} is not awaiting approval (it is running); nothing was changed",
        f"运行 #{short} 没有在等待审批(当前:运行中),未做任何改动",
    )
    assert await snapshot(conn, run["id"]) == before

    await set_job_status(conn, approved.job_id, "succeeded")
    done = await run_row(conn, run["id"])
    assert (done["status"], done["segment"], done["error"]) == ("succeeded", 2, None)


async def test_a_second_approval_point_and_a_stale_segment(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "step 1", {"n": 1})
    first = await lifecycle.approve(conn, run["id"], "alice")
    assert first.job_id is not None
    await set_job_status(conn, first.job_id, "doing")
    run = await run_row(conn, run["id"])
    assert await ask(conn, run, "step 2", {"n": 2}) == 2
    short = str(run["id"])[:6]
    before = await snapshot(conn, run["id"])
    with pytest.raises(Conflict) as err:
        await lifecycle.approve(conn, run["id"], "alice", segment=1)
    assert err.value.code == "run.stale_segment"
    assert both(err.value) == (
        f"run #{short} is waiting for the approval of segment 2, not segment 1; nothing was changed",
        f"运行 #{short} 正在等待第 2 段的审批,不是第 1 段,未做任何改动",
    )
    assert await snapshot(conn, run["id"]) == before
    # The same refusal from SQL, in the session's locale, SQLSTATE 55000.
    await in_locale(conn, "zh-CN")
    with pytest.raises(psycopg.Error) as sql_err:
        await conn.execute("SELECT agentlab_sched.approve(%s, 'alice', NULL, 1)", (run["id"],))
    assert sql_err.value.sqlstate == "55000"
    assert sql_err.value.diag.message_primary == f"运行 #{short} 正在等待第 2 段的审批,不是第 1 段,未做任何改动"
    await in_locale(conn, "en")
    # The right segment: approved, a third segment follows.
    approved = await lifecycle.approve(conn, run["id"], "bob", segment=2)
    assert approved.job_id is not None
    await set_job_status(conn, approved.job_id, "doing")
    assert (await run_row(conn, run["id"]))["segment"] == 3
    assert [(a["segment"], a["title"], a["status"]) for a in await approvals_of(conn, run["id"])] == [
        (1, "step 1", "approved"),
        (2, "step 2", "approved"),
    ]


async def test_reject_cancels_the_run_and_says_who_and_why(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "Publish?", None)
    await set_job_status(conn, run["job_id"], "succeeded")
    cur = await conn.execute("SELECT session_user AS role, now() AS at")
    me = fetched(await cur.fetchone())
    rejected = await lifecycle.reject(conn, run["id"], "bob", "not this week")
    assert (rejected.status, rejected.error, rejected.error_code, rejected.cancelled_by) == (
        "cancelled",
        f"rejected by bob ({me['role']}): not this week",
        "run.rejected",
        f"bob ({me['role']})",
    )
    assert rejected.finished_at is not None and rejected.finished_at >= me["at"]
    [a] = await approvals_of(conn, run["id"])
    assert (a["status"], a["decided_by"], a["decided_label"], a["comment"]) == (
        "rejected",
        me["role"],
        "bob",
        "not this week",
    )
    short = str(run["id"])[:6]
    with pytest.raises(Conflict) as err:
        await lifecycle.approve(conn, run["id"], "alice")
    assert both(err.value) == (
        f"run #{short} has already ended (cancelled); nothing was changed",
        f"运行 #{short} 已经结束(已取消),未做任何改动",
    )
    # A rejection without a comment; in Chinese.
    other = await launch(conn, sid, "manual:test2")
    await set_job_status(conn, other["job_id"], "doing")
    await ask(conn, other, "Publish?", None)
    await in_locale(conn, "zh-CN")
    await conn.execute("SELECT agentlab_sched.reject(%s, 'bob')", (other["id"],))
    await in_locale(conn, "en")
    assert (await run_row(conn, other["id"]))["error"] == f"已被 bob ({me['role']}) 驳回"


async def test_decisions_check_who_and_what(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "ok?", None)
    before = await snapshot(conn, run["id"])
    with pytest.raises(ValidationError) as err:
        await lifecycle.approve(conn, run["id"], " ")
    assert (err.value.field, both(err.value)) == (
        "by",
        ("by: say who decides, in 1 to 200 characters", "操作人:请写明是谁,1 到 200 个字符"),
    )
    with pytest.raises(ValidationError) as err:
        await lifecycle.approve(conn, run["id"], "alice", "x" * 2001)
    assert err.value.message("en") == "comment: 2001 characters, more than the limit of 2000"
    with pytest.raises(ValidationError) as err:
        await lifecycle.approve(conn, run["id"], "alice", segment=0)
    assert err.value.message("en") == "segment: 0 is not a segment number (1 or more)"
    assert await snapshot(conn, run["id"]) == before


async def test_an_approval_title_is_checked(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    with pytest.raises(psycopg.Error) as err:
        await ask(conn, run, "", None)
    assert err.value.diag.message_primary == "the approval title must be 1 to 500 characters of text"
    assert (await run_row(conn, run["id"]))["status"] == "running"


async def test_a_cancelled_run_does_not_start_waiting(conn: Conn) -> None:
    """The task asks for approval after someone cancelled its run: nothing is written."""
    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    _, outcome = await lifecycle.cancel(conn, run["id"], "dave")
    assert outcome == "abort_requested"
    await set_job_status(conn, run["job_id"], "aborted")
    assert await ask(conn, run, "too late", None) is None
    assert await approvals_of(conn, run["id"]) == []
    assert (await run_row(conn, run["id"]))["status"] == "cancelled"


# --------------------------------------------------------------------------------------------------
# Suspended runs
# --------------------------------------------------------------------------------------------------


async def test_a_stalled_job_suspends_its_run_then_resume_and_abandon(conn: Conn) -> None:
    sid = await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [run] = await runs_of(conn, sid)
    wid = await add_worker(conn, NINE + timedelta(seconds=10))
    await start_on(conn, run["job_id"], wid)

    # The worker heartbeats until NINE+10s, then nothing: suspended once 30 s have passed, not before.
    assert await lifecycle.detect_suspended(conn, now=NINE + timedelta(seconds=39)) == 0
    assert (await run_row(conn, run["id"]))["status"] == "running"
    assert await lifecycle.detect_suspended(conn, now=NINE + timedelta(seconds=41)) == 1
    held = await run_row(conn, run["id"])
    assert (held["status"], held["suspended_at"], held["error_code"], held["finished_at"]) == (
        "suspended",
        NINE + timedelta(seconds=41),
        "run.suspended",
        None,
    )
    assert held["error"] == (
        "suspended: the worker running it stopped (usually a restart); it will not continue by itself: "
        "resume it to run it again, or abandon it"
    )
    assert messages.render("run.suspended", "zh-CN") == (
        "已挂起:执行它的 worker 已停止(通常是服务重启所致),它不会自己接着执行;请继续运行,或放弃这次运行"
    )
    # Detected once: later checks leave it alone.
    assert await lifecycle.detect_suspended(conn, now=NINE + timedelta(minutes=5)) == 0

    # Every later fire is skipped, saying what to do.
    short = str(run["id"])[:6]
    await in_locale(conn, "zh-CN")
    for day in (1, 2):
        await fire_due(conn, NINE + timedelta(days=day, seconds=5), settings=ZH)
    await in_locale(conn, "en")
    skipped = [f for f in await fires(conn, sid) if f["status"] == "skipped_overlap"]
    assert [f["reason"] for f in skipped] == [
        f"上一次运行 #{short} 已挂起(通常是服务重启所致),请在运行记录中继续运行或放弃这次运行,本次触发已跳过"
    ] * 2

    # Resume: Procrastinate retries the same job; the run is queued again, its error cleared.
    resumed = await lifecycle.resume(conn, short, "erin")
    assert (resumed.status, resumed.job_id, resumed.error, resumed.error_code) == ("queued", run["job_id"], None, None)
    retried = await job(conn, run["job_id"])
    assert (retried["status"], retried["attempts"]) == ("todo", 1)
    with pytest.raises(Conflict) as err:
        await lifecycle.resume(conn, run["id"], "erin")
    assert both(err.value) == (
        f"run #{short} is not suspended (it is queued); only a suspended run can be resumed or abandoned; "
        "nothing was changed",
        f"运行 #{short} 没有挂起(当前:排队中),只有已挂起的运行可以继续运行或放弃,未做任何改动",
    )

    # It stalls again (its worker is gone altogether this time): abandon cancels it, its job ends aborted.
    await start_on(conn, run["job_id"], wid)
    await conn.execute("DELETE FROM procrastinate_workers WHERE id = %s", (wid,))
    assert await lifecycle.detect_suspended(conn, now=NINE + timedelta(days=3)) == 1
    abandoned = await lifecycle.abandon(conn, run["id"], "erin", now=NINE + timedelta(days=3, minutes=1))
    assert (abandoned.status, abandoned.error, abandoned.cancelled_by, abandoned.finished_at) == (
        "cancelled",
        "abandoned by erin after it was suspended",
        "erin",
        NINE + timedelta(days=3, minutes=1),
    )
    assert (await job(conn, run["job_id"]))["status"] == "aborted"
    with pytest.raises(Conflict) as err:
        await lifecycle.resume(conn, run["id"], "erin")
    assert err.value.message("en") == f"run #{short} has already ended (cancelled); nothing was changed"
    # Not a failure: a suspended run is not counted, nor an abandoned one.
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0

    # The next fire starts again.
    await fire_due(conn, NINE + timedelta(days=4, seconds=5), settings=EN)
    assert (await fires(conn, sid))[-1]["status"] == "started"


async def test_resume_defers_a_new_job_when_the_stalled_one_is_gone(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, overlap="buffer_all", queue="reports", priority=3)
    run = await launch(conn, sid)
    await start_on(conn, run["job_id"], None)
    assert await lifecycle.detect_suspended(conn) == 1
    await conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (run["job_id"],))
    resumed = await lifecycle.resume(conn, run["id"], "erin")
    assert resumed.status == "queued" and resumed.job_id not in (None, run["job_id"])
    fresh = await job(conn, resumed.job_id)
    assert (fresh["status"], fresh["queue_name"], fresh["priority"], fresh["lock"], fresh["args"]) == (
        "todo",
        "reports",
        3,
        f"agentlab_sched:{sid}",
        run["inputs"],
    )


async def test_a_stalled_run_being_aborted_ends_as_the_abort_would(conn: Conn) -> None:
    """A worker dies while its run is being cancelled or timed out: no suspension, the abort's outcome."""
    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all", timeout=timedelta(minutes=1))
    cancelled = await launch(conn, sid, "manual:a")
    timed = await launch(conn, sid, "manual:b")
    for r in (cancelled, timed):
        await start_on(conn, r["job_id"], None)
    await lifecycle.cancel(conn, cancelled["id"], "dave")
    deadline = (await run_row(conn, timed["id"]))["deadline_at"]
    assert await lifecycle.enforce_timeouts(conn, now=deadline) == 1
    assert await lifecycle.detect_suspended(conn) == 2
    assert (await run_row(conn, cancelled["id"]))["status"] == "cancelled"
    ended = await run_row(conn, timed["id"])
    assert (ended["status"], ended["error"]) == (
        "timed_out",
        "timed out: still running after the schedule's timeout of 1 minute; it was aborted",
    )


# --------------------------------------------------------------------------------------------------
# Cancel
# --------------------------------------------------------------------------------------------------


async def test_cancel_a_queued_a_running_and_a_waiting_run(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all")
    queued = await launch(conn, sid, "manual:q")
    running = await launch(conn, sid, "manual:r")
    waiting = await launch(conn, sid, "manual:w")
    await set_job_status(conn, running["job_id"], "doing")
    await set_job_status(conn, waiting["job_id"], "doing")
    await ask(conn, waiting, "ok?", None)
    await set_job_status(conn, waiting["job_id"], "succeeded")

    run, outcome = await lifecycle.cancel(conn, queued["id"], "dave", now=NINE)
    assert (outcome, run.status, run.error, run.finished_at) == ("cancelled", "cancelled", "cancelled by dave", NINE)
    assert (await job(conn, queued["job_id"]))["status"] == "cancelled"

    run, outcome = await lifecycle.cancel(conn, running["id"], "dave")
    assert (outcome, run.status, run.abort_reason) == ("abort_requested", "running", "cancel")
    assert (await job(conn, running["job_id"]))["abort_requested"] is True
    await set_job_status(conn, running["job_id"], "aborted")  # the worker cancelled the task
    ended = await run_row(conn, running["id"])
    assert (ended["status"], ended["error"], ended["cancelled_by"]) == ("cancelled", "cancelled by dave", "dave")

    run, outcome = await lifecycle.cancel(conn, waiting["id"], "dave")
    assert (outcome, run.status) == ("cancelled", "cancelled")

    short = str(queued["id"])[:6]
    with pytest.raises(Conflict) as err:
        await lifecycle.cancel(conn, queued["id"], "dave")
    assert both(err.value) == (
        f"run #{short} has already ended (cancelled); nothing was changed",
        f"运行 #{short} 已经结束(已取消),未做任何改动",
    )
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0


# --------------------------------------------------------------------------------------------------
# Timeouts
# --------------------------------------------------------------------------------------------------


async def test_a_timeout_aborts_then_reports_a_task_that_ignores_it(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, timeout=timedelta(minutes=5))
    run = await launch(conn, sid)
    assert run["deadline_at"] is None
    await set_job_status(conn, run["job_id"], "doing")
    started = await run_row(conn, run["id"])
    deadline = started["deadline_at"]
    assert deadline == started["started_at"] + timedelta(minutes=5)

    assert await lifecycle.enforce_timeouts(conn, now=deadline - timedelta(seconds=1)) == 0
    assert await lifecycle.enforce_timeouts(conn, now=deadline) == 1
    aborting = await run_row(conn, run["id"])
    assert (aborting["status"], aborting["abort_reason"], aborting["abort_requested_at"]) == (
        "running",
        "timeout",
        deadline,
    )
    assert (await job(conn, run["job_id"]))["abort_requested"] is True
    # Within the grace nothing more; past it the run says why it is still running (once).
    assert await lifecycle.enforce_timeouts(conn, now=deadline + timedelta(seconds=9)) == 0
    assert await lifecycle.enforce_timeouts(conn, now=deadline + timedelta(seconds=12)) == 1
    still = await run_row(conn, run["id"])
    assert (still["status"], still["error_code"]) == ("running", "run.ignoring_abort")
    assert still["error"] == (
        "still running 12 seconds after it was aborted for the schedule's timeout of 5 minutes: it is a "
        "synchronous task that does not check context.should_abort(), so it cannot be stopped until it "
        "returns; it will be recorded as timed out"
    )
    assert messages.render("run.ignoring_abort", "zh-CN", late=messages.seconds(12), timeout=messages.seconds(300)) == (
        "超过定时任务的超时上限 5 分钟后已要求中断,但 12 秒后仍在运行:它是同步任务,不检查 "
        "context.should_abort(),在它自己返回之前无法停下;结束后记为超时"
    )
    assert await lifecycle.enforce_timeouts(conn, now=deadline + timedelta(seconds=30)) == 0

    # The task finally returns 40 s after the abort: the middleware discards its result (job aborted).
    cur = await conn.execute(
        "SELECT agentlab_sched.finish_after_abort(%s, %s, %s, interval '10 seconds') AS reason",
        (run["id"], run["job_id"], deadline + timedelta(seconds=40)),
    )
    assert fetched(await cur.fetchone())["reason"] == "timeout"
    await set_job_status(conn, run["job_id"], "aborted")
    ended = await run_row(conn, run["id"])
    assert (ended["status"], ended["error_code"], ended["result"]) == ("timed_out", "run.timed_out_late", None)
    assert ended["error"] == (
        "timed out: still running after the schedule's timeout of 5 minutes; it was asked to abort, but as a "
        "synchronous task that does not check context.should_abort() it ran on for 40 seconds more; its "
        "result was discarded"
    )
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1


async def test_an_async_task_aborted_for_its_timeout_ends_timed_out_in_both_locales(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, timeout=timedelta(seconds=90), overlap="allow_all")
    for locale, expected in (
        ("en", "timed out: still running after the schedule's timeout of 1 minute 30 seconds; it was aborted"),
        ("zh-CN", "运行超时:超过定时任务的超时上限 1 分钟 30 秒仍未结束,已中断"),
    ):
        await in_locale(conn, locale)
        run = await launch(conn, sid, f"manual:{locale}")
        await set_job_status(conn, run["job_id"], "doing")
        deadline = (await run_row(conn, run["id"]))["deadline_at"]
        cur = await conn.execute("SELECT agentlab_sched.time_out_run(%s, %s) AS done", (run["id"], deadline))
        assert fetched(await cur.fetchone())["done"] == "aborted"
        await set_job_status(conn, run["job_id"], "aborted")  # the async task was cancelled at once
        ended = await run_row(conn, run["id"])
        assert (ended["status"], ended["error"]) == ("timed_out", expected)
    await in_locale(conn, "en")


async def test_a_run_without_timeout_or_not_running_is_never_timed_out(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all")
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    assert (await run_row(conn, run["id"]))["deadline_at"] is None
    assert await lifecycle.enforce_timeouts(conn, now=NINE + timedelta(days=3650)) == 0
    timed = await make_schedule(conn, "timed", next_run_at=None, timeout=timedelta(seconds=5))
    waiting = await launch(conn, timed)
    await set_job_status(conn, waiting["job_id"], "doing")
    await ask(conn, waiting, "ok?", None)
    assert (await run_row(conn, waiting["id"]))["deadline_at"] is None
    assert await lifecycle.enforce_timeouts(conn, now=NINE + timedelta(days=3650)) == 0


# --------------------------------------------------------------------------------------------------
# Failure accounting
# --------------------------------------------------------------------------------------------------


async def test_failures_count_reset_on_success_and_pause_the_schedule(conn: Conn) -> None:
    sid = await make_schedule(
        conn, next_run_at=None, overlap="allow_all", pause_after_failures=3, timeout=timedelta(minutes=1)
    )

    async def ends(status: str) -> None:
        run = await launch(conn, sid, f"manual:{status}")
        await set_job_status(conn, run["job_id"], "doing")
        if status == "timed_out":
            deadline = (await run_row(conn, run["id"]))["deadline_at"]
            await lifecycle.enforce_timeouts(conn, now=deadline)
            status = "aborted"
        await set_job_status(conn, run["job_id"], status)

    await ends("failed")
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
    await ends("succeeded")
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0
    await ends("failed")
    await ends("timed_out")
    s = await schedule_row(conn, sid)
    assert (s["consecutive_failures"], s["enabled"], s["paused_reason"]) == (2, True, None)

    # A fire refused (no live worker registered the task) is the third failure: the schedule pauses.
    await conn.execute("DELETE FROM agentlab_sched.known_tasks")
    assert (await launch_outcome(conn, sid, "manual:t"))["status"] == "failed_to_start"
    s = await schedule_row(conn, sid)
    assert (s["consecutive_failures"], s["enabled"], s["next_run_at"]) == (3, False, None)
    since = messages.local_time(s["paused_at"].replace(second=0, microsecond=0), "Asia/Shanghai")
    # The system's reason is kept as a message code, rendered in the reader's language when read.
    assert (s["paused_reason"], s["paused_reason_code"]) == (None, "schedule.paused_after_failures")
    reason = f"paused after 3 consecutive failures (since {since}, Asia/Shanghai); fix the cause, then resume it"
    assert messages.render(s["paused_reason_code"], "en", **s["paused_reason_params"]) == reason
    cur = await conn.execute(
        "SELECT enabled, paused_reason, paused_at, consecutive_failures FROM agentlab_sched.schedule_status "
        "WHERE id = %s",
        (sid,),
    )
    assert await cur.fetchone() == {
        "enabled": False,
        "paused_reason": reason,  # the view renders it
        "paused_at": s["paused_at"],
        "consecutive_failures": 3,
    }


async def test_remaining_runs_decrement_per_started_run_and_stop_at_zero(conn: Conn) -> None:
    sid = await make_schedule(conn, remaining_runs=2, overlap="allow_all")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    assert (await schedule_row(conn, sid))["remaining_runs"] == 1
    await fire_due(conn, NINE + timedelta(days=1, seconds=5), settings=EN)
    s = await schedule_row(conn, sid)
    assert (s["remaining_runs"], s["next_run_at"]) == (0, None)
    assert [f["status"] for f in await fires(conn, sid)] == ["started", "started"]


# --------------------------------------------------------------------------------------------------
# Session keys: persistent or isolated context
# --------------------------------------------------------------------------------------------------


async def test_persistent_runs_share_a_session_key_until_the_host_resets_it(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all", context="persistent")
    first, second = await launch(conn, sid, "manual:1"), await launch(conn, sid, "manual:2")
    key = first["session_key"]
    assert key.startswith(f"agentlab_sched:{sid}:") and second["session_key"] == key
    assert (await schedule_row(conn, sid))["session_key"] == key
    version = (await schedule_row(conn, sid))["version"]

    renewed = await lifecycle.reset_session(conn, "store-report")
    assert renewed != key and renewed.startswith(f"agentlab_sched:{sid}:")
    third = await launch(conn, sid, "manual:3")
    assert third["session_key"] == renewed
    assert (await schedule_row(conn, sid))["version"] == version  # bookkeeping, not a change of definition

    # From inside a run (context.renew_session() calls this): the schedule and the run both move on.
    cur = await conn.execute("SELECT agentlab_sched.renew_session(%s) AS k", (third["id"],))
    inside = fetched(await cur.fetchone())["k"]
    assert inside not in (key, renewed)
    assert (await run_row(conn, third["id"]))["session_key"] == inside
    assert (await schedule_row(conn, sid))["session_key"] == inside


async def test_isolated_runs_get_a_fresh_session_key_each(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all")
    keys = {(await launch(conn, sid, f"manual:{i}"))["session_key"] for i in range(3)}
    assert len(keys) == 3 and all(UUID(k) for k in keys)
    assert (await schedule_row(conn, sid))["session_key"] is None
    with pytest.raises(Conflict) as err:
        await lifecycle.reset_session(conn, "store-report")
    assert both(err.value) == (
        'schedule "store-report" uses an isolated context; only a persistent context keeps a session key',
        "定时任务「store-report」使用独立上下文,只有持续上下文才保留会话键",
    )
    with pytest.raises(NotFound):
        await lifecycle.reset_session(conn, "nope")


# --------------------------------------------------------------------------------------------------
# Retention
# --------------------------------------------------------------------------------------------------


async def test_prune_drops_whole_partitions_past_retention_but_never_live_work(conn: Conn) -> None:
    a = await make_schedule(conn, "a", next_run_at=None, overlap="allow_all")
    b = await make_schedule(conn, "b", next_run_at=None)

    async def finished(sid: int, who: str, ask_first: bool = False) -> dict[str, Any]:
        run = await launch(conn, sid, who)
        await set_job_status(conn, run["job_id"], "doing")
        if ask_first:  # two segments: two jobs to prune
            await ask(conn, run, "ok?", None)
            await set_job_status(conn, run["job_id"], "succeeded")
            approved = await lifecycle.approve(conn, run["id"], "alice")
            assert approved.job_id is not None
            await set_job_status(conn, approved.job_id, "doing")
            run = await run_row(conn, run["id"])
        await set_job_status(conn, run["job_id"], "succeeded")
        return await run_row(conn, run["id"])

    gone = await finished(a, "manual:gone", ask_first=True)
    running = await launch(conn, a, "manual:running")
    await set_job_status(conn, running["job_id"], "doing")
    await finished(a, "manual:newest")
    await finished(b, "manual:only")
    # All of it 100 days before it happened (the rows move to the DEFAULT partitions: no partition there).
    await conn.execute("UPDATE agentlab_sched.fires SET fire_at = fire_at - interval '100 days'")
    await conn.execute("UPDATE agentlab_sched.runs SET created_at = created_at - interval '100 days'")
    await conn.execute("UPDATE procrastinate_events SET at = at - interval '100 days'")
    jobs_before = {gone["job_id"], *(a_["job_id"] for a_ in await approvals_of(conn, gone["id"]))}
    assert len(jobs_before) == 2
    assert len(await approvals_of(conn, gone["id"])) == 1

    with pytest.raises(ValidationError) as err:
        await lifecycle.prune(conn, timedelta(seconds=30), now=NINE)
    assert both(err.value) == (
        "older_than: 30 seconds is too short; keep at least 1 minute of history",
        "「保留时长」30 秒太短;运行记录至少保留 1 分钟",
    )

    # The day of the running run is kept whole: its runs and its fires. Procrastinate's finished jobs
    # with nothing since the cutoff go all the same (every segment's of the run `gone`).
    report = await lifecycle.prune(conn, timedelta(days=30), now=NINE)
    assert report == lifecycle.PruneReport(fires=0, runs=0, jobs=4, requests=0, partitions=0)
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.runs")
    assert fetched(await cur.fetchone())["n"] == 4
    cur = await conn.execute("SELECT count(*) AS n FROM procrastinate_jobs WHERE id = ANY(%s)", (list(jobs_before),))
    assert fetched(await cur.fetchone())["n"] == 0
    # Once it has ended (its job's end an event of the same old day), the day goes: fires, runs, approvals.
    await set_job_status(conn, running["job_id"], "succeeded")
    await conn.execute("UPDATE procrastinate_events SET at = least(at, %s)", (NINE - timedelta(days=40),))
    report = await lifecycle.prune(conn, timedelta(days=30), now=NINE)
    assert report == lifecycle.PruneReport(fires=4, runs=4, jobs=1, requests=0, partitions=2)
    for table in ("runs", "fires", "approvals"):
        cur = await conn.execute(f"SELECT count(*) AS n FROM agentlab_sched.{table}")
        assert fetched(await cur.fetchone())["n"] == 0, table
    # Again: nothing more to do.
    assert await lifecycle.prune(conn, timedelta(days=30), now=NINE) == lifecycle.PruneReport(0, 0, 0, 0, 0)


async def test_housekeeping_runs_every_check_and_prunes_with_a_retention(conn: Conn) -> None:
    cur = await conn.execute("SELECT agentlab_sched.housekeeping(prune_due => false) AS done")
    assert fetched(await cur.fetchone())["done"] == {"pruned_ticks": 0, "suspended": 0, "timeouts": 0, "tallied": 0}
    cur = await conn.execute(
        "SELECT agentlab_sched.housekeeping(now(), interval '30 seconds', interval '30 days') AS done"
    )
    assert fetched(await cur.fetchone())["done"] == {
        "pruned_ticks": 0,
        "suspended": 0,
        "timeouts": 0,
        "tallied": 0,
        "partitions": {"created": 0, "moved": 0},
        "pruned": {"fires": 0, "runs": 0, "jobs": 0, "requests": 0, "partitions": 0},
    }
    # The database's own retention serves when the caller gives none.
    await conn.execute("SELECT agentlab_sched.set_retention(interval '30 days')")
    cur = await conn.execute("SELECT agentlab_sched.housekeeping() -> 'pruned' AS p")
    assert fetched(await cur.fetchone())["p"] == {"fires": 0, "runs": 0, "jobs": 0, "requests": 0, "partitions": 0}
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        await conn.execute("SELECT agentlab_sched.set_retention(interval '5 seconds')")


def test_retention_ages_parse_or_name_the_setting() -> None:
    assert lifecycle.parse_age("30d") == timedelta(days=30)
    assert lifecycle.parse_age("1w 2d") == timedelta(days=9)
    assert lifecycle.parse_age("12h30m") == timedelta(hours=12, minutes=30)
    with pytest.raises(ValidationError) as err:
        lifecycle.parse_age("thirty days", "retention")
    assert both(err.value) == (
        'AGENTLAB_SCHED_RETENTION: "thirty days" is not a duration; write it like 90s, 10m, 1h30m, 2d or 0',
        "「AGENTLAB_SCHED_RETENTION」「thirty days」不是时长;请写成 90s、10m、1h30m、2d 或 0 这样的形式",
    )


# --------------------------------------------------------------------------------------------------
# Naming runs
# --------------------------------------------------------------------------------------------------


async def test_runs_are_named_by_id_or_prefix(conn: Conn) -> None:
    sid = await make_schedule(conn, next_run_at=None)
    for rid in ("aaaa1111-0000-4000-8000-000000000001", "aaaa2222-0000-4000-8000-000000000002"):
        await conn.execute(
            """INSERT INTO agentlab_sched.runs (id, schedule_id, task, status, started_by)
               VALUES (%s, %s, 'demo.echo', 'succeeded', 'manual:test')""",
            (rid, sid),
        )
    run = await lifecycle.get_run(conn, "#AAAA11")
    assert str(run.id) == "aaaa1111-0000-4000-8000-000000000001"
    assert (await lifecycle.get_run(conn, "aaaa2222-0000-4000-8000-000000000002")).short_id == "aaaa22"
    with pytest.raises(ValidationError) as err:
        await lifecycle.get_run(conn, "#aaaa")
    assert both(err.value) == (
        '"#aaaa" names 2 runs; give more characters of the id',
        "「#aaaa」对应 2 次运行;请多写几位编号",
    )
    with pytest.raises(NotFound) as nf:
        await lifecycle.get_run(conn, "bbbb")
    assert both(nf.value) == ('no run "bbbb"', "没有编号为「bbbb」的运行")
    with pytest.raises(ValidationError) as err:
        await lifecycle.get_run(conn, "run 7")
    assert err.value.message("en") == (
        '"run 7" is not a run id; give the id or its first characters (at least 4, like #1a2b3c)'
    )


async def test_list_runs_and_fires_filter_and_check_their_filters(conn: Conn) -> None:
    await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    await fire_due(conn, NINE + timedelta(days=1, seconds=5), settings=EN)
    [run] = await lifecycle.list_runs(conn, "store-report")
    assert (run.status, run.schedule_name, run.kind, run.fire_at) == ("queued", "store-report", "scheduled", NINE)
    assert await lifecycle.list_runs(conn, status="succeeded") == []
    listed = await lifecycle.list_fires(conn, "store-report")
    assert [(f.fire_at, f.status) for f in listed] == [(NINE + timedelta(days=1), "skipped_overlap"), (NINE, "started")]
    assert [f.fire_at for f in await lifecycle.list_fires(conn, status="started")] == [NINE]
    with pytest.raises(ValidationError) as err:
        await lifecycle.list_runs(conn, status="done")
    assert err.value.message("en") == (
        'status: "done" is not a run status; choose one of queued, running, awaiting_approval, suspended, '
        "succeeded, failed, cancelled, timed_out"
    )
    with pytest.raises(NotFound):
        await lifecycle.list_fires(conn, "nope")


def test_messages_of_the_lifecycle_agree_across_locales() -> None:
    assert [c for c in messages.check_catalog() if c.startswith(("run.", "approval.", "session.", "retention."))] == []


# --------------------------------------------------------------------------------------------------
# Notifications: each approval point once per segment, a suspended run once (the outbox trigger)
# --------------------------------------------------------------------------------------------------


async def test_lifecycle_notifies_each_approval_point_once_and_a_suspension_once(conn: Conn) -> None:
    from agentlab_sched.notify import set_webhook
    from tests.support.notify_fakes import FEISHU_URL, settings

    sid = await make_schedule(conn, next_run_at=None, overlap="allow_all")
    await set_webhook(conn, "store-report", url=FEISHU_URL, events="finished,failed,awaiting_approval",
                      settings=settings())  # fmt: skip

    async def events() -> list[tuple[str, str, int]]:
        cur = await conn.execute("SELECT run_id, event, segment FROM agentlab_sched.outbox ORDER BY id")
        return [(str(r["run_id"])[:6], r["event"], r["segment"]) for r in await cur.fetchall()]

    asking = await launch(conn, sid, "manual:ask")
    await set_job_status(conn, asking["job_id"], "doing")
    await ask(conn, asking, "step 1", None)
    approved = await lifecycle.approve(conn, asking["id"], "alice")  # waiting until it starts: no event
    assert approved.job_id is not None
    await set_job_status(conn, approved.job_id, "doing")
    await ask(conn, await run_row(conn, asking["id"]), "step 2", None)
    approved = await lifecycle.approve(conn, asking["id"], "alice")
    assert approved.job_id is not None
    await set_job_status(conn, approved.job_id, "doing")
    await set_job_status(conn, approved.job_id, "succeeded")

    stalled = await launch(conn, sid, "manual:stall")
    await start_on(conn, stalled["job_id"], None)
    await lifecycle.detect_suspended(conn)
    await lifecycle.resume(conn, stalled["id"], "erin")
    await start_on(conn, stalled["job_id"], None)
    await lifecycle.detect_suspended(conn)  # suspended a second time: not reported again
    await lifecycle.abandon(conn, stalled["id"], "erin")

    a, s = str(asking["id"])[:6], str(stalled["id"])[:6]
    assert await events() == [
        (a, "awaiting_approval", 1),
        (a, "awaiting_approval", 2),
        (a, "finished", 3),
        (s, "failed", 1),
    ]


async def test_a_body_returning_after_a_newer_fire_cancelled_it_ends_cancelled_whatever_its_worker_knew(
    conn: Conn,
) -> None:
    """cancel_other asks the running run to abort; its sync body returns before the worker hears of it (the
    worker finishes the job `succeeded` with a result): the run is cancelled, its result discarded, and it
    is not counted as a success."""
    sid = await make_schedule(conn, "replaced", next_run_at=None, overlap="cancel_other", pause_after_failures=1)
    first = await launch(conn, sid, "manual:1")
    await set_job_status(conn, first["job_id"], "doing")
    second = await launch(conn, sid, "manual:2")
    assert (await job(conn, first["job_id"]))["abort_requested"] is True
    await conn.execute(
        "SELECT agentlab_sched.record_result(%s::uuid, %s, '\"finished anyway\"'::jsonb)",
        (first["id"], first["job_id"]),
    )
    await conn.execute("SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", (first["job_id"],))
    ended = await run_row(conn, first["id"])
    assert (ended["status"], ended["result"], ended["error"]) == (
        "cancelled",
        None,
        "cancelled: a newer fire of this schedule started (overlap cancel_other)",
    )
    assert (await run_row(conn, second["id"]))["status"] == "queued"
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0
