"""Every statement the package sends is a named query in agentlab_sched/database/queries/*.sql, run by the
queries module alone: no SQL strings, no psycopg.sql composition, no execute() anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import psycopg
import pytest

import agentlab_sched
from agentlab_sched.database import queries

PACKAGE = Path(agentlab_sched.__file__).parent
RUNNER = PACKAGE / "database" / "queries" / "__init__.py"
#: What a statement starts with; a string constant that starts so is SQL written in Python.
SQL_START = re.compile(r"\s*(SELECT|INSERT INTO|UPDATE \w|DELETE FROM|WITH \w+ AS|CREATE |ALTER |LISTEN |SET \w|SHOW )")
EXECUTE = {"execute", "executemany", "execute_query_async", "execute_query_one_async", "execute_query_all_async"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != RUNNER)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_no_sql_is_written_or_sent_outside_the_queries_module() -> None:
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if SQL_START.match(node.value):
                    found.append(f"{where}:{node.lineno}: SQL in a string: {node.value.strip()[:60]!r}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in EXECUTE
                and getattr(node.func.value, "id", None) != "queries"
            ):
                found.append(f"{where}:{node.lineno}: .{node.func.attr}() outside database/queries")
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module == "psycopg"
                and any(a.name == "sql" for a in node.names)
            ):
                found.append(f"{where}:{node.lineno}: psycopg.sql composition")
            elif (
                isinstance(node, ast.Attribute) and node.attr == "sql" and getattr(node.value, "id", None) == "psycopg"
            ):
                found.append(f"{where}:{node.lineno}: psycopg.sql composition")
    assert found == [], "write it as a named query in database/queries/*.sql:\n" + "\n".join(found)


def test_every_named_query_is_used_by_the_package() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in _modules())
    unused = [name for name in queries.load() if f'"{name}"' not in source]
    assert unused == [], f"named queries nothing runs: {unused}"


def test_the_query_files_parse_strictly() -> None:
    text = "-- a file header\n\n-- name: one\n-- What it does.\nSELECT 1\n\n-- name: two\nSELECT 2;\n-- a note\n"
    assert queries.parse(text) == {"one": "SELECT 1", "two": "SELECT 2"}
    with pytest.raises(ValueError, match="defined twice"):
        queries.parse("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(ValueError, match="before the first"):
        queries.parse("SELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(ValueError, match="is empty"):
        queries.parse("-- name: a\n-- only words\n")
    assert len(queries.load()) > 50


def test_identifiers_are_quoted(pg_server: str) -> None:
    with psycopg.connect(pg_server, autocommit=True) as conn:
        name = 'odd "name"'
        queries.execute_sync(conn, "create_database", identifiers={"database": name})
        try:
            assert queries.value_sync(conn, "database_exists", {"name": name}) is True
        finally:
            conn.execute('DROP DATABASE "odd ""name"""')
