"""Isolation: nothing a resolver returns or raises fails the batch; resolvers hold no lock, have a timeout,
and never block the event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from datetime import timedelta
from typing import Any

from procrastinate import jobs as pjobs

from agentlab_sched import database as db
from agentlab_sched.demo import make_app
from agentlab_sched.firing import hooks
from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, fires, make_schedule, runs_of
from tests.support.rows import Conn, fetched


class _Lazy:
    """A lazy translation, as web frameworks hand them out: text only when asked."""

    def __str__(self) -> str:
        return "「门店周报」还没有发布版本"


class _Broken:
    def __str__(self) -> str:
        raise RuntimeError("no translation catalogue loaded")


async def test_nothing_a_resolver_raises_fails_the_batch(conn: Conn) -> None:
    reasons: dict[str, Any] = {"lazy": _Lazy(), "broken": _Broken(), "number": 404, "nul": "bad\x00byte", "empty": ""}
    ids = {name: await make_schedule(conn, name, task=f"t.{name}") for name in reasons}
    fine = await make_schedule(conn, "fine")
    for name, reason in reasons.items():

        def refuse(request: hooks.LaunchRequest, reason: Any = reason) -> None:
            raise hooks.LaunchRefused(reason)

        hooks.resolver(f"t.{name}")(refuse)
    try:
        await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    finally:
        for name in reasons:
            hooks.unregister(f"t.{name}")
    got = {}
    for name, sid in ids.items():
        [fire] = await fires(conn, sid)
        assert (fire["status"], fire["reason_code"]) == ("failed_to_start", "launch.refused")
        got[name] = fire["reason"]
    assert got == {
        "lazy": "「门店周报」还没有发布版本",
        "broken": "the task's resolver refused this fire without saying why",
        "number": "404",
        "nul": "badbyte",
        "empty": "The task's resolver refused this fire.",  # LaunchRefused's own words when given none
    }
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]


async def _old_run_with_a_running_job(conn: Conn, sid: int) -> int:
    cur = await conn.execute(
        """SELECT (procrastinate_defer_jobs_v1(ARRAY[ROW('default', 'reports.slow', 0, NULL, NULL, '{}'::jsonb,
                  NULL)::procrastinate_job_to_defer_v1]))[1] AS id"""
    )
    job_id = fetched(await cur.fetchone())["id"]
    await conn.execute(
        """INSERT INTO agentlab_sched.runs (schedule_id, task, status, started_by, job_id)
           VALUES (%s, 'reports.slow', 'queued', 'schedule:slow', %s)""",
        (sid, job_id),
    )
    await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (job_id,))
    return job_id


async def test_a_slow_resolver_delays_only_its_own_schedule(db_url: str, conn: Conn) -> None:
    """batch_size 2, a 3 s resolver: another worker claims and fires everything else meanwhile, and
    Procrastinate finishing the slow schedule's previous job is not held up."""
    slow = await make_schedule(conn, "slow", task="reports.slow")  # due first: in worker one's first batch
    others = [
        await make_schedule(conn, name, cron="* * * * * *", timezone="UTC", next_run_at=NINE + timedelta(seconds=5))
        for name in ("a", "b", "c")
    ]
    old_job = await _old_run_with_a_running_job(conn, slow)
    resolving = asyncio.Event()
    loop = asyncio.get_running_loop()

    @hooks.resolver("reports.slow")
    async def three_seconds(request: hooks.LaunchRequest) -> None:
        loop.call_soon_threadsafe(resolving.set)
        await asyncio.sleep(3)

    two = dataclasses.replace(EN, batch_size=2)
    first, second = await db.connect(db_url, locale="en"), await db.connect(db_url, locale="en")
    app = make_app(db_url)
    try:
        worker_one = asyncio.create_task(fire_due(first, NINE + timedelta(seconds=5), settings=two))
        await asyncio.wait_for(resolving.wait(), timeout=10)
        began = time.perf_counter()
        await asyncio.wait_for(fire_due(second, NINE + timedelta(seconds=5), settings=two), timeout=10)
        assert time.perf_counter() - began < 2.0
        for sid in others:
            assert [f["status"] for f in await fires(conn, sid)] == ["started"]
        assert await fires(conn, slow) == []  # still resolving
        async with app.open_async():
            began = time.perf_counter()
            await asyncio.wait_for(
                app.job_manager.finish_job_by_id_async(old_job, pjobs.Status.FAILED, False), timeout=10
            )
            assert time.perf_counter() - began < 1.0
        assert not worker_one.done()
        await asyncio.wait_for(worker_one, timeout=20)
    finally:
        hooks.unregister("reports.slow")
        await first.close()
        await second.close()
    assert [(f["kind"], f["status"]) for f in await fires(conn, slow)] == [("scheduled", "started")]
    assert sorted(r["status"] for r in await runs_of(conn, slow)) == ["failed", "queued"]
    cur = await conn.execute(
        "SELECT resolving_until, consecutive_failures, next_run_at FROM agentlab_sched.schedules WHERE id = %s",
        (slow,),
    )
    assert await cur.fetchone() == {
        "resolving_until": None,
        "consecutive_failures": 1,
        "next_run_at": NINE + timedelta(days=1),
    }


async def test_a_schedule_paused_while_its_resolver_runs_does_not_fire(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(conn, "slow", task="reports.slow")
    resolving, release = asyncio.Event(), asyncio.Event()

    @hooks.resolver("reports.slow")
    async def wait(request: hooks.LaunchRequest) -> None:
        resolving.set()
        await release.wait()

    ticking = await db.connect(db_url, locale="en")
    try:
        task = asyncio.create_task(fire_due(ticking, NINE + timedelta(seconds=5), settings=EN))
        await asyncio.wait_for(resolving.wait(), timeout=10)
        began = time.perf_counter()
        # Not held up by the tick (it used to wait for the resolver, which waited for this test: a timeout).
        await asyncio.wait_for(conn.execute("SELECT agentlab_sched.pause('slow', 'holiday')"), timeout=5)
        assert time.perf_counter() - began < 1.0
        release.set()
        await asyncio.wait_for(task, timeout=10)
    finally:
        hooks.unregister("reports.slow")
        await ticking.close()
    assert await fires(conn, sid) == []
    cur = await conn.execute("SELECT enabled, next_run_at, resolving_until FROM agentlab_sched.schedules")
    assert await cur.fetchone() == {"enabled": False, "next_run_at": None, "resolving_until": None}


async def test_a_resolver_that_never_answers_times_out(conn: Conn) -> None:
    sid = await make_schedule(conn, "slow", task="reports.slow")
    fine = await make_schedule(conn, "fine")

    @hooks.resolver("reports.slow")
    async def forever(request: hooks.LaunchRequest) -> None:
        await asyncio.sleep(3600)

    began = time.perf_counter()
    try:
        await fire_due(conn, NINE + timedelta(seconds=5), settings=dataclasses.replace(EN, resolver_timeout=1))
    finally:
        hooks.unregister("reports.slow")
    assert time.perf_counter() - began < 10
    [fire] = await fires(conn, sid)
    assert (fire["status"], fire["reason_code"], fire["reason"]) == (
        "failed_to_start",
        "launch.resolver_timeout",
        "the resolver of task reports.slow did not answer within 1 second; this fire was not started",
    )
    cur = await conn.execute(
        "SELECT agentlab_sched.msg(reason_code, reason_params, 'zh-CN') AS zh FROM agentlab_sched.fires WHERE id = %s",
        (fire["id"],),
    )
    assert fetched(await cur.fetchone())["zh"] == "任务 reports.slow 的启动检查(resolver)未在 1 秒 内返回,本次未启动"
    assert [f["status"] for f in await fires(conn, fine)] == ["started"]


async def test_a_blocking_resolver_never_blocks_the_event_loop(conn: Conn) -> None:
    sid = await make_schedule(conn, "sync", task="reports.sync")
    threads: list[str] = []

    @hooks.resolver("reports.sync")
    def blocking(request: hooks.LaunchRequest) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(1.0)

    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.02)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    try:
        await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    finally:
        done.set()
        await beat
        hooks.unregister("reports.sync")
    assert threads and threads[0] != threading.main_thread().name
    assert max(gaps) < 0.5, max(gaps)
    assert [f["status"] for f in await fires(conn, sid)] == ["started"]
