"""The locks of code sync and migrate: a role with only CONNECT cannot take them (an advisory lock was
anyone's), a session that holds them makes the other give up after 10 s naming it, and a worker's sync
that gave up is tried again."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from agentlab_sched import database as db
from agentlab_sched.database.migrate import LOCK_KEY, migrate
from agentlab_sched.errors import Conflict
from agentlab_sched.schedules import code
from tests.support.code_app import app as code_app

OLD_SYNC_KEY = 7161746375646531  # the advisory key code sync used to wait for


@pytest.fixture
def outsider(db_url: str) -> Iterator[str]:
    """A login role with nothing but CONNECT; the URL connecting as it."""
    name = f"outsider_{os.getpid()}"
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield psycopg.conninfo.make_conninfo(db_url, user=name)
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


async def test_an_outsiders_advisory_locks_hold_up_neither_sync_nor_migrate(db_url: str, outsider: str) -> None:
    with psycopg.connect(outsider, autocommit=True) as c:
        c.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", (OLD_SYNC_KEY, LOCK_KEY))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # and the locks used now are not its to take
            c.execute("BEGIN; LOCK TABLE agentlab_sched.code_deployments IN EXCLUSIVE MODE")
        c.execute("ROLLBACK")
        started = time.monotonic()
        conn = await db.connect(db_url, locale="en")
        try:
            report = await code.sync(conn, code_app)
        finally:
            await conn.close()
        assert report.created == ["nightly"]
        migrate(db_url)
        assert time.monotonic() - started < 8


async def test_a_held_sync_lock_is_given_up_after_10_s_naming_its_holder_and_the_worker_retries(
    db_url: str,
) -> None:
    holder = psycopg.connect(db_url, autocommit=True)
    holder.execute("SET application_name = 'the other sync'")
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE agentlab_sched.code_deployments IN EXCLUSIVE MODE")
    pid = holder.info.backend_pid
    conn: Any = await db.connect(db_url, locale="en")
    code._synced.discard(id(code_app))
    try:
        started = time.monotonic()
        with pytest.raises(Conflict) as caught:
            await code.sync(conn, code_app)
        assert 9.5 < time.monotonic() - started < 15
        err = caught.value
        assert err.code == "code.sync_locked"
        assert err.message("en").startswith(
            f"the schedules defined in code were not synced: another sync has held its lock for 10 s (pid {pid} ("
        )
        assert "the other sync, since " in err.message("en")
        assert err.message("zh-CN").startswith("代码中定义的定时任务未同步:另一个同步已持有其锁 10 秒(pid ")
        # a worker's sync at start gives up the same way, and is tried again once the lock is free
        assert await code.sync_once(conn, code_app) is None
        holder.execute("ROLLBACK")
        again = await code.sync_once(conn, code_app)
        assert again is not None and again.created == ["nightly"]
        assert await code.sync_once(conn, code_app) is None  # synced: once is enough
    finally:
        code._synced.discard(id(code_app))
        holder.close()
        await conn.close()


def test_a_held_migrate_lock_is_given_up_after_10_s_naming_its_holder(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as holder:
        holder.execute("SET application_name = 'a long migrate'")
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE agentlab_sched.schema_migrations IN EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(Conflict) as caught:
            migrate(db_url)
        assert 9.5 < time.monotonic() - started < 15
        assert caught.value.code == "migrate.locked"
        assert caught.value.message("en").startswith(
            f"migrate did not start: another session has held migrate's lock for 10 s (pid {holder.info.backend_pid} ("
        )
        assert "a long migrate, since " in caught.value.message("en")
        holder.execute("ROLLBACK")
    migrate(db_url)
