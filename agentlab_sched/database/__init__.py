"""The database: connections, the embedded server, migrations, and the SQL the package ships.

- :mod:`.connections`: which database (``resolve``) and our connections (``connect``, ``connect_sync``);
- :mod:`.embedded`: the embedded PostgreSQL used when no URL is configured;
- :mod:`.migrate`: ``agentlab-sched migrate`` (Procrastinate's schema, ``migrations/``, ``sql/``);
- ``migrations/``: forward-only schema changes; ``sql/``: functions, triggers and views, re-applied by
  every migrate.
"""

from __future__ import annotations

from agentlab_sched.database.connections import (
    Database,
    connect,
    connect_kwargs,
    connect_sync,
    embedded_database,
    resolve,
)

__all__ = ["Database", "connect", "connect_kwargs", "connect_sync", "embedded_database", "resolve"]
