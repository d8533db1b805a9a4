"""Timed waits that never lose a cancellation (kafka_core.client.waiting)."""

from __future__ import annotations

import asyncio

import pytest

from kafka_core.client.waiting import wait_event, within


def test_a_cancellation_that_arrives_as_the_event_is_set_ends_the_loop():
    """``asyncio.wait_for`` before 3.12 returns the result here and the loop runs on; a task so
    cancelled kept ``asyncio.run`` waiting on the topic watcher for minutes."""

    async def main() -> None:
        ev = asyncio.Event()
        rounds = 0

        async def loop() -> None:
            nonlocal rounds
            while True:
                await wait_event(ev, 3600)
                ev.clear()
                rounds += 1

        task = asyncio.create_task(loop())
        await asyncio.sleep(0.01)  # the loop is waiting
        ev.set()
        task.cancel()
        await asyncio.wait([task], timeout=5)
        assert task.done() and task.cancelled()
        assert rounds == 0

    asyncio.run(main())


def test_wait_event_answers():
    async def main() -> None:
        ev = asyncio.Event()
        assert await wait_event(ev, 0) is False
        assert await wait_event(ev, 0.01) is False
        ev.set()
        assert await wait_event(ev, 0) is True  # set: at once, even with no time left
        ev.clear()
        asyncio.get_running_loop().call_later(0.01, ev.set)
        assert await wait_event(ev, None) is True

    asyncio.run(main())


def test_within_times_out_and_returns():
    async def main() -> None:
        assert await within(asyncio.sleep(0, "x"), 1) == "x"
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(10), 0.01)

    asyncio.run(main())
