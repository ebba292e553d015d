"""Where the tests' own PostgreSQL servers keep their data: in memory when the machine has a tmpfs.

Each test clones a database from a template and drops it at its end: several hundred files made and
removed per test. On a disk that costs 200-500 ms a test (ext4 mounted with ``discard`` here), in memory
about 55 ms, and the servers are thrown away at the end of the session anyway (they run without fsync).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Linux's shared-memory tmpfs, present on every mainstream distribution; elsewhere the system's temp dir.
MEMORY = Path("/dev/shm")
#: The room it must have free (bytes): a session's server with its template and a few test databases
#: takes a few hundred megabytes. A container's default /dev/shm (64 MB) has not: then the disk.
MEMORY_NEEDED = 2 * 1024**3


def _memory_has_room() -> bool:
    try:
        stat = os.statvfs(MEMORY)
    except OSError:
        return False
    return os.access(MEMORY, os.W_OK | os.X_OK) and stat.f_bavail * stat.f_frsize >= MEMORY_NEEDED


def server_dir(prefix: str) -> Path:
    """A new private directory for a test server's data, in memory when there is room."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=MEMORY if _memory_has_room() else None))
