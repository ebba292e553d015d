"""`agentlab-sched worker`'s job runner (agentlab_sched.worker.batch): jobs taken and finished in batches, each
with its run's context and result in the same statements, Procrastinate's semantics kept (retries, abort,
delete_jobs), NOTIFY waited on by socket; and the precise loop's tick committing batch by batch."""

from __future__ import annotations

import asyncio
import collections
import gc
import logging
import selectors
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import procrastinate
import psycopg
import pytest
from cryptography.fernet import Fernet

from agentlab_sched import current_run
from agentlab_sched.database import queries
from agentlab_sched.database.connections import wait_for_notifies
from agentlab_sched.demo import make_app
from agentlab_sched.firing import tick
from agentlab_sched.settings import Settings
from agentlab_sched.worker import batch as runner
from agentlab_sched.worker import blueprint
from agentlab_sched.worker.middleware import install
from agentlab_sched.worker.process import connector_for, run_worker
from tests.support.firing_helpers import EN, NINE, make_schedule
from tests.support.rows import Conn
from tests.support.workers import wait_for

QUIET = Settings(locale="en", scheduler=False)


@asynccontextmanager
async def worker(app: procrastinate.App, url: str, **options: Any) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(
            app, url, stop=stop, install_signal_handlers=False, settings=options.pop("settings", QUIET), **options
        )
    )
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


async def _value(conn: Conn, sql: str, params: Any = None) -> Any:
    row = await (await conn.execute(sql, params)).fetchone()
    assert row is not None
    return next(iter(row.values()))


async def test_jobs_are_taken_and_finished_in_batches_each_with_its_run(
    db_url: str, conn: Conn, monkeypatch: Any
) -> None:
    """40 runs queued, concurrency 10: a statement takes many jobs, one writes many ends; no run is looked
    up per job and each result is written with its job's end; every body read its own run."""
    statements: collections.Counter[tuple[str, int]] = collections.Counter()
    rows = runner._Session.rows

    async def counted(self: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        statements[(name, params["wanted"] if name == "fetch_jobs" else len(params["ids"]))] += 1
        return await rows(self, name, params)

    monkeypatch.setattr(runner._Session, "rows", counted)
    lookups: list[str] = []
    connector_one = queries.connector_one

    async def spied(connector: Any, name: str, **params: Any) -> dict[str, Any]:
        lookups.append(name)
        return await connector_one(connector, name, **params)

    monkeypatch.setattr(queries, "connector_one", spied)

    app = make_app(db_url)

    @app.task(name="probe")
    async def probe(**inputs: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"run": str(current_run().run_id), "inputs": inputs}

    sids = [await make_schedule(conn, f"agent-{i}", task="probe", overlap="allow_all") for i in range(40)]
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)

    async def all_done() -> bool:
        return await _value(conn, "SELECT count(*) FROM agentlab_sched.runs WHERE status = 'succeeded'") == 40

    async with worker(app, db_url, concurrency=10):
        await wait_for(all_done, what="40 runs succeeded")
    cur = await conn.execute("SELECT id, schedule_id, result, inputs FROM agentlab_sched.runs ORDER BY schedule_id")
    runs = await cur.fetchall()
    assert [r["schedule_id"] for r in runs] == sids
    assert all(r["result"] == {"run": str(r["id"]), "inputs": r["inputs"]} for r in runs)
    fetches = sum(n for (name, _), n in statements.items() if name == "fetch_jobs")
    finishes = sum(n for (name, _), n in statements.items() if name == "finish_jobs")
    assert statements[("fetch_jobs", 10)] >= 1  # the first one took a slot's worth for every slot
    assert fetches < 40 and finishes < 40, statements
    assert sum(size * n for (name, size), n in statements.items() if name == "finish_jobs") >= 40  # + housekeeping
    assert "run_context" not in lookups and "record_result" not in lookups, lookups


async def test_retries_aborts_and_delete_jobs_behave_as_with_procrastinate(db_url: str, conn: Conn) -> None:
    app = make_app(db_url)
    attempts: list[int] = []

    @app.task(name="flaky", retry=1)
    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return "second attempt"

    async with app.open_async():
        retried = await app.tasks["flaky"].defer_async()
        long = await app.tasks["demo.sleep"].defer_async(seconds=60)
        quick = await app.tasks["demo.echo"].defer_async(day="today")

    async def status(job_id: int) -> str | None:
        return await _value(
            conn, "SELECT coalesce(max(status::text), 'gone') FROM procrastinate_jobs WHERE id = %s", (job_id,)
        )

    async with worker(app, db_url, concurrency=4, delete_jobs="successful"):
        await wait_for(lambda: _is(status(long), "doing"), what="the long job running")
        await app.job_manager.cancel_job_by_id_async(long, abort=True)  # the worker's app is open
        # Heard by NOTIFY (the abort polling is 30 s away): the async task is cancelled at once.
        await wait_for(lambda: _is(status(long), "aborted"), limit=10, what="the long job aborted")
        await wait_for(lambda: _is(status(retried), "gone"), what="the retried job succeeded (and deleted)")
        await wait_for(lambda: _is(status(quick), "gone"), what="the quick job deleted")
    assert len(attempts) == 2  # failed once, retried by Procrastinate, succeeded, then deleted (successful)
    cur = await conn.execute(
        "SELECT job_id, type::text FROM procrastinate_events WHERE job_id = ANY(%s) ORDER BY id", ([retried, long],)
    )
    events = [(r["job_id"], r["type"]) for r in await cur.fetchall()]
    assert [t for j, t in events if j == long] == ["deferred", "started", "abort_requested", "aborted"]


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return await value == expected


GATES = "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'gate'"


async def test_a_job_the_batch_cannot_finish_fails_alone(db_url: str, conn: Conn, caplog: Any) -> None:
    """A job whose end cannot be written (here: finished meanwhile by someone else, as after a batch whose
    commit the worker never heard of because the connection broke) does not stop the others' ends from
    being written, and is a job settled already, not an error of its body's task."""
    app = make_app(db_url)
    release = asyncio.Event()

    @app.task(name="gate")
    async def gate(n: int) -> None:
        await release.wait()

    async with app.open_async():
        ids = [await app.tasks["gate"].defer_async(n=n) for n in range(3)]
    async with worker(app, db_url, concurrency=3):
        await wait_for(
            lambda: _is(_value(conn, f"{GATES} AND status = 'doing'"), 3),
            what="3 jobs running",
        )
        await conn.execute("UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %s", (ids[1],))
        release.set()
        await wait_for(
            lambda: _is(_value(conn, f"{GATES} AND status = 'succeeded'"), 2),
            what="the other 2 succeeded",
        )
    cur = await conn.execute("SELECT status::text FROM procrastinate_jobs WHERE task_name = 'gate' ORDER BY id")
    assert [r["status"] for r in await cur.fetchall()] == ["succeeded", "failed", "succeeded"]
    gc.collect()  # a task whose exception nobody retrieved is reported when it is collected
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


@pytest.mark.parametrize(
    ("due", "batches"), [(150, [(10, 10), (140, 150)]), (100, [(100, 100), (0, 100)]), (60, [(60, 60)])]
)
async def test_a_tick_of_the_precise_loop_commits_batch_by_batch(
    db_url: str, conn: Conn, monkeypatch: Any, due: int, batches: list[tuple[int, int]]
) -> None:
    """Each batch is committed on its own, and when more are due than the first batch takes (a storm) the
    first one is small: the first jobs of a storm can start while the rest is still being recorded; fewer
    are recorded in one transaction. (A pool connection is not in autocommit: the whole tick would be one
    transaction, nothing visible before its end.)"""
    assert (tick.FIRST_BATCH, tick.STORM_FIRST_BATCH) == (100, 10)
    now = await _value(conn, "SELECT date_trunc('minute', clock_timestamp())")
    for i in range(due):
        await make_schedule(conn, f"s-{i}", cron="* * * * *", timezone="UTC", next_run_at=now, overlap="allow_all")
    seen: list[tuple[int, int]] = []  # (schedules claimed by the batch, jobs visible to another session)
    one_batch = tick._one_batch

    async def observed(*args: Any, **kwargs: Any) -> tuple[int, int]:
        claimed, asked = await one_batch(*args, **kwargs)
        seen.append((claimed, await _value(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")))
        return claimed, asked

    monkeypatch.setattr(tick, "_one_batch", observed)
    app = make_app(db_url)
    async with app.open_async():
        await blueprint.run_tick(app, Settings(locale="en", batch_size=1000))
    assert seen == batches


async def test_wait_for_notifies_returns_what_arrived_or_nothing_after_the_wait(db_url: str, conn: Conn) -> None:
    listener = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    try:
        await listener.execute("LISTEN probe")
        began = time.monotonic()
        assert await wait_for_notifies(listener, 0.3) == []
        assert time.monotonic() - began >= 0.29
        await conn.execute("NOTIFY probe, 'one'")
        await conn.execute("NOTIFY probe, 'two'")
        got = await wait_for_notifies(listener, 5)
        got += await wait_for_notifies(listener, 0.2) if len(got) < 2 else []
        assert [n.payload for n in got] == ["one", "two"]
    finally:
        await listener.close()


def test_an_idle_agentlab_worker_sleeps(db_url: str) -> None:
    """Idle, the worker (jobs, precise loop, notification dispatch) wakes its event loop only for timers
    seconds apart: no 0.1 s polling of NOTIFY connections (psycopg's notifies() does that)."""
    wakeups: list[float] = []

    class Counted(selectors.DefaultSelector):
        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            events = super().select(timeout)
            wakeups.append(time.monotonic())
            return events

    async def main() -> None:
        app = procrastinate.App(connector=connector_for(db_url))  # no periodic tasks: nothing due in the window
        app.task(name="demo.echo")(lambda **kw: kw)
        install(app)
        settings = Settings(locale="en", secret_keys=(Fernet.generate_key().decode(),))
        stop = asyncio.Event()
        task = asyncio.create_task(run_worker(app, db_url, stop=stop, install_signal_handlers=False, settings=settings))
        await asyncio.sleep(1.5)  # started: tasks registered, listeners listening
        began = time.monotonic()
        await asyncio.sleep(3.0)
        ended = time.monotonic()
        stop.set()
        await asyncio.wait_for(task, timeout=15)
        window = [t for t in wakeups if began < t <= ended]
        # The sleep itself wakes the loop once; a heartbeat (every 10 s) or a poll may add one or two.
        assert len(window) <= 5, f"{len(window)} wake-ups in 3 s"

    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(Counted())) as loop_runner:
        loop_runner.run(main())


async def test_the_worker_keeps_house_itself_without_housekeeping_jobs(db_url: str, conn: Conn) -> None:
    """A running run whose job has no live worker is suspended by the worker's own round of housekeeping
    (every 10 s, the first at start); no housekeeping job is deferred, taken or run for it."""
    sid = await make_schedule(conn, "agent")
    await tick.fire_due(conn, NINE + timedelta(seconds=1), settings=EN)
    # Its job taken by a worker that is gone (no heartbeat row at all).
    await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE task_name = 'demo.echo'")
    app = make_app(db_url)

    async def suspended() -> bool:
        return (
            await _value(conn, "SELECT status FROM agentlab_sched.runs WHERE schedule_id = %s", (sid,)) == "suspended"
        )

    async with worker(app, db_url):
        await wait_for(suspended, limit=20, what="the run suspended")
        assert not any("housekeeping" in p.task.name for p in app.periodic_registry.periodic_tasks.values())
    assert await _value(conn, "SELECT count(*) FROM procrastinate_jobs WHERE task_name LIKE '%%housekeeping'") == 0


async def test_what_start_up_loaded_is_left_out_of_full_collections_while_the_worker_runs(db_url: str) -> None:
    """A full collection walked every object the process had loaded: every 16 s under 50 jobs a second it
    held the event loop 30-40 ms, and the jobs due then started that much late. The worker freezes what
    start-up made (``gc.freeze``) and gives it back to the collector when it stops."""
    assert gc.get_freeze_count() == 0
    app = make_app(db_url)
    async with app.open_async(), worker(app, db_url):
        await wait_for(lambda: _frozen(), what="the start-up objects frozen")
        assert gc.get_freeze_count() > 10_000  # the modules, the app and its tasks, the pools
        made_since = len(gc.get_objects(generation=2))
        assert made_since < gc.get_freeze_count()
    assert gc.get_freeze_count() == 0


async def _frozen() -> bool:
    return gc.get_freeze_count() > 0
