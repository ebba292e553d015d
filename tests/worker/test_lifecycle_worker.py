"""The run lifecycle with real workers (in-process, and a subprocess killed with SIGKILL): approvals,
timeouts of async and sync tasks, a dead worker's run suspended then resumed, cancelling, a stopping
worker, failure accounting and what a task reads from current_run(). Waits are bounded polls."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import procrastinate
import pytest

from agentlab_sched import current_run, install, messages
from agentlab_sched.demo import make_app
from agentlab_sched.runs import lifecycle
from agentlab_sched.schedules import admin
from agentlab_sched.settings import Settings
from agentlab_sched.worker.middleware import RunMiddleware
from agentlab_sched.worker.process import JOB_GRACE
from tests.support.firing_helpers import job, make_schedule
from tests.support.rows import Conn, fetched
from tests.support.runs import approvals_of, launch, run_row, schedule_row
from tests.support.workers import run_in, slow_the_first_time, wait_for, worker

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------
# Approvals
# --------------------------------------------------------------------------------------------------


async def test_demo_ask_pauses_then_returns_what_the_approver_said(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(conn, "ask", task="demo.ask", inputs={"question": "ship it?"}, next_run_at=None)
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        waiting = await wait_for(run_in(conn, run["id"], "awaiting_approval"), what="awaiting approval")
        assert (waiting["segment"], waiting["state"], waiting["error"]) == (
            1,
            {"inputs": {"question": "ship it?"}},
            None,
        )
        [pending] = await approvals_of(conn, run["id"])
        assert (pending["segment"], pending["title"], pending["status"], pending["job_id"]) == (
            1,
            "demo.ask: approve this run?",
            "pending",
            run["job_id"],
        )
        first = await wait_for(lambda: _job_in(conn, run["job_id"], "succeeded"), what="first job ended")
        assert first["status"] == "succeeded"  # asking for approval is not a failure of the job

        approved = await lifecycle.approve(conn, run["id"], "alice", "yes, ship it")
        done = await wait_for(run_in(conn, run["id"], "succeeded", "failed"), what="segment 2 finished")
    assert (done["status"], done["segment"], done["job_id"], done["error"]) == ("succeeded", 2, approved.job_id, None)
    result = done["result"]
    assert result["approved_at"]
    cur = await conn.execute("SELECT session_user AS role")
    role = fetched(await cur.fetchone())["role"]
    assert {k: v for k, v in result.items() if k != "approved_at"} == {
        "approved_by": role,
        "approved_label": "alice",
        "comment": "yes, ship it",
        "inputs": {"question": "ship it?"},
    }
    assert [(a["segment"], a["status"], a["decided_by"]) for a in await approvals_of(conn, run["id"])] == [
        (1, "approved", role)
    ]


async def _job_in(conn: Conn, job_id: int, status: str) -> dict[str, Any] | None:
    row = await job(conn, job_id)
    return row if row["status"] == status else None


# --------------------------------------------------------------------------------------------------
# Timeouts
# --------------------------------------------------------------------------------------------------


async def test_an_async_task_past_its_timeout_is_aborted_on_time(db_url: str, conn: Conn, caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="procrastinate")
    caplog.set_level(logging.INFO, logger="agentlab_sched")
    sid = await make_schedule(
        conn, "slow", task="demo.sleep", inputs={"seconds": 60}, next_run_at=None, timeout=timedelta(seconds=2)
    )
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        running = await wait_for(run_in(conn, run["id"], "running"), what="running")
        ended = await wait_for(run_in(conn, run["id"], "timed_out", "succeeded", "failed"), what="timed out")
    assert (ended["status"], ended["abort_reason"], ended["result"]) == ("timed_out", "timeout", None)
    assert ended["error"] == "timed out: still running after the schedule's timeout of 2 seconds; it was aborted"
    # The middleware aborts at the deadline (not at the next 10-second housekeeping).
    assert ended["finished_at"] - running["started_at"] < timedelta(seconds=4)
    assert (await job(conn, run["job_id"]))["status"] == "aborted"
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
    # Procrastinate says the job was aborted, without the CancelledError's traceback (install() quiets it);
    # the worker tells the run's changes as events with the run's fields.
    aborted = [r for r in caplog.records if r.name == "procrastinate.worker" and "Aborted" in r.getMessage()]
    assert aborted and all(r.exc_info is None for r in aborted)
    assert not [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], asyncio.CancelledError)]
    told = [(r.status, r.run_id) for r in caplog.records if r.name == "agentlab_sched.runs"]
    assert told == [("running", str(run["id"])), ("timed_out", str(run["id"]))]


async def test_a_sync_task_that_ignores_the_abort_is_reported_then_timed_out(db_url: str, conn: Conn) -> None:
    """In zh-CN: the deployment's locale is the one the worker's messages use."""
    release = threading.Event()

    def stubborn(**inputs: Any) -> dict[str, Any]:
        release.wait(30)  # a sync task that never checks context.should_abort()
        return {"partial": "result"}

    app = make_app(db_url)
    app.task(name="t.stubborn")(stubborn)
    install(app, RunMiddleware(Settings(locale="zh-CN"), abort_grace=0.5))
    sid = await make_schedule(conn, "stubborn", task="t.stubborn", inputs={}, next_run_at=None,
                              timeout=timedelta(seconds=2))  # fmt: skip
    async with worker(app, db_url):
        try:
            run = await launch(conn, sid)

            async def reported() -> dict[str, Any] | None:
                row = await run_row(conn, run["id"])
                return row if row["error_code"] == "run.ignoring_abort" else None

            # Reported by the middleware half a second (its grace) after the abort, not by housekeeping.
            still = await wait_for(reported, limit=6, what="reported as ignoring the abort")
            assert (still["status"], still["abort_reason"], still["finished_at"]) == ("running", "timeout", None)
            late = int((still["updated_at"] - still["abort_requested_at"]).total_seconds())
            assert still["error"] == messages.render(
                "run.ignoring_abort", "zh-CN", late=messages.seconds(late), timeout=messages.seconds(2)
            )
            assert still["error"].startswith("超过定时任务的超时上限 2 秒后已要求中断,但 ")
        finally:
            release.set()
        ended = await wait_for(run_in(conn, run["id"], "timed_out", "succeeded", "failed"), what="ended")
    assert (ended["status"], ended["error_code"], ended["result"]) == ("timed_out", "run.timed_out_late", None)
    late = int((ended["updated_at"] - ended["abort_requested_at"]).total_seconds())
    assert ended["error"] == (
        f"运行超时:超过定时任务的超时上限 2 秒仍未结束,已要求中断;但它是同步任务,不检查 "
        f"context.should_abort(),又多运行了 {messages.duration(late, 'zh-CN')}才结束,结果已丢弃"
    )
    assert (await job(conn, run["job_id"]))["status"] == "aborted"


# --------------------------------------------------------------------------------------------------
# A worker killed with SIGKILL: suspended, then resumed
# --------------------------------------------------------------------------------------------------

WORKER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from agentlab_sched.demo import make_app
    from agentlab_sched.settings import Settings
    from agentlab_sched.worker.process import run_worker

    url = sys.argv[1]
    app = make_app(url)

    @app.task(name="t.hang")
    async def hang(**inputs):
        print("started", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(run_worker(app, url, settings=Settings(locale="en", scheduler=False)))
    """
)


async def test_kill_9_suspends_the_run_then_resume_succeeds(db_url: str, conn: Conn, tmp_path: Path) -> None:
    sid = await make_schedule(conn, "agent", task="t.hang", inputs={"topic": "weekly"}, next_run_at=None)
    run = await launch(conn, sid)
    script = tmp_path / "hang_worker.py"
    script.write_text(WORKER_SCRIPT)
    log = (tmp_path / "worker.log").open("w")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTLAB_SCHED_LOCALE": "en"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), db_url, stdout=log, stderr=subprocess.STDOUT, env=env
    )
    try:
        await wait_for(run_in(conn, run["id"], "running"), limit=30, what="running in the subprocess")
        proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(proc.wait(), timeout=10) == -signal.SIGKILL
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
    assert (await run_row(conn, run["id"]))["status"] == "running"  # nobody has noticed yet

    # Housekeeping's check, with a 1-second stall window instead of Procrastinate's 30 s.
    async def detected() -> int:
        return await lifecycle.detect_suspended(conn, stalled_after=timedelta(seconds=1))

    assert await wait_for(detected, limit=15, what="detected") == 1
    held = await run_row(conn, run["id"])
    assert (held["status"], held["error"]) == ("suspended", messages.render("run.suspended", "en"))
    assert (await job(conn, run["job_id"]))["status"] == "doing"  # Procrastinate's stalled job

    # Resumed on another worker (same task name, which finishes this time): the same job, retried.
    app = make_app(db_url)

    @app.task(name="t.hang")
    async def hang(**inputs: Any) -> dict[str, Any]:
        return {"resumed": inputs}

    resumed = await lifecycle.resume(conn, run["id"], "erin")
    assert (resumed.status, resumed.job_id, resumed.error) == ("queued", run["job_id"], None)
    async with worker(app, db_url):
        done = await wait_for(run_in(conn, run["id"], "succeeded", "failed"), what="resumed run finished")
    assert (done["status"], done["result"], done["error"], done["segment"]) == (
        "succeeded",
        {"resumed": {"topic": "weekly"}},
        None,
        1,
    )
    retried = await job(conn, run["job_id"])
    assert (retried["status"], retried["attempts"]) == ("succeeded", 2)


# --------------------------------------------------------------------------------------------------
# A worker that stops mid-run; cancelling a running run
# --------------------------------------------------------------------------------------------------


async def test_a_stopping_worker_suspends_its_run_and_resume_finishes_it(db_url: str, conn: Conn) -> None:
    app = make_app(db_url)
    app.task(name="t.once_slow")(slow_the_first_time())
    sid = await make_schedule(conn, "restart", task="t.once_slow", inputs={}, next_run_at=None)
    async with worker(app, db_url):
        run = await launch(conn, sid)
        await wait_for(run_in(conn, run["id"], "running"), what="running")
    # The worker stopped (its grace ended, the job was aborted): suspended, not cancelled, resumable.
    held = await run_row(conn, run["id"])
    assert (held["status"], held["finished_at"], held["error"]) == (
        "suspended",
        None,
        messages.render("run.suspended", "en"),
    )
    assert (await job(conn, run["job_id"]))["status"] == "aborted"
    resumed = await lifecycle.resume(conn, run["id"], "erin")
    assert resumed.status == "queued" and resumed.job_id != run["job_id"]  # a new job: the old one ended
    async with worker(app, db_url):
        done = await wait_for(run_in(conn, run["id"], "succeeded", "failed"), what="finished")
    assert (done["status"], done["result"]) == ("succeeded", {"calls": 2})


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_body_that_finishes_while_its_worker_stops_keeps_its_result(db_url: str, conn: Conn, kind: str) -> None:
    """The stop (SIGTERM) arrives mid-body and the body returns: within the stop's grace (async), or
    after it, once Procrastinate has marked the job aborted for the shutdown (a sync task, which it cannot
    cancel): the run ends succeeded with its result, not cancelled or suspended."""
    began = threading.Event()

    def short_sync(**inputs: Any) -> dict[str, Any]:
        began.set()
        time.sleep(JOB_GRACE + 0.5)
        return {"done": kind}

    async def short_async(**inputs: Any) -> dict[str, Any]:
        began.set()
        await asyncio.sleep(0.6)
        return {"done": kind}

    app = make_app(db_url)
    app.task(name="t.short")(short_sync if kind == "sync" else short_async)
    sid = await make_schedule(conn, "short", task="t.short", inputs={}, next_run_at=None)
    async with worker(app, db_url):
        run = await launch(conn, sid)
        await wait_for(lambda: asyncio.sleep(0, began.is_set()), what="the body started")
    done = await run_row(conn, run["id"])
    assert (done["status"], done["result"], done["error"]) == ("succeeded", {"done": kind}, None)
    assert (await job(conn, run["job_id"]))["status"] in ("succeeded", "aborted")


async def test_cancel_aborts_a_running_run(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(conn, "long", task="demo.sleep", inputs={"seconds": 60}, next_run_at=None)
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        await wait_for(run_in(conn, run["id"], "running"), what="running")
        began = time.monotonic()
        _, outcome = await lifecycle.cancel(conn, run["id"], "dave")
        assert outcome == "abort_requested"
        ended = await wait_for(run_in(conn, run["id"], "cancelled", "succeeded", "failed"), what="cancelled")
        took = time.monotonic() - began
    assert (ended["status"], ended["error"], ended["cancelled_by"]) == ("cancelled", "cancelled by dave", "dave")
    assert took < 5
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0


# --------------------------------------------------------------------------------------------------
# Failures, and what a task reads
# --------------------------------------------------------------------------------------------------


async def test_failures_record_the_message_and_pause_after_n(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(
        conn, "flaky", task="demo.fail", inputs={"message": "the report source is unreachable"},
        next_run_at=None, overlap="allow_all", pause_after_failures=2,
    )  # fmt: skip
    async with worker(make_app(db_url), db_url):
        runs = [await launch(conn, sid, f"manual:{i}") for i in range(2)]
        ended = [await wait_for(run_in(conn, r["id"], "failed", "succeeded"), what="failed") for r in runs]
    assert [(r["status"], r["error"], r["error_code"]) for r in ended] == [
        ("failed", "the report source is unreachable", "run.task_failed")
    ] * 2
    s = await schedule_row(conn, sid)
    assert (s["consecutive_failures"], s["enabled"], s["next_run_at"]) == (2, False, None)
    since = messages.local_time(s["paused_at"].replace(second=0, microsecond=0), "Asia/Shanghai")
    shown = await admin.get(conn, "flaky")
    assert shown.paused_reason == (
        f"paused after 2 consecutive failures (since {since}, Asia/Shanghai); fix the cause, then resume it"
    )


async def test_async_and_sync_tasks_read_their_run(db_url: str, conn: Conn) -> None:
    def sync_reader(**inputs: Any) -> dict[str, Any]:
        run = current_run()
        return {"run": str(run.run_id), "schedule": run.schedule, "segment": run.segment, "key": run.session_key,
                "kind": run.kind, "inputs": run.inputs}  # fmt: skip

    async def async_reader(**inputs: Any) -> dict[str, Any]:
        return sync_reader(**inputs)

    app = make_app(db_url)
    app.task(name="t.sync_reader")(sync_reader)
    app.task(name="t.async_reader")(async_reader)
    sync_sid = await make_schedule(conn, "sync-agent", task="t.sync_reader", inputs={"a": 1}, next_run_at=None,
                                   context="persistent")  # fmt: skip
    async_sid = await make_schedule(conn, "async-agent", task="t.async_reader", inputs={"b": 2}, next_run_at=None)
    async with worker(app, db_url):
        runs = [await launch(conn, sync_sid, "manual:1"), await launch(conn, async_sid, "manual:2")]
        done = [await wait_for(run_in(conn, r["id"], "succeeded", "failed"), what="finished") for r in runs]
    key = (await schedule_row(conn, sync_sid))["session_key"]
    assert [d["result"] for d in done] == [
        {"run": str(runs[0]["id"]), "schedule": "sync-agent", "segment": 1, "key": key, "kind": "manual",
         "inputs": {"a": 1}},
        {"run": str(runs[1]["id"]), "schedule": "async-agent", "segment": 1, "key": runs[1]["session_key"],
         "kind": "manual", "inputs": {"b": 2}},
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The housekeeping task itself
# --------------------------------------------------------------------------------------------------


async def test_the_housekeeping_task_checks_and_prunes_with_the_retention_setting(
    db_url: str, conn: Conn, monkeypatch: Any, caplog: Any
) -> None:
    from types import SimpleNamespace

    from agentlab_sched.runs import housekeeping

    sid = await make_schedule(conn, "agent", next_run_at=None)
    run = await launch(conn, sid)
    await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (run["job_id"],))
    app = make_app(db_url)
    context = cast(procrastinate.JobContext, SimpleNamespace(app=app))  # housekeeping reads only .app
    monkeypatch.setenv("AGENTLAB_SCHED_RETENTION", "30d")
    monkeypatch.setattr(housekeeping, "_pruned_at", {})
    async with app.open_async():
        done = await housekeeping.housekeeping(context, 0)
        # migrate made the days ahead already (one more when the session crossed midnight UTC since).
        assert done["partitions"]["created"] in (0, 1, 2, 3, 4, 5)
        done["partitions"]["created"] = 0
        assert done == {
            "pruned_ticks": 0,
            "suspended": 1,  # a doing job with no worker at all
            "timeouts": 0,
            "tallied": 0,
            "partitions": {"created": 0, "moved": 0},
            "pruned": {"fires": 0, "runs": 0, "jobs": 0, "requests": 0, "partitions": 0},
        }
        # Partitions and pruning at most once every PRUNE_EVERY seconds per worker.
        again = await housekeeping.housekeeping(context, 0)
        assert "pruned" not in again and "partitions" not in again
        monkeypatch.setenv("AGENTLAB_SCHED_RETENTION", "a month")
        monkeypatch.setattr(housekeeping, "_pruned_at", {})
        with caplog.at_level("ERROR", logger="agentlab_sched.runs.housekeeping"):
            assert "pruned" not in await housekeeping.housekeeping(context, 0)
            await housekeeping.housekeeping(context, 0)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        'automatic pruning is off: AGENTLAB_SCHED_RETENTION: "a month" is not a duration; write it like 90s, 10m, '
        "1h30m, 2d or 0"
    ]
    assert (await run_row(conn, run["id"]))["status"] == "suspended"
    # Without the setting, the database's own retention serves.
    monkeypatch.delenv("AGENTLAB_SCHED_RETENTION")
    monkeypatch.setattr(housekeeping, "_pruned_at", {})
    await conn.execute("SELECT agentlab_sched.set_retention(interval '30 days')")
    async with app.open_async():
        done = await housekeeping.housekeeping(context, 0)
    assert done["pruned"] == {"fires": 0, "runs": 0, "jobs": 0, "requests": 0, "partitions": 0}


async def test_a_sync_run_cancelled_by_a_newer_fire_ends_cancelled_even_if_it_returns(db_url: str, conn: Conn) -> None:
    """overlap cancel_other aborts the running run; a sync task that returns anyway is not a success."""
    release = threading.Event()

    def stubborn(**inputs: Any) -> str:
        release.wait(30)
        return "finished anyway"

    app = make_app(db_url)
    app.task(name="t.stubborn")(stubborn)
    sid = await make_schedule(
        conn, "replace-me", task="t.stubborn", inputs={}, next_run_at=None, overlap="cancel_other"
    )
    async with worker(app, db_url):
        try:
            first = await launch(conn, sid, "manual:1")
            await wait_for(run_in(conn, first["id"], "running"), what="first running")
            second = await launch(conn, sid, "manual:2")
            assert (await job(conn, first["job_id"]))["abort_requested"] is True
        finally:
            release.set()
        ended = await wait_for(run_in(conn, first["id"], "cancelled", "succeeded", "failed"), what="first ended")
        done = await wait_for(run_in(conn, second["id"], "succeeded", "failed"), what="second ran")
    assert (ended["status"], ended["result"], ended["error"]) == (
        "cancelled",
        None,
        "cancelled: a newer fire of this schedule started (overlap cancel_other)",
    )
    assert (done["status"], done["result"]) == ("succeeded", "finished anyway")
