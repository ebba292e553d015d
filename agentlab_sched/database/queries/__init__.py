"""Every statement the package sends, by name, and the one place that runs them.

The statements live in the ``.sql`` files next to this module (one file per domain), each after a
header naming it, then comment lines saying what it does::

    -- name: claim_due
    -- The schedules due at %(now)s (and those to re-plan), locked for this tick.
    SELECT * FROM agentlab_sched.claim_due(%(now)s, %(batch)s)

Parameters are psycopg's named placeholders (``%(now)s``; ``%s`` for rows inserted from tuples). A
statement that must name a database object (``CREATE DATABASE``) writes it as ``{database}``; the
caller passes ``identifiers=`` and it is quoted as an identifier here (the only place the package
composes SQL). Whole SQL files (migrations, ``sql/``) run through :func:`run_script_sync`.

Rows come as dicts, or as instances of a class when one is given (psycopg's ``class_row``: the columns
must be the class's fields, a mismatch fails loudly). The functions take a psycopg connection, async or
sync (``*_sync``); :func:`connector_one` runs a statement through a Procrastinate connector (the
worker's pool).

Tests may write SQL freely; the package's modules write none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import psycopg
from psycopg import sql
from psycopg.rows import class_row, dict_row

if TYPE_CHECKING:
    from procrastinate.connector import BaseConnector

__all__ = [
    "DIRECTORY",
    "connector_one",
    "connector_rows",
    "execute",
    "execute_many",
    "execute_many_sync",
    "execute_sync",
    "load",
    "one",
    "one_sync",
    "rows",
    "rows_sync",
    "run_command",
    "run_script_sync",
    "text",
    "value",
    "value_sync",
]

T = TypeVar("T")
Params = Mapping[str, Any] | Sequence[Any] | None
AsyncConn = psycopg.AsyncConnection[Any]
Conn = psycopg.Connection[Any]

DIRECTORY = Path(__file__).parent
_HEADER = re.compile(r"^-- name: ([a-z0-9_]+)[ \t]*$", re.MULTILINE)


def parse(text: str, source: str = "<text>") -> dict[str, str]:
    """The statements of one file: name -> text (without the description lines after the header)."""
    parts = _HEADER.split(text)
    if parts[0].strip() and not all(line.startswith("--") for line in parts[0].strip().splitlines()):
        raise ValueError(f"{source}: SQL before the first '-- name:' header")
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{source}: query {name} defined twice")
        lines = body.strip().splitlines()
        while lines and lines[0].startswith("--"):  # its description: documentation, not sent
            lines.pop(0)
        while lines and (lines[-1].startswith("--") or not lines[-1].strip()):  # a note on the next ones
            lines.pop()
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{source}: query {name} is empty")
        found[name] = statement
    return found


@cache
def load() -> dict[str, str]:
    """Every named statement of the ``.sql`` files here; a name used twice is an error."""
    queries: dict[str, str] = {}
    for path in sorted(DIRECTORY.glob("*.sql")):
        for name, statement in parse(path.read_text(encoding="utf-8"), path.name).items():
            if name in queries:
                raise ValueError(f"{path.name}: query {name} is defined in another file too")
            queries[name] = statement
    return queries


def text(name: str) -> str:
    """The text of statement ``name`` (KeyError for an unknown name)."""
    return load()[name]


def _query(name: str, identifiers: Mapping[str, str] | None) -> sql.SQL | sql.Composed:
    # The files are part of the package, as trusted as a literal in its source.
    statement = sql.SQL(text(name))
    if identifiers:
        return statement.format(**{k: sql.Identifier(v) for k, v in identifiers.items()})
    return statement


# ------------------------------------------------------------------------------------------- async


async def execute(
    conn: AsyncConn, name: str, params: Params = None, *, identifiers: Mapping[str, str] | None = None
) -> int:
    """Run statement ``name``; the number of rows it touched."""
    async with conn.cursor() as cur:
        await cur.execute(_query(name, identifiers), params)
        return cur.rowcount


async def execute_many(conn: AsyncConn, name: str, params: Iterable[Mapping[str, Any] | Sequence[Any]]) -> None:
    """Run statement ``name`` once per parameter set (one pipeline)."""
    async with conn.cursor() as cur:
        await cur.executemany(_query(name, None), params)


@overload
async def one(conn: AsyncConn, name: str, params: Params = None) -> dict[str, Any] | None: ...
@overload
async def one(conn: AsyncConn, name: str, params: Params, row: type[T]) -> T | None: ...
async def one(conn: AsyncConn, name: str, params: Params = None, row: type[Any] | None = None) -> Any:
    """The first row of statement ``name`` (None when there is none): a dict, or a ``row``."""
    async with conn.cursor(row_factory=class_row(row) if row else dict_row) as cur:
        await cur.execute(_query(name, None), params)
        return await cur.fetchone()


@overload
async def rows(conn: AsyncConn, name: str, params: Params = None) -> list[dict[str, Any]]: ...
@overload
async def rows(conn: AsyncConn, name: str, params: Params, row: type[T]) -> list[T]: ...
async def rows(conn: AsyncConn, name: str, params: Params = None, row: type[Any] | None = None) -> Any:
    """Every row of statement ``name``: dicts, or ``row`` instances."""
    async with conn.cursor(row_factory=class_row(row) if row else dict_row) as cur:
        await cur.execute(_query(name, None), params)
        return await cur.fetchall()


async def value(conn: AsyncConn, name: str, params: Params = None) -> Any:
    """The first column of the one row statement ``name`` returns."""
    async with conn.cursor() as cur:
        await cur.execute(_query(name, None), params)
        found = await cur.fetchone()
    if found is None:
        raise LookupError(f"query {name} returned no row")
    return next(iter(found.values())) if isinstance(found, dict) else found[0]


async def run_command(conn: AsyncConn, command: str) -> list[dict[str, Any]]:
    """Send a user's SQL command (the sql task's) as one query: each statement's status and rows."""
    async with conn.cursor() as cur:
        await cur.execute(command.encode(), prepare=False)  # bytes: never read as a %s template
        statements = []
        while True:
            statements.append({"status": cur.statusmessage or "", "rows": max(cur.rowcount, 0)})
            if not cur.nextset():
                return statements


# -------------------------------------------------------------------------------------------- sync


def execute_sync(conn: Conn, name: str, params: Params = None, *, identifiers: Mapping[str, str] | None = None) -> int:
    """:func:`execute` on a sync connection."""
    with conn.cursor() as cur:
        cur.execute(_query(name, identifiers), params)
        return cur.rowcount


def execute_many_sync(conn: Conn, name: str, params: Iterable[Mapping[str, Any] | Sequence[Any]]) -> None:
    """:func:`execute_many` on a sync connection."""
    with conn.cursor() as cur:
        cur.executemany(_query(name, None), params)


def one_sync(
    conn: Conn, name: str, params: Params = None, *, identifiers: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """:func:`one` on a sync connection (dict rows)."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(_query(name, identifiers), params)
        return cur.fetchone()


def rows_sync(conn: Conn, name: str, params: Params = None) -> list[dict[str, Any]]:
    """:func:`rows` on a sync connection (dict rows)."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(_query(name, None), params)
        return cur.fetchall()


def value_sync(conn: Conn, name: str, params: Params = None, *, identifiers: Mapping[str, str] | None = None) -> Any:
    """:func:`value` on a sync connection."""
    found = one_sync(conn, name, params, identifiers=identifiers)
    if found is None:
        raise LookupError(f"query {name} returned no row")
    return next(iter(found.values()))


def run_script_sync(conn: Conn, script: str) -> None:
    """Run a whole SQL file (a migration, a ``sql/`` file, Procrastinate's schema): no parameters."""
    # The files are part of the package (or of Procrastinate's), as trusted as a literal in its source.
    conn.execute(script)


# ---------------------------------------------------------------------------------- Procrastinate


async def connector_one(connector: BaseConnector, name: str, **params: Any) -> dict[str, Any]:
    """The first row of statement ``name`` run through a Procrastinate connector (its pool)."""
    row: dict[str, Any] = await connector.execute_query_one_async(text(name), **params)
    return row


async def connector_rows(connector: BaseConnector, name: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of statement ``name`` run through a Procrastinate connector (its pool)."""
    found: list[dict[str, Any]] = await connector.execute_query_all_async(text(name), **params)
    return found
