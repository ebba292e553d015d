"""A worker started before its database exists: the first pool gives up (its open timeout, POOL_WAIT), and the
worker opens a new one when the database is there, rather than keeping the closed pool for ever."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from agentlab_sched.demo import make_app
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import POOL_WAIT, run_worker
from tests.support.rows import fetched


async def _until(predicate: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def test_a_pool_that_could_not_open_is_replaced(
    pg_server: str, template_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"late_{os.getpid()}"
    url = conninfo.make_conninfo(pg_server, dbname=name)
    caplog.set_level(logging.WARNING, logger="agentlab_sched")
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_worker(make_app(url), url, stop=stop, install_signal_handlers=False, settings=Settings(locale="en"))
    )
    try:
        # The pool gives up opening after POOL_WAIT (not psycopg_pool's 30 s): the message comes then.
        started = time.monotonic()
        await _until(lambda: "opening the worker's connection pool: PoolTimeout" in caplog.text, 30)
        assert time.monotonic() - started < POOL_WAIT * 3
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')

        def reported() -> bool:
            with psycopg.connect(url, autocommit=True) as conn:
                return bool(fetched(conn.execute("SELECT count(*) FROM agentlab_sched.workers").fetchone())[0])

        await _until(reported, 60)
        assert "PoolClosed" not in caplog.text
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=10)
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
