"""Run and fire statuses have one definition, agentlab_sched/core/statuses.py; every other place agrees.

- the database's copy (``agentlab_sched.statuses``) is the table, and the SQL helpers made from it
  (``run_is_open()``, ``run_is_final()``, ``run_is_active()``, ``run_is_held()``, ``run_is_failure()``,
  ``run_is_troubled()``, ``run_is_error_free()``, ``run_cron_status()``) say what it says, inlined so that
  the partial indexes on runs serve the queries that call them;
- what must stay literal (the CHECK constraints of ``runs.status`` and ``fires.status``, the predicates of
  the partial indexes on runs) lists a set of the table;
- no function, query or Python module writes a list of two or more statuses at all (``IN (...)``,
  ``ARRAY[...]``, ``'{a,b}'``; a tuple, list, set or frozenset): a list is a concept, and a concept is a flag
  or a named set of core/statuses.py, said by a helper or imported. A list that is one of the table's sets
  is named with the helper to use; any other (a subset no flag says) is named too, to be made one.

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
#: Not read for lists: the migrations (history, applied as written) and current_schema.sql, whose lists
#: (CHECK constraints, index predicates) catalog_disagreements() checks in the built schema.
SQL_SKIPPED = ("database/migrations/", "database/current_schema.sql")

#: The named sets of run statuses -> the helper that says it (sql/01_statuses.sql; the Python name is the
#: same set in core/statuses.py).
RUN_SETS: dict[frozenset[str], str] = {
    frozenset(statuses.OPEN_RUN_STATUSES): "run_is_open",
    frozenset(statuses.FINAL_RUN_STATUSES): "run_is_final",
    frozenset(statuses.ACTIVE_RUN_STATUSES): "run_is_active",
    frozenset(statuses.HELD_RUN_STATUSES): "run_is_held",
    frozenset(statuses.FAILURE_RUN_STATUSES): "run_is_failure",
    frozenset(statuses.TROUBLED_RUN_STATUSES): "run_is_troubled",
    frozenset(statuses.ERROR_FREE_RUN_STATUSES): "run_is_error_free",
}
ALL_RUNS = frozenset(statuses.RUN_STATUSES)
ALL_FIRES = frozenset(statuses.FIRE_STATUSES)
KNOWN = ALL_RUNS | ALL_FIRES

#: Literal status lists that may stay: (file, its words) -> why. Kept minimal, and empty now: a list of
#: statuses is a concept of core/statuses.py (a flag, or a set derived from its rows), so an entry here
#: needs a reason it cannot be one. An entry no longer found is named too (test_the_allow_list_is_used).
Allowed = dict[tuple[str, frozenset[str]], str]
ALLOWED: Allowed = {}

_QUOTED = r"'[a-z_]+'(?:::(?:pg_catalog\.)?text)?"
#: A list of quoted words, on one line or several: `IN ('a', 'b')`, `ARRAY['a', 'b']`.
_LIST = re.compile(rf"[(\[]\s*({_QUOTED}(?:\s*,\s*{_QUOTED})+)\s*[)\]]")
#: An array literal: `'{a,b}'`.
_ARRAY = re.compile(r"'\{\s*([a-z_]+(?:\s*,\s*[a-z_]+)+)\s*\}'")
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


def _status_lists(text: str) -> list[tuple[int, frozenset[str]]]:
    """(offset, words) of each literal list of two or more words in SQL ``text`` that are all statuses
    (a job's statuses, webhook events, ... are other words)."""
    found = []
    for match in _LIST.finditer(text):
        found.append((match.start(), frozenset(_WORD.findall(match.group(1)))))
    for match in _ARRAY.finditer(text):
        found.append((match.start(), frozenset(w.strip() for w in match.group(1).split(","))))
    return sorted((at, words) for at, words in found if len(words) >= 2 and words <= KNOWN)


def _without_comments(sql: str) -> str:
    """``sql`` with its `--` comments blanked (outside quotes), lines kept where they are."""
    out = []
    for line in sql.splitlines(keepends=True):
        quoted = False
        for i, char in enumerate(line):
            if char == "'":
                quoted = not quoted
            elif not quoted and line.startswith("--", i):
                line = line[:i] + "\n" * line.endswith("\n")
                break
        out.append(line)
    return "".join(out)


def _named(where: str, words: frozenset[str], allowed: Allowed, how: str) -> str | None:
    """The line that names a literal list at ``where`` (``file:line``), unless it is allowed."""
    if (where.rsplit(":", 1)[0], words) in allowed:
        return None
    what = _set_name(words)
    if what:
        return f"{where}: {how} {sorted(words)} ({what})"
    return f"{where}: {how} {sorted(words)}, no set of core/statuses.py: make it a flag or a named set there"


def sql_disagreements(files: dict[str, str], allowed: Allowed = ALLOWED) -> list[str]:
    """The literal status lists of functions and queries (``name -> text``), each named."""
    found = []
    for name, text in sorted(files.items()):
        code = _without_comments(text)
        for at, words in _status_lists(code):
            number = code.count("\n", 0, at) + 1
            line = _named(f"{name}:{number}", words, allowed, "lists")
            if line:
                found.append(f"{line}: use the helper of sql/01_statuses.sql")
    return found


def python_disagreements(files: dict[str, str], allowed: Allowed = ALLOWED) -> list[str]:
    """The literal status tuples, lists and sets of Python modules (``name -> source``), and the status
    lists of the SQL in their strings, each named, in line order."""
    found = []
    for name, source in sorted(files.items()):
        lines: list[tuple[int, str]] = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                words = frozenset(values)
                if len(values) == len(node.elts) and len(words) >= 2 and words <= KNOWN:
                    line = _named(f"{name}:{node.lineno}", words, allowed, "spells out")
                    if line:
                        lines.append((node.lineno, f"{line}: import it from core/statuses.py"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for at, words in _status_lists(node.value):
                    number = node.lineno + node.value.count("\n", 0, at)
                    line = _named(f"{name}:{number}", words, allowed, "lists")
                    if line:
                        lines.append((number, f"{line}: use the helper of sql/01_statuses.sql"))
        found += [line for _, line in sorted(lines)]
    return found


_SET_WORDS = ", ".join(helper.removeprefix("run_is_") for helper in RUN_SETS.values())


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
                    f"{sorted(words)}, no set of core/statuses.py ({_SET_WORDS})"
                )
            elif len(words) == 1 and not words <= ALL_RUNS:
                found.append(f"index {row['name']} (database/current_schema.sql): {sorted(words)} is no run status")
    return found


def _sql_files() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.sql"))
        if not str(p.relative_to(PACKAGE)).startswith(SQL_SKIPPED)
    }


def _python_files() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != PACKAGE / "core" / "statuses.py"
    }


def test_the_database_copy_is_the_definition(sync_conn: psycopg.Connection[DictRow]) -> None:
    rows = sync_conn.execute(
        """SELECT kind, status, position, is_open, is_final, is_held, is_failure, is_interrupted, is_error_free,
                  cron_status
           FROM agentlab_sched.statuses ORDER BY position"""
    ).fetchall()
    assert [tuple(r.values()) for r in rows] == statuses.catalog_rows()


@pytest.mark.parametrize("status", statuses.RUN_STATUSES)
def test_the_helpers_say_what_the_definition_says(sync_conn: psycopg.Connection[DictRow], status: str) -> None:
    row = sync_conn.execute(
        """SELECT agentlab_sched.run_is_open(%(s)s) AS open, agentlab_sched.run_is_final(%(s)s) AS final,
                  agentlab_sched.run_is_active(%(s)s) AS active, agentlab_sched.run_is_held(%(s)s) AS held,
                  agentlab_sched.run_is_failure(%(s)s) AS failure,
                  agentlab_sched.run_is_troubled(%(s)s) AS troubled,
                  agentlab_sched.run_is_error_free(%(s)s) AS error_free,
                  agentlab_sched.run_cron_status(%(s)s) AS cron""",
        {"s": status},
    ).fetchone()
    (definition,) = [s for s in statuses.STATUSES if s.kind == "run" and s.name == status]
    assert row == {
        "open": status in statuses.OPEN_RUN_STATUSES,
        "final": status in statuses.FINAL_RUN_STATUSES,
        "active": status in statuses.ACTIVE_RUN_STATUSES,
        "held": status in statuses.HELD_RUN_STATUSES,
        "failure": status in statuses.FAILURE_RUN_STATUSES,
        "troubled": status in statuses.TROUBLED_RUN_STATUSES,
        "error_free": status in statuses.ERROR_FREE_RUN_STATUSES,
        "cron": definition.cron,
    }


def test_the_helpers_say_nothing_of_what_is_no_run_status(sync_conn: psycopg.Connection[DictRow]) -> None:
    row = sync_conn.execute(
        """SELECT agentlab_sched.run_is_failure('started') AS failure,
                  agentlab_sched.run_is_error_free(NULL) AS error_free,
                  agentlab_sched.run_cron_status('started') AS cron, agentlab_sched.run_cron_status(NULL) AS none"""
    ).fetchone()
    assert row == {"failure": False, "error_free": None, "cron": None, "none": None}


def test_the_named_sets_are_distinct() -> None:
    # RUN_SETS is keyed by the set: two names for one set would hide one.
    assert len(RUN_SETS) == 7


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


def test_the_allow_list_is_used() -> None:
    everything = sql_disagreements(_sql_files(), {}) + python_disagreements(_python_files(), {})
    stale = [
        f"{name}: {sorted(words)}"
        for name, words in ALLOWED
        if not any(line.startswith(f"{name}:") and str(sorted(words)) in line for line in everything)
    ]
    assert stale == [], "allowed in ALLOWED but no longer there: remove the entry"


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
        "no set of core/statuses.py (open, final, active, held, failure, troubled, error_free)",
    ]


def test_a_subset_list_is_named() -> None:
    sql = {
        "database/sql/99_planted.sql": "SELECT 1;\n"
        "  WHERE r.status IN ('failed', 'timed_out')\n"  # a named subset: the helper is said
        "     OR r.status IN ('queued',\n"  # a subset no flag says, over two lines
        "                     'cancelled')\n"
        "     OR r.status = ANY ('{running,succeeded}'::text[])\n"  # an array literal
        "     OR x IN ('started', 'failed')  -- a fire's and a run's\n"
        "  -- r.status IN ('queued', 'running'): a comment is no list\n"
        "  AND j.status IN ('todo', 'doing')\n",  # a job's statuses: not ours
    }
    assert sql_disagreements(sql) == [
        "database/sql/99_planted.sql:2: lists ['failed', 'timed_out'] (agentlab_sched.run_is_failure()): "
        "use the helper of sql/01_statuses.sql",
        "database/sql/99_planted.sql:3: lists ['cancelled', 'queued'], no set of core/statuses.py: make it a flag "
        "or a named set there: use the helper of sql/01_statuses.sql",
        "database/sql/99_planted.sql:5: lists ['running', 'succeeded'], no set of core/statuses.py: make it a flag "
        "or a named set there: use the helper of sql/01_statuses.sql",
        "database/sql/99_planted.sql:6: lists ['failed', 'started'], no set of core/statuses.py: make it a flag "
        "or a named set there: use the helper of sql/01_statuses.sql",
    ]
    python = {
        "agentlab_sched/planted.py": "import logging\n"
        'BAD = frozenset({"failed", "timed_out", "suspended"})\n'
        'WORDS = ("failed", "finished")\n'  # webhook events: not only statuses
        "def f(status):\n"
        '    return status in ["queued", "cancelled"]\n'
        'SQL = """SELECT 1\n'
        "  WHERE status IN ('running', 'suspended')\"\"\"\n",
    }
    assert python_disagreements(python) == [
        "agentlab_sched/planted.py:2: spells out ['failed', 'suspended', 'timed_out'] "
        "(agentlab_sched.run_is_troubled()): import it from core/statuses.py",
        "agentlab_sched/planted.py:5: spells out ['cancelled', 'queued'], no set of core/statuses.py: make it a "
        "flag or a named set there: import it from core/statuses.py",
        "agentlab_sched/planted.py:7: lists ['running', 'suspended'], no set of core/statuses.py: make it a flag "
        "or a named set there: use the helper of sql/01_statuses.sql",
    ]
    # An allowed list is not named (ALLOWED itself is kept empty).
    allowed = {("agentlab_sched/planted.py", frozenset({"queued", "cancelled"})): "planted"}
    assert len(python_disagreements(python, allowed)) == 2
