"""Schema Registry Avro as Arrow columns on a broker and the registry: ``poll_columns`` with a
value decoder (records of two schema versions and a corrupt one, written by confluent-kafka's
AvroSerializer, the reference), ``send_batch`` of an Arrow table with a value encoder (read back
by confluent-kafka's AvroDeserializer)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from prerequisites import need_module

need_module("confluent_kafka")
need_module("fastavro")

from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from kafka_core import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka_core.errors import KafkaCodecError  # noqa: E402
from kafka_core.schema_registry import SchemaRegistryClient  # noqa: E402
from kafka_core.schema_registry.columnar import AvroColumnDeserializer, AvroColumnSerializer  # noqa: E402

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "it",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "items", "type": {"type": "array", "items": "string"}},
    ],
}
V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "it",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
T0 = 1_767_225_600_000  # 2026-01-01 UTC in ms


def _produce_versions(bootstrap: str, registry: str, topic: str) -> None:
    """Two records under V1, two under V2 (V2 registered second: the latest), a corrupt one."""
    client = TheirClient({"url": registry})
    v1 = TheirSerializer(client, json.dumps(V1))
    v2 = TheirSerializer(client, json.dumps(V2))
    ctx = SerializationContext(topic, MessageField.VALUE)
    import datetime

    def at(i: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp((T0 + i) / 1000, datetime.UTC)

    values = [
        v1({"id": 1, "at": at(1), "items": ["a"]}, ctx),
        v2({"id": 2, "at": at(2), "items": [], "coupon": "C"}, ctx),
        v1({"id": 3, "at": at(3), "items": ["b", "c"]}, ctx),
        b"\x00\x00\x00\x7f\x7fgarbage",
        v2({"id": 5, "at": at(5), "items": ["d"], "coupon": None}, ctx),
    ]
    with KafkaProducer(bootstrap_servers=bootstrap) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush()


def _poll_all(consumer: Any, n: int, **decoders: Any) -> pa.Table:
    batches, deadline = [], time.monotonic() + 30
    while sum(b.num_rows for b in batches) < n and time.monotonic() < deadline:
        batch = consumer.poll_columns(timeout_ms=500, **decoders)
        if batch is not None and batch.num_rows:
            batches.append(batch)
    return pa.Table.from_batches(batches)


def test_poll_columns_decodes_by_writer_id_into_the_latest_reader_schema(
    bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    _produce_versions(bootstrap_servers, schema_registry, topic)
    client = SchemaRegistryClient({"url": schema_registry})
    decoder = AvroColumnDeserializer(client, mode="PERMISSIVE")
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={topic: [0]}, auto_offset_reset="earliest"
    ) as c:
        table = _poll_all(c, 5, value_decoder=decoder)
    assert table.num_rows == 5
    assert table.schema.field("value").type == pa.struct(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("items", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
            pa.field("coupon", pa.string()),
        ]
    )
    rows = table.column("value").to_pylist()
    assert [r and (r["id"], r["items"], r["coupon"]) for r in rows] == [
        (1, ["a"], None),
        (2, [], "C"),
        (3, ["b", "c"], None),
        None,
        (5, ["d"], None),
    ]
    assert rows[0]["at"].timestamp() * 1000 == pytest.approx(T0 + 1)
    errors = table.column("value_error").to_pylist()
    assert errors[3] is not None and "schema id 32639" in errors[3] and "40403" in errors[3]
    assert [e is None for e in errors] == [True, True, True, False, True]


def test_failfast_poll_columns_raises_and_leaves_the_records_to_poll_again(
    bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    _produce_versions(bootstrap_servers, schema_registry, topic)
    decoder = AvroColumnDeserializer(SchemaRegistryClient({"url": schema_registry}))
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={topic: [0]}, auto_offset_reset="earliest"
    ) as c:
        raw = _poll_all(c, 5)
        c.seek_to_beginning()
        with pytest.raises(KafkaCodecError, match="record 3"):
            _poll_all(c, 5, value_decoder=decoder)
        again = _poll_all(c, 5)  # the failed batch was not consumed
    assert again.column("offset").to_pylist()[0] == raw.column("offset").to_pylist()[0]


def test_send_batch_of_a_table_reads_back_with_confluent_kafka(
    bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    import confluent_kafka

    topic = new_topic(1)
    encoder = AvroColumnSerializer(SchemaRegistryClient({"url": schema_registry}), json.dumps(V2))
    table = pa.table(
        {
            "id": pa.array([10, 11], pa.int64()),
            "at": pa.array([T0 * 1000, (T0 + 1) * 1000], pa.timestamp("us", tz="UTC")),
            "items": [["x"], []],
            "coupon": [None, "Z"],
        }
    )
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        producer.send_batch(topic, table, value_encoder=encoder).result(30)
    theirs = TheirDeserializer(TheirClient({"url": schema_registry}))
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(theirs(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert [(r["id"], r["items"], r["coupon"]) for r in got] == [(10, ["x"], None), (11, [], "Z")]
    assert int(got[1]["at"].timestamp() * 1000) == T0 + 1
