"""Fetches never queue behind the group coordinator's requests on a shared connection.

A broker answers one connection's requests in order, one at a time. Apache Kafka's group
coordinator answers a classic Heartbeat or an OffsetCommit only once its __consumer_offsets high
watermark passes the group's last write: while a SIGKILLed follower is still in that partition's
ISR (until the controller fences it, ~9 s) each such answer waits out offsets.commit.timeout.ms
(5 s). Seen through the chaos proxies (kafka_core/devtools/chaos/timing.py, issue 21): the consumer's Fetch to
the coordinator sent on the same connection waited as long, again and again. The fake broker
here serves each (node, connection) in order and holds Heartbeat answers: records must keep
arriving from every partition meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest
from fakes.consumer_client import FakeGroupClient

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.protocol import messages as m

pytestmark = pytest.mark.timeout(90)

T = "t"
PARTITIONS = 3


class InOrderCoordinator(FakeGroupClient):
    """Node 1 leads every partition and coordinates the group; each of its connections (lane)
    serves one request at a time, in order; while ``holding``, Heartbeat answers wait for
    ``release`` (a coordinator write waiting on its high watermark)."""

    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.lanes: dict[tuple[int, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        self.holding = False
        self.held = 0
        self.release = asyncio.Event()

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        async with self.lanes[(node, kw.get("lane", 0))]:
            if isinstance(body, m.HeartbeatRequest) and self.holding:
                self.held += 1
                await self.release.wait()
            return await super().send(node, body, version, **kw)


def fill(client: FakeGroupClient, partition: int, n: int, start: int = 0) -> None:
    client.log(T, partition).append([(None, b"v%d-%d" % (partition, i), []) for i in range(start, start + n)])


async def poll_for(c: KafkaConsumer, n: int, seconds: float) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(out) < n and time.monotonic() < deadline:
        out.extend(await c.poll(100))
    return out


@pytest.mark.parametrize("fetch_concurrency", [1, 3])
def test_records_keep_arriving_while_a_heartbeat_waits_on_the_coordinator(fetch_concurrency: int) -> None:
    async def main() -> None:
        client = InOrderCoordinator({T: PARTITIONS})
        for p in range(PARTITIONS):
            fill(client, p, 5)
        c = KafkaConsumer(
            T,
            client=client,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=50,
            session_timeout_ms=60_000,
            fetch_max_wait_ms=50,
            fetch_concurrency=fetch_concurrency,
        )
        try:
            first = await poll_for(c, 5 * PARTITIONS, 30)
            assert len(first) == 5 * PARTITIONS
            client.holding = True
            deadline = time.monotonic() + 20
            while not client.held and time.monotonic() < deadline:
                await c.poll(50)
            assert client.held == 1  # a heartbeat now waits for its answer, as on Kafka
            for p in range(PARTITIONS):
                fill(client, p, 5, start=5)
            later = await poll_for(c, 5 * PARTITIONS, 15)
            assert not client.release.is_set()  # all of it while the heartbeat was still held
            assert sorted((r.partition, r.offset) for r in later) == [
                (p, o) for p in range(PARTITIONS) for o in range(5, 10)
            ]
        finally:
            client.release.set()
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 80))
