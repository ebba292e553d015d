"""Run and fire statuses have one definition, agentlab_sched/core/statuses.py; every other place agrees.

- the database's copy (``agentlab_sched.statuses``) is the table, and the SQL helpers made from it
  (``run_is_open()``, ``run_is_final()``, ``run_is_active()``, ``run_is_held()``) say what it says, inlined
  so that the partial indexes on runs serve the queries that call them;
- what must stay literal (the CHECK constraints of ``runs.status`` and ``fires.status``, the predicates of
  the partial indexes on runs) lists a set of the table;
- no function, query or Python module spells out a set of the table instead of using it.

Each place that disagrees is named: SQL file and line, index or constraint, Python module and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.core import statuses

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentlab_sched"
SQL_DIRS = ("database/sql", "database/queries")

#: The named sets of run statuses -> the helper that says it.
RUN_SETS: dict[frozenset[str], str] = {
    frozenset(statuses.OPEN_RUN_STATUSES): "run_is_open",
    frozenset(statuses.FINAL_RUN_STATUSES): "run_is_final",
    frozenset(statuses.ACTIVE_RUN_STATUSES): "run_is_active",
    frozenset(statuses.HELD_RUN_STATUSES): "run_is_held",
}
ALL_RUNS = frozenset(statuses.RUN_STATUSES)
ALL_FIRES = frozenset(statuses.FIRE_STATUSES)

#: A list of quoted words: `IN ('a', 'b')`, `ARRAY['a', 'b']`, `'{a,b}'`.
_LIST = re.compile(r"(?:\(|\[)\s*('[a-z_]+'(?:\s*(?:::text)?\s*,\s*'[a-z_]+'(?:::text)?)+)\s*(?:\)|\])")
_WORD = re.compile(r"'([a-z_]+)'")


def _set_name(words: frozenset[str]) -> str | None:
    """What a list of run (or fire) statuses is, when it is one of the table's sets."""
    if words in RUN_SETS:
        return f"agentlab_sched.{RUN_SETS[words]}()"
    if words == ALL_RUNS:
        return "every run status"
    if words == ALL_FIRES:
        return "every fire status"
    return None


def sql_disagreements(files: dict[str, str]) -> list[str]:
    """The status lists of functions and queries (``name -> text``) that spell out a set of the table."""
    found = []
    for name, text in sorted(files.items()):
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("--"):
                continue
            for match in _LIST.finditer(line):
                words = frozenset(_WORD.findall(match.group(1)))
                if len(words) < 2 or not (words <= ALL_RUNS or words <= ALL_FIRES):
                    continue  # not (only) statuses: a job's statuses, webhook events, ...
                what = _set_name(words)
                if what:
                    found.append(
                        f"{name}:{number}: lists {sorted(words)} ({what}): use the helper of sql/01_statuses.sql"
                    )
    return found


def python_disagreements(files: dict[str, str]) -> list[str]:
    """The literal tuples, lists and sets of Python modules (``name -> source``) that spell out a set of
    the table instead of importing it from agentlab_sched.core.statuses."""
    found = []
    for name, source in sorted(files.items()):
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Tuple | ast.List | ast.Set):
                continue
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) != len(node.elts) or len(values) < 2:
                continue
            words = frozenset(values)
            what = _set_name(words) if (words <= ALL_RUNS or words <= ALL_FIRES) else None
            if what:
                found.append(
                    f"{name}:{node.lineno}: spells out {sorted(words)} ({what}): import it from core/statuses.py"
                )
    return found


def catalog_disagreements(conn: psycopg.Connection[DictRow]) -> list[str]:
    """The literal lists the schema keeps (CHECK constraints, partial index predicates on runs) that are no
    set of the table."""
    found = []
    checks = {
        r["name"]: r["def"]
        for r in conn.execute(
            """SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
               WHERE c.conrelid IN ('agentlab_sched.runs'::regclass, 'agentlab_sched.fires'::regclass)
                 AND c.conname IN ('runs_status_check', 'fires_status_check')"""
        ).fetchall()
    }
    for name, everything in (("runs_status_check", ALL_RUNS), ("fires_status_check", ALL_FIRES)):
        words = frozenset(_WORD.findall(checks.get(name, "")))
        if words != everything:
            found.append(
                f"constraint {name} (database/current_schema.sql): lists {sorted(words)}, "
                f"core/statuses.py has {sorted(everything)}"
            )
    for row in conn.execute(
        """SELECT c.relname AS name, pg_get_expr(i.indpred, i.indrelid) AS predicate
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE i.indrelid = 'agentlab_sched.runs'::regclass AND i.indpred IS NOT NULL
           ORDER BY 1"""
    ).fetchall():
        lists = [frozenset(_WORD.findall(m)) for m in re.findall(r"status\s*=\s*ANY\s*\((.*?)\)", row["predicate"])]
        lists += [frozenset(_WORD.findall(m)) for m in re.findall(r"status\s*=\s*('[a-z_]+')", row["predicate"])]
        for words in lists:
            if len(words) > 1 and words not in RUN_SETS:
                found.append(
                    f"index {row['name']} (database/current_schema.sql): its predicate lists "
                    f"{sorted(words)}, no set of core/statuses.py (open, final, active, held)"
                )
            elif len(words) == 1 and not words <= ALL_RUNS:
                found.append(f"index {row['name']} (database/current_schema.sql): {sorted(words)} is no run status")
    return found


def _sql_files() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
        for d in SQL_DIRS
        for p in sorted((PACKAGE / d).glob("*.sql"))
    }


def _python_files() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != PACKAGE / "core" / "statuses.py"
    }


def test_the_database_copy_is_the_definition(sync_conn: psycopg.Connection[DictRow]) -> None:
    rows = sync_conn.execute(
        "SELECT kind, status, position, is_open, is_final, is_held FROM agentlab_sched.statuses ORDER BY position"
    ).fetchall()
    assert [tuple(r.values()) for r in rows] == statuses.catalog_rows()


@pytest.mark.parametrize("status", statuses.RUN_STATUSES)
def test_the_helpers_say_what_the_definition_says(sync_conn: psycopg.Connection[DictRow], status: str) -> None:
    row = sync_conn.execute(
        """SELECT agentlab_sched.run_is_open(%(s)s) AS open, agentlab_sched.run_is_final(%(s)s) AS final,
                  agentlab_sched.run_is_active(%(s)s) AS active, agentlab_sched.run_is_held(%(s)s) AS held""",
        {"s": status},
    ).fetchone()
    assert row == {
        "open": status in statuses.OPEN_RUN_STATUSES,
        "final": status in statuses.FINAL_RUN_STATUSES,
        "active": status in statuses.ACTIVE_RUN_STATUSES,
        "held": status in statuses.HELD_RUN_STATUSES,
    }


@pytest.mark.parametrize(
    ("where", "index"),
    [
        ("r.schedule_id = 1 AND agentlab_sched.run_is_open(r.status)", "runs_open_idx"),
        ("agentlab_sched.run_is_final(r.status) AND r.finished_at < now()", "runs_finished_idx"),
        ("r.deadline_at <= now() AND agentlab_sched.run_is_active(r.status)", "runs_deadline_idx"),
    ],
)
def test_the_helpers_are_inlined_so_the_partial_indexes_serve_them(
    sync_conn: psycopg.Connection[DictRow], where: str, index: str
) -> None:
    with sync_conn.transaction():
        sync_conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r["QUERY PLAN"] for r in sync_conn.execute(f"EXPLAIN SELECT 1 FROM agentlab_sched.runs r WHERE {where}")
        )
    # runs is partitioned: each partition's copy of the index is named after it (runs_p20261202_runs_open_idx).
    assert re.search(rf"using (runs_\w+_)?{index} on runs", plan), plan


def test_every_status_list_agrees_with_the_definition(sync_conn: psycopg.Connection[DictRow]) -> None:
    found = catalog_disagreements(sync_conn) + sql_disagreements(_sql_files()) + python_disagreements(_python_files())
    assert found == []


def test_a_list_that_disagrees_is_named(sync_conn: psycopg.Connection[DictRow]) -> None:
    sql = {
        "database/sql/99_planted.sql": "SELECT 1;\n"
        "  WHERE r.status IN ('succeeded', 'failed', 'cancelled', 'timed_out')\n"
        "  AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')\n"  # a job's statuses: not ours
        "  AND f.status = ANY (ARRAY['started', 'skipped_overlap', 'skipped_misfire', 'failed_to_start'])\n",
    }
    assert sql_disagreements(sql) == [
        "database/sql/99_planted.sql:2: lists ['cancelled', 'failed', 'succeeded', 'timed_out'] "
        "(agentlab_sched.run_is_final()): use the helper of sql/01_statuses.sql",
        "database/sql/99_planted.sql:4: lists ['failed_to_start', 'skipped_misfire', 'skipped_overlap', 'started'] "
        "(every fire status): use the helper of sql/01_statuses.sql",
    ]
    python = {"agentlab_sched/planted.py": 'OPEN = ("queued", "running", "awaiting_approval", "suspended")\n'}
    assert python_disagreements(python) == [
        "agentlab_sched/planted.py:1: spells out ['awaiting_approval', 'queued', 'running', 'suspended'] "
        "(agentlab_sched.run_is_open()): import it from core/statuses.py"
    ]
    sync_conn.execute(
        "CREATE INDEX runs_planted_idx ON agentlab_sched.runs (id) WHERE status IN ('queued', 'suspended')"
    )
    sync_conn.execute("ALTER TABLE agentlab_sched.runs DROP CONSTRAINT runs_status_check")
    sync_conn.execute(
        "ALTER TABLE agentlab_sched.runs ADD CONSTRAINT runs_status_check CHECK (status IN ('queued', 'running'))"
    )
    assert catalog_disagreements(sync_conn) == [
        "constraint runs_status_check (database/current_schema.sql): lists ['queued', 'running'], core/statuses.py "
        "has ['awaiting_approval', 'cancelled', 'failed', 'queued', 'running', 'succeeded', 'suspended', 'timed_out']",
        "index runs_planted_idx (database/current_schema.sql): its predicate lists ['queued', 'suspended'], "
        "no set of core/statuses.py (open, final, active, held)",
    ]
