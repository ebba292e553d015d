"""Pinned search paths (docs/security.md): no object planted in a schema another role can write is ever
called by our functions, every function of schema agentlab_sched is pinned (functions added later too),
and the definer functions are the owner's, closed to PUBLIC and granted to the roles that call them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.database.migrate import migrate
from agentlab_sched.errors import from_database
from agentlab_sched.firing.requests import backfill, trigger
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.runs import lifecycle
from tests.support.firing_helpers import EN, NINE, make_schedule, set_job_status
from tests.support.rows import Conn, SyncConn, fetched
from tests.support.runs import ask, launch
from tests.support.security_helpers import Roles

PINNED = "search_path=pg_catalog, pg_temp"

#: Operators and functions a role that may CREATE in public plants: more exact matches for the argument
#: types our functions use than pg_catalog's polymorphic ones (`text || anynonarray`, VARIADIC "any").
PLANTED_OPERATORS = [
    ("text", "bigint"),
    ("text", "integer"),
    ("text", "uuid"),
    ("text", "timestamp with time zone"),
    ("text", "numeric"),
    ("text", "boolean"),
    ("text", "interval"),
    ("bigint", "text"),
    ("uuid", "text"),
]
PLANTED_FUNCTIONS = [
    ("left", "a text, b bigint", "text", "pg_catalog.left(a, b::integer)"),
    ("lpad", "a text, b bigint, c text", "text", "pg_catalog.lpad(a, b::integer, c)"),
    ("jsonb_build_object", "a text, b bigint", "jsonb", "pg_catalog.jsonb_build_object(a, b)"),
    ("jsonb_build_object", "a text, b uuid", "jsonb", "pg_catalog.jsonb_build_object(a, b)"),
    ("format", "a text, b bigint", "text", "pg_catalog.format(a, b)"),
    ("gen_random_uuid", "", "uuid", "pg_catalog.gen_random_uuid()"),
]


def plant(db_url: str, roles: Roles) -> str:
    """A role that may create in public plants its operators and functions there; each logs its calls."""
    evil = roles.login("planter")
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(sql.Identifier(evil)))
    with roles.connect(evil) as conn:
        conn.execute("CREATE TABLE public.hijack_log (called text, by_role text DEFAULT current_user)")
        conn.execute("GRANT INSERT, SELECT ON public.hijack_log TO PUBLIC")
        for n, (left, right) in enumerate(PLANTED_OPERATORS):
            conn.execute(
                f"""CREATE FUNCTION public.planted_cat_{n}(a {left}, b {right}) RETURNS text LANGUAGE plpgsql AS $$
                    BEGIN
                        INSERT INTO public.hijack_log (called) VALUES ('||({left}, {right})');
                        RETURN a::text OPERATOR(pg_catalog.||) b::text;
                    END $$"""
            )
            conn.execute(
                f"CREATE OPERATOR public.|| (LEFTARG = {left}, RIGHTARG = {right}, FUNCTION = public.planted_cat_{n})"
            )
        for name, args, returns, body in PLANTED_FUNCTIONS:
            conn.execute(
                f"""CREATE FUNCTION public.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $$
                    BEGIN
                        INSERT INTO public.hijack_log (called) VALUES ('{name}({args})');
                        RETURN {body};
                    END $$"""
            )
    return evil


async def calls(conn: Conn) -> list[dict[str, Any]]:
    cur = await conn.execute("SELECT called, by_role FROM public.hijack_log")
    return await cur.fetchall()


async def test_objects_planted_in_public_are_never_called_by_our_functions(
    db_url: str, roles: Roles, conn: Conn
) -> None:
    evil = plant(db_url, roles)
    # The scheduler does not fire while another role may create in public or owns objects there (the next
    # test): the planted objects stay, given to the owner, and our functions must still never call them.
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(sql.Identifier(evil)))
        owner.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(sql.Identifier(evil)))
    # Everything runs as the superuser the tests connect as: the role a hijack would have become.
    # The firing path: set-based (allow_all), one by one (buffer_one's queueing lock, a persistent
    # session, cancel_other), manual and backfill fires through launch().
    simple = await make_schedule(conn, "simple", overlap="allow_all")
    await make_schedule(conn, "queued", overlap="buffer_one", remaining_runs=3)
    session = await make_schedule(conn, "session", context="persistent", overlap="allow_all")
    cancels = await make_schedule(conn, "cancels", overlap="cancel_other")
    await conn.execute(
        "SELECT agentlab_sched.schedule('by-sql', '0 9 * * *', 'demo.echo', '{\"d\": \"{{ schedule.date }}\"}')"
    )
    await conn.execute("SELECT agentlab_sched.alter_schedule('by-sql', cron => '0 10 * * *', remaining_runs => 2)")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    await fire_due(conn, NINE + timedelta(days=1, seconds=5), settings=EN)
    assert (await trigger(conn, "queued", {"d": "x"}, requested_by="alice", settings=EN)).status is not None
    await trigger(conn, "simple", settings=EN)
    await backfill(conn, "session", NINE - timedelta(days=3), NINE - timedelta(days=1), settings=EN)
    # The run lifecycle: approvals (defer_run_job), rejection, cancel, suspension, timeouts, retention.
    for sid in (simple, cancels):  # cancel_other: defer_run_job takes the schedule's lock
        run = await launch(conn, sid)
        await set_job_status(conn, run["job_id"], "doing")
        await ask(conn, run, "Go on?", {"n": 1})
        await set_job_status(conn, run["job_id"], "succeeded")
        await lifecycle.approve(conn, run["id"], "alice", "yes")
    run = await launch(conn, session)
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "Go on?", None)
    await lifecycle.reject(conn, run["id"], "bob", "no")
    running = await launch(conn, simple)
    await set_job_status(conn, running["job_id"], "doing")
    await conn.execute("SELECT agentlab_sched.detect_suspended(now(), interval '0 seconds')")
    await lifecycle.resume(conn, running["id"], "carol")
    await conn.execute("SELECT agentlab_sched.reset_session('session')")
    await conn.execute(
        "SELECT agentlab_sched.housekeeping(now() + interval '400 days', interval '1 second', interval '1 day')"
    )
    await conn.execute("SELECT agentlab_sched.pause('simple', 'done')")
    await conn.execute("SELECT agentlab_sched.resume('simple')")
    await conn.execute("SELECT agentlab_sched.unschedule('by-sql')")
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fires")
    assert fetched(await cur.fetchone())["n"] >= 8  # the path really ran
    assert await calls(conn) == []
    # The planted objects are live: a statement that searches public calls them.
    await conn.execute("SELECT 'agentlab_sched:' || 42::bigint")
    assert await calls(conn) == [{"called": "||(text, bigint)", "by_role": (await who(conn))}]


async def test_the_scheduler_refuses_to_fire_while_public_is_unsafe(db_url: str, roles: Roles, conn: Conn) -> None:
    """Procrastinate's functions search public: a planted unnest(procrastinate_job_to_defer_v1[]) would be
    called by procrastinate_defer_jobs_v1() inside our launch, as the owner. So migrate, the tick and the
    requests refuse while another role may create in public, and while a role not trusted owns a function
    there (planted while it could)."""
    evil = roles.login("planter")
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(sql.Identifier(evil)))
    with roles.connect(evil) as c:
        c.execute(
            """CREATE FUNCTION public.unnest(jobs public.procrastinate_job_to_defer_v1[])
               RETURNS SETOF public.procrastinate_job_to_defer_v1 LANGUAGE sql
               AS 'SELECT * FROM pg_catalog.unnest(jobs)'"""
        )
    await make_schedule(conn, "simple", overlap="allow_all")
    await conn.commit()

    async def refusal() -> tuple[str, str]:
        with pytest.raises(psycopg.Error) as caught:
            await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
        await conn.rollback()
        err = from_database(caught.value)
        assert err is not None
        return err.code, err.message("en")

    code, words = await refusal()
    assert code == "setup.public_writable" and words.startswith(f"database: {evil} may create objects in schema")
    with pytest.raises(psycopg.Error) as caught:
        migrate(db_url)
    assert json.loads(caught.value.diag.message_detail or "{}")["code"] == "setup.public_writable"
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(sql.Identifier(evil)))
        with pytest.raises(psycopg.Error) as caught:
            owner.execute("SELECT * FROM agentlab_sched.next_request()")
    assert json.loads(caught.value.diag.message_detail or "{}")["params"] == {
        "objects": "public.unnest(public.procrastinate_job_to_defer_v1[])"
    }
    assert await refusal() == (
        "setup.public_planted",
        "database: schema public, where Procrastinate lives, holds functions or operators of another role "
        "(public.unnest(public.procrastinate_job_to_defer_v1[])) that Procrastinate's functions could call with the "
        "scheduler's rights; the scheduler does not fire until they are dropped or owned by a trusted role",
    )
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute("DROP FUNCTION public.unnest(public.procrastinate_job_to_defer_v1[])")
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    cur = await conn.execute("SELECT count(*) AS n FROM agentlab_sched.fires")
    assert fetched(await cur.fetchone())["n"] == 1
    migrate(db_url)


async def who(conn: Conn) -> str:
    cur = await conn.execute("SELECT current_user AS me")
    return fetched(await cur.fetchone())["me"]


def test_every_function_of_the_schema_pins_its_search_path(sync_conn: SyncConn) -> None:
    """Except the ones with an SQL-standard body (``RETURN ...``: sql/01_statuses.sql's run_is_open() and
    the like, which must be inlined, and a SET clause stops that): their names are bound when they are
    made, so no search_path at call time can change them."""
    rows = sync_conn.execute(
        """SELECT p.oid::regprocedure::text AS name, p.proconfig
           FROM pg_proc p WHERE p.pronamespace = 'agentlab_sched'::regnamespace AND p.prosqlbody IS NULL
           ORDER BY 1"""
    ).fetchall()
    assert len(rows) > 100
    unpinned = [r["name"] for r in rows if PINNED not in (r["proconfig"] or [])]
    assert unpinned == [], f"SET search_path = pg_catalog, pg_temp missing (docs/security.md): {unpinned}"


def test_a_function_added_without_a_pinned_path_is_caught(sync_conn: SyncConn) -> None:
    sync_conn.execute("CREATE FUNCTION agentlab_sched.added_later() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    with pytest.raises(AssertionError, match=r"agentlab_sched.added_later\(\)"):
        test_every_function_of_the_schema_pins_its_search_path(sync_conn)


def test_definer_functions_are_the_owners_closed_to_public_and_each_granted_to_a_role(
    sync_conn: SyncConn,
) -> None:
    rows = sync_conn.execute(
        """SELECT p.proname, p.oid::regprocedure::text AS sig, p.prosecdef,
                  p.proowner = n.nspowner AS owned, p.prorettype = 'trigger'::regtype AS is_trigger,
                  EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                          WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public_execute
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'agentlab_sched'"""
    ).fetchall()
    listed = set(
        fetched(sync_conn.execute("SELECT agentlab_sched.role_functions('admin') AS f").fetchone())["f"]
    ) | set(fetched(sync_conn.execute("SELECT agentlab_sched.role_functions('worker') AS f").fetchone())["f"])
    definers = {r["proname"] for r in rows if r["prosecdef"]}
    by_hand = {"schedule_sql"}  # a privilege the owner grants (docs/security.md)
    for r in rows:
        if r["prosecdef"]:
            assert r["owned"], f"{r['sig']} is not owned by the schema's owner"
            assert not r["public_execute"], f"{r['sig']}: EXECUTE not revoked from PUBLIC"
            assert r["is_trigger"] or r["proname"] in listed | by_hand, f"{r['sig']}: granted to no role"
    assert listed - definers == set(), "listed in role_functions but not SECURITY DEFINER"
    assert {"schedules_after_write", "follow_job"} <= definers  # the audit, and runs following their jobs


def test_procrastinates_functions_are_pinned_to_its_schema(sync_conn: SyncConn) -> None:
    rows = sync_conn.execute(
        """SELECT p.oid::regprocedure::text AS name, p.proconfig FROM pg_proc p
           WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'procrastinate\\_%'"""
    ).fetchall()
    assert len(rows) > 10
    assert [r["name"] for r in rows if "search_path=pg_catalog, public, pg_temp" not in (r["proconfig"] or [])] == []


def test_doctor_says_when_public_is_writable(db_url: str) -> None:
    def doctor() -> str:
        env = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
        result = CliRunner(env=env).invoke(app, ["--database-url", db_url, "doctor"])
        assert result.exit_code == 0, result.output
        return " ".join(result.stdout.split())

    assert "may create objects in schema public" not in doctor()
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")  # PostgreSQL 14's default
    assert (
        "warning: PUBLIC may create objects in schema public, where Procrastinate lives; such a role can plant "
        "operators that Procrastinate's functions would call. Run: REVOKE CREATE ON SCHEMA public FROM PUBLIC"
    ) in doctor()
