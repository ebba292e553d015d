"""wait_at_most: the timed wait of the long-lived loops, which a stop must always end."""

from __future__ import annotations

import asyncio

import pytest

from agentlab_sched.waiting import wait_at_most


async def test_it_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_at_most(event, 0.01) is False
    event.set()
    assert await wait_at_most(event, None) is True


async def test_a_cancellation_that_comes_as_the_event_is_set_is_not_dropped() -> None:
    # asyncio.wait_for on Python 3.11 returns here instead of raising: the loop around it would go on.
    event = asyncio.Event()
    waiter = asyncio.get_running_loop().create_task(wait_at_most(event, 60))
    await asyncio.sleep(0)  # waiting
    event.set()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
