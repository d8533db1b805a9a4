"""The kafka_core data source over Spark Connect: a remote client (no JVM of its own) registers the
source and reads, streams and writes through a Connect server (pyspark's
``sbin/start-connect-server.sh``, started once per run), registry formats included."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prerequisites import need_module

need_module("pyspark")
need_module("grpc")  # pyspark[connect]
need_module("pandas")

from pyspark.sql import SparkSession  # noqa: E402
from spark_connect import SparkConnectServer, remote_session  # noqa: E402

from kafka_core import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka_core.spark import register  # noqa: E402

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "namespace": "connect.it",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}],
}


@pytest.fixture(scope="session")
def connect_server() -> Iterator[SparkConnectServer]:
    with SparkConnectServer() as server:
        yield server


@pytest.fixture
def remote(connect_server: SparkConnectServer) -> Iterator[SparkSession]:
    with remote_session(connect_server.url) as session:
        register(session)
        yield session


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with KafkaProducer(bootstrap_servers=bootstrap) as producer:
        for v in values:
            producer.send(topic, v, key=b"k", partition=0)
        producer.flush()


def test_read_stream_and_write_over_connect(
    remote: SparkSession, bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    source, sink = new_topic(1), new_topic(1)
    _produce(bootstrap_servers, source, [f"v{i}".encode() for i in range(20)])
    df = (
        remote.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source)
        .load()
    )
    assert sorted(bytes(r.value) for r in df.select("value").collect()) == sorted(
        f"v{i}".encode() for i in range(20)
    )

    stream = (
        remote.readStream.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    name = f"connect_{source.replace('-', '_')}"
    query = (
        stream.select("value").writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    )
    query.awaitTermination(120)
    assert remote.sql(f"select count(*) from {name}").collect()[0][0] == 20

    df.selectExpr("key", "upper(cast(value as string)) as value").write.format("kafka_core").option(
        "kafka.bootstrap.servers", bootstrap_servers
    ).option("topic", sink).mode("append").save()
    got: list[bytes] = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={sink: [0]}, auto_offset_reset="earliest"
    ) as c:
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += [m.value for m in c.poll(500)]
    assert sorted(got) == sorted(f"V{i}".encode() for i in range(20))


def test_registry_avro_over_connect(
    remote: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    from kafka_core.codec.avro_encode import AvroColumnEncoder
    from kafka_core.schema_registry import Schema, SchemaRegistryClient

    topic = new_topic(1)
    with SchemaRegistryClient({"url": schema_registry}) as client:
        schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
    import pyarrow as pa

    rows = [{"sensor": f"s{i % 3}", "value": i / 2} for i in range(30)]
    _produce(
        bootstrap_servers, topic, AvroColumnEncoder(SCHEMA, schema_id).encode(pa.array(rows)).to_pylist()
    )
    df = (
        remote.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == "struct<sensor:string,value:double>"
    totals = {
        r.sensor: r.total
        for r in df.groupBy("value.sensor").agg({"value.value": "sum"}).toDF("sensor", "total").collect()
    }
    assert totals == {f"s{k}": sum(i / 2 for i in range(30) if i % 3 == k) for k in range(3)}


@pytest.mark.parametrize("fmt", ["json", "protobuf"])
def test_registry_json_and_protobuf_over_connect(
    fmt: str,
    remote: SparkSession,
    bootstrap_servers: str,
    schema_registry: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """valueFormat json/protobuf through the Connect server: a PERMISSIVE batch read (an unknown
    id and an unparsable record are null values with their errors), then the good rows into the
    sink, which encodes them for confluent-kafka to read: for json a stream (Trigger.AvailableNow),
    for protobuf a batch write (the stream's path is format-blind: one stream keeps the time down)."""
    need_module("confluent_kafka")
    from spark_registry_formats import RegistryFormat

    side = RegistryFormat(fmt, schema_registry)
    source, sink = new_topic(1), new_topic(1)
    _produce(bootstrap_servers, source, [side.framed(source, i) for i in (1, 2, 3)] + side.bad(source))
    registry = {"valueFormat": fmt, "schema.registry.url": schema_registry, "mode": "PERMISSIVE"}
    df = (
        remote.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source)
        .options(**registry)
        .load()
    )
    rows = df.select("value.id", "value.tags", "valueError", "offset").orderBy("offset").collect()
    assert [(r.id, r.tags) for r in rows] == [(1, ["1"]), (2, ["2"]), (3, ["3"]), (None, None), (None, None)]
    assert [r.valueError for r in rows[:3]] == [None] * 3
    assert "not in the registry" in rows[3].valueError and side.parse_error in rows[4].valueError

    encode = {"valueFormat": fmt, "schema.registry.url": schema_registry, "valueSchema": side.schema}
    if fmt == "json":
        stream = (
            remote.readStream.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .options(**registry)
            .load()
        )
        query = (
            stream.where("valueError is null")
            .select("value")
            .writeStream.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", sink)
            .options(**encode)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
        assert query.exception() is None, query.exception()
    else:
        df.where("valueError is null").select("value").write.format("kafka_core").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).option("topic", sink).options(**encode).mode("append").save()
    got: list[bytes] = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={sink: [0]}, auto_offset_reset="earliest"
    ) as c:
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m.value for m in c.poll(500)]
    assert sorted(side.read_back(sink, v) for v in got) == [(i, [str(i)]) for i in (1, 2, 3)]
