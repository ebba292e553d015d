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


def server_dir(prefix: str) -> Path:
    """A new private directory for a test server's data, in memory when possible."""
    where = MEMORY if MEMORY.is_dir() and os.access(MEMORY, os.W_OK | os.X_OK) else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=where))
