"""Schedules that nobody can corrupt by the back door (docs/security.md): the audit cannot be bypassed,
bookkeeping is checked, templates and messages substitute once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.firing.tick import fire_due
from tests.support.firing_helpers import EN, NINE, make_schedule, runs_of
from tests.support.rows import fetched


async def changes(conn: psycopg.AsyncConnection[DictRow], sid: int) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT operation, db_role, old_values, new_values FROM agentlab_sched.schedule_changes "
        "WHERE schedule_id = %s ORDER BY id",
        (sid,),
    )
    return await cur.fetchall()


async def test_a_session_setting_is_no_way_around_the_audit(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, remaining_runs=5)
    await conn.execute("SET agentlab_sched.countdown = 'on'")
    await conn.execute("SELECT agentlab_sched.alter_schedule('store-report', remaining_runs => 4)")
    await conn.execute("UPDATE agentlab_sched.schedules SET remaining_runs = 3 WHERE id = %s", (sid,))
    cur = await conn.execute("SELECT remaining_runs, version FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert await cur.fetchone() == {"remaining_runs": 3, "version": 3}
    audit = await changes(conn, sid)
    assert [
        (c["operation"], c["old_values"]["remaining_runs"], c["new_values"]["remaining_runs"]) for c in audit[1:]
    ] == [
        ("update", 5, 4),
        ("update", 4, 3),
    ]
    cur = await conn.execute("SELECT session_user AS who")
    assert {c["db_role"] for c in audit} == {fetched(await cur.fetchone())["who"]}


async def test_a_launch_still_counts_down_as_bookkeeping(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn, remaining_runs=2)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    cur = await conn.execute("SELECT remaining_runs, version FROM agentlab_sched.schedules WHERE id = %s", (sid,))
    assert await cur.fetchone() == {"remaining_runs": 1, "version": 1}
    assert [c["operation"] for c in await changes(conn, sid)] == ["insert"]
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.bookkeeping_marks")
    assert fetched(await cur.fetchone())["n"] == 0  # no mark left behind for a later update to use


async def test_bookkeeping_columns_are_checked(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await make_schedule(conn)
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute("UPDATE agentlab_sched.schedules SET consecutive_failures = -100 WHERE id = %s", (sid,))
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        await conn.execute("UPDATE agentlab_sched.schedules SET session_key = %s WHERE id = %s", ("k\x1b[2J", sid))
    assert str(caught.value).startswith("session_key: character 2 is an invisible control character")


@pytest.mark.parametrize("context", ["isolated", "persistent"])  # set-based apply, and launch() one by one
@pytest.mark.parametrize("name", ["x {{ schedule.year }}", "y {{ no.such.placeholder }}", 'z "{{ schedule.date }}\\'])
async def test_a_name_that_looks_like_a_placeholder_is_substituted_once(
    conn: psycopg.AsyncConnection[DictRow], name: str, context: str
) -> None:
    inputs = {"who": "{{ schedule.name }}", "day": "{{ schedule.date }}", "again": "{{schedule.name}}!"}
    sid = await make_schedule(conn, name, inputs=inputs, context=context)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    [run] = await runs_of(conn, sid)
    assert run["inputs"] == {"who": name, "day": "2026-10-05", "again": f"{name}!"}


async def test_messages_substitute_once(conn: psycopg.AsyncConnection[DictRow]) -> None:
    cur = await conn.execute(
        """SELECT agentlab_sched.msg('schedule.too_long', '{"field": "{length} {max}", "length": 5, "max": 3}',
                                     'en') AS text"""
    )
    assert fetched(await cur.fetchone())["text"] == "{length} {max}: 5 characters is more than the 3 allowed"


async def test_an_approval_records_the_session_role_and_the_database_clock(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    from agentlab_sched.runs import lifecycle
    from tests.support.firing_helpers import set_job_status
    from tests.support.runs import approvals_of, ask, launch

    sid = await make_schedule(conn, next_run_at=None)
    run = await launch(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "Pay the invoice?", None)
    cur = await conn.execute("SELECT session_user AS role, now() AS before")
    me = fetched(await cur.fetchone())
    # A caller that says "cfo" and 2020: the label is kept as a label, the rest is the database's.
    with pytest.raises(psycopg.errors.UndefinedFunction):
        await conn.execute(
            "SELECT agentlab_sched.approve(%s, 'cfo', 'fine', 1, '2020-01-01 00:00+00'::timestamptz)", (run["id"],)
        )
    await lifecycle.approve(conn, run["id"], "cfo", "fine")
    [decision] = await approvals_of(conn, run["id"])
    assert (decision["decided_by"], decision["decided_label"]) == (me["role"], "cfo")
    cur = await conn.execute("SELECT now() AS after")
    assert me["before"] <= decision["decided_at"] <= fetched(await cur.fetchone())["after"]


# ---------------------------------------------------------------------------------------------- sizes


async def test_inputs_over_the_limit_are_refused_in_sql_and_python(conn: psycopg.AsyncConnection[DictRow]) -> None:
    from agentlab_sched.errors import ValidationError
    from agentlab_sched.limits import LIMITS
    from agentlab_sched.schedules import admin

    big = {"blob": "x" * LIMITS["inputs_bytes"]}
    size = len(json.dumps(big))
    expected = f"inputs: {size} bytes is more than the {LIMITS['inputs_bytes']} allowed"
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        await conn.execute(
            "SELECT agentlab_sched.schedule('big', '0 9 * * *', 'demo.echo', %s::jsonb)", (json.dumps(big),)
        )
    assert caught.value.diag.message_primary == expected and caught.value.diag.column_name == "inputs"
    with pytest.raises(ValidationError) as err:
        await admin.schedule(conn, "big", "0 9 * * *", "demo.echo", big)
    assert (str(err.value), err.value.field) == (expected, "inputs")
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedules")
    assert fetched(await cur.fetchone())["n"] == 0
    assert (await admin.schedule(conn, "fine", "0 9 * * *", "demo.echo", {"blob": "x" * 60_000})).name == "fine"


async def test_a_trigger_override_over_the_limit_is_refused(conn: psycopg.AsyncConnection[DictRow]) -> None:
    from agentlab_sched.errors import ValidationError
    from agentlab_sched.firing.requests import trigger

    await make_schedule(conn)
    override = {"blob": "y" * (20 * 1024 * 1024)}
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        await conn.execute("SELECT agentlab_sched.trigger('store-report', %s::jsonb)", (json.dumps(override),))
    assert str(caught.value).startswith("inputs: 20971532 bytes is more than the 65536 allowed")
    with pytest.raises(ValidationError):
        await trigger(conn, "store-report", override, settings=EN)
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fire_requests")
    assert fetched(await cur.fetchone())["n"] == 0


async def test_cron_text_has_a_length_limit_checked_before_parsing(conn: psycopg.AsyncConnection[DictRow]) -> None:
    import time

    from agentlab_sched.core import cron
    from agentlab_sched.errors import ValidationError

    huge = "0 " + ",".join(["9"] * 200_000) + " * * *"
    began = time.monotonic()
    with pytest.raises(ValidationError) as err:
        cron.parse(huge)
    assert str(err.value) == f"cron: {len(huge)} characters is more than the 1000 allowed"
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        await conn.execute("SELECT agentlab_sched.schedule('huge', %s, 'demo.echo')", (huge,))
    assert caught.value.diag.message_primary == str(err.value)
    assert time.monotonic() - began < 1.0
