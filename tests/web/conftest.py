"""Fixtures of the dashboard's tests: login roles made for one test, and HTTP clients of the app signed in as them.

Roles belong to the whole server, so each test's get names of their own and are dropped when it ends. The
reader and admin logins are members of the roles ``roles create`` makes (`create_roles`); the on-call login
has the reader's rights and ``trigger_now`` only (docs/security.md).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import TupleRow

from agentlab_sched.database.roles import RoleNames, create_roles
from tests.support.web import PASSWORD, Web

_counter = itertools.count()


def _login(conn: psycopg.Connection[TupleRow], base: str, *member_of: str) -> str:
    name = f"{base}_{os.getpid()}_{next(_counter)}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), PASSWORD))
    for group in member_of:
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(name)))
    return name


@pytest.fixture
def web(db_url: str) -> Iterator[Web]:
    names = RoleNames.with_prefix(f"w{os.getpid()}_{next(_counter)}")
    with psycopg.connect(db_url, autocommit=True) as conn:
        create_roles(conn, names)
        reader = _login(conn, "web_reader", names.reader)
        admin_login = _login(conn, "web_admin", names.admin)
        oncall = _login(conn, "web_oncall", names.reader)
        conn.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION agentlab_sched.trigger_now(text, boolean) TO {}").format(
                sql.Identifier(oncall)
            )
        )
    site = Web(db_url, names, reader, admin_login, oncall)
    try:
        yield site
    finally:
        for client in site.clients:
            client.__exit__(None, None, None)
        with psycopg.connect(db_url, autocommit=True) as conn:
            for role in (oncall, admin_login, reader, names.worker, names.admin, names.reader):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
