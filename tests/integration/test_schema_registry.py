"""Schema Registry serializers on a broker: our producer and consumers (group consumer, share
consumer, transport) with our serializers, and confluent-kafka's producer and consumer with its
own serializers on the same topic and registry, each reading what the other wrote."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes.delivery import drain
from fakes.share_kafka import share_setup
from fakes.timing import wait_until
from prerequisites import need_module

need_module("confluent_kafka.schema_registry.avro")
need_module("fastavro")

import confluent_kafka  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField as TheirField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as TheirContext  # noqa: E402

from kafka_core import KafkaConsumer, KafkaProducer, KafkaShareConsumer, KafkaStreamTransport  # noqa: E402
from kafka_core.consumer_base.deserialize import KafkaDeserializationError  # noqa: E402
from kafka_core.devtools.brokers.kafka import KafkaCluster  # noqa: E402
from kafka_core.schema_registry import (  # noqa: E402
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    SchemaRegistryClient,
    SerializationError,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "it",
    "fields": [{"name": "id", "type": "long"}, {"name": "city", "type": "string"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "coupon", "type": ["null", "string"], "default": None}]}  # type: ignore[list-item]


@pytest.fixture
def registry(schema_registry: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry}) as client:
        yield client


def orders(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "city": f"city-{i}"} for i in range(start, start + n)]


def test_our_producer_and_consumer_with_avro(
    bootstrap_servers: str,
    new_topic: Callable[..., str],
    registry: SchemaRegistryClient,
    schema_registry: str,
) -> None:
    topic = new_topic(3)
    with KafkaProducer(
        bootstrap_servers,
        value_serializer=AvroSerializer(registry, json.dumps(V1)).for_topic(topic),
        key_serializer=AvroSerializer(registry, '"long"').for_topic(topic, MessageField.KEY),
    ) as producer:
        for order in orders(40):
            producer.send(topic, order, key=order["id"])
        producer.flush(30)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        auto_offset_reset="earliest",
        value_deserializer=AvroDeserializer(registry),
        key_deserializer=AvroDeserializer(registry),
    ) as consumer:
        got = drain(consumer, 40)
    assert sorted((m.key, m.value["id"]) for m in got) == [(i, i) for i in range(40)]
    assert all(m.value == {"id": m.key, "city": f"city-{m.key}"} for m in got)
    # confluent-kafka reads what we wrote, with its own deserializer
    theirs = TheirDeserializer(TheirClient({"url": schema_registry}))
    consumer_c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer_c.subscribe([topic])
    read: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    try:
        while len(read) < 40 and time.monotonic() < deadline:
            msg = consumer_c.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append(theirs(msg.value(), TheirContext(topic, TheirField.VALUE)))
    finally:
        consumer_c.close()
    assert sorted(r["id"] for r in read) == list(range(40))


def test_records_of_two_schema_versions_read_by_one_reader(
    bootstrap_servers: str,
    new_topic: Callable[..., str],
    registry: SchemaRegistryClient,
    schema_registry: str,
) -> None:
    """confluent-kafka writes v1, we write v2 on the same topic; a v2 reader reads both, resolving v1's records."""
    topic = new_topic(1)
    producer_c = confluent_kafka.Producer({"bootstrap.servers": bootstrap_servers})
    theirs = TheirSerializer(TheirClient({"url": schema_registry}), json.dumps(V1))
    for order in orders(5):
        producer_c.produce(topic, theirs(order, TheirContext(topic, TheirField.VALUE)))
    assert producer_c.flush(30) == 0
    with KafkaProducer(
        bootstrap_servers, value_serializer=AvroSerializer(registry, json.dumps(V2)).for_topic(topic)
    ) as p:
        for order in orders(5, start=5):
            p.send(topic, {**order, "coupon": "SAVE5"})
        p.flush(30)
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        auto_offset_reset="earliest",
        value_deserializer=AvroDeserializer(registry, json.dumps(V2)),
    ) as consumer:
        values = [m.value for m in drain(consumer, 10)]
    assert values == [{**o, "coupon": None} for o in orders(5)] + [
        {**o, "coupon": "SAVE5"} for o in orders(5, 5)
    ]


def test_a_record_not_in_the_registrys_framing_stops_poll_with_its_offset(
    bootstrap_servers: str, new_topic: Callable[..., str], registry: SchemaRegistryClient
) -> None:
    topic = new_topic(1)
    with KafkaProducer(bootstrap_servers) as p:
        p.send(topic, b"plain bytes")
        p.flush(30)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        auto_offset_reset="earliest",
        value_deserializer=AvroDeserializer(registry),
    ) as consumer:
        deadline = time.monotonic() + 30
        with pytest.raises(KafkaDeserializationError) as info:
            while time.monotonic() < deadline:
                consumer.poll(500)
    assert isinstance(info.value.__cause__, SerializationError)
    assert info.value.offset == 0


def test_transport_with_avro(
    bootstrap_servers: str, new_topic: Callable[..., str], registry: SchemaRegistryClient
) -> None:
    """The transport takes bytes: the serializer's ``for_topic`` makes them, the deserializer reads ``Message.value``."""
    topic = new_topic(1)
    serialize = AvroSerializer(registry, json.dumps(V1)).for_topic(topic)
    deserialize = AvroDeserializer(registry)
    got: list[dict[str, Any]] = []
    with KafkaStreamTransport(
        bootstrap_servers, consumer_session_timeout_ms=6_000, consumer_heartbeat_interval_ms=500
    ) as tr:
        for order in orders(5):
            tr.publish(topic, serialize(order))
        stop = tr.subscribe(topic, f"g-{uuid.uuid4().hex[:8]}", lambda m: got.append(deserialize(m.value)))
        assert wait_until(lambda: len(got) >= 5, 60)
        stop(30)
    assert sorted(got, key=lambda o: o["id"]) == orders(5)


def test_share_consumer_with_avro(real_kafka: KafkaCluster, registry: SchemaRegistryClient) -> None:
    topic, group = share_setup(real_kafka, 0, prefix="sr")
    with KafkaProducer(
        real_kafka.bootstrap, value_serializer=AvroSerializer(registry, json.dumps(V1)).for_topic(topic)
    ) as p:
        for order in orders(6):
            p.send(topic, order)
        p.flush(30)
    with KafkaShareConsumer(
        topic,
        bootstrap_servers=real_kafka.bootstrap,
        group_id=group,
        value_deserializer=AvroDeserializer(registry),
    ) as consumer:
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while len(got) < 6 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(500))
    assert sorted(got, key=lambda o: o["id"]) == orders(6)


def test_asyncio_producer_and_consumer_with_avro(
    bootstrap_servers: str, new_topic: Callable[..., str], registry: SchemaRegistryClient
) -> None:
    """kafka_core.aio takes the same serializers (the first record of each id fetches its schema, in the loop)."""
    import asyncio

    from kafka_core.aio import KafkaConsumer as AsyncConsumer
    from kafka_core.aio import KafkaProducer as AsyncProducer

    topic = new_topic(1)

    async def main() -> list[Any]:
        async with AsyncProducer(
            bootstrap_servers, value_serializer=AvroSerializer(registry, json.dumps(V1)).for_topic(topic)
        ) as producer:
            futures = [await producer.send(topic, order) for order in orders(8)]
            await producer.flush(30)
            for future in futures:
                await future
        async with AsyncConsumer(
            bootstrap_servers=bootstrap_servers,
            topics=[topic],
            auto_offset_reset="earliest",
            value_deserializer=AvroDeserializer(registry, json.dumps(V2)),
        ) as consumer:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 8 and time.monotonic() < deadline:
                got.extend(m.value for m in await consumer.poll(500))
            return got

    assert asyncio.run(main()) == [{**o, "coupon": None} for o in orders(8)]
