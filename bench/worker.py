"""A worker process for the benchmarks, on AGENTLAB_SCHED_DATABASE_URL; SIGTERM or SIGINT stops it.

    python -m bench.worker --mode precise   # agentlab-sched's worker: run_worker (the precise loop)
    python -m bench.worker --mode tick      # a plain procrastinate worker on the demo app (periodic tick only)
    python -m bench.worker --mode bare      # a plain procrastinate worker, demo tasks without the scheduler
    python -m bench.worker --mode loop      # the precise loop alone, no procrastinate worker

The apps are bench/apps.py's (the demo app with ``bench.hit``; ``bare``: ``bench.hit`` and the demo tasks
alone). ``tick`` is what ``procrastinate --app agentlab_sched.demo.app worker`` runs; ``bare`` and ``loop``
split the idle cost of ``precise`` into its parts.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

import procrastinate

from agentlab_sched import demo
from agentlab_sched.database.connections import scheduler_connection
from agentlab_sched.settings import Settings
from agentlab_sched.worker.blueprint import register_app_tasks
from agentlab_sched.worker.precise import Scheduler
from agentlab_sched.worker.process import run_worker

from . import apps


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _plain(app: procrastinate.App, concurrency: int) -> None:
    stop = _stop_on_signals()
    async with app.open_async():
        worker = asyncio.create_task(
            app.run_worker_async(concurrency=concurrency, install_signal_handlers=False, shutdown_graceful_timeout=2)
        )
        await stop.wait()
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def _loop_only(app: procrastinate.App, url: str) -> None:
    stop = _stop_on_signals()
    settings = Settings.from_env()
    async with app.open_async():
        async with scheduler_connection(app, settings) as conn:
            await register_app_tasks(app, conn, force=True)
        scheduler = Scheduler(app, url, settings)
        scheduler.start()
        await stop.wait()
        await scheduler.stop()


async def main(mode: str, concurrency: int) -> None:
    url = os.environ["AGENTLAB_SCHED_DATABASE_URL"]
    if mode == "precise":
        await run_worker(apps.make_app(url), url, concurrency=concurrency)
    elif mode == "tick":
        await _plain(apps.make_app(url), concurrency)
    elif mode == "bare":
        app = apps.make_bare_app(url)
        for func in (demo.echo, demo.sleep, demo.fail):
            app.task(name=f"demo.{func.__name__}")(func)
        await _plain(app, concurrency)
    elif mode == "loop":
        await _loop_only(apps.make_app(url), url)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["precise", "tick", "bare", "loop"], default="precise")
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=os.environ.get("BENCH_LOG_LEVEL", "WARNING"))
    asyncio.run(main(args.mode, args.concurrency))
