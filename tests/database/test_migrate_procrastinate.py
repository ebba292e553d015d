"""agentlab-sched migrate beside Procrastinate: it upgrades a Procrastinate schema older than the
installed Procrastinate (as `procrastinate schema --apply` of an older release left it, maybe upgraded
by hand since), copes with migrations an operator applied by hand, and its triggers on
procrastinate_jobs never block Procrastinate's own migrations nor a role that has rights on
Procrastinate's tables only.

An older schema is rebuilt from Procrastinate's own migration files: the initial schema plus every
migration up to that release (Procrastinate checks that this chain gives its schema.sql)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest
from procrastinate.schema import SchemaManager
from psycopg.rows import dict_row

from agentlab_sched.database.migrate import migrate
from tests.support.rows import fetched

FILES = sorted(Path(SchemaManager.get_migrations_path()).glob("*.sql"))


def _upto(version: str) -> list[Path]:
    """The migration files of every release up to ``version`` (like "03.02.00"), oldest first."""
    return [p for p in FILES if p.name[:8] <= version]


def _apply(url: str, files: list[Path]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        for path in files:
            conn.execute(path.read_text(encoding="utf-8"))


def fingerprint(url: str) -> dict[str, set[Any]]:
    """Procrastinate's objects in schema public, as the catalog defines them."""
    with psycopg.connect(url, row_factory=dict_row) as conn:

        def rows(query: str) -> set[Any]:
            return {tuple(r.values()) for r in conn.execute(query).fetchall()}

        return {
            "columns": rows(
                """SELECT table_name, column_name, data_type, column_default, is_nullable
                   FROM information_schema.columns WHERE table_schema = 'public'"""
            ),
            "indexes": rows(  # ours on Procrastinate's tables (agentlab_sched_*) are the migrations'
                """SELECT indexname, indexdef FROM pg_indexes
                   WHERE schemaname = 'public' AND indexname NOT LIKE 'agentlab\\_sched\\_%'"""
            ),
            "constraints": rows(
                """SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c
                   JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public'"""
            ),
            "triggers": rows(
                """SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'public' AND NOT t.tgisinternal AND t.tgname LIKE 'procrastinate%'"""
            ),
            "functions": rows(
                """SELECT p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc) FROM pg_proc p
                   JOIN pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = 'public' AND p.proname LIKE 'procrastinate%'"""
            ),
            "enums": rows(
                """SELECT t.typname, string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e
                   JOIN pg_type t ON t.oid = e.enumtypid GROUP BY t.typname"""
            ),
        }


@pytest.fixture
def fresh_fingerprint(empty_db_url: str) -> dict[str, set[Any]]:
    schema = (resources.files("procrastinate.sql") / "schema.sql").read_text(encoding="utf-8")
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute(schema)
    return fingerprint(empty_db_url)


@pytest.fixture
def second_db(pg_server: str) -> Any:
    name = f"p_{os.getpid()}_{id(object())}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(pg_server, dbname=name)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_chain_of_migrations_gives_procrastinates_schema(
    second_db: str, fresh_fingerprint: dict[str, set[Any]]
) -> None:
    """What the upgrade tests rest on, checked against the installed Procrastinate."""
    _apply(second_db, FILES)
    assert fingerprint(second_db) == fresh_fingerprint


def test_the_schema_tells_which_migrations_it_has_at_every_release(second_db: str) -> None:
    from agentlab_sched.database import upstream

    assert upstream.migration_files() == FILES
    marks = upstream.markers(FILES)
    done: list[Path] = []
    with psycopg.connect(second_db, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        for version in sorted({p.name[:8] for p in FILES}):
            for path in [p for p in FILES if p.name[:8] == version]:
                conn.execute(path.read_text(encoding="utf-8"))
                done.append(path)
            have = upstream.applied_prefix(conn, FILES)
            newest_marked = max(i + 1 for i, p in enumerate(done) if marks[p.name])
            assert have == newest_marked, (version, have, newest_marked)


@pytest.mark.parametrize("release", ["02.14.01", "03.00.00", "03.02.00", "03.03.00"])
def test_migrate_upgrades_an_older_procrastinate_schema(
    empty_db_url: str, second_db: str, release: str, fresh_fingerprint: dict[str, set[Any]]
) -> None:
    older = _upto(release)
    _apply(second_db, older)
    report = migrate(second_db)
    assert fingerprint(second_db) == fresh_fingerprint
    newer = [p.name for p in FILES[len(older) :]]
    assert set(newer) <= set(report.procrastinate)
    assert set(report.procrastinate) | set(report.procrastinate_found) == {p.name for p in FILES}
    with psycopg.connect(second_db) as conn:
        assert fetched(conn.execute("SELECT to_regproc('procrastinate_retry_job_v2') IS NOT NULL").fetchone())[0]
        recorded = fetched(
            conn.execute(
                "SELECT count(*) FROM agentlab_sched.schema_migrations WHERE name LIKE 'procrastinate/%'"
            ).fetchone()
        )[0]
    assert recorded == len(FILES)
    again = migrate(second_db)
    assert (again.procrastinate, again.procrastinate_found, again.applied) == ([], [], [])


def test_migrations_an_operator_applied_by_hand_are_not_run_twice(
    empty_db_url: str, fresh_fingerprint: dict[str, set[Any]]
) -> None:
    """Our records stop at 3.2 (the release installed when we last migrated); the operator applied 3.3 and
    3.4 since, by hand, as Procrastinate documents; now we run with 3.4 installed."""
    migrate(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("DELETE FROM agentlab_sched.schema_migrations WHERE name > 'procrastinate/03.03'")
    report = migrate(empty_db_url)
    assert "03.04.00_01_pre_add_retry_failed_job_procedure.sql" in report.procrastinate_found  # 'retried' exists
    assert fingerprint(empty_db_url) == fresh_fingerprint
    assert migrate(empty_db_url).procrastinate == []


def test_our_triggers_never_block_procrastinates_migrations(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        defs = [
            r[0]
            for r in conn.execute(
                """SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t
                   WHERE t.tgrelid = 'public.procrastinate_jobs'::regclass AND t.tgname LIKE 'agentlab_sched%'"""
            ).fetchall()
        ]
        assert len(defs) == 2 and not any(" OF " in d or " WHEN " in d for d in defs), defs
        # What Procrastinate's 3.0 migration does: its own triggers on the column dropped, the type altered,
        # its triggers created again (all rolled back here).
        own = conn.execute(
            """SELECT t.tgname, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t
               WHERE t.tgrelid = 'public.procrastinate_jobs'::regclass AND NOT t.tgisinternal
                 AND t.tgname LIKE 'procrastinate%'"""
        ).fetchall()
        with pytest.raises(psycopg.errors.ProgrammingError, match="rolled back"), conn.transaction():
            for name, _ in own:
                conn.execute(f"DROP TRIGGER {name} ON procrastinate_jobs")
            conn.execute(
                """ALTER TABLE procrastinate_jobs ALTER COLUMN status TYPE procrastinate_job_status
                   USING (status::text::procrastinate_job_status)"""
            )
            for _, definition in own:
                conn.execute(definition)
            raise psycopg.errors.ProgrammingError("rolled back")


def test_a_role_with_rights_on_procrastinates_tables_only(db_url: str, pg_server: str) -> None:
    """Another app's worker sharing the database: it changes and deletes jobs, runs' jobs included."""
    role = f"jobs_only_{os.getpid()}"
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f'CREATE ROLE "{role}"')
        try:
            for what in ("ALL TABLES", "ALL SEQUENCES"):
                conn.execute(f'GRANT ALL ON {what} IN SCHEMA public TO "{role}"')
            conn.execute(f'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO "{role}"')
            conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
            conn.execute(
                "INSERT INTO agentlab_sched.schedules (name, cron, task, overlap, next_run_at, replan) "
                "VALUES ('r', '* * * * *', 'demo.echo', 'allow_all', NULL, NULL)"
            )

            def launch() -> dict[str, Any]:
                out = fetched(
                    conn.execute(
                        "SELECT agentlab_sched.launch(s, clock_timestamp(), 'manual') AS r"
                        " FROM agentlab_sched.schedules s"
                    ).fetchone()
                )["r"]
                return fetched(
                    conn.execute("SELECT * FROM agentlab_sched.runs WHERE id = %s", (out["run_id"],)).fetchone()
                )

            runs = [launch() for _ in range(4)]
            conn.execute(f'SET ROLE "{role}"')
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # it really has no rights on ours
                conn.execute("SELECT count(*) FROM agentlab_sched.runs")
            other = fetched(
                conn.execute(
                    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW('default', 'other.task', 0, NULL, NULL, "
                    "'{}'::jsonb, NULL)::procrastinate_job_to_defer_v1])) AS id"
                ).fetchone()
            )["id"]
            wid = fetched(conn.execute("SELECT * FROM procrastinate_register_worker_v1()").fetchone())["worker_id"]
            for _ in range(3):  # the three oldest runs' jobs, then the other app's job
                conn.execute("SELECT * FROM procrastinate_fetch_job_v2(NULL, %s)", (wid,))
            conn.execute("SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", (runs[0]["job_id"],))
            conn.execute("SELECT procrastinate_retry_job_v2(%s, NULL, NULL, NULL, NULL)", (runs[1]["job_id"],))
            conn.execute("SELECT procrastinate_finish_job_v1(%s, 'failed', false)", (runs[2]["job_id"],))
            conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (runs[2]["job_id"],))
            conn.execute("SELECT procrastinate_cancel_job_v1(%s, false, true)", (runs[3]["job_id"],))
            conn.execute("SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", (other,))
            conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (other,))
            conn.execute("RESET ROLE")
            statuses = [
                fetched(conn.execute("SELECT status FROM agentlab_sched.runs WHERE id = %s", (r["id"],)).fetchone())[
                    "status"
                ]
                for r in runs
            ]
            assert statuses == ["succeeded", "queued", "failed", "cancelled"]
        finally:
            conn.execute("RESET ROLE")
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')
