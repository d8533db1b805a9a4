"""confluent-kafka's calling convention against a broker (issue 39): a dict of Java-style names
passed first builds a working producer, consumer, admin, client and transport, blocking and
asyncio. Before, the dict was taken for the bootstrap list (``send`` blocked 60 s, then "cannot
connect to bootstrap.servers:9092"), or for a topic name (the consumer's poll failed to encode its
Metadata request), and the admin gave up after two minutes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import kafka_core
import kafka_core.aio

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

POLLS = 60  # a hang guard, not a measurement


def test_blocking_classes_take_a_config_dict(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    config = {"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all"}
    with kafka_core.KafkaProducer(config, value_serializer=str.encode) as producer:
        meta = producer.send(topic, "hello").result(60)
    assert meta.topic == topic and meta.offset >= 0
    consumer_config = {"bootstrap.servers": bootstrap_servers, "auto.offset.reset": "earliest"}
    with kafka_core.KafkaConsumer(
        consumer_config, topic, group_id=None, value_deserializer=bytes.decode
    ) as consumer:
        values: list[Any] = []
        for _ in range(POLLS):
            values += [m.value for m in consumer.poll(1_000)]
            if values:
                break
    assert values == ["hello"]
    with kafka_core.KafkaAdmin({"bootstrap.servers": bootstrap_servers}) as admin:
        assert topic in admin.list_topics()
    with kafka_core.KafkaClient({"bootstrap.servers": bootstrap_servers, "client.id": "dict"}) as client:
        assert [t.name for t in client.metadata([topic]).topics] == [topic]
    with kafka_core.KafkaStreamTransport(
        {"bootstrap.servers": bootstrap_servers, "linger.ms": "1"}
    ) as transport:
        assert transport.publish(topic, b"again").offset == meta.offset + 1


def test_asyncio_classes_take_a_config_dict(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap_servers, "enable.idempotence": "true"}
        async with kafka_core.aio.KafkaProducer(config) as producer:
            meta = await (await producer.send(topic, b"x", key=uuid.uuid4().bytes))
        consumer_config = {"bootstrap.servers": bootstrap_servers, "auto.offset.reset": "earliest"}
        async with kafka_core.aio.KafkaConsumer(consumer_config, topic, group_id=None) as consumer:
            got = []
            for _ in range(POLLS):
                got += await consumer.poll(1_000)
                if got:
                    break
        assert [m.offset for m in got] == [meta.offset]
        async with kafka_core.aio.KafkaAdmin({"bootstrap.servers": bootstrap_servers}) as admin:
            assert topic in await admin.list_topics()

    asyncio.run(main())
