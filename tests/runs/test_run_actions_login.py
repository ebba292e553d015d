"""cancel_run, resume_run and abandon record who acted as the database knows it (the login role) and
when (the database clock), whatever name and time the caller gave; the name stays as a label."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.firing_helpers import make_schedule
from tests.support.rows import Conn, fetched
from tests.support.runs import launch
from tests.support.security_helpers import Roles

LONG_AGO = datetime(1999, 1, 1, tzinfo=UTC)


async def test_a_cancel_records_the_login_and_the_database_clock(conn: Conn, roles: Roles) -> None:
    admin = roles.login("carol", roles.groups().admin)
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    sid = await make_schedule(conn, "s", task="demo.echo", next_run_at=None)
    run = await launch(conn, sid)
    with roles.connect(admin) as c:
        c.execute("SELECT agentlab_sched.cancel_run(%s, by => 'alice', now => %s)", (run["id"], LONG_AGO))
        clock = fetched(c.execute("SELECT clock_timestamp()").fetchone())[0]
    cur = await conn.execute(
        "SELECT cancelled_by, acted_by_login, acted_at, finished_at FROM agentlab_sched.runs WHERE id = %s",
        (run["id"],),
    )
    row = fetched(await cur.fetchone())
    assert (row["cancelled_by"], row["acted_by_login"]) == ("alice", admin)
    assert abs((clock - row["acted_at"]).total_seconds()) < 60  # the database's clock, not the caller's
    assert row["finished_at"] == LONG_AGO  # what the caller said stays what it said


async def test_resume_and_abandon_record_the_login_too(conn: Conn, roles: Roles) -> None:
    admin = roles.login("dora", roles.groups().admin)
    await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    sid = await make_schedule(conn, "s", task="demo.echo", next_run_at=None, overlap="allow_all")
    first = await launch(conn, sid)
    await conn.execute("UPDATE agentlab_sched.runs SET status = 'suspended' WHERE id = %s", (first["id"],))
    with roles.connect(admin) as c:
        c.execute("SELECT agentlab_sched.resume_run(%s, by => 'eve', now => %s)", (first["id"], LONG_AGO))
    await conn.execute("UPDATE agentlab_sched.runs SET status = 'suspended' WHERE id = %s", (first["id"],))
    cur = await conn.execute("SELECT acted_by_login FROM agentlab_sched.runs WHERE id = %s", (first["id"],))
    assert fetched(await cur.fetchone())["acted_by_login"] == admin
    second = await launch(conn, sid)
    await conn.execute("UPDATE agentlab_sched.runs SET status = 'suspended' WHERE id = %s", (second["id"],))
    with roles.connect(admin) as c:
        c.execute("SELECT agentlab_sched.abandon(%s, by => 'eve', now => %s)", (second["id"], LONG_AGO))
    cur = await conn.execute(
        "SELECT cancelled_by, acted_by_login FROM agentlab_sched.runs WHERE id = %s", (second["id"],)
    )
    assert await cur.fetchone() == {"cancelled_by": "eve", "acted_by_login": admin}
