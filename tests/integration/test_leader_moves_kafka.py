"""A controlled shutdown of a partition leader on the three-node Apache Kafka (``kafka_three``)
while a producer and a consumer run: nothing acknowledged is lost, nothing is written or read twice,
and the records of each partition arrive in order.

Kafka's controlled shutdown hands the node's leaderships over before it stops; Produce and
Fetch requests reaching it meanwhile are answered NOT_LEADER_OR_FOLLOWER with the new leader
(KIP-951), which the clients follow at once (``leader_hints`` counts what they took; printed, not
asserted: whether a request meets that window is the broker's timing). The stall figures beside
confluent-kafka's are bench/bench_leader_moves.py's, in RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import pytest
from fakes.topics import wait_writable

from kafka_core.aio import KafkaClient, KafkaConsumer, KafkaProducer
from kafka_core.devbroker import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

PARTITIONS = 3


def test_a_controlled_shutdown_of_the_leader_loses_and_duplicates_nothing(kafka_three: KafkaCluster) -> None:
    cluster = kafka_three
    topic = f"leader-moves-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, 3)
    wait_writable(cluster.bootstrap, topic, PARTITIONS)
    victim: list[int] = []

    async def main() -> tuple[list[tuple[int, int]], int, int, int]:
        sent = 0
        acked: list[int] = []
        got: list[tuple[int, int]] = []  # (partition, record number)
        ack_times: list[float] = []
        consumer_client = KafkaClient(cluster.bootstrap)
        async with KafkaProducer(cluster.bootstrap, linger_ms=5, delivery_timeout_ms=120_000) as producer:
            consumer = KafkaConsumer(
                topics=[topic],
                group_id=None,
                auto_offset_reset="earliest",
                client=consumer_client,
            )
            stop = asyncio.Event()

            async def produce() -> None:
                nonlocal sent
                pending = []
                while not stop.is_set():
                    n = sent
                    future = await producer.send(topic, str(n).encode(), partition=n % PARTITIONS)
                    future.add_done_callback(lambda _: ack_times.append(time.monotonic()))
                    pending.append((n, future))
                    sent += 1
                    await asyncio.sleep(0.004)
                for n, future in pending:
                    await future  # every record acknowledged: none failed
                    acked.append(n)

            async def consume() -> None:
                while not stop.is_set() or len(got) < sent:
                    got.extend((m.partition, int(m.value or b"-1")) for m in await consumer.poll(200))

            try:
                tasks = [asyncio.create_task(produce()), asyncio.create_task(consume())]
                await asyncio.sleep(3)
                victim.append(await producer.client.leader_for(topic, 0))
                struck = time.monotonic()
                await asyncio.to_thread(cluster.stop_node, victim[0])  # SIGTERM: a controlled shutdown
                stopped = time.monotonic()
                await asyncio.sleep(5)
                stop.set()
                await tasks[0]
                deadline = time.monotonic() + 90
                while len(got) < sent and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                tasks[1].cancel()
                await asyncio.gather(tasks[1], return_exceptions=True)
            finally:
                await consumer.close()
                hints = producer.client.leader_hints, consumer_client.leader_hints
                await consumer_client.close()
        around = [struck, *sorted(t for t in ack_times if struck <= t <= stopped + 3), stopped + 3]
        gap = max(b - a for a, b in itertools.pairwise(around))
        print(f"stop took {stopped - struck:.2f}s; longest ack gap from the SIGTERM to 3 s after: {gap:.2f}s")
        return got, len(acked), hints[0], hints[1]

    try:
        got, acked, producer_hints, consumer_hints = asyncio.run(main())
    finally:
        if victim:
            cluster.start_node(victim[0])
    numbers = [n for _, n in got]
    assert acked > 0
    assert len(numbers) == len(set(numbers)), "a record was read twice"
    assert sorted(numbers) == list(range(acked)), "acknowledged records missing"
    for p in range(PARTITIONS):
        mine = [n for q, n in got if q == p]
        assert mine == sorted(mine), f"partition {p} out of order"
        assert all(n % PARTITIONS == p for n in mine)
    print(
        f"leader {victim[0]} stopped: {acked} records; leader hints taken: producer {producer_hints}, consumer {consumer_hints}"
    )
