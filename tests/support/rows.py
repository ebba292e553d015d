"""Typed access to the rows tests read back: the connections of the fixtures yield dict rows
(``psycopg.Connection[DictRow]``), and a query a test expects to answer must answer."""

from __future__ import annotations

from typing import TypeVar

import psycopg
from psycopg.rows import DictRow

#: The fixtures' connections (tests/conftest.py): autocommit, dict rows; ``conn`` async, ``sync_conn`` not.
Conn = psycopg.AsyncConnection[DictRow]
SyncConn = psycopg.Connection[DictRow]

R = TypeVar("R")


def fetched(row: R | None) -> R:
    """The row a ``fetchone()`` returned, which the test expects to be there."""
    assert row is not None, "the query returned no row"
    return row
