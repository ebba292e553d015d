"""Runs follow their Procrastinate jobs in every path an operator of Procrastinate takes: retries of a
buffer_one run, `--delete-jobs`, jobs cancelled with deletion or deleted by hand, cancel_other over a
suspended run, cancelling a task declared with retries, failures counted once per run, a worker that
does not know the task, a run lookup that fails for a moment, a role that only has rights on
Procrastinate's tables, and a trigger that never blocks Procrastinate's own migrations.

Jobs are moved with Procrastinate's own operations: its job manager (what its worker and CLI call),
its shell's `retry` and `cancel`, and real workers (`app.run_worker_async(wait=False)`: run what is
there, then stop)."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any

import procrastinate
import psycopg
import pytest
from procrastinate import jobs as pjobs

from agentlab_sched import messages
from agentlab_sched.runs import lifecycle
from agentlab_sched.runs.context import current_run
from tests.support.firing_helpers import job, make_schedule
from tests.support.rows import Conn, fetched
from tests.support.runs import in_locale, launch, run_row, schedule_row
from tests.support.workers import QUIET, bare_app, fetch, opened, run_in, wait_for, worker


async def drain(app: procrastinate.App, **options: Any) -> None:
    """A real Procrastinate worker that runs every job it can, then stops."""
    async with app.open_async():
        await asyncio.wait_for(app.run_worker_async(wait=False, install_signal_handlers=False, **options), 30)


async def fires_of(conn: Conn, sid: int) -> list[tuple[str, str | None]]:
    cur = await conn.execute(
        "SELECT status, reason_code FROM agentlab_sched.fires WHERE schedule_id = %s ORDER BY id", (sid,)
    )
    return [(r["status"], r["reason_code"]) for r in await cur.fetchall()]


# --------------------------------------------------------------------------------------------------
# buffer_one and retries
# --------------------------------------------------------------------------------------------------


async def test_buffer_one_retry_keeps_its_place_ahead_of_the_waiting_run(db_url: str, conn: Conn) -> None:
    """The running job fails and Procrastinate retries it while another run waits: no collision, the
    retried run runs first, one run still waits at most, and the schedule goes on."""
    app = bare_app(db_url)
    sid = await make_schedule(conn, "one", next_run_at=None, overlap="buffer_one")
    first = await launch(conn, sid)
    async with opened(app) as wid:
        running = await fetch(app, wid)
        second = await launch(conn, sid)
        third = await launch_outcome_status(conn, sid)
        assert third == "skipped_overlap"  # one waits already
        await app.job_manager.retry_job(running)  # what the worker does for a task with retry=
        again = await run_row(conn, first["id"])
        assert (again["status"], (await job(conn, first["job_id"]))["status"]) == ("queued", "todo")
        # Still one waiting run (the retried one was started before), and the retried one goes first.
        assert await launch_outcome_status(conn, sid) == "skipped_overlap"
        assert (await fetch(app, wid)).id == first["job_id"]
        assert await app.job_manager.fetch_job(queues=None, worker_id=wid) is None  # one at a time (lock)
        await app.job_manager.finish_job(running, pjobs.Status.SUCCEEDED, delete_job=False)
        assert (await fetch(app, wid)).id == second["job_id"]
        # The waiting one started: the next fire may wait behind it.
        assert await launch_outcome_status(conn, sid) == "started"
    assert (await run_row(conn, first["id"]))["status"] == "succeeded"
    assert (await run_row(conn, second["id"]))["status"] == "running"
    assert [s for s, _ in await fires_of(conn, sid)] == [
        "started", "started", "skipped_overlap", "skipped_overlap", "started"
    ]  # fmt: skip


async def launch_outcome_status(conn: Conn, sid: int) -> str:
    from tests.support.runs import launch_outcome

    return (await launch_outcome(conn, sid, "manual:test"))["status"]


async def test_a_real_worker_retries_a_buffer_one_run_without_wedging(db_url: str, conn: Conn) -> None:
    attempts: list[int] = []
    gate = asyncio.Event()

    async def flaky(**inputs: Any) -> dict[str, Any]:
        attempts.append(current_run().segment)
        if len(attempts) == 1:
            await gate.wait()
            raise RuntimeError("the source timed out")
        return {"attempt": len(attempts)}

    app = bare_app(db_url)
    app.task(name="t.flaky", retry=2)(flaky)
    app.task(name="t.echo")(lambda **inputs: inputs)
    sid = await make_schedule(conn, "flaky", task="t.flaky", inputs={}, next_run_at=None, overlap="buffer_one")
    async with worker(app, db_url):
        first = await launch(conn, sid)
        await wait_for(run_in(conn, first["id"], "running"), what="first running")
        second = await launch(conn, sid)
        gate.set()
        done = [await wait_for(run_in(conn, r["id"], "succeeded", "failed"), what="ended") for r in (first, second)]
        third = await launch(conn, sid)
        await wait_for(run_in(conn, third["id"], "succeeded", "failed"), what="third ended")
    assert [(d["status"], d["result"]) for d in done] == [("succeeded", {"attempt": 2}), ("succeeded", {"attempt": 3})]
    assert done[0]["finished_at"] <= done[1]["started_at"]  # the retried run kept its place
    assert (await job(conn, first["job_id"]))["attempts"] == 2
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0


async def test_resuming_a_suspended_buffer_one_run_with_one_waiting(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "one", next_run_at=None, overlap="buffer_one")
    first = await launch(conn, sid)
    async with opened(app) as wid:
        await fetch(app, wid)
        second = await launch(conn, sid)
        # Its worker dies: no heartbeat for longer than the stall window.
        await conn.execute("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'")
        assert await lifecycle.detect_suspended(conn) == 1
        resumed = await lifecycle.resume(conn, first["id"], "erin")
        assert (resumed.status, resumed.job_id) == ("queued", first["job_id"])
        other = await app.job_manager.register_worker()
        assert (await fetch(app, other)).id == first["job_id"]  # ahead of the waiting one
    assert (await run_row(conn, second["id"]))["status"] == "queued"


# --------------------------------------------------------------------------------------------------
# Deleted jobs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delete_jobs", ["successful", "always"])
async def test_a_worker_that_deletes_jobs_settles_their_runs(db_url: str, conn: Conn, delete_jobs: str) -> None:
    async def fails(**inputs: Any) -> None:
        raise RuntimeError("the report source is unreachable")

    app = bare_app(db_url)
    app.task(name="t.echo")(lambda **inputs: inputs)
    app.task(name="t.none")(lambda **inputs: None)
    app.task(name="t.fails")(fails)
    ids = {}
    for task in ("t.echo", "t.none", "t.fails"):
        ids[task] = await make_schedule(conn, task, task=task, inputs={"n": 1}, next_run_at=None)
    runs = {task: await launch(conn, sid) for task, sid in ids.items()}
    await drain(app, delete_jobs=delete_jobs)
    ended = {task: await run_row(conn, r["id"]) for task, r in runs.items()}
    assert (ended["t.echo"]["status"], ended["t.echo"]["result"], ended["t.echo"]["error"]) == (
        "succeeded", {"n": 1}, None
    )  # fmt: skip
    assert (ended["t.none"]["status"], ended["t.none"]["result"]) == ("succeeded", None)
    assert (ended["t.fails"]["status"], ended["t.fails"]["error"]) == ("failed", "the report source is unreachable")
    cur = await conn.execute("SELECT id FROM procrastinate_jobs")
    left = {r["id"] for r in await cur.fetchall()}
    assert left == (set() if delete_jobs == "always" else {runs["t.fails"]["job_id"]})
    # Housekeeping finds nothing to suspend, failures count once, and a skip schedule fires again.
    assert await lifecycle.detect_suspended(conn, stalled_after=timedelta(0)) == 0
    assert [(await schedule_row(conn, sid))["consecutive_failures"] for sid in ids.values()] == [0, 0, 1]
    assert (await launch(conn, ids["t.echo"]))["status"] == "queued"


async def test_a_waiting_job_cancelled_with_deletion_or_deleted_cancels_its_run(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "skip-me", next_run_at=None)  # overlap skip
    first = await launch(conn, sid)
    async with app.open_async():
        assert await app.job_manager.cancel_job_by_id_async(first["job_id"], delete_job=True)
    gone = await run_row(conn, first["id"])
    assert (gone["status"], gone["error_code"], gone["job_id"]) == ("cancelled", "run.job_removed", None)
    assert gone["error"] == messages.render("run.job_removed", "en")
    assert gone["error"].startswith("cancelled: its Procrastinate job was removed (deleted) while it waited")
    second = await launch(conn, sid)  # nothing blocks the schedule
    await in_locale(conn, "zh-CN")
    await conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (second["job_id"],))
    gone = await run_row(conn, second["id"])
    assert (gone["status"], gone["error"]) == ("cancelled", messages.render("run.job_removed", "zh-CN"))
    assert gone["error"].startswith("已取消:它的 Procrastinate 作业在等待开始时被删除")
    assert (await launch(conn, sid))["status"] == "queued"
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0


async def test_a_running_job_deleted_by_hand_cancels_its_run_saying_so(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "hand", next_run_at=None)
    run = await launch(conn, sid)
    async with opened(app) as wid:
        await fetch(app, wid)
        await conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (run["job_id"],))
    gone = await run_row(conn, run["id"])
    assert (gone["status"], gone["error"]) == ("cancelled", messages.render("run.job_removed_running", "en"))
    assert (await launch(conn, sid))["status"] == "queued"


# --------------------------------------------------------------------------------------------------
# cancel_other over a suspended run; cancelling a task declared with retries
# --------------------------------------------------------------------------------------------------


async def test_cancel_other_settles_the_dead_job_of_a_suspended_run(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url)
    sid = await make_schedule(conn, "newest-wins", next_run_at=None, overlap="cancel_other")
    first = await launch(conn, sid)
    async with opened(app) as wid:
        await fetch(app, wid)
        await conn.execute("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'")
        assert await lifecycle.detect_suspended(conn) == 1
        second = await launch(conn, sid)
        old = await run_row(conn, first["id"])
        assert (old["status"], old["error"]) == ("cancelled", messages.render("overlap.cancelled_by_newer", "en"))
        assert (await job(conn, first["job_id"]))["status"] == "aborted"  # lock released
        other = await app.job_manager.register_worker()
        assert (await fetch(app, other)).id == second["job_id"]
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0


async def test_cancelling_a_run_of_a_task_with_retries_ends_cancelled(db_url: str, conn: Conn) -> None:
    async def slow(**inputs: Any) -> None:
        await asyncio.sleep(60)

    app = bare_app(db_url)
    app.task(name="t.slow", retry=3)(slow)
    sid = await make_schedule(conn, "slow", task="t.slow", inputs={}, next_run_at=None, pause_after_failures=1)
    async with worker(app, db_url):
        run = await launch(conn, sid)
        await wait_for(run_in(conn, run["id"], "running"), what="running")
        await lifecycle.cancel(conn, run["id"], "dave")
        ended = await wait_for(run_in(conn, run["id"], "cancelled", "failed", "queued"), what="ended")
        await asyncio.sleep(0.3)  # a retry would show now
    ended = await run_row(conn, run["id"])
    assert (ended["status"], ended["error"]) == ("cancelled", "cancelled by dave")
    assert ((await job(conn, run["job_id"]))["status"], (await job(conn, run["job_id"]))["attempts"]) == ("aborted", 1)
    s = await schedule_row(conn, sid)
    assert (s["consecutive_failures"], s["enabled"]) == (0, True)


async def test_a_failed_job_of_a_cancelled_run_never_counts(db_url: str, conn: Conn) -> None:
    """A worker without the middleware: Procrastinate retries the abort, which fails the job."""
    app = bare_app(db_url, middleware=False)
    sid = await make_schedule(conn, "c", next_run_at=None, pause_after_failures=1)
    run = await launch(conn, sid)
    async with opened(app) as wid:
        running = await fetch(app, wid)
        await lifecycle.cancel(conn, run["id"], "dave")
        await app.job_manager.retry_job(running)  # abort requested: procrastinate_retry_job_v2 fails it
    assert (await job(conn, run["job_id"]))["status"] == "failed"
    assert (await run_row(conn, run["id"]))["status"] == "cancelled"
    s = await schedule_row(conn, sid)
    assert (s["consecutive_failures"], s["enabled"]) == (0, True)


# --------------------------------------------------------------------------------------------------
# Retries count once
# --------------------------------------------------------------------------------------------------


async def test_a_run_retried_counts_once_and_a_success_on_retry_resets(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url, middleware=False)
    sid = await make_schedule(conn, "flaky", next_run_at=None, overlap="allow_all")

    async def fail_once(job_id: int, wid: int) -> pjobs.Job:
        running = await fetch(app, wid)
        assert running.id == job_id
        await app.job_manager.finish_job(running, pjobs.Status.FAILED, delete_job=False)
        return running

    async def retry_now(job_id: int) -> None:
        """Retried by hand, as the procrastinate shell's retry does: retry_at NULL, at once."""
        # Procrastinate's SQL takes NULL; its signature says datetime.
        await app.job_manager.retry_job_by_id_async(job_id, retry_at=None)  # type: ignore[arg-type]

    async with opened(app) as wid:
        a = await launch(conn, sid)
        await fail_once(a["job_id"], wid)
        assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
        for _ in range(2):  # retried by hand (the procrastinate shell's retry) and failing again
            await retry_now(a["job_id"])
            assert (await run_row(conn, a["id"]))["status"] == "queued"
            await fail_once(a["job_id"], wid)
        assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
        b = await launch(conn, sid)
        await fail_once(b["job_id"], wid)
        assert (await schedule_row(conn, sid))["consecutive_failures"] == 2
        # a succeeds on its retry: the count is reset; failing again afterwards counts again.
        await retry_now(a["job_id"])
        running = await fetch(app, wid)
        await app.job_manager.finish_job(running, pjobs.Status.SUCCEEDED, delete_job=False)
        assert (await schedule_row(conn, sid))["consecutive_failures"] == 0
        await retry_now(b["job_id"])
        await fail_once(b["job_id"], wid)
        assert (await schedule_row(conn, sid))["consecutive_failures"] == 1


async def test_automatic_retries_count_once_with_a_real_worker(db_url: str, conn: Conn) -> None:
    async def always_fails(**inputs: Any) -> None:
        raise RuntimeError(f"attempt {current_run().run_id} failed")

    app = bare_app(db_url)
    app.task(name="t.fails", retry=2)(always_fails)
    sid = await make_schedule(conn, "fails", task="t.fails", inputs={}, next_run_at=None, overlap="allow_all")
    runs = [await launch(conn, sid) for _ in range(2)]
    for _ in range(3):  # each attempt; the retries are due at once
        await drain(app)
    assert [(await run_row(conn, r["id"]))["status"] for r in runs] == ["failed", "failed"]
    assert [(await job(conn, r["job_id"]))["attempts"] for r in runs] == [3, 3]
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 2


async def test_the_procrastinate_shell_retry_and_cancel(db_url: str, conn: Conn) -> None:
    """The commands an operator types: `procrastinate --app ... shell`, then `retry N` / `cancel N`."""
    sid = await make_schedule(conn, "shell", next_run_at=None, overlap="allow_all")
    failed = await launch(conn, sid)
    waiting = await launch(conn, sid)
    app = bare_app(db_url, middleware=False)
    async with opened(app) as wid:
        await app.job_manager.finish_job(await fetch(app, wid), pjobs.Status.FAILED, delete_job=False)
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
    commands = f"retry {failed['job_id']}\ncancel {waiting['job_id']}\n"
    env = {"AGENTLAB_SCHED_DATABASE_URL": db_url, "PATH": "", "AGENTLAB_SCHED_LOCALE": "en"}
    shell = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "procrastinate", "--app", "agentlab_sched.demo.app", "shell",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    _, err = await asyncio.wait_for(shell.communicate(commands.encode()), timeout=60)
    assert shell.returncode == 0, err.decode()
    assert (await run_row(conn, failed["id"]))["status"] == "queued"
    cancelled = await run_row(conn, waiting["id"])
    assert (cancelled["status"], cancelled["error"]) == ("cancelled", messages.render("run.job_cancelled", "en"))
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1


# --------------------------------------------------------------------------------------------------
# A worker without the task; a run lookup that fails for a moment
# --------------------------------------------------------------------------------------------------


async def test_a_job_whose_task_the_worker_does_not_know(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(conn, "elsewhere", task="reports.weekly", inputs={}, next_run_at=None)
    run = await launch(conn, sid)
    await drain(bare_app(db_url))
    ended = await run_row(conn, run["id"])
    assert (ended["status"], ended["error_code"]) == ("failed", "run.task_unknown")
    assert ended["error"] == (
        "the worker that took this job does not know the task reports.weekly (it is not in that worker's app); "
        "run it on workers whose app includes the task"
    )
    # Without the run middleware, the run still says what may have happened.
    other = await launch(conn, sid)
    await drain(bare_app(db_url, middleware=False))
    ended = await run_row(conn, other["id"])
    assert (ended["status"], ended["error_code"]) == ("failed", "run.failed_without_error")
    assert ended["error"] == messages.render("run.failed_without_error", "en", task="reports.weekly")


async def test_a_run_lookup_that_fails_for_a_moment_is_retried(db_url: str, conn: Conn) -> None:
    """The lookup of the run fails (a lock timeout here, a cut connection in production): the body waits
    for its context rather than run without it."""

    async def reader(**inputs: Any) -> str:
        return str(current_run().run_id)

    app = bare_app(db_url, kwargs={"options": "-c lock_timeout=200"})
    app.task(name="t.reader")(reader)
    sid = await make_schedule(conn, "reader", task="t.reader", inputs={}, next_run_at=None)
    run = await launch(conn, sid)
    async with await psycopg.AsyncConnection.connect(db_url) as locker:
        async with locker.transaction():
            await locker.execute("LOCK TABLE agentlab_sched.fires IN ACCESS EXCLUSIVE MODE")
            draining = asyncio.create_task(drain(app))
            await wait_for(run_in(conn, run["id"], "running"), what="fetched")
            await asyncio.sleep(1.0)  # several failed lookups
        await draining
    ended = await run_row(conn, run["id"])
    assert (ended["status"], ended["result"]) == ("succeeded", str(run["id"]))


async def test_a_stopping_worker_hands_back_a_job_whose_run_it_could_not_look_up(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url, kwargs={"options": "-c lock_timeout=200"})
    app.task(name="t.echo")(lambda **inputs: inputs)
    sid = await make_schedule(conn, "echo", task="t.echo", inputs={}, next_run_at=None)
    run = await launch(conn, sid)
    async with await psycopg.AsyncConnection.connect(db_url) as locker:
        async with locker.transaction():
            await locker.execute("LOCK TABLE agentlab_sched.fires IN ACCESS EXCLUSIVE MODE")
            async with worker(app, db_url, QUIET):
                await wait_for(run_in(conn, run["id"], "running"), what="fetched")
                await asyncio.sleep(0.5)
    back = await run_row(conn, run["id"])
    assert (back["status"], (await job(conn, run["job_id"]))["status"]) == ("queued", "todo")
    await drain(app)
    assert (await run_row(conn, run["id"]))["status"] == "succeeded"


# --------------------------------------------------------------------------------------------------
# Finishing a job never waits on the schedules table
# --------------------------------------------------------------------------------------------------


async def test_finishing_a_job_never_waits_on_a_locked_schedules_table(db_url: str, conn: Conn) -> None:
    """A migration's LOCK TABLE (or DDL) on agentlab_sched.schedules: jobs are still fetched and finished
    at once; their runs' ends are counted by housekeeping once the lock is gone."""
    app = bare_app(db_url, kwargs={"options": "-c statement_timeout=3000"})  # a wait would fail the test
    sid = await make_schedule(conn, "locked", next_run_at=None, overlap="allow_all", pause_after_failures=3)
    runs = [await launch(conn, sid) for _ in range(3)]
    async with opened(app) as wid, await psycopg.AsyncConnection.connect(db_url) as locker:
        async with locker.transaction():
            await locker.execute("LOCK TABLE agentlab_sched.schedules IN ACCESS EXCLUSIVE MODE")
            began = asyncio.get_running_loop().time()
            for status in (pjobs.Status.FAILED, pjobs.Status.SUCCEEDED, pjobs.Status.FAILED):
                await app.job_manager.finish_job(await fetch(app, wid), status, delete_job=False)
            took = asyncio.get_running_loop().time() - began
    assert took < 2.0
    cur = await conn.execute(
        "SELECT status, tally_pending FROM agentlab_sched.runs WHERE schedule_id = %s ORDER BY created_at", (sid,)
    )
    assert [(r["status"], r["tally_pending"]) for r in await cur.fetchall()] == [
        ("failed", "failure"), ("succeeded", "success"), ("failed", "failure")
    ]  # fmt: skip
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 0  # not counted yet
    cur = await conn.execute("SELECT agentlab_sched.housekeeping() AS done")
    assert fetched(await cur.fetchone())["done"]["tallied"] == 3
    # In order: failed, succeeded (reset), failed.
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 1
    assert [(await run_row(conn, r["id"]))["tally_pending"] for r in runs] == [None, None, None]


async def test_a_schedule_row_held_by_another_session_defers_the_count(db_url: str, conn: Conn) -> None:
    app = bare_app(db_url, middleware=False)
    sid = await make_schedule(conn, "held", next_run_at=None, overlap="allow_all")
    first, second = await launch(conn, sid), await launch(conn, sid)
    async with opened(app) as wid, await psycopg.AsyncConnection.connect(db_url) as holder:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM agentlab_sched.schedules WHERE id = %s FOR UPDATE", (sid,))
            await app.job_manager.finish_job(await fetch(app, wid), pjobs.Status.FAILED, delete_job=False)
        # Free again, but an earlier count is pending: this one waits its turn too.
        await app.job_manager.finish_job(await fetch(app, wid), pjobs.Status.FAILED, delete_job=False)
    assert [(await run_row(conn, r["id"]))["tally_pending"] for r in (first, second)] == ["failure", "failure"]
    await conn.execute("SELECT agentlab_sched.housekeeping()")
    assert (await schedule_row(conn, sid))["consecutive_failures"] == 2


# --------------------------------------------------------------------------------------------------
# The reason of a backlog names what really happened
# --------------------------------------------------------------------------------------------------


async def test_a_backlog_behind_a_held_schedule_says_so(db_url: str, conn: Conn) -> None:
    """Another session holds one schedule's row while ticks fire the others: its backlog row says that
    it was held, not that no worker was firing (and a plain outage still says the latter)."""
    from agentlab_sched.firing.tick import fire_due
    from tests.support.firing_helpers import EN, fires

    start = fetched(await (await conn.execute("SELECT date_trunc('second', now()) AS t")).fetchone())["t"]
    held = await make_schedule(conn, "held", cron="* * * * * *", timezone="UTC", next_run_at=start)
    free = await make_schedule(conn, "free", cron="* * * * * *", timezone="UTC", next_run_at=start, overlap="allow_all")
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM agentlab_sched.schedules WHERE id = %s FOR UPDATE", (held,))
            for _ in range(5):  # ticks go on for the others
                await fire_due(conn, settings=EN)
                await asyncio.sleep(1)
    await fire_due(conn, settings=EN)
    [backlog] = [f for f in await fires(conn, held) if f["status"] == "skipped_misfire"]
    assert backlog["reason_code"] == "misfire.backlog_locked"
    assert "while another session held this schedule" in messages.render(
        backlog["reason_code"], "en", **backlog["reason_params"]
    )
    assert [f["status"] for f in await fires(conn, free)].count("started") >= 5
    # Nothing fired meanwhile (no worker at all): the reason stays the outage's.
    await conn.execute("UPDATE agentlab_sched.schedules SET next_run_at = now() - interval '5 seconds'")
    await conn.execute("DELETE FROM agentlab_sched.fires WHERE created_at > now() - interval '1 hour'")
    await fire_due(conn, settings=EN)
    codes = {f["reason_code"] for f in await fires(conn, held) if f["status"] == "skipped_misfire"}
    assert codes == {"misfire.backlog"}
