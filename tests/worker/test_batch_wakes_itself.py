"""The batch worker used as a class, without install(app): a job its own write made ready (a retry of a job
that failed, a job that waited behind a lock) is taken at once, not at the next poll."""

from __future__ import annotations

import asyncio
import contextlib
import time

import procrastinate
import psycopg

from agentlab_sched.worker.batch import BatchWorker
from agentlab_sched.worker.process import connector_for

POLL = 30.0  # the fallback poll: far longer than the test may take


async def test_a_retry_and_a_job_behind_a_lock_are_taken_at_once(db_url: str) -> None:
    app = procrastinate.App(connector=connector_for(db_url))
    attempts: list[float] = []
    locked: list[float] = []

    @app.task(name="wake.flaky", retry=1)
    async def flaky() -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    @app.task(name="wake.locked")
    async def behind_lock(n: int) -> None:
        locked.append(time.monotonic())

    async with app.open_async():
        await flaky.defer_async()
        await behind_lock.configure(lock="one-at-a-time").defer_async(n=1)
        await behind_lock.configure(lock="one-at-a-time").defer_async(n=2)
        worker = BatchWorker(app, listen_url=db_url, concurrency=4, fetch_job_polling_interval=POLL,
                             install_signal_handlers=False)  # fmt: skip
        running = asyncio.create_task(worker.run())
        began = time.monotonic()
        try:
            for _ in range(200):
                if len(attempts) == 2 and len(locked) == 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            worker.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(running, timeout=10)
    assert len(attempts) == 2 and len(locked) == 2, (attempts, locked)
    assert max(attempts[1], locked[1]) - began < 5.0  # not the 30 s poll
    with psycopg.connect(db_url) as check:
        statuses = check.execute("SELECT status::text FROM procrastinate_jobs ORDER BY id").fetchall()
    assert statuses == [("succeeded",), ("succeeded",), ("succeeded",)]
