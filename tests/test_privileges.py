"""Privileges: who may do what (docs/security.md)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.security_helpers import Roles


@pytest.fixture
def roles(db_url: str) -> Iterator[Roles]:
    made = Roles(db_url)
    try:
        yield made
    finally:
        made.drop_all()


def test_sql_schedules_need_the_privilege_and_membership_of_the_role_they_run_as(db_url: str, roles: Roles) -> None:
    author = roles.login("author")
    reporting = roles.login("reporting")
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT USAGE ON SCHEMA agentlab_sched TO "{author}"')

    def may(run_as: str) -> bool:
        with roles.connect(author) as conn:
            return conn.execute("SELECT agentlab_sched.may_schedule_sql(%s)", (run_as,)).fetchone()[0]

    assert may(reporting) is False  # no schedule_sql function, so nobody holds the privilege
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(
            "CREATE FUNCTION agentlab_sched.schedule_sql(name text) RETURNS bigint LANGUAGE sql AS $$SELECT 1$$"
        )
        owner.execute("REVOKE EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text) FROM PUBLIC")
    assert may(reporting) is False  # the privilege is not granted
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text) TO "{author}"')
    assert may(reporting) is False  # not a member of reporting: no role is gained through a schedule
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(f'GRANT "{reporting}" TO "{author}"')
        superuser = owner.execute("SELECT current_user").fetchone()[0]
    assert may(reporting) is True
    assert may("no_such_role_anywhere") is False
    assert may(superuser) is False  # never a superuser, even for a member
