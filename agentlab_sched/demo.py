"""A ready Procrastinate app with the scheduler and four demo tasks (`agentlab-sched dev` uses it).

    agentlab-sched worker --app agentlab_sched.demo.app

`app` is built on first use from the configured database (or the embedded one); `make_app(url)` builds
one for a given URL (tests, benchmarks).
"""

from __future__ import annotations

import asyncio
from typing import Any

import procrastinate

from agentlab_sched import database
from agentlab_sched.runs.approvals import ask_once
from agentlab_sched.worker.blueprint import make_blueprint
from agentlab_sched.worker.middleware import install
from agentlab_sched.worker.process import connector_for


async def echo(**inputs: Any) -> dict[str, Any]:
    """Return its inputs."""
    return inputs


async def sleep(seconds: float = 1.0, **inputs: Any) -> float:
    """Sleep for ``seconds`` (an overlapping run, a timeout to hit)."""
    await asyncio.sleep(float(seconds))
    return float(seconds)


async def fail(message: str = "demo.fail was asked to fail", **inputs: Any) -> None:
    """Fail with ``message``."""
    raise RuntimeError(message)


async def ask(**inputs: Any) -> Any:
    """Pause for approval once, then return what the approver said."""
    return await ask_once("demo.ask: approve this run?", inputs)


def make_app(url: str, **connector_options: Any) -> procrastinate.App:
    """The demo app on the database at ``url``."""
    app = procrastinate.App(connector=connector_for(url, **connector_options))
    app.add_tasks_from(make_blueprint(), namespace="agentlab_sched")
    for func in (echo, sleep, fail, ask):
        app.task(name=f"demo.{func.__name__}")(func)
    install(app)  # the run middleware, also for a plain `procrastinate --app agentlab_sched.demo.app worker`
    return app


_app: procrastinate.App | None = None


def __getattr__(name: str) -> Any:
    # `app` is resolved lazily so that importing this module never starts a database server.
    global _app
    if name == "app":
        if _app is None:
            _app = make_app(database.resolve().url)
        return _app
    raise AttributeError(name)
