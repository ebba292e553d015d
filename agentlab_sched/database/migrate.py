"""`agentlab-sched migrate`: Procrastinate's schema, our migrations and our SQL, in one transaction.

- Procrastinate: its full schema on a new database, or its migration files not applied yet on an
  existing one (Procrastinate keeps no version table: we record each file we applied).
- ``migrations/``: forward-only, ordered by file name, each recorded with a checksum; an applied file
  that changed afterwards is refused.
- ``sql/``: functions, triggers and views (CREATE OR REPLACE), re-applied every time.
- The run and fire statuses (``core/statuses.py``), before ``sql/`` (which makes helpers from them).
- The message catalogue, the error registry (``errors.py``), the schedule options
  (``core/options.py``) and the deployment settings the database renders and validates with.
- On a Citus coordinator only (the citus extension installed), last: the Citus step
  (``citus_step.py``), which makes the tables of docs/scaling.md's design reference or distributed
  tables, once.

Everything runs under a transaction-scoped advisory lock, so two concurrent migrates are safe: the
second waits, then finds nothing to do. Before it changes anything, migrate takes the tables firing
writes, whole and at once: a tick that claims schedules and then advances them would otherwise deadlock
with a migration that took a weaker lock on one of them and then wanted it whole.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg

from agentlab_sched import errors, limits, messages
from agentlab_sched.core import options, statuses
from agentlab_sched.database import citus_step, queries, upstream
from agentlab_sched.errors import SchedError
from agentlab_sched.settings import Settings

PACKAGE_DIR = Path(__file__).parent
MIGRATIONS_DIR = PACKAGE_DIR / "migrations"
SQL_DIR = PACKAGE_DIR / "sql"
#: pg_advisory_xact_lock key: "agentlab-sched migrate".
LOCK_KEY = 0x61676C5F6D696772
#: The tables firing writes are taken at once, each try waiting at most this long; after the last try
#: migrate waits for them like any statement.
FIRING_LOCK_TIMEOUT = "100ms"
FIRING_LOCK_TRIES = 100
FIRING_LOCK_PAUSE = 0.1
#: The migration that makes the history tables partitioned: on a database with history, firing waits for it.
HISTORY_UPGRADE = "0005_partitioned_history.sql"
#: How long that migration holds firing, per million rows of the history tables: it builds each table's
#: primary key again and validates one bound (bench/history_upgrade.py, 2 cores, fsync on: 1.18 s for
#: 2,000,000 rows of fires and runs, 5.02 s for 10,000,000).
HOLD_SECONDS_PER_MILLION_ROWS = 0.5


@dataclass
class MigrateReport:
    """What one migrate did."""

    procrastinate: list[str] = field(default_factory=list)
    #: Procrastinate migrations the database had already (an older schema, files applied by hand).
    procrastinate_found: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    sql_files: list[str] = field(default_factory=list)
    #: The schema of the pg_cron-compatible views, and why they were not made there (None: made).
    cron_schema: str | None = None
    cron_blocker: str | None = None
    #: Tables the Citus step handed to Citus (``table: placement``); empty on plain PostgreSQL.
    citus: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.procrastinate or self.applied or self.citus)


@dataclass
class MigratePlan:
    """What `migrate` would do to a database, and how long firing would wait for it."""

    #: Migration files not applied yet (``procrastinate/`` ones included), and ``sql/`` when older.
    pending: list[str]
    #: Rows of each history table the partitioning migration turns into a partition (empty once done).
    history_rows: dict[str, int] = field(default_factory=dict)

    @property
    def hold_seconds(self) -> float:
        """About how long firing waits for `migrate` (the partitioning of the history; the rest is quick)."""
        return sum(self.history_rows.values()) / 1_000_000 * HOLD_SECONDS_PER_MILLION_ROWS


def plan(url: str) -> MigratePlan:
    """What `migrate` would do to the database at ``url``, changing nothing (`agentlab-sched migrate --plan`)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return _plan(conn)


def _plan(conn: psycopg.Connection[Any]) -> MigratePlan:
    if not queries.value_sync(conn, "migrations_table_exists"):
        return MigratePlan(pending=pending(set(), None))
    applied = {r["name"] for r in queries.rows_sync(conn, "applied_migrations")}
    recorded = queries.one_sync(conn, "recorded_fingerprint")
    todo = pending(applied, recorded["value"] if recorded else None)
    rows: dict[str, int] = {}
    if HISTORY_UPGRADE in todo:
        for r in queries.rows_sync(conn, "unpartitioned_history"):
            count = r["rows"]
            if count is None:
                count = queries.value_sync(conn, "count_history_rows", identifiers={"table": r["name"]})
            rows[r["name"]] = int(count)
    return MigratePlan(pending=todo, history_rows=rows)


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_FROM_SETTINGS = "from settings"


def migrate(
    url: str,
    *,
    locale: str | None = None,
    on_time_window: float | None = None,
    cron_schema: str | None = _FROM_SETTINGS,
    max_hold: float | None = None,
) -> MigrateReport:
    """Bring the database at ``url`` up to date; running it again changes nothing.

    ``cron_schema`` (default: ``AGENTLAB_SCHED_CRON_SCHEMA``, ``cron``; None: none) is where pg_cron's
    monitoring views ``job`` and ``job_run_details`` are made, unless pg_cron itself is installed there.
    ``max_hold``: refuse, changing nothing, when firing would wait longer than this many seconds (see
    :func:`plan`); the upgrade can then run at a quiet hour.
    """
    if cron_schema == _FROM_SETTINGS:
        cron_schema = Settings.from_env().cron_schema
    if max_hold is not None and not max_hold >= 0:
        raise errors.ValidationError("migrate.max_hold", "max_hold", value=max_hold)
    report = MigrateReport(cron_schema=cron_schema)
    with psycopg.connect(url, autocommit=False) as conn:
        with conn.transaction():
            _lock(conn)
            if max_hold is not None:
                _check_hold(conn, max_hold)
            _lock_firing_tables(conn)
            queries.execute_sync(conn, "quiet_notices")
            queries.execute_sync(conn, "create_schema")
            queries.execute_sync(conn, "create_migrations_table")
            applied = {r["name"]: r["checksum"] for r in queries.rows_sync(conn, "applied_migrations")}
            _procrastinate(conn, applied, report)
            _ours(conn, applied, report)
            # Before sql/: its 01_statuses.sql makes run_is_open() and the like from this table.
            queries.execute_sync(conn, "clear_statuses")
            queries.execute_many_sync(conn, "insert_status", statuses.catalog_rows())
            for path in sorted(SQL_DIR.glob("*.sql")):
                queries.run_script_sync(conn, path.read_text(encoding="utf-8"))
                report.sql_files.append(path.name)
            _catalogue(conn, locale, on_time_window)
            # Refused (the whole migrate) while another role could plant what Procrastinate's functions call.
            queries.execute_sync(conn, "check_public")
            # The history tables' partitions for today and the days ahead (housekeeping keeps them made).
            queries.execute_sync(conn, "ensure_partitions")
            queries.execute_sync(conn, "drop_unattached_history")
            if cron_schema:
                report.cron_blocker = queries.value_sync(conn, "install_cron_compat", {"schema": cron_schema})
            if citus_step.installed(conn):
                report.citus = citus_step.distribute(conn)
    return report


def _lock(conn: psycopg.Connection[Any]) -> None:
    """One migrate at a time, waited for at most 10 s, then refused naming who holds it: the lock of the
    migrations table, which only its owner can take (an advisory lock is anyone's who may connect), or on
    the first install, before there is a table, the advisory lock."""
    was = queries.value_sync(conn, "lock_timeout")
    queries.execute_sync(conn, "set_lock_timeout", {"value": "10s"})
    try:
        with conn.transaction():
            if queries.value_sync(conn, "migrations_table_exists"):
                queries.execute_sync(conn, "migrate_lock_table")
            else:
                queries.execute_sync(conn, "migrate_lock", {"key": LOCK_KEY})
    except psycopg.errors.LockNotAvailable:
        holder = queries.value_sync(conn, "migrate_lock_holders", {"key": LOCK_KEY})
        raise errors.Conflict("migrate.locked", "database", holder=holder or "?") from None
    queries.execute_sync(conn, "set_lock_timeout", {"value": was})


def _check_hold(conn: psycopg.Connection[Any], max_hold: float) -> None:
    """Refused (nothing changed yet) when the history upgrade would hold firing longer than ``max_hold``."""
    todo = _plan(conn)
    if todo.hold_seconds > max_hold:
        raise errors.Conflict(
            "migrate.hold_too_long", "max_hold", rows=sum(todo.history_rows.values()),
            seconds=hold_text(todo.hold_seconds), max_hold=f"{max_hold:g}",
        )  # fmt: skip


def hold_text(seconds: float) -> str:
    """The hold as it is said: tenths of a second, at least 0.1."""
    return f"{max(seconds, 0.1):.1f}"


def _lock_firing_tables(conn: psycopg.Connection[Any]) -> None:
    """The tables firing writes, taken before anything changes them (see the ``lock_firing_tables`` query):
    in short tries, so that a tick holding one of them finishes instead of queuing behind migrate."""
    was = queries.value_sync(conn, "lock_timeout")
    queries.execute_sync(conn, "set_lock_timeout", {"value": FIRING_LOCK_TIMEOUT})
    try:
        for _ in range(FIRING_LOCK_TRIES):
            try:
                with conn.transaction():  # a savepoint: a try that timed out leaves nothing
                    queries.execute_sync(conn, "lock_firing_tables")
                return
            except psycopg.errors.LockNotAvailable:
                time.sleep(FIRING_LOCK_PAUSE)
    finally:
        queries.execute_sync(conn, "set_lock_timeout", {"value": was})
    queries.execute_sync(conn, "lock_firing_tables")  # busy all along: wait like any statement


def fingerprint() -> str:
    """What this version's migrate writes besides the migrations: its SQL files, its Citus step and its
    message catalogue. Recorded by every migrate, so that `doctor` can tell a database migrated by an older
    version (the Citus step counts everywhere: it is part of the version, whether it runs or not)."""
    parts = [path.read_text(encoding="utf-8") for path in [*sorted(SQL_DIR.glob("*.sql")), *citus_step.scripts()]]
    parts += ["\t".join(row) for row in messages.catalog_rows()]
    parts += ["\t".join(map(str, row)) for row in statuses.catalog_rows()]
    return checksum("\n".join(parts))


def pending(applied: set[str], recorded_fingerprint: str | None) -> list[str]:
    """What `agentlab-sched migrate` would do to a database with these migrations applied and this
    fingerprint: the migration files not applied yet, and ``sql/`` when its functions, views or messages
    are older than this version's."""
    names = [f"procrastinate/{p.name}" for p in upstream.migration_files()]
    names += [p.name for p in sorted(MIGRATIONS_DIR.glob("*.sql"))]
    todo = [name for name in names if name not in applied]
    if recorded_fingerprint != fingerprint():
        todo.append("sql/")
    return todo


def _procrastinate(conn: psycopg.Connection, applied: dict[str, str], report: MigrateReport) -> None:
    """Procrastinate's schema: all of it on a new database; on an existing one, the migration files it
    does not have yet (see `upstream`: which it has is known from our records, or from the schema)."""
    files = upstream.migration_files()
    if not queries.value_sync(conn, "has_procrastinate"):
        schema = (resources.files("procrastinate.sql") / "schema.sql").read_text(encoding="utf-8")
        queries.run_script_sync(conn, schema)
        report.procrastinate.append("schema.sql")
        for path in files:  # the full schema contains every migration: record them only
            _record(conn, f"procrastinate/{path.name}", path.read_text(encoding="utf-8"))
        return
    pending = [p for p in files if f"procrastinate/{p.name}" not in applied]
    if not pending:
        return
    if not any(name.startswith("procrastinate/") for name in applied):
        # A schema set up by `procrastinate schema --apply` (of this release or an older one), maybe
        # upgraded by hand since: what it has already is read off the schema itself.
        have = upstream.applied_prefix(conn, files)
        for path in files[:have]:
            _record(conn, f"procrastinate/{path.name}", path.read_text(encoding="utf-8"))
        report.procrastinate_found.extend(p.name for p in files[:have])
        pending = files[have:]
    # Our triggers on procrastinate_jobs name no column, so they cannot block Procrastinate's own
    # migrations (ALTER COLUMN ... TYPE); they are dropped meanwhile all the same, and the sql/ files
    # re-create them below.
    queries.execute_sync(conn, "drop_job_triggers")
    for path in pending:
        text = path.read_text(encoding="utf-8")
        try:
            with conn.transaction():  # a savepoint: a file applied by hand already fails, and changes nothing
                queries.run_script_sync(conn, text)
        except (
            psycopg.errors.DuplicateObject,
            psycopg.errors.DuplicateFunction,
            psycopg.errors.DuplicateTable,
            psycopg.errors.DuplicateColumn,
        ):
            report.procrastinate_found.append(path.name)  # an operator applied it by hand
        else:
            report.procrastinate.append(path.name)
        _record(conn, f"procrastinate/{path.name}", text)


def _record(conn: psycopg.Connection, name: str, text: str) -> None:
    queries.execute_sync(conn, "record_migration", {"name": name, "checksum": checksum(text)})


def _ours(conn: psycopg.Connection[Any], applied: dict[str, str], report: MigrateReport) -> None:
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        digest = checksum(text)
        name = path.name
        if name in applied:
            if applied[name] != digest:
                raise SchedError("migrate.changed", "migrations", file=name)
            continue
        queries.run_script_sync(conn, text)
        queries.execute_sync(conn, "record_migration", {"name": name, "checksum": digest})
        report.applied.append(name)


def _catalogue(conn: psycopg.Connection[Any], locale: str | None, on_time_window: float | None) -> None:
    queries.execute_sync(conn, "clear_messages")
    queries.execute_many_sync(conn, "insert_message", messages.catalog_rows())
    queries.execute_sync(conn, "clear_error_codes")
    queries.execute_many_sync(conn, "insert_error_code", errors.registry_rows())
    queries.execute_sync(conn, "clear_schedule_options")
    queries.execute_many_sync(conn, "insert_schedule_option", options.catalog_rows())
    # The size limits SQL checks by (agentlab_sched.size_limit).
    queries.execute_many_sync(conn, "set_config", [{"key": k, "value": v} for k, v in limits.catalog_rows()])
    if locale:
        queries.execute_sync(conn, "set_config", {"key": "locale", "value": messages.normalise_locale(locale)})
    if on_time_window is None:
        on_time_window = Settings.from_env().on_time_window
    # What doctor compares with the code it runs (migrations current, functions and messages too).
    queries.execute_sync(conn, "set_config", {"key": "schema_fingerprint", "value": fingerprint()})
    # The overdue view reads it: the database has no environment.
    queries.execute_sync(conn, "set_config", {"key": "on_time_window_seconds", "value": str(int(on_time_window))})
