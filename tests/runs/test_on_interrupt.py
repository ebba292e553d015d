"""on_interrupt: what a run does when its worker stops under it (a stopping worker aborts its job, or
the worker dies and its job stalls): suspend (the default), retry (on another worker, a bounded number of
times, then suspended) or abandon (cancelled, and the next fire goes ahead). Jobs are moved with
Procrastinate's own operations; `runs resume|abandon --suspended [SCHEDULE]` settle many at once."""

from __future__ import annotations

import asyncio
from typing import Any

import procrastinate
import pytest
from procrastinate import jobs as pjobs

from agentlab_sched import messages
from agentlab_sched.cli.worker import DEMO_SCHEDULES
from agentlab_sched.errors import NotFound
from agentlab_sched.limits import LIMITS
from agentlab_sched.observe import events
from agentlab_sched.runs import housekeeping, lifecycle
from agentlab_sched.schedules import admin
from agentlab_sched.settings import Settings
from agentlab_sched.worker.blueprint import make_blueprint
from tests.support.cli import cli, out
from tests.support.firing_helpers import job, make_schedule
from tests.support.rows import Conn
from tests.support.runs import launch, launch_outcome, run_row
from tests.support.workers import bare_app, fetch, opened, run_in, slow_the_first_time, wait_for, worker

MOST = LIMITS["interrupt_retries"]


async def _worker_dies(conn: Conn) -> int:
    """Every worker stops heartbeating (killed); housekeeping's check: how many runs it found."""
    await conn.execute("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'")
    return await lifecycle.detect_suspended(conn)


async def _interrupted_on_a_worker(app: procrastinate.App, conn: Conn, job_id: int, check: bool = True) -> None:
    """A worker takes the job and dies with it: housekeeping's check finds its run; without ``check``, the
    dead worker is pruned (as Procrastinate does), for housekeeping to find (a stale heartbeat counts only
    on a database up for longer than the stall window)."""
    wid = await app.job_manager.register_worker()
    assert (await fetch(app, wid)).id == job_id
    if check:
        assert await _worker_dies(conn) == 1
    else:
        await conn.execute("DELETE FROM procrastinate_workers WHERE id = %s", (wid,))


async def test_the_default_suspends_and_blocks_skip_until_settled(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "default", next_run_at=None)  # overlap skip, on_interrupt suspend
    assert (await admin.get(conn, "default")).on_interrupt == "suspend"
    run = await launch(conn, sid)
    async with app.open_async():
        await _interrupted_on_a_worker(app, conn, run["job_id"])
    held = await run_row(conn, run["id"])
    assert (held["status"], held["error_code"], held["interrupts"]) == ("suspended", "run.suspended", 0)
    assert (await launch_outcome(conn, sid, "manual:test"))["reason_code"] == "overlap.suspended"


async def test_retry_runs_it_again_a_bounded_number_of_times_then_suspends(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "again", next_run_at=None, on_interrupt="retry", overlap="buffer_one")
    run = await launch(conn, sid)
    async with app.open_async():
        for attempt in range(1, MOST + 1):
            await _interrupted_on_a_worker(app, conn, run["job_id"])
            again = await run_row(conn, run["id"])
            assert (again["status"], again["job_id"], again["interrupts"]) == ("queued", run["job_id"], attempt)
            assert again["error"] == messages.render("run.interrupted_retried", "en", attempt=attempt, most=MOST)
            assert (await job(conn, run["job_id"]))["status"] == "todo"  # the same job: its place kept
        await _interrupted_on_a_worker(app, conn, run["job_id"])
    held = await run_row(conn, run["id"])
    assert (held["status"], held["error_code"]) == ("suspended", "run.suspended_after_retries")
    assert held["error"] == messages.render("run.suspended_after_retries", "en", count=MOST)
    assert held["error"].startswith(f"suspended: its worker stopped under it {MOST} times")
    # Resumed by a person: the count starts again.
    resumed = await lifecycle.resume(conn, run["id"], "erin")
    assert resumed.status == "queued"
    assert (await run_row(conn, run["id"]))["interrupts"] == 0


async def test_retry_after_a_stopping_worker_aborted_the_job_defers_a_new_one(db_url: str, conn: Conn) -> None:
    """The shutdown abort ended the job (nobody asked for it): the run goes on in a new job."""
    app = bare_app(db_url, middleware=False)
    sid = await make_schedule(conn, "again", next_run_at=None, on_interrupt="retry")
    run = await launch(conn, sid)
    async with opened(app) as wid:
        running = await fetch(app, wid)
        await app.job_manager.finish_job(running, pjobs.Status.ABORTED, delete_job=False)
        again = await run_row(conn, run["id"])
        assert (again["status"], again["interrupts"]) == ("queued", 1)
        assert again["job_id"] != run["job_id"]
        assert (await job(conn, run["job_id"]))["status"] == "aborted"
        assert (await fetch(app, wid)).id == again["job_id"]


async def test_abandon_cancels_it_and_the_next_fire_goes_ahead(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "give-up", next_run_at=None, on_interrupt="abandon", overlap="buffer_one")
    run = await launch(conn, sid)
    async with app.open_async():
        await _interrupted_on_a_worker(app, conn, run["job_id"])
        gone = await run_row(conn, run["id"])
        assert (gone["status"], gone["error"]) == ("cancelled", messages.render("run.interrupted_abandoned", "en"))
        assert (await job(conn, run["job_id"]))["status"] == "aborted"  # its lock released
        nxt = await launch(conn, sid)
        other = await app.job_manager.register_worker()
        assert (await fetch(app, other)).id == nxt["job_id"]
    assert (await admin.get(conn, "give-up")).consecutive_failures == 0


async def test_a_stopping_worker_with_retry_leaves_the_run_for_the_next_worker(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    app.task(name="t.once_slow")(slow_the_first_time())
    sid = await make_schedule(conn, "deploy", task="t.once_slow", inputs={}, next_run_at=None, on_interrupt="retry")
    async with worker(app, db_url):
        run = await launch(conn, sid)
        await wait_for(run_in(conn, run["id"], "running"), what="running")
    assert (await run_row(conn, run["id"]))["status"] == "queued"  # not suspended: it goes on by itself
    async with worker(app, db_url):
        done = await wait_for(run_in(conn, run["id"], "succeeded", "failed"), what="finished")
    assert (done["status"], done["result"], done["interrupts"]) == ("succeeded", {"calls": 2}, 1)


async def test_python_resumes_or_abandons_every_suspended_run(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    one = await make_schedule(conn, "one", next_run_at=None, overlap="allow_all")
    two = await make_schedule(conn, "two", next_run_at=None, overlap="allow_all")
    runs = [await launch(conn, sid) for sid in (one, one, two)]
    async with app.open_async():
        wid = await app.job_manager.register_worker()
        for _ in runs:
            await fetch(app, wid)
        assert await _worker_dies(conn) == 3
    assert await lifecycle.resume_suspended(conn, "one", "erin") == 2
    assert [(await run_row(conn, r["id"]))["status"] for r in runs] == ["queued", "queued", "suspended"]
    assert await lifecycle.abandon_suspended(conn, None, "erin") == 1
    assert (await run_row(conn, runs[2]["id"]))["status"] == "cancelled"
    assert await lifecycle.resume_suspended(conn) == 0
    with pytest.raises(NotFound):
        await lifecycle.resume_suspended(conn, "three")


def test_the_cli_settles_every_suspended_run_of_a_schedule(db_url: str) -> None:
    async def suspend_two(conn: Conn) -> None:
        app = bare_app(db_url)
        sid = await make_schedule(conn, "nightly", next_run_at=None, overlap="allow_all")
        for _ in range(2):
            await launch(conn, sid)
        async with app.open_async():
            wid = await app.job_manager.register_worker()
            for _ in range(2):
                await fetch(app, wid)
            assert await _worker_dies(conn) == 2

    from tests.support.cli import setup

    setup(db_url, suspend_two)
    assert out(db_url, "runs", "resume", "--suspended", "nightly") == (
        'queued again 2 suspended runs of schedule "nightly"; they start as soon as a worker picks them up\n'
    )
    assert out(db_url, "--locale", "zh-CN", "runs", "abandon", "--suspended") == (
        "已放弃所有定时任务的 0 个已挂起的运行,运行已取消\n"
    )
    missing = cli(db_url, "runs", "resume")
    assert missing.exit_code == 2 and "--suspended" in missing.stderr
    assert cli(db_url, "runs", "resume", "--suspended", "nope").exit_code == 2


def test_the_demo_schedules_retry_interrupted_runs() -> None:
    assert {spec["on_interrupt"] for spec in DEMO_SCHEDULES} == {"retry"}


async def test_retry_is_carried_out_by_either_housekeeping(db_url: str, conn: Conn) -> None:
    """on_interrupt=retry after a worker died: run again by `agentlab-sched worker`'s own housekeeping
    (Housekeeper, in its process) and by the blueprint's periodic task that a plain `procrastinate worker`
    host runs, after that worker was restarted (Procrastinate prunes the dead worker on start)."""
    sid = await make_schedule(conn, "again", next_run_at=None, on_interrupt="retry")
    run = await launch(conn, sid)
    app = bare_app(db_url)
    async with app.open_async():
        await _interrupted_on_a_worker(app, conn, run["job_id"], check=False)
        keeper = housekeeping.Housekeeper(app, Settings(locale="en"))
        keeper.start()  # its first round at once
        try:
            again = await wait_for(run_in(conn, run["id"], "queued"), what="retried by the Housekeeper")
        finally:
            await keeper.stop()
    assert (again["job_id"], again["interrupts"]) == (run["job_id"], 1)
    assert (await job(conn, run["job_id"]))["status"] == "todo"

    plain = bare_app(db_url)
    plain.add_tasks_from(make_blueprint("keeping"), namespace="agentlab_sched")
    async with plain.open_async():
        await _interrupted_on_a_worker(plain, conn, run["job_id"], check=False)
        await plain.configure_task("agentlab_sched:housekeeping").defer_async(timestamp=0)
        # A plain worker (re)started on the scheduler's queue: it runs the housekeeping job, then stops.
        await asyncio.wait_for(
            plain.run_worker_async(queues=["keeping"], wait=False, install_signal_handlers=False), 30
        )
    again = await run_row(conn, run["id"])
    assert (again["status"], again["job_id"], again["interrupts"]) == ("queued", run["job_id"], 2)
    assert again["error"] == messages.render("run.interrupted_retried", "en", attempt=2, most=MOST)


@pytest.mark.parametrize(
    ("policy", "status"), [("retry", "queued"), ("suspend", "suspended"), ("abandon", "cancelled")]
)
async def test_a_stopping_worker_says_what_becomes_of_the_run(
    db_url: str, conn: Conn, policy: str, status: str
) -> None:
    """The line a stopping worker prints for a run in progress gives the status the run is given (back in
    the queue under retry, not "suspended"), and what follows; the run is then so."""
    app = bare_app(db_url)
    app.task(name="t.once_slow")(slow_the_first_time())
    sid = await make_schedule(conn, "deploy", task="t.once_slow", inputs={}, next_run_at=None, on_interrupt=policy)
    told: list[dict[str, Any]] = []

    def listen(event: str, data: Any) -> None:
        if event == "run":
            told.append(dict(data))

    events.subscribe(listen)
    try:
        async with worker(app, db_url):
            run = await launch(conn, sid)
            await wait_for(run_in(conn, run["id"], "running"), what="running")
    finally:
        events.unsubscribe(listen)
    assert [(t["status"], t["error"]) for t in told if t["run_id"] == str(run["id"])][-1] == (
        status, messages.render(f"run.worker_stopped.{status}", "en"))  # fmt: skip
    assert (await run_row(conn, run["id"]))["status"] == status
