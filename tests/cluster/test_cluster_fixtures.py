"""The cluster fixtures themselves: a PostgreSQL 15 primary run by an unprivileged user, migrated."""

from __future__ import annotations

import pwd
from pathlib import Path
from typing import Any


def test_primary_is_postgresql_15_run_unprivileged_and_migrated(pg15: Any, pg15_db: str) -> None:
    (version,) = pg15.rows("SHOW server_version_num")[0]
    assert int(version) // 10000 == 15
    pid = pg15.postmaster_pid()
    assert pid is not None
    owner = pwd.getpwuid(Path(f"/proc/{pid}").stat().st_uid).pw_name
    assert owner != "root"
    (in_recovery,) = pg15.rows("SELECT pg_is_in_recovery()")[0]
    assert in_recovery is False
    assert pg15.rows("SELECT count(*) FROM agentlab_sched.schedules", dbname=pg15_db) == [(0,)]
