"""Helpers the share consumer's unit tests share (tests/unit/share/test_share_*.py, on the scripted
broker of fakes/share_broker.py): the topic they use, running a coroutine with a bound, and
polling either face until enough records arrived. One copy, so a fix to a bound reaches all."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kafka_core import KafkaShareConsumer as BlockingShareConsumer
from kafka_core.aio import KafkaShareConsumer
from kafka_core.client.metadata import TopicPartition

T = "jobs"
TP = TopicPartition(T, 0)
POLL_DEADLINE_S = 10.0


def run(fn: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Run ``fn()`` (a coroutine function) to its end; a hang fails after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(fn(), timeout))


async def poll_until(
    c: KafkaShareConsumer, n: int, *, timeout_ms: int = 100, deadline_s: float = POLL_DEADLINE_S
) -> list[Any]:
    """Poll until ``n`` records arrived or ``deadline_s`` passed: the records, however many came
    (a real broker's tests wait longer, in longer polls)."""
    got: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < deadline:
        got.extend(await c.poll(timeout_ms))
    return got


def first_poll(c: BlockingShareConsumer, timeout_ms: int, **kwargs: Any) -> list[Any]:
    """The blocking face's first poll that returned records (within 10 s; else ``[]``)."""
    got: list[Any] = []
    deadline = time.monotonic() + POLL_DEADLINE_S
    while not got and time.monotonic() < deadline:
        got = c.poll(timeout_ms, **kwargs)
    return got
