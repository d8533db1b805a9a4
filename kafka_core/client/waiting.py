"""Waiting on an event with a time limit, without ``asyncio.wait_for``.

Before Python 3.12, ``wait_for`` returns the inner result when a cancellation arrives as the
awaited thing completes: the cancellation is lost. A background loop so cancelled runs on, and
``asyncio.run`` (which cancels and then awaits every task) waits for it until its next wake-up,
minutes later (CI: a unit test's event loop hung 300 s on the topic watcher). ``wait_for`` also
starts a task per call, which the hot waits (poll, the sender) pay every time.
``asyncio.timeout`` has neither problem: it cancels the waiting task itself and tells its own
expiry from a cancellation that came from outside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes (``None``: no limit); True if set.

    A set event answers True even with a zero timeout (``wait_for`` times out on it). Every call
    yields to the loop at least once, as ``wait_for`` did: loops that wait with nothing left to
    wait for (a zero delay, an event already set) must not starve the other tasks.
    """
    if event.is_set() or (timeout_s is not None and timeout_s <= 0):
        await asyncio.sleep(0)
        return event.is_set()
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def within(aw: Awaitable[T], timeout_s: float | None) -> T:
    """``await aw`` for at most ``timeout_s``; TimeoutError past it; a cancellation is never lost."""
    async with asyncio.timeout(timeout_s):
        return await aw
