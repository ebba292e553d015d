"""Waiting for an event with a time limit, in the long-lived loops (workers, the dispatcher, the web server)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["wait_at_most"]


async def wait_at_most(event: asyncio.Event, within: float | None) -> bool:
    """Wait until ``event`` is set or ``within`` seconds pass (None: no limit); return whether it is set.

    Not ``asyncio.wait_for``: on Python 3.11 it drops a cancellation that comes as the event is set, and a loop
    being stopped then goes on waiting for ever.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            await event.wait()
    return event.is_set()
