"""A fire request's inputs are checked when it is carried out, against the task actually launched and with
the privileges of the login that asked: a request made while the schedule ran another task is no way to
run SQL as a role the requester may not act as."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg import sql

from agentlab_sched.tasks.sql import SQL_TASK
from tests.support.rows import fetched
from tests.support.security_helpers import Roles


def _author(db_url: str, roles: Roles) -> tuple[str, str, str]:
    """An admin with the sql privilege, a member of `mine`, not of `finance` (both may log in)."""
    groups = roles.groups()
    author = roles.login("author", groups.admin)
    mine = roles.login("mine")
    finance = roles.login("finance")
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text, text, text, text, text, text,"
                    " interval, boolean) TO {}").format(sql.Identifier(author))
        )  # fmt: skip
        owner.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(mine), sql.Identifier(author)))
    return author, mine, finance


def _carry_out(db_url: str, request_id: int) -> dict[str, Any]:
    """What a worker does with the request (its due time is the instant asked for); the request's row."""
    with psycopg.connect(db_url, autocommit=True, row_factory=psycopg.rows.dict_row) as c:
        c.execute("SELECT agentlab_sched.register_tasks(%s)", ([SQL_TASK, "demo.echo"],))
        c.execute(
            "SELECT agentlab_sched.carry_out_request(r.id, ARRAY[r.fire_at]) FROM agentlab_sched.fire_requests r"
            " WHERE r.id = %s",
            (request_id,),
        )
        row = c.execute(
            "SELECT status, error_code, error_params, error, requested_login FROM agentlab_sched.fire_requests"
            " WHERE id = %s",
            (request_id,),
        ).fetchone()
        assert row is not None
        row["runs"] = c.execute("SELECT task, inputs FROM agentlab_sched.runs").fetchall()
    return row


def test_inputs_asked_for_another_task_are_checked_against_the_task_launched(db_url: str, roles: Roles) -> None:
    author, mine, finance = _author(db_url, roles)
    here = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    own = {"command": "SELECT 1", "database": here, "username": mine}
    other = {"command": "DELETE FROM payroll", "database": here, "username": finance}
    with roles.connect(author) as c, c.transaction():
        c.execute("SELECT agentlab_sched.schedule('s', '0 3 * * *', 'demo.echo', %s::jsonb)", (json.dumps(own),))
        # accepted: for demo.echo these are just inputs
        request_id = fetched(
            c.execute("SELECT agentlab_sched.trigger('s', %s::jsonb)", (json.dumps(other),)).fetchone()
        )[0]
        c.execute("SELECT agentlab_sched.alter_schedule('s', task => %s)", (SQL_TASK,))  # its own inputs: fine
    done = _carry_out(db_url, request_id)
    assert (done["status"], done["error_code"], done["requested_login"], done["runs"]) == (
        "failed",
        "sql.not_allowed",
        author,
        [],
    )
    assert done["error_params"] == {
        "value": finance, "user": author,
        "why": {"msg": "sql.not_allowed.not_member", "params": {"value": finance, "user": author}},
    }  # fmt: skip
    assert done["error"] == (
        f"username: {author} may not schedule SQL to run as {finance}: {author} is not a member of {finance}, and "
        f"nobody gains a role through a schedule (GRANT {finance} TO {author}) (docs/security.md)"
    )


def test_the_requesters_privileges_at_launch_are_what_counts(db_url: str, roles: Roles) -> None:
    author, mine, _ = _author(db_url, roles)
    here = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    inputs = {"command": "SELECT 2", "database": here, "username": mine}
    with roles.connect(author) as c:
        c.execute("SELECT agentlab_sched.schedule_sql('q', '0 3 * * *', 'SELECT 1', %s, %s)", (here, mine))
        first = fetched(c.execute("SELECT agentlab_sched.trigger('q', %s::jsonb)", (json.dumps(inputs),)).fetchone())[0]
        second = fetched(c.execute("SELECT agentlab_sched.trigger('q', %s::jsonb)", (json.dumps(inputs),)).fetchone())[
            0
        ]
    started = _carry_out(db_url, first)
    assert (started["status"], started["error_code"]) == ("done", None)
    assert started["runs"] == [{"task": SQL_TASK, "inputs": inputs}]
    with psycopg.connect(db_url, autocommit=True) as owner:  # the author is no longer a member of mine
        owner.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(mine), sql.Identifier(author)))
    refused = _carry_out(db_url, second)
    assert (refused["status"], refused["error_code"], len(refused["runs"])) == ("failed", "sql.not_allowed", 1)
