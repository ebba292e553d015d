"""Procrastinate's schema in a database migrate finds: which of its migrations it has already.

Procrastinate keeps no version table: a schema comes from ``procrastinate schema --apply`` of some
release, and operators then apply the migration files of later releases by hand, in order
(Procrastinate's documented way). ``agentlab-sched migrate`` records each file it applied; for a schema
it did not set up, it works out the newest migration the schema already has from what the migrations
create: each file's *markers* are the objects it is the first to create (a table, an index, a trigger,
a function name, a type, an enum label, a column). The newest file whose markers are all there, and
every file before it, are in the schema; the files after it are applied. A file after that point that
an operator applied by hand anyway fails on an object it creates ("already exists"): it is recorded as
applied, not run twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from procrastinate.schema import SchemaManager

from agentlab_sched.database import queries

__all__ = ["Marker", "applied_prefix", "markers", "migration_files", "present"]

_IDENT = r'"?([A-Za-z_][A-Za-z0-9_]*)"?'
_PATTERNS = {
    "table": re.compile(rf"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:public\.)?{_IDENT}", re.I),
    "index": re.compile(rf"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}", re.I),
    "trigger": re.compile(rf"CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+{_IDENT}", re.I),
    "function": re.compile(rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+(?:public\.)?{_IDENT}", re.I),
    "type": re.compile(rf"CREATE\s+TYPE\s+(?:public\.)?{_IDENT}", re.I),
    "label": re.compile(
        rf"ALTER\s+TYPE\s+(?:public\.)?{_IDENT}\s+ADD\s+VALUE\s+(?:IF\s+NOT\s+EXISTS\s+)?'([^']+)'", re.I
    ),
    "column": re.compile(
        rf"ALTER\s+TABLE\s+(?:ONLY\s+)?(?:public\.)?{_IDENT}\s+ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}",
        re.I,
    ),
}
#: What a file may remove again (its absence then says nothing): (kind, pattern of the name).
_REMOVED = [
    ("table", re.compile(rf"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}", re.I)),
    ("table", re.compile(rf"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}\s+RENAME\s+TO", re.I)),
    ("index", re.compile(rf"DROP\s+INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}", re.I)),
    ("index", re.compile(rf"ALTER\s+INDEX\s+(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}\s+RENAME\s+TO", re.I)),
    ("trigger", re.compile(rf"DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?{_IDENT}", re.I)),
    ("trigger", re.compile(rf"ALTER\s+TRIGGER\s+{_IDENT}\s+ON\s+\S+\s+RENAME\s+TO", re.I)),
    ("function", re.compile(rf"DROP\s+(?:FUNCTION|PROCEDURE)\s+(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}", re.I)),
    ("function", re.compile(rf"ALTER\s+FUNCTION\s+(?:public\.)?{_IDENT}[^;]*?\s+RENAME\s+TO", re.I)),
    ("type", re.compile(rf"DROP\s+TYPE\s+(?:IF\s+EXISTS\s+)?(?:public\.)?{_IDENT}", re.I)),
    (
        "column",
        re.compile(
            rf"ALTER\s+TABLE\s+(?:ONLY\s+)?(?:public\.)?{_IDENT}\s+DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_IDENT}",
            re.I,
        ),
    ),
]
#: Objects created by renaming one: (kind, pattern of the new name).
_RENAMED = [
    ("table", re.compile(rf"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?\S+\s+RENAME\s+TO\s+{_IDENT}", re.I)),
    ("index", re.compile(rf"ALTER\s+INDEX\s+(?:IF\s+EXISTS\s+)?\S+\s+RENAME\s+TO\s+{_IDENT}", re.I)),
    ("trigger", re.compile(rf"ALTER\s+TRIGGER\s+\S+\s+ON\s+\S+\s+RENAME\s+TO\s+{_IDENT}", re.I)),
    ("function", re.compile(rf"ALTER\s+FUNCTION\s+[^;]*?\s+RENAME\s+TO\s+{_IDENT}", re.I)),
]
#: Words the patterns above catch that are not object names (CREATE INDEX ON ..., ADD CONSTRAINT ...).
_NOT_NAMES = {"on", "constraint", "check", "unique", "primary", "foreign", "exclude"}
#: The named query that says whether a marker of each kind is there.
_PRESENT = {
    "table": "procrastinate_has_relation",
    "index": "procrastinate_has_relation",
    "trigger": "procrastinate_has_trigger",
    "function": "procrastinate_has_function",
    "type": "procrastinate_has_type",
    "label": "procrastinate_has_label",
    "column": "procrastinate_has_column",
}


@dataclass(frozen=True)
class Marker:
    kind: str
    name: str
    detail: str = ""


def migration_files() -> list[Path]:
    """The migration files of the installed Procrastinate, oldest first."""
    return sorted(Path(SchemaManager.get_migrations_path()).glob("*.sql"))


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def _found(patterns: list[tuple[str, re.Pattern[str]]], text: str) -> set[Marker]:
    found = set()
    for kind, pattern in patterns:
        for m in pattern.finditer(_strip_comments(text)):
            groups = [g.lower() for g in m.groups()]
            if groups[-1] in _NOT_NAMES or groups[0] in _NOT_NAMES:
                continue
            found.add(Marker(kind, groups[0], groups[1] if len(groups) > 1 else ""))
    return found


def markers(files: list[Path]) -> dict[str, set[Marker]]:
    """File name -> the objects it is the first of these files to create, that neither it nor a later
    file removes (drops or renames)."""
    texts = [path.read_text(encoding="utf-8") for path in files]
    created = [_found(list(_PATTERNS.items()) + _RENAMED, text) for text in texts]
    removed = [_found(_REMOVED, text) for text in texts]
    seen: set[Marker] = set()
    result: dict[str, set[Marker]] = {}
    for i, path in enumerate(files):
        gone = set().union(*removed[i:])
        result[path.name] = {m for m in created[i] - seen if m not in gone}
        seen |= created[i]
    return result


def present(conn: psycopg.Connection, marker: Marker) -> bool:
    return bool(queries.value_sync(conn, _PRESENT[marker.kind], {"a": marker.name, "b": marker.detail}))


def applied_prefix(conn: psycopg.Connection, files: list[Path]) -> int:
    """How many of ``files`` (oldest first) the schema in ``conn`` already has: up to and including the
    newest file all of whose markers are present."""
    marks = markers(files)
    for i in range(len(files) - 1, -1, -1):
        mine = marks[files[i].name]
        if mine and all(present(conn, m) for m in mine):
            return i + 1
    return 0
