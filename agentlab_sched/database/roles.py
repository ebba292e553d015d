"""The database roles (docs/security.md): reader, admin and worker, created by ``agentlab-sched roles
create`` (`create_roles`), and the checks ``roles create`` and ``doctor`` report (`warnings`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from agentlab_sched import errors
from agentlab_sched.database import queries

#: The prefix of the role names by default: agentlab_sched_reader, agentlab_sched_admin, agentlab_sched_worker.
DEFAULT_PREFIX = "agentlab_sched"


@dataclass(frozen=True)
class RoleNames:
    """The names of the three roles."""

    reader: str
    admin: str
    worker: str

    @classmethod
    def with_prefix(cls, prefix: str = DEFAULT_PREFIX) -> RoleNames:
        """``<prefix>_reader``, ``<prefix>_admin``, ``<prefix>_worker``."""
        return cls(f"{prefix}_reader", f"{prefix}_admin", f"{prefix}_worker")


@dataclass(frozen=True)
class RolesReport:
    """What `create_roles` did."""

    names: RoleNames
    created: tuple[str, ...]
    existing: tuple[str, ...]


@dataclass(frozen=True)
class SetupWarning:
    """A weakness of the database's set-up: a message code and its parameters."""

    code: str
    params: dict[str, Any]


def create_roles(conn: psycopg.Connection[Any], names: RoleNames) -> RolesReport:
    """Create the roles that do not exist (NOLOGIN), record all three and grant them what they may do;
    running it again changes nothing. Needs the owner of the schema, with the right to create roles."""
    with conn.transaction(), errors.translated():
        report = queries.value_sync(
            conn, "create_roles", {"reader": names.reader, "admin": names.admin, "worker": names.worker}
        )
    return RolesReport(names, tuple(report["created"]), tuple(report["existing"]))


def configured(conn: psycopg.Connection[Any]) -> RoleNames | None:
    """The roles `create_roles` recorded, None when there are none (or one of them is gone)."""
    row = queries.one_sync(conn, "configured_roles")
    if row is None or None in row.values():
        return None
    return RoleNames(row["reader"], row["admin"], row["worker"])


def warnings(conn: psycopg.Connection[Any]) -> list[SetupWarning]:
    """What weakens the roles: a writable public schema (Procrastinate's functions search it), Procrastinate
    functions whose search_path migrate could not pin, a superuser owning schema agentlab_sched."""
    found = []
    creators = [r["who"] for r in queries.rows_sync(conn, "public_creators")]
    if creators:
        found.append(SetupWarning("roles.public_create", {"who": creators}))
    for row in queries.rows_sync(conn, "unpinned_procrastinate"):
        found.append(SetupWarning("roles.unpinned", {"name": row["name"], "owner": row["owner"]}))
    owner = queries.one_sync(conn, "schema_owner")
    if owner is not None and owner["superuser"]:
        found.append(SetupWarning("roles.superuser_owner", {"owner": owner["owner"]}))
    return found
