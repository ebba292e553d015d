"""The Citus step of `migrate`: on a database where the citus extension is installed, the tables
docs/scaling.md places on the cluster become reference or distributed tables (database/citus/*.sql).
Nothing of it runs on plain PostgreSQL, and running it again changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError

CITUS_DIR = Path(__file__).parent / "citus"


def installed(conn: psycopg.Connection[Any]) -> bool:
    """Whether the citus extension is installed in the connected database."""
    return bool(queries.value_sync(conn, "has_citus"))


def scripts() -> list[Path]:
    """The step's SQL files, in the order it runs them (migrate's schema fingerprint includes them)."""
    return sorted(CITUS_DIR.glob("*.sql"))


def distribute(conn: psycopg.Connection[Any]) -> list[str]:
    """Hand the tables of the design to Citus, in the caller's transaction: ``table: placement`` for each
    table changed now (none when an earlier migrate did it already)."""
    if not queries.value_sync(conn, "citus_coordinator_known"):
        # Reference tables need a copy on the coordinator, where the local tables join them.
        raise SchedError("migrate.citus_coordinator", "database")
    for path in scripts():
        queries.run_script_sync(conn, path.read_text(encoding="utf-8"))
    return [f"{row['table_name']}: {row['placement']}" for row in queries.rows_sync(conn, "citus_distribute")]
