"""Fixtures of the cron tests that compare the Python core with SQL."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo
from psycopg.rows import DictRow

from agentlab_sched import database as db


@pytest.fixture(scope="module")
def sql(request: pytest.FixtureRequest, pg_server: str, template_db: str) -> Iterator[psycopg.Connection[DictRow]]:
    """An autocommit connection (locale en) to a database of the module's own, shared by its tests."""
    name = f"{request.module.__name__.rsplit('.', 1)[-1]}_{os.getpid()}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    try:
        with db.connect_sync(conninfo.make_conninfo(pg_server, dbname=name), locale="en") as conn:
            yield conn
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
