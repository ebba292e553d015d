"""A run's link to its Procrastinate job is kept by the job triggers, with no foreign key: a job deleted by
hand or by a worker's `--delete-jobs` settles its run as the key's ON DELETE SET NULL and the trigger did
together (the run ends as before, and names no job)."""

from __future__ import annotations

import asyncio
from typing import Any

import procrastinate
from procrastinate import jobs as pjobs

from tests.support.firing_helpers import make_schedule
from tests.support.rows import Conn
from tests.support.runs import launch, run_row
from tests.support.workers import bare_app, fetch, opened

TASKS = ("t.echo", "t.fails")
#: What the deletion may change on a run; every other column stays as it was.
SETTLED = ("status", "job_id", "finished_at", "error", "error_code", "error_term", "updated_at", "outcome")


def unchanged(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The columns of ``after`` that differ from ``before``, outside those a settled run changes."""
    return {k: v for k, v in after.items() if k not in SETTLED and v != before[k]}


async def test_runs_have_no_foreign_key_to_procrastinate_jobs(conn: Conn) -> None:
    cur = await conn.execute(
        """SELECT conrelid::regclass::text AS tbl, conname FROM pg_constraint
           WHERE contype = 'f' AND confrelid = 'public.procrastinate_jobs'::regclass
             AND conrelid IN (SELECT 'agentlab_sched.runs'::regclass
                              UNION ALL SELECT inhrelid FROM pg_inherits
                              WHERE inhparent = 'agentlab_sched.runs'::regclass)"""
    )
    assert await cur.fetchall() == []


async def test_a_delete_by_hand_settles_waiting_running_and_finished_jobs_runs(db_url: str, conn: Conn) -> None:
    """One DELETE of four jobs: waiting, running, succeeded, failed. The waiting and running runs are
    cancelled saying so; the finished ones keep everything but the link."""
    app = bare_app(db_url)
    sids = [await make_schedule(conn, name, next_run_at=None, overlap="allow_all") for name in "wrsf"]
    succeeded, failed = await launch(conn, sids[2]), await launch(conn, sids[3])
    async with opened(app) as wid:
        for status in (pjobs.Status.SUCCEEDED, pjobs.Status.FAILED):
            await app.job_manager.finish_job(await fetch(app, wid), status, delete_job=False)
        running = await launch(conn, sids[1])
        assert (await fetch(app, wid)).id == running["job_id"]
        waiting = await launch(conn, sids[0])
        runs = [waiting, running, succeeded, failed]
        before = [await run_row(conn, r["id"]) for r in runs]
        assert [b["status"] for b in before] == ["queued", "running", "succeeded", "failed"]
        await conn.execute("DELETE FROM procrastinate_jobs WHERE id = ANY (%s)", ([r["job_id"] for r in runs],))
    after = [await run_row(conn, r["id"]) for r in runs]
    assert [unchanged(b, a) for b, a in zip(before, after, strict=True)] == [{}, {}, {}, {}]
    assert [(a["status"], a["error_code"], a["job_id"]) for a in after] == [
        ("cancelled", "run.job_removed", None),
        ("cancelled", "run.job_removed_running", None),
        ("succeeded", None, None),
        ("failed", "run.task_unknown", None),  # the job manager failed it: no body ran
    ]
    assert [a["finished_at"] is not None for a in after] == [True, True, True, True]
    # A finished run's deletion is no change of the run: only its link goes.
    assert [(a["finished_at"], a["updated_at"], a["error"]) for a in after[2:]] == [
        (b["finished_at"], b["updated_at"], b["error"]) for b in before[2:]
    ]
    assert [(await launch(conn, sid))["status"] for sid in sids[:2]] == ["queued", "queued"]


async def test_delete_jobs_always_ends_runs_as_their_bodies_did_and_unlinks_them(db_url: str, conn: Conn) -> None:
    """`procrastinate worker --delete-jobs always`: no job is left, each run ends as its body did."""

    async def fails(**inputs: Any) -> None:
        raise RuntimeError("the source is gone")

    app = bare_app(db_url)
    app.task(name="t.echo")(lambda **inputs: inputs)
    app.task(name="t.fails")(fails)
    sids = {task: await make_schedule(conn, task, task=task, inputs={"n": 2}, next_run_at=None) for task in TASKS}
    runs = {task: await launch(conn, sid) for task, sid in sids.items()}
    await drain(app)
    ended = {task: await run_row(conn, r["id"]) for task, r in runs.items()}
    assert {t: (e["status"], e["result"], e["error"], e["outcome"], e["job_id"]) for t, e in ended.items()} == {
        "t.echo": ("succeeded", {"n": 2}, None, "succeeded", None),
        "t.fails": ("failed", None, "the source is gone", "failed", None),
    }
    cur = await conn.execute("SELECT count(*) AS n FROM procrastinate_jobs")
    assert await cur.fetchone() == {"n": 0}


async def drain(app: procrastinate.App) -> None:
    """A real Procrastinate worker deleting every job it ends, until none is left."""
    async with app.open_async():
        await asyncio.wait_for(
            app.run_worker_async(wait=False, install_signal_handlers=False, delete_jobs="always"), 30
        )
