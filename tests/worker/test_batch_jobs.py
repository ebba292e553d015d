"""agentlab_sched.fetch_jobs / finish_jobs: many jobs in one statement, exactly as Procrastinate's own
functions treat them one by one (priority, age, lock, queue, scheduled_at; end statuses, delete, errors)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from agentlab_sched.firing import tick
from tests.support.firing_helpers import EN, NINE, make_schedule
from tests.support.rows import Conn, fetched


async def _defer(
    conn: Conn,
    task: str = "demo.echo",
    *,
    queue: str = "default",
    priority: int = 0,
    lock: str | None = None,
    scheduled_at: datetime | None = None,
    args: dict[str, Any] | None = None,
) -> int:
    cur = await conn.execute(
        """SELECT (procrastinate_defer_jobs_v1(ARRAY[ROW(%s, %s, %s, %s, NULL, %s::jsonb, %s)
                  ::procrastinate_job_to_defer_v1]))[1] AS id""",
        (queue, task, priority, lock, json.dumps(args or {}), scheduled_at),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["id"])


async def _worker(conn: Conn) -> int:
    row = await (await conn.execute("SELECT worker_id FROM procrastinate_register_worker_v1()")).fetchone()
    assert row is not None
    return int(row["worker_id"])


async def _fetch(conn: Conn, worker: int, wanted: int, queues: list[str] | None = None) -> list[dict[str, Any]]:
    cur = await conn.execute("SELECT * FROM agentlab_sched.fetch_jobs(%s, %s, %s)", (queues, worker, wanted))
    return await cur.fetchall()


async def _procrastinate_order(conn: Conn, worker: int, queues: list[str] | None) -> list[int]:
    """What procrastinate_fetch_job_v2 returns call after call (in a transaction rolled back)."""
    taken: list[int] = []
    async with conn.transaction(force_rollback=True):
        while True:
            cur = await conn.execute("SELECT id FROM procrastinate_fetch_job_v2(%s, %s)", (queues, worker))
            row = await cur.fetchone()
            if row is None or row["id"] is None:
                return taken
            taken.append(row["id"])


async def _mixed_jobs(conn: Conn) -> dict[str, int]:
    """Jobs that Procrastinate's fetch takes in an order of its own, or not at all."""
    future = datetime.now(UTC) + timedelta(hours=1)
    jobs = {
        "a1": await _defer(conn, lock="A"),
        "a2": await _defer(conn, lock="A"),  # behind a1 (same lock, queued after it)
        "urgent": await _defer(conn, priority=5),
        "other_queue": await _defer(conn, queue="other"),
        "later": await _defer(conn, scheduled_at=future),
        "b_running": await _defer(conn, lock="B"),
        "b_waiting": await _defer(conn, lock="B"),  # its lock is doing
        "plain": await _defer(conn),
        "c_low": await _defer(conn, lock="C", priority=-1),
        "c_high": await _defer(conn, lock="C", priority=3),  # ahead of c_low despite coming later
    }
    await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (jobs["b_running"],))
    return jobs


@pytest.mark.parametrize("queues", [None, ["default"], ["other"]])
async def test_fetch_jobs_takes_what_procrastinates_fetch_takes_one_after_the_other(
    conn: Conn, queues: list[str] | None
) -> None:
    jobs = await _mixed_jobs(conn)
    worker = await _worker(conn)
    expected = await _procrastinate_order(conn, worker, queues)
    assert expected  # the case is not empty
    taken = await _fetch(conn, worker, 20, queues)
    assert [r["id"] for r in taken] == expected
    names = {v: k for k, v in jobs.items()}
    if queues is None:
        assert [names[i] for i in expected] == ["urgent", "c_high", "a1", "other_queue", "plain"]
    cur = await conn.execute(
        "SELECT id, status, worker_id FROM procrastinate_jobs WHERE id = ANY(%s) ORDER BY id", (expected,)
    )
    assert await cur.fetchall() == [{"id": i, "status": "doing", "worker_id": worker} for i in sorted(expected)]
    # Procrastinate's own trigger recorded each start.
    cur = await conn.execute(
        "SELECT count(*) AS n FROM procrastinate_events WHERE type = 'started' AND job_id = ANY(%s)", (expected,)
    )
    assert fetched(await cur.fetchone())["n"] == len(expected)


async def test_fetch_jobs_takes_at_most_what_is_wanted_then_the_next_ones(conn: Conn) -> None:
    ids = [await _defer(conn, priority=p) for p in (0, 1, 2, 0, 1)]
    worker = await _worker(conn)
    first = await _fetch(conn, worker, 2)
    assert [r["id"] for r in first] == [ids[2], ids[1]]
    second = await _fetch(conn, worker, 2)
    assert [r["id"] for r in second] == [ids[4], ids[0]]
    assert [r["id"] for r in await _fetch(conn, worker, 2)] == [ids[3]]
    assert await _fetch(conn, worker, 2) == []


async def test_fetch_jobs_skips_jobs_another_worker_is_taking(db_url: str, conn: Conn) -> None:
    ids = [await _defer(conn) for _ in range(4)]
    worker = await _worker(conn)
    other = await psycopg.AsyncConnection.connect(db_url)
    try:
        await other.execute("SELECT id FROM procrastinate_jobs WHERE id = ANY(%s) FOR UPDATE", (ids[:2],))
        assert [r["id"] for r in await _fetch(conn, worker, 10)] == ids[2:]
    finally:
        await other.rollback()
        await other.close()
    assert [r["id"] for r in await _fetch(conn, worker, 10)] == ids[:2]


async def test_fetch_jobs_returns_each_runs_context_after_the_run_started(conn: Conn) -> None:
    sid = await make_schedule(conn, "agent", inputs={"day": "{{ schedule.date }}"})
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    plain = await _defer(conn, "demo.echo")
    worker = await _worker(conn)
    taken = await _fetch(conn, worker, 10)
    cur = await conn.execute(
        "SELECT id, job_id, status, started_at FROM agentlab_sched.runs WHERE schedule_id = %s", (sid,)
    )
    run = await cur.fetchone()
    assert run is not None and run["status"] == "running" and run["started_at"] is not None
    by_id = {r["id"]: r for r in taken}
    assert set(by_id) == {run["job_id"], plain}
    assert by_id[plain]["run"] is None
    cur = await conn.execute("SELECT agentlab_sched.run_context(%s) AS ctx", (run["job_id"],))
    assert by_id[run["job_id"]]["run"]["run_id"] == str(run["id"])
    context = fetched(await cur.fetchone())["ctx"]
    clocked = {"seconds_left", "late_seconds"}  # read off the clock: they differ between two reads
    assert {k: v for k, v in by_id[run["job_id"]]["run"].items() if k not in clocked} == {
        k: v for k, v in context.items() if k not in clocked
    }
    assert by_id[run["job_id"]]["run"]["inputs"] == {"day": "2026-10-05"}
    assert by_id[run["job_id"]]["args"] == {"day": "2026-10-05"}


async def test_a_run_started_by_fetch_jobs_is_the_run_procrastinates_fetch_starts(conn: Conn) -> None:
    """fetch_jobs starts the runs of the jobs it takes in one statement (start_runs); Procrastinate's fetch
    leaves it to the job trigger (settle_run), run by run. Both write the same run, from a queued one with
    a timeout and from one without."""
    for name, timeout in (("plain-a", None), ("timed-a", timedelta(seconds=30)),
                          ("plain-b", None), ("timed-b", timedelta(seconds=30))):  # fmt: skip
        await make_schedule(conn, name, inputs={}, timeout=timeout)
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    cur = await conn.execute(
        """SELECT s.name, r.job_id FROM agentlab_sched.runs r JOIN agentlab_sched.schedules s ON s.id = r.schedule_id"""
    )
    job_of = {row["name"]: row["job_id"] for row in await cur.fetchall()}
    worker = await _worker(conn)
    await conn.execute(
        "UPDATE procrastinate_jobs SET priority = 1 WHERE id = ANY(%s)", ([job_of["plain-a"], job_of["timed-a"]],)
    )
    for _ in range(2):  # the two of priority 1, each by Procrastinate's own fetch and the job trigger
        await conn.execute("SELECT id FROM procrastinate_fetch_job_v2(NULL, %s)", (worker,))
    assert {r["id"] for r in await _fetch(conn, worker, 10)} == {job_of["plain-b"], job_of["timed-b"]}
    cur = await conn.execute(
        """SELECT s.name, r.status, r.tally_pending, r.finished_at, r.error, r.error_code, r.error_term, r.outcome,
                  r.started_at IS NOT NULL AS started, r.deadline_at - r.started_at AS deadline_after,
                  r.updated_at >= r.started_at AS updated
           FROM agentlab_sched.runs r JOIN agentlab_sched.schedules s ON s.id = r.schedule_id"""
    )
    runs = {row.pop("name"): row for row in await cur.fetchall()}
    assert runs["plain-a"] == runs["plain-b"]
    assert runs["timed-a"] == runs["timed-b"]
    assert runs["plain-b"]["status"] == "running" and runs["plain-b"]["deadline_after"] is None
    assert runs["timed-b"]["deadline_after"] == timedelta(seconds=30)


async def _finish(
    conn: Conn,
    ids: list[int],
    statuses: list[str],
    deletes: list[bool],
    recorded: list[tuple[str, str | None] | None] | None = None,
) -> list[int]:
    recorded = recorded or [None] * len(ids)
    cur = await conn.execute(
        "SELECT agentlab_sched.finish_jobs(%s, %s::procrastinate_job_status[], %s, %s::uuid[], %s::jsonb[]) AS missing",
        (ids, statuses, deletes, [r[0] if r else None for r in recorded], [r[1] if r else None for r in recorded]),
    )
    return fetched(await cur.fetchone())["missing"]


async def test_finish_jobs_ends_each_job_as_procrastinate_does(conn: Conn) -> None:
    worker = await _worker(conn)
    ids = [await _defer(conn) for _ in range(5)]
    waiting = await _defer(conn)  # todo: Procrastinate finishes those too
    await _fetch(conn, worker, 5)
    gone = 10**9
    missing = await _finish(
        conn,
        [*ids, waiting, gone],
        ["succeeded", "failed", "aborted", "succeeded", "failed", "succeeded", "succeeded"],
        [False, False, False, True, False, False, False],
    )
    assert missing == [gone]
    cur = await conn.execute(
        "SELECT id, status, attempts, abort_requested FROM procrastinate_jobs WHERE id = ANY(%s) ORDER BY id",
        ([*ids, waiting],),
    )
    assert await cur.fetchall() == [
        {"id": ids[0], "status": "succeeded", "attempts": 1, "abort_requested": False},
        {"id": ids[1], "status": "failed", "attempts": 1, "abort_requested": False},
        {"id": ids[2], "status": "aborted", "attempts": 1, "abort_requested": False},
        # ids[3] deleted
        {"id": ids[4], "status": "failed", "attempts": 1, "abort_requested": False},
        {"id": waiting, "status": "succeeded", "attempts": 0, "abort_requested": False},
    ]
    # A job that ended already is left alone and reported.
    assert await _finish(conn, [ids[0]], ["failed"], [False]) == [ids[0]]
    cur = await conn.execute("SELECT status FROM procrastinate_jobs WHERE id = %s", (ids[0],))
    assert fetched(await cur.fetchone())["status"] == "succeeded"
    with pytest.raises(psycopg.errors.RaiseException, match='End status should be either "succeeded"'):
        await _finish(conn, [ids[4]], ["todo"], [False])


async def test_finish_jobs_keeps_each_runs_result_with_its_end(conn: Conn) -> None:
    sids = [await make_schedule(conn, f"agent-{i}") for i in range(3)]
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    worker = await _worker(conn)
    taken = await _fetch(conn, worker, 10)
    job_of = {r["run"]["schedule_id"]: r["id"] for r in taken}
    run_of = {r["run"]["schedule_id"]: r["run"]["run_id"] for r in taken}
    await _finish(
        conn,
        [job_of[s] for s in sids],
        ["succeeded", "succeeded", "failed"],
        [False, False, False],
        # The first two returned (a JSON result, none); the third raised: nothing recorded.
        [(run_of[sids[0]], json.dumps({"rows": 3})), (run_of[sids[1]], None), None],
    )
    cur = await conn.execute(
        "SELECT schedule_id, status, result, outcome, finished_at IS NOT NULL AS finished FROM agentlab_sched.runs "
        "ORDER BY schedule_id"
    )
    assert await cur.fetchall() == [
        {
            "schedule_id": sids[0],
            "status": "succeeded",
            "result": {"rows": 3},
            "outcome": "succeeded",
            "finished": True,
        },
        {"schedule_id": sids[1], "status": "succeeded", "result": None, "outcome": "succeeded", "finished": True},
        {"schedule_id": sids[2], "status": "failed", "result": None, "outcome": None, "finished": True},
    ]


async def test_results_recorded_with_the_end_settle_a_deleted_job_as_succeeded(conn: Conn) -> None:
    """`--delete-jobs`: the job is deleted instead of finished; the run still ends as its body did."""
    sid = await make_schedule(conn, "agent")
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    [taken] = await _fetch(conn, await _worker(conn), 10)
    assert await _finish(conn, [taken["id"]], ["succeeded"], [True], [(taken["run"]["run_id"], '"done"')]) == []
    cur = await conn.execute("SELECT status, result FROM agentlab_sched.runs WHERE schedule_id = %s", (sid,))
    assert await cur.fetchone() == {"status": "succeeded", "result": "done"}
    assert await _value_of(conn, "SELECT count(*) FROM procrastinate_jobs WHERE id = %s", taken["id"]) == 0


async def _value_of(conn: Conn, sql: str, *params: Any) -> Any:
    row = await (await conn.execute(sql, params)).fetchone()
    assert row is not None
    return next(iter(row.values()))


async def test_fetch_jobs_takes_jobs_whose_runs_cannot_be_read_now_and_says_so(db_url: str, conn: Conn) -> None:
    """The runs locked elsewhere beyond lock_timeout: the jobs are taken all the same, their contexts
    unread (run_read false), for the run middleware to look up with its retries."""
    sid = await make_schedule(conn, "agent")
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    worker = await _worker(conn)
    async with await psycopg.AsyncConnection.connect(db_url) as locker:
        async with locker.transaction():
            await locker.execute("LOCK TABLE agentlab_sched.fires IN ACCESS EXCLUSIVE MODE")
            await conn.execute("SET lock_timeout = '100ms'")
            [taken] = await _fetch(conn, worker, 10)
    assert (taken["run_read"], taken["run"]) == (False, None)
    cur = await conn.execute("SELECT status FROM agentlab_sched.runs WHERE schedule_id = %s", (sid,))
    assert fetched(await cur.fetchone())["status"] == "running"
    assert not await _fetch(conn, worker, 10)  # nothing left to take
