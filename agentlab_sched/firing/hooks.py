"""Hooks a host app registers: resolvers that may refuse a launch, per task."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentlab_sched import messages
from agentlab_sched.observe.events import fields
from agentlab_sched.settings import Settings

logger = logging.getLogger(__name__)


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


#: The longest reason recorded from a resolver, in characters.
REASON_MAX = 2000


def _reason_text(refused: LaunchRefused, locale: str) -> str:
    """A resolver's reason as text we can store, whatever it handed us (a lazy translation, any object)."""
    try:
        value = refused.reason
        text = value if isinstance(value, str) else str(value)
        if not isinstance(text, str):
            raise TypeError("str() did not return text")
    except Exception:
        logger.warning("a resolver's refusal reason could not be turned into text", exc_info=True)
        text = ""
    text = text.replace("\x00", "").strip()
    if not text:
        return messages.render("launch.refused_no_reason", locale)
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


async def refusal_of(
    row: dict[str, Any], at: datetime, kind: str, settings: Settings, inputs: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Run the task's resolver (bounded by the resolver timeout): None to launch, else the refusal to record.

    Never raises: a refusal, a timeout and an unexpected error each become the fire's reason.
    """
    if not has_resolver(row["task"]):
        return None
    locale = settings.locale
    request = LaunchRequest(row["id"], row["name"], row["task"], at, kind, inputs or row["inputs"])
    try:
        await asyncio.wait_for(resolve(request), settings.resolver_timeout)
    except LaunchRefused as refused:
        reason = _reason_text(refused, locale)
        return {"reason_code": "launch.refused", "reason_params": {"reason": reason}, "reason": reason}
    except TimeoutError:
        logger.error(
            "the resolver of task %s did not answer within %s s for schedule %s",
            row["task"],
            settings.resolver_timeout,
            row["name"],
        )
        params = {"task": row["task"], "timeout": messages.seconds(settings.resolver_timeout)}
        return {
            "reason_code": "launch.resolver_timeout",
            "reason_params": params,
            "reason": messages.render("launch.resolver_timeout", locale, **params),
        }
    except (Exception, asyncio.CancelledError) as exc:
        current = asyncio.current_task()
        if isinstance(exc, asyncio.CancelledError) and current is not None and current.cancelling():
            raise  # we are being stopped: not the resolver's doing
        logger.exception(
            "the resolver of task %s failed for schedule %s", row["task"], row["name"],
            extra=fields(row["name"], reason_code="launch.error", task=row["task"]),
        )  # fmt: skip
        return {
            "reason_code": "launch.error",
            "reason_params": {},
            "reason": messages.render("launch.error", locale),
        }
    return None
