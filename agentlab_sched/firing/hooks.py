"""Hooks a host app registers: resolvers that may refuse a launch, per task."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class LaunchRefused(Exception):
    """The task's resolver refused this fire.

    Raised by a resolver to refuse a fire; ``reason`` (this docstring's first line when not given) is
    recorded verbatim as the fire's reason.
    """

    def __init__(self, reason: str | None = None) -> None:
        reason = reason or (type(self).__doc__ or "").strip().splitlines()[0]
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LaunchRequest:
    """What a resolver is told about the fire it may refuse."""

    schedule_id: int
    schedule: str
    task: str
    fire_at: datetime
    kind: str
    inputs: dict[str, Any]


Resolver = Callable[[LaunchRequest], Awaitable[None] | None]
_resolvers: dict[str, Resolver] = {}


def resolver(task: str) -> Callable[[Resolver], Resolver]:
    """Register a resolver for ``task``: it runs before every launch and may raise `LaunchRefused`.

    It runs outside any transaction (it holds no lock a tick, a worker or an admin waits for), at most
    ``AGENTLAB_SCHED_RESOLVER_TIMEOUT`` seconds (10 by default; then the fire is ``failed_to_start``); a
    plain (non-async) function runs in a thread. Whatever it raises is recorded against its own fire.

    Example: check that a published version of the workflow exists::

        @agentlab_sched.resolver("reports.store_weekly")
        async def needs_published(request: LaunchRequest) -> None:
            if not await published(request.inputs["workflow"]):
                raise LaunchRefused("the workflow has no published version; publish it first")
    """

    def register(func: Resolver) -> Resolver:
        _resolvers[task] = func
        return func

    return register


def unregister(task: str) -> None:
    """Remove the resolver of ``task`` (tests, reloads)."""
    _resolvers.pop(task, None)


async def resolve(request: LaunchRequest) -> None:
    """Run the resolver registered for the request's task, if any (may raise LaunchRefused).

    A coroutine function is awaited; a plain function runs in a thread, so a resolver that blocks (a
    synchronous HTTP call, a database driver) never blocks the worker's event loop.
    """
    func = _resolvers.get(request.task)
    if func is None:
        return
    if inspect.iscoroutinefunction(func):
        await func(request)
        return
    result = await asyncio.to_thread(func, request)
    if inspect.isawaitable(result):
        await result


def has_resolver(task: str) -> bool:
    return task in _resolvers
