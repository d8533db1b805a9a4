"""Issue 40 on Apache Kafka: a producer over a few hundred partitions sends what is ready for a
broker in one Produce request, as the Java client's ``RecordAccumulator.drain``: once one
partition's batch is due (here: full), the batches of every other partition of that broker go
with it, lingered or not, instead of each waiting out its own linger and going alone.

The Produce requests are counted on the wire: the producer runs on a client of ours that notes
the partitions of every Produce request it sends. ``linger_ms`` is a minute and every wait here
is a hang guard far below it, so a producer that waits for each partition's linger fails (its
records are not delivered in time), whatever the machine's speed. Runs on Apache Kafka whatever
the session's broker (``real_kafka``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kafka_core import KafkaAdmin, NewTopic
from kafka_core.aio import KafkaClient
from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.devbroker import KafkaCluster
from kafka_core.protocol import ApiKey

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

PARTITIONS = 300
LINGER_MS = 60_000
GUARD_S = 30.0  # a hang guard, far below the linger


class CountingClient(KafkaClient):
    """A client that notes the (topic, partition) pairs of every Produce request it sends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.produced: list[list[tuple[str, int]]] = []

    async def send(self, node_id: int, request_body: Any, *args: Any, **kwargs: Any) -> Any:
        if request_body.API_KEY == ApiKey.PRODUCE:
            self.produced.append(
                [(t.name, p.index) for t in request_body.topic_data for p in t.partition_data]
            )
        return await super().send(node_id, request_body, *args, **kwargs)


def _topic(bootstrap: str) -> str:
    topic = f"wide-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result()
    return topic


async def _producer(bootstrap: str, topic: str) -> tuple[AsyncKafkaProducer, CountingClient]:
    client = CountingClient(bootstrap)
    producer = AsyncKafkaProducer(
        client=client,
        linger_ms=LINGER_MS,
        batch_size=4096,
        produce_concurrency=1,  # one connection: every partition's batches share its requests
        delivery_timeout_ms=LINGER_MS + 60_000,
    )
    await producer.start()
    await asyncio.wait_for(producer.wait_topic(topic), GUARD_S)  # every partition's leader known
    return producer, client


@pytest.mark.parametrize("path", ["partition", "keyed"])
def test_a_due_batch_takes_every_partitions_batch_along_in_one_request(
    real_kafka: KafkaCluster, path: str
) -> None:
    topic = _topic(real_kafka.bootstrap)

    async def main() -> list[list[tuple[str, int]]]:
        producer, client = await _producer(real_kafka.bootstrap, topic)
        try:
            if path == "partition":  # one small record per partition: none full, none lingered
                futures = [await producer.send(topic, b"v%d" % p, partition=p) for p in range(1, PARTITIONS)]
            else:  # keyed, spread over every partition by murmur2: no batch full either
                keys = [b"key-%d" % i for i in range(20 * PARTITIONS)]
                futures = [await producer.send(topic, b"v", key=key) for key in keys]
            client.produced.clear()
            # Partition 0's batch fills up: its broker is ready now, and a drain takes everything.
            filler = [await producer.send(topic, b"x" * 3000, partition=0) for _ in range(2)]
            done = await asyncio.wait_for(asyncio.gather(*futures, filler[0]), GUARD_S)
            assert all(meta.offset >= 0 for meta in done)
            await producer.flush(GUARD_S)
            return list(client.produced)
        finally:
            await producer.close()

    produced = asyncio.run(main())
    first = produced[0]
    # One request took the full batch and every other partition's open batch with it.
    assert len(first) == len(set(first)) == PARTITIONS, [len(r) for r in produced]


def test_send_batch_chunks_for_many_partitions_go_in_one_request(real_kafka: KafkaCluster) -> None:
    topic = _topic(real_kafka.bootstrap)

    async def main() -> list[list[tuple[str, int]]]:
        producer, client = await _producer(real_kafka.bootstrap, topic)
        try:
            client.produced.clear()
            keys = [b"key-%d" % i for i in range(20 * PARTITIONS)]
            future = await producer.send_batch(topic, [b"v"] * len(keys), keys=keys)

            async def settled() -> Any:
                return await future

            await asyncio.wait_for(settled(), GUARD_S)
            return list(client.produced)
        finally:
            await producer.close()

    produced = asyncio.run(main())
    partitions = {p for request in produced for _, p in request}
    assert len(partitions) == PARTITIONS
    assert len(produced[0]) == PARTITIONS, [len(r) for r in produced]
