"""Helpers for privilege tests: login roles made for one test, and connections as them.

Roles belong to the whole server, so each test's roles get names of their own and are dropped (with
whatever they were granted) when the test ends. A password is set so that the helpers also work on a
server that does not trust local connections (AGENTLAB_SCHED_TEST_DATABASE_URL).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import conninfo, sql
from psycopg.rows import TupleRow

from agentlab_sched.database.roles import RoleNames, create_roles

PASSWORD = "agentlab-test"
_counter = itertools.count()


class Roles:
    """Creates login roles on the server of ``db_url``; `drop_all` removes them again."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self.made: list[str] = []

    def login(self, base: str, *member_of: str) -> str:
        """A new login role (``<base>_<pid>_<n>``), member of ``member_of``; returns its name."""
        name = f"{base}_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), PASSWORD))
            for group in member_of:
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(name)))
        self.made.append(name)
        return name

    def groups(self) -> RoleNames:
        """The reader, admin and worker roles, made for this test by ``roles create`` (create_roles)."""
        names = RoleNames.with_prefix(f"t{os.getpid()}_{next(_counter)}")
        self.made.extend([names.worker, names.admin, names.reader])  # dropped in this order, members first
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            create_roles(conn, names)
        return names

    def url(self, role: str) -> str:
        """``db_url`` connecting as ``role``."""
        return conninfo.make_conninfo(self.db_url, user=role, password=PASSWORD)

    @contextmanager
    def connect(self, role: str) -> Iterator[psycopg.Connection[TupleRow]]:
        """An autocommit connection as ``role`` (tuple rows)."""
        with psycopg.connect(self.url(role), autocommit=True) as conn:
            yield conn

    def drop_all(self, extra: tuple[str, ...] = ()) -> None:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            for name in [*reversed(self.made), *extra]:
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
                if exists:
                    conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
