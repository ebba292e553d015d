"""The web dashboard: `agentlab-sched web` (docs/web.md).

Server-rendered pages over the same database and roles as SQL and the CLI: a person signs in with a
PostgreSQL role and its password, and every request runs on connections authenticated as them, so the
database's privileges decide what they see and may do, and its audit records them.

    from agentlab_sched.web import WebConfig, create_app

    app = create_app(WebConfig(database_url=url))   # an ASGI app: uvicorn, or a test client
"""

from __future__ import annotations

from agentlab_sched.web.config import WebConfig
from agentlab_sched.web.dashboard import create_app
from agentlab_sched.web.server import serve

__all__ = ["WebConfig", "create_app", "serve"]
