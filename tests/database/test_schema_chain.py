"""The migration chain builds the schema current_schema.sql describes.

``agentlab_sched/database/current_schema.sql`` is the schema as it stands, each table in one place;
``migrations/`` is how a database gets there. Both are built on empty databases through the same
``migrate`` (Procrastinate's schema, then ours, then ``sql/``), and their catalogues are compared: tables,
columns (type, default, nullability, generation, identity), constraints and indexes with their
definitions, triggers, views and function signatures. Each difference is named.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo

from agentlab_sched.database import migrate as migrate_module

CURRENT_SCHEMA = migrate_module.PACKAGE_DIR / "current_schema.sql"
_counter = itertools.count()

#: What is compared, kind -> query of (name, definition) rows for schema agentlab_sched (and our triggers
#: on Procrastinate's tables).
CATALOG: dict[str, str] = {
    "table": """
        SELECT c.relname, CASE c.relpersistence WHEN 'u' THEN 'unlogged' ELSE 'logged' END
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'agentlab_sched' AND c.relkind IN ('r', 'p')""",
    "column": """
        SELECT c.relname || '.' || a.attname,
               concat_ws(' ', format_type(a.atttypid, a.atttypmod),
                         CASE WHEN a.attnotnull THEN 'NOT NULL' ELSE 'NULL' END,
                         CASE WHEN a.attgenerated = 's' THEN 'GENERATED ' || pg_get_expr(d.adbin, d.adrelid)
                              WHEN d.adbin IS NOT NULL THEN 'DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) END,
                         CASE a.attidentity WHEN 'a' THEN 'IDENTITY ALWAYS' WHEN 'd' THEN 'IDENTITY BY DEFAULT' END)
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'agentlab_sched' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped""",
    "constraint": """
        SELECT c.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'agentlab_sched'""",
    "index": """
        SELECT i.indexname, i.indexdef FROM pg_indexes i
        WHERE i.schemaname = 'agentlab_sched' OR (i.schemaname = 'public' AND i.indexname LIKE 'agentlab_sched%')""",
    "trigger": """
        SELECT c.relname || '.' || t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'agentlab_sched' AND NOT t.tgisinternal
          AND t.tgparentid = 0  -- a partition's copy of its parent's trigger is the parent's""",
    "view": """
        SELECT c.relname, pg_get_viewdef(c.oid)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'agentlab_sched' AND c.relkind IN ('v', 'm')""",
    "function": """
        SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'agentlab_sched'""",
}


def catalog(url: str) -> dict[str, dict[str, str]]:
    """kind -> name -> definition, for the database at ``url``."""
    with psycopg.connect(url) as conn:
        return {kind: dict(conn.execute(sql).fetchall()) for kind, sql in CATALOG.items()}


def differences(chain: dict[str, dict[str, str]], current: dict[str, dict[str, str]]) -> list[str]:
    """Every way the two catalogues differ, one line each, named: what, where, and both definitions."""
    found = []
    for kind in CATALOG:
        a, b = chain[kind], current[kind]
        for name in sorted(a.keys() | b.keys()):
            if name not in b:
                found.append(f"{kind} {name}: only in migrations/ ({a[name]})")
            elif name not in a:
                found.append(f"{kind} {name}: only in current_schema.sql ({b[name]})")
            elif a[name] != b[name]:
                found.append(f"{kind} {name}: migrations/ has {a[name]!r}, current_schema.sql has {b[name]!r}")
    return found


@pytest.fixture
def new_database(pg_server: str) -> Iterator[Callable[[], str]]:
    """Makes empty databases (dropped at the end)."""
    names: list[str] = []

    def make() -> str:
        name = f"schema_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        names.append(name)
        return conninfo.make_conninfo(pg_server, dbname=name)

    yield make
    with psycopg.connect(pg_server, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _from_current_schema(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None = None) -> None:
    """Migrate ``url`` with current_schema.sql (or ``text``) as the only migration."""
    only = tmp_path / "current"
    only.mkdir()
    (only / "0001_schema.sql").write_text(text if text is not None else CURRENT_SCHEMA.read_text(encoding="utf-8"))
    with monkeypatch.context() as patch:
        patch.setattr(migrate_module, "MIGRATIONS_DIR", only)
        migrate_module.migrate(url, cron_schema=None)
    shutil.rmtree(only)


def test_the_migration_chain_builds_the_current_schema(
    new_database: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain, current = new_database(), new_database()
    migrate_module.migrate(chain, cron_schema=None)
    _from_current_schema(current, tmp_path, monkeypatch)
    built = catalog(chain)
    assert built["table"] and built["index"] and built["function"]
    assert differences(built, catalog(current)) == []


def test_each_difference_is_named(
    new_database: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A current_schema.sql that forgot an index, has another default and a looser CHECK: each is said."""
    chain, current = new_database(), new_database()
    migrate_module.migrate(chain, cron_schema=None)
    text = CURRENT_SCHEMA.read_text(encoding="utf-8")
    edits = {
        "CREATE INDEX workers_seen_idx ON agentlab_sched.workers (seen_at);\n": "",
        "max_catchup integer NOT NULL DEFAULT 10,": "max_catchup integer NOT NULL DEFAULT 11,",
        "CONSTRAINT runs_segment_check CHECK (segment >= 1)": "CONSTRAINT runs_segment_check CHECK (segment >= 0)",
    }
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    _from_current_schema(current, tmp_path, monkeypatch, text)
    assert differences(catalog(chain), catalog(current)) == [
        "column schedules.max_catchup: migrations/ has 'integer NOT NULL DEFAULT 10', "
        "current_schema.sql has 'integer NOT NULL DEFAULT 11'",
        "constraint runs.runs_segment_check: migrations/ has 'CHECK ((segment >= 1))', "
        "current_schema.sql has 'CHECK ((segment >= 0))'",
        "index workers_seen_idx: only in migrations/ "
        "(CREATE INDEX workers_seen_idx ON agentlab_sched.workers USING btree (seen_at))",
    ]
