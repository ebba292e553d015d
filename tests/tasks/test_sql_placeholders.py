"""Placeholders in a sql schedule's command are SQL literals: a schedule's name (anyone's to change who may
rename it) never changes what the SQL says; renaming a sql schedule is the privilege of changing its
command."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import DictRow

from agentlab_sched.firing.tick import fire_due
from agentlab_sched.schedules import admin
from agentlab_sched.settings import Settings
from tests.support.rows import Conn, fetched
from tests.support.runs import launch
from tests.support.security_helpers import Roles

NOW = datetime(2026, 3, 1, tzinfo=UTC)
EVIL = "x'); DO $$ BEGIN RAISE 'pwned'; END $$; --"


def _render(c: psycopg.Connection[DictRow], command: str, name: str) -> str:
    return fetched(
        c.execute(
            "SELECT agentlab_sched.render_sql_command(%s, agentlab_sched.template_values("
            "'2026-03-01 03:00+00', 'UTC', %s, 'scheduled')) AS r",
            (command, name),
        ).fetchone()
    )["r"]


def _refusal(c: psycopg.Connection[DictRow], command: str, name: str) -> tuple[str, str]:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        _render(c, command, name)
    detail = json.loads(caught.value.diag.message_detail or "{}")
    return detail["code"], detail["params"]["placeholder"]


def test_a_placeholder_in_the_sql_is_a_literal_and_inside_quoted_text_cannot_end_it(
    sync_conn: psycopg.Connection[DictRow],
) -> None:
    c = sync_conn
    assert _render(c, "INSERT INTO log VALUES ({{ schedule.name }})", EVIL) == (
        "INSERT INTO log VALUES ('x''); DO $$ BEGIN RAISE ''pwned''; END $$; --')"
    )
    assert _render(c, "SELECT {{schedule.name}}", "a\\b") == "SELECT E'a\\\\b'"
    # inside quotes (as pg_cron users write dates) the value stands as it is: it cannot end them
    assert (
        _render(c, "DELETE FROM t WHERE day < '{{ schedule.date }}'", EVIL) == "DELETE FROM t WHERE day < '2026-03-01'"
    )
    assert _render(c, "SELECT 'it''s {{ schedule.name }}'", "nightly (b)") == "SELECT 'it''s nightly (b)'"
    for command in (
        "INSERT INTO log VALUES ('{{ schedule.name }}')",
        "SELECT E'it\\'s {{ schedule.name }}'",
        'SELECT 1 AS "{{ schedule.name }}"',
        "DO $f$ BEGIN RAISE NOTICE '%', {{ schedule.name }}; END $f$",
        "DO $$ BEGIN PERFORM 1; END $$; -- {{ schedule.name }}",
        "/* a /* nested */ {{ schedule.name }} */ SELECT 1",
    ):
        assert _refusal(c, command, EVIL) == ("sql.unsafe_value", "{{ schedule.name }}"), command
    assert _refusal(c, "-- {{ schedule.name }}\nSELECT 1", "a\nDROP TABLE t") == (
        "sql.unsafe_value",
        "{{ schedule.name }}",
    )
    # what is not quoted is read as SQL again after each closing quote, comment or dollar-quoted body
    assert _render(c, "SELECT 'a', $q$b$q$, \"c\" /* d */, {{ schedule.name }} -- e", EVIL).endswith(
        "\"c\" /* d */, 'x''); DO $$ BEGIN RAISE ''pwned''; END $$; --' -- e"
    )
    # with standard_conforming_strings in play every string is read with backslash escapes
    assert _refusal(c, "SET standard_conforming_strings = off; SELECT 'a\\' {{ schedule.name }}'", EVIL)[0] == (
        "sql.unsafe_value"
    )


async def test_a_renamed_schedule_fires_its_name_as_a_literal(conn: Conn, roles: Roles) -> None:
    reporting = roles.login("reporting")
    here = conn.info.dbname
    s = await admin.schedule_sql(
        conn, "log", "0 3 * * *", "INSERT INTO log VALUES ({{ schedule.name }}, '{{ schedule.date }}')",
        database=here, username=reporting, now=NOW,
    )  # fmt: skip
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['agentlab_sched:sql'])")
    await conn.execute("SELECT agentlab_sched.alter_schedule('log', new_name => %s)", (EVIL,))
    run = await launch(conn, s.id)
    assert run["inputs"]["command"].startswith(
        "INSERT INTO log VALUES ('x''); DO $$ BEGIN RAISE ''pwned''; END $$; --', '20"
    )


def test_renaming_a_sql_schedule_needs_the_sql_privilege(db_url: str, roles: Roles) -> None:
    groups = roles.groups()
    reporting = roles.login("reporting")
    other = roles.login("other", groups.admin)  # the SQL API, without the sql privilege
    here = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(
            "SELECT agentlab_sched.schedule_sql('nightly', '0 3 * * *', 'SELECT {{ schedule.name }}', %s, %s)",
            (here, reporting),
        )
    with roles.connect(other) as c:
        c.execute("SELECT agentlab_sched.schedule('plain', '0 3 * * *', 'demo.echo')")
        c.execute("SELECT agentlab_sched.alter_schedule('plain', new_name => 'plain-2')")  # other tasks: fine
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as caught:
            c.execute("SELECT agentlab_sched.alter_schedule('nightly', new_name => %s)", (EVIL,))
    detail = caught.value.diag.message_detail
    assert detail is not None and json.loads(detail)["code"] == "sql.not_allowed"
    with psycopg.connect(db_url) as c:
        names = [r[0] for r in c.execute("SELECT name FROM agentlab_sched.schedules ORDER BY name")]
    assert names == ["nightly", "plain-2"]
    with psycopg.connect(db_url, autocommit=True) as owner:  # the privilege and membership: allowed
        owner.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(reporting), sql.Identifier(other)))
        owner.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text, text, text, text, text, text,"
                    " interval, boolean) TO {}").format(sql.Identifier(other))
        )  # fmt: skip
    with roles.connect(other) as c:
        c.execute("SELECT agentlab_sched.alter_schedule('nightly', new_name => 'nightly-2')")


async def test_a_scheduled_fire_renders_the_command_the_same_way(conn: Conn, roles: Roles) -> None:
    """The tick's set-based launch leaves a sql command with placeholders to launch()."""
    reporting = roles.login("reporting")
    here = conn.info.dbname
    s = await admin.schedule_sql(
        conn, EVIL, "0 3 * * *", "INSERT INTO log VALUES ({{ schedule.name }})", database=here, username=reporting,
        now=NOW,
    )  # fmt: skip
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['agentlab_sched:sql'])")
    assert s.next_run_at is not None
    await fire_due(conn, s.next_run_at + timedelta(seconds=1), settings=Settings(locale="en"))
    cur = await conn.execute("SELECT inputs ->> 'command' AS command FROM agentlab_sched.runs")
    assert await cur.fetchall() == [
        {"command": "INSERT INTO log VALUES ('x''); DO $$ BEGIN RAISE ''pwned''; END $$; --')"}
    ]
