"""An abort request reaches the job it names however it falls against the worker's own steps: sent while
the job's fetch was committed but not yet read, or while the worker's listener was not listening (starting,
or reconnecting). Before, each waited for the fallback poll (30 s)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentlab_sched.demo import make_app
from agentlab_sched.runs import lifecycle
from agentlab_sched.worker import batch
from agentlab_sched.worker.process import POLL_FALLBACK
from tests.support.firing_helpers import make_schedule
from tests.support.rows import Conn, fetched
from tests.support.runs import launch
from tests.support.workers import run_in, wait_for, worker

#: Well under the fallback poll: an abort that waited for it fails the test.
PROMPTLY = 5.0
LISTENER = "application_name = 'agentlab-sched worker' AND query LIKE 'LISTEN%%'"


async def _cancelled_promptly(conn: Conn, run_id: Any, began: float) -> None:
    ended = await wait_for(run_in(conn, run_id, "cancelled", "succeeded", "failed"), what="cancelled")
    assert (ended["status"], ended["error"], ended["cancelled_by"]) == ("cancelled", "cancelled by dave", "dave")
    assert time.monotonic() - began < PROMPTLY < POLL_FALLBACK


async def test_an_abort_heard_before_the_fetch_that_took_its_job_returned_aborts_it(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await make_schedule(conn, "long", task="demo.sleep", inputs={"seconds": 60}, next_run_at=None)
    cancelled: list[str] = []
    original = batch._Session.rows

    async def rows_then_cancel(self: batch._Session, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        rows = await original(self, name, params)
        if name == "fetch_jobs" and rows and not cancelled:
            # The fetch is committed (the run is running) and its rows are not read yet: cancel now, and let
            # the worker's listener hear the abort before the fetch returns.
            _, outcome = await lifecycle.cancel(conn, rows[0]["run"]["run_id"], "dave")
            cancelled.append(outcome)
            await asyncio.sleep(0.3)
        return rows

    monkeypatch.setattr(batch._Session, "rows", rows_then_cancel)
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        began = time.monotonic()
        await wait_for(lambda: asyncio.sleep(0, cancelled), what="the run cancelled during its fetch")
        assert cancelled == ["abort_requested"]
        await _cancelled_promptly(conn, run["id"], began)


async def test_an_abort_sent_while_the_listener_reconnects_aborts_its_job(db_url: str, conn: Conn) -> None:
    sid = await make_schedule(conn, "long", task="demo.sleep", inputs={"seconds": 60}, next_run_at=None)
    async with worker(make_app(db_url), db_url):
        run = await launch(conn, sid)
        await wait_for(run_in(conn, run["id"], "running"), what="running")
        cur = await conn.execute(f"SELECT pid FROM pg_stat_activity WHERE {LISTENER}")
        [listener] = [r["pid"] for r in await cur.fetchall()]
        await conn.execute("SELECT pg_terminate_backend(%s)", (listener,))

        async def gone() -> bool:
            cur = await conn.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", (listener,))
            return fetched(await cur.fetchone())["n"] == 0

        await wait_for(gone, what="the listener's connection gone")
        began = time.monotonic()
        _, outcome = await lifecycle.cancel(conn, run["id"], "dave")  # nobody listens: its NOTIFY is lost
        assert outcome == "abort_requested"
        await _cancelled_promptly(conn, run["id"], began)


async def test_new_jobs_are_heard_while_the_missed_aborts_are_looked_up(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the listener reconnects with jobs running here, it looks up the abort requests it may have
    missed, through the app's pool, which after an outage can take seconds to reconnect: the NOTIFYs of new
    jobs are heard meanwhile, not after it (the first job after an outage once started 3-4.6 s late)."""
    long = await make_schedule(conn, "long", task="demo.sleep", inputs={"seconds": 60}, next_run_at=None)
    quick = await make_schedule(conn, "quick", task="demo.echo", next_run_at=None)
    app = make_app(db_url)
    looked_up = asyncio.Event()
    real = app.job_manager.list_jobs_to_abort_async

    async def slow_pool(*args: Any, **kwargs: Any) -> Any:
        looked_up.set()
        await asyncio.sleep(4.0)  # the pool connecting again after an outage
        return await real(*args, **kwargs)

    monkeypatch.setattr(app.job_manager, "list_jobs_to_abort_async", slow_pool)
    async with worker(app, db_url):
        first = await launch(conn, long)
        await wait_for(run_in(conn, first["id"], "running"), what="running")
        cur = await conn.execute(f"SELECT pid FROM pg_stat_activity WHERE {LISTENER}")
        [listener] = [r["pid"] for r in await cur.fetchall()]
        await conn.execute("SELECT pg_terminate_backend(%s)", (listener,))
        await asyncio.wait_for(looked_up.wait(), timeout=10)  # listening again, the look-up under way
        began = time.monotonic()
        second = await launch(conn, quick)
        await wait_for(run_in(conn, second["id"], "running", "succeeded"), what="the new job taken")
        took = time.monotonic() - began
        await lifecycle.cancel(conn, first["id"], "dave")
    assert took < 2.0, took
