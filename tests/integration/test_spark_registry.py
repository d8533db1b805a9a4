"""``format("kafka_core")`` with ``valueFormat=avro`` on a local Spark, the broker and the registry:
the value column typed as from_avro types the reader schema, records of two schema versions in
one read and one micro-batch, PERMISSIVE/FAILFAST, a schema change while a stream runs, and the
sink encoding a struct column (read back by confluent-kafka's AvroDeserializer); and
``valueFormat=json``/``protobuf`` read from and written for confluent-kafka's serializers, in batch
and in a stream (readStream into the streaming sink) across a schema change, with an unknown id
and a corrupt record in PERMISSIVE."""

from __future__ import annotations

import datetime
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prerequisites import need_module

need_module("pyspark")
need_module("confluent_kafka")

from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from spark_cluster import local_session  # noqa: E402
from spark_registry_formats import AT, ORDER_JSON, UNKNOWN_ID, RegistryFormat, proto_order  # noqa: E402

from kafka_core import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka_core.spark import register  # noqa: E402

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "spark.it",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    ],
}
V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "spark.it",
    "fields": [*V1["fields"], {"name": "coupon", "type": ["null", "string"], "default": None}],  # type: ignore[misc]
}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_session("local[2]", "kafka_core-registry-tests") as session:
        register(session)
        yield session


def _order(i: int, coupon: Any = ...) -> dict[str, Any]:
    import decimal

    row = {
        "id": i,
        "at": AT + datetime.timedelta(seconds=i),
        "tags": {"k": str(i)},
        "amount": decimal.Decimal(i) / 4,
    }
    if coupon is not ...:
        row["coupon"] = coupon
    return row


def _produce(
    bootstrap: str, registry: str, topic: str, values: list[tuple[dict[str, Any], dict[str, Any]] | bytes]
) -> None:
    client = TheirClient({"url": registry})
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializers: dict[str, Any] = {}
    with KafkaProducer(bootstrap_servers=bootstrap) as producer:
        for item in values:
            if isinstance(item, bytes):
                producer.send(topic, item, partition=0)
                continue
            schema, row = item
            text = json.dumps(schema)
            ser = serializers.setdefault(text, TheirSerializer(client, text))
            producer.send(topic, ser(row, ctx), partition=0)
        producer.flush()


def _read(spark: SparkSession, bootstrap: str, registry: str, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_types_and_mixed_versions(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    _produce(
        bootstrap_servers, schema_registry, topic, [(V1, _order(1)), (V2, _order(2, "C")), (V1, _order(3))]
    )
    df = _read(spark, bootstrap_servers, schema_registry, topic)
    value = df.schema["value"].dataType
    assert value == T.StructType(
        [
            T.StructField("id", T.IntegerType(), False),
            T.StructField("at", T.TimestampType(), False),
            T.StructField("tags", T.MapType(T.StringType(), T.StringType(), False), False),
            T.StructField("amount", T.DecimalType(9, 2), False),
            T.StructField("coupon", T.StringType(), True),
        ]
    )
    rows = df.select("value.*", "offset").orderBy("offset").collect()
    assert [(r.id, r.tags, str(r.amount), r.coupon) for r in rows] == [
        (1, {"k": "1"}, "0.25", None),
        (2, {"k": "2"}, "0.50", "C"),
        (3, {"k": "3"}, "0.75", None),
    ]
    assert df.select("value.id").groupBy().sum("id").collect()[0][0] == 6


def test_permissive_and_failfast(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    _produce(
        bootstrap_servers, schema_registry, topic, [(V1, _order(1)), b"\x00\x00\x00\x00", (V1, _order(3))]
    )
    df = _read(spark, bootstrap_servers, schema_registry, topic, mode="PERMISSIVE")
    rows = df.select("value.id", "valueError", "offset").orderBy("offset").collect()
    assert [r.id for r in rows] == [1, None, 3]
    assert rows[0].valueError is None and "Schema Registry framing" in rows[1].valueError
    with pytest.raises(PySparkException, match="Schema Registry framing"):
        _read(spark, bootstrap_servers, schema_registry, topic).collect()


def test_schema_change_while_a_stream_runs(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    """The reader schema is V1's (latest when the query starts); V2 records arriving later are
    read with it, in the same query, with no restart."""
    topic = new_topic(1)
    _produce(bootstrap_servers, schema_registry, topic, [(V1, _order(1))])
    seen: list[Any] = []
    stream = (
        spark.readStream.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            stream.select("value.id", "value.tags")
            .writeStream.foreachBatch(lambda df, _id: seen.extend(df.collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 120
            while not seen and time.monotonic() < deadline:
                time.sleep(0.2)
            _produce(bootstrap_servers, schema_registry, topic, [(V2, _order(2, "X")), (V1, _order(3))])
            while len(seen) < 3 and time.monotonic() < deadline and query.isActive:
                time.sleep(0.2)
            assert query.exception() is None
        finally:
            query.stop()
    assert sorted(r.id for r in seen) == [1, 2, 3]


def test_sink_encodes_a_struct_column(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    from pyspark.sql import functions as F

    topic = new_topic(1)
    df = spark.createDataFrame(
        [(i, AT + datetime.timedelta(seconds=i), {"k": "v"}, None) for i in range(3)],
        "id int, at timestamp, tags map<string,string>, amount decimal(9,2)",
    )
    df = df.withColumn("amount", F.lit("1.50").cast("decimal(9,2)"))
    (
        df.select(F.struct("id", "at", "tags", "amount").alias("value"))
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry)
        .option("valueSchema", json.dumps(V1))
        .mode("append")
        .save()
    )
    theirs = TheirDeserializer(TheirClient({"url": schema_registry}))
    got = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={topic: [0]}, auto_offset_reset="earliest"
    ) as c:
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [theirs(m.value, SerializationContext(topic, MessageField.VALUE)) for m in c.poll(500)]
    assert sorted((r["id"], r["tags"], str(r["amount"])) for r in got) == [
        (i, {"k": "v"}, "1.50") for i in range(3)
    ]
    back = _read(spark, bootstrap_servers, schema_registry, topic).select("value.*").orderBy("id").collect()
    assert [r.id for r in back] == [0, 1, 2]


def test_options_are_checked_and_secrets_kept_out_of_repr() -> None:
    from kafka_core.errors import KafkaConfigError
    from kafka_core.spark.options import parse_source

    base = {"kafka.bootstrap.servers": "x:1", "subscribe": "t", "valueFormat": "avro"}
    with pytest.raises(KafkaConfigError, match=r"schema.registry.url"):
        parse_source(base, streaming=False)
    with pytest.raises(KafkaConfigError, match="must be avro, protobuf or json"):
        parse_source({**base, "valueFormat": "xml", "schema.registry.url": "http://r"}, streaming=False)
    proto = parse_source(
        {**base, "valueFormat": "Protobuf", "valueMessageName": "a.B", "schema.registry.url": "http://r"},
        streaming=False,
    ).value_format
    assert proto is not None and (proto.format, proto.message) == ("protobuf", "a.B")
    with pytest.raises(KafkaConfigError, match="mode"):
        parse_source({**base, "schema.registry.url": "http://r", "mode": "DROP"}, streaming=False)
    opts = parse_source(
        {**base, "schema.registry.url": "http://r", "schema.registry.basic.auth.user.info": "u:s3cret-pw"},
        streaming=False,
    )
    assert (
        opts.value_format is not None and opts.value_format.registry["basic.auth.user.info"] == "u:s3cret-pw"
    )
    assert "s3cret-pw" not in repr(opts)


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got: list[bytes] = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap, partitions={topic: [0]}, auto_offset_reset="earliest"
    ) as c:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += [m.value for m in c.poll(500)]
    return got


def test_json_read_and_sink(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    topic, out = new_topic(1), new_topic(1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = JSONSerializer(json.dumps(ORDER_JSON), TheirClient({"url": schema_registry}))
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(3):
            row = {"id": i, "note": None if i else "first", "tags": ["t"] * i, "ship": {"city": f"c{i}"}}
            producer.send(topic, ser(row, ctx), partition=0)
        producer.send(topic, b"\x00\x00\x00\x00\x01{nope", partition=0)
        producer.flush()
    df = _read(spark, bootstrap_servers, schema_registry, topic, valueFormat="json", mode="PERMISSIVE")
    assert df.schema["value"].dataType == T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("note", T.StringType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("ship", T.StructType([T.StructField("city", T.StringType())])),
        ]
    )
    rows = df.select("value.*", "valueError", "offset").orderBy("offset").collect()
    assert [(r.id, r.note, r.tags, r.ship and r.ship.city) for r in rows] == [
        (0, "first", [], "c0"),
        (1, None, ["t"], "c1"),
        (2, None, ["t", "t"], "c2"),
        (None, None, None, None),
    ]
    assert rows[0].valueError is None and "not JSON" in rows[3].valueError
    (
        df.where("valueError is null")
        .select("value")
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", out)
        .option("valueFormat", "json")
        .option("schema.registry.url", schema_registry)
        .option("valueSchema", json.dumps(ORDER_JSON))
        .mode("append")
        .save()
    )
    theirs = JSONDeserializer(json.dumps(ORDER_JSON))
    back = [
        theirs(v, SerializationContext(out, MessageField.VALUE)) for v in _consume(bootstrap_servers, out, 3)
    ]
    assert sorted((r["id"], r["ship"]["city"], r.get("note")) for r in back) == [
        (0, "c0", "first"),
        (1, "c1", None),
        (2, "c2", None),
    ]


def test_protobuf_read_and_sink(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    order = proto_order()
    topic, out = new_topic(1), new_topic(1)
    client = TheirClient({"url": schema_registry})
    ser = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(1, 4):
            message = order(id=i, tags=[str(i)])
            message.at.FromDatetime(AT + datetime.timedelta(seconds=i))
            producer.send(topic, ser(message, SerializationContext(topic, MessageField.VALUE)), partition=0)
        producer.flush()
    df = _read(spark, bootstrap_servers, schema_registry, topic, valueFormat="protobuf")
    assert df.schema["value"].dataType == T.StructType(
        [
            T.StructField("id", T.IntegerType()),
            T.StructField("at", T.TimestampType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
        ]
    )
    rows = df.select("value.*").orderBy("id").collect()
    assert [(r.id, r.tags) for r in rows] == [(1, ["1"]), (2, ["2"]), (3, ["3"])]
    # the sink: the latest schema of the out topic's subject (registered by theirs first)
    client.register_schema(f"{out}-value", client.get_latest_version(f"{topic}-value").schema)
    (
        df.select("value")
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", out)
        .option("valueFormat", "protobuf")
        .option("schema.registry.url", schema_registry)
        .option("useLatestVersion", "true")
        .option("autoRegisterSchemas", "false")
        .mode("append")
        .save()
    )
    theirs = ProtobufDeserializer(order, {"use.deprecated.format": False})
    back = [
        theirs(v, SerializationContext(out, MessageField.VALUE)) for v in _consume(bootstrap_servers, out, 3)
    ]
    assert sorted((m.id, m.at.ToDatetime(tzinfo=datetime.UTC), list(m.tags)) for m in back) == [
        (i, AT + datetime.timedelta(seconds=i), [str(i)]) for i in range(1, 4)
    ]


# -- JSON Schema and Protobuf in a stream: readStream decoding into writeStream encoding ----------


def _produce_raw(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with KafkaProducer(bootstrap_servers=bootstrap) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush()


def _consume_records(
    bootstrap: str, topic: str, n: int, timeout: float, alive: Callable[[], bool]
) -> list[Any]:
    got: list[Any] = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap, partitions={topic: [0]}, auto_offset_reset="earliest"
    ) as c:
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline and alive():
            got += c.poll(500)
    return got


@pytest.mark.parametrize("fmt", ["json", "protobuf"])
def test_stream_decodes_across_a_schema_change_into_the_streaming_sink(
    fmt: str,
    spark: SparkSession,
    bootstrap_servers: str,
    schema_registry: str,
    new_topic: Callable[..., str],
) -> None:
    """readStream with valueFormat json/protobuf (PERMISSIVE: an unknown id and a corrupt record
    are null values with their errors) straight into writeStream encoding the struct again; a
    version 2 registered while the query runs is read with version 1's columns, no restart.
    JSON's version 1 is closed (additionalProperties false): a record is checked against the
    schema it was written with, then typed by the reader's."""
    side = RegistryFormat(fmt, schema_registry)
    topic, out = new_topic(1), new_topic(1)
    _produce_raw(bootstrap_servers, topic, [side.framed(topic, i) for i in range(3)] + side.bad(topic))
    stream = (
        spark.readStream.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", fmt)
        .option("schema.registry.url", schema_registry)
        .option("mode", "PERMISSIVE")
        .load()
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            stream.selectExpr("valueError as key", "value")
            .writeStream.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", out)
            .option("valueFormat", fmt)
            .option("schema.registry.url", schema_registry)
            .option("valueSchema", side.schema)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            first = _consume_records(bootstrap_servers, out, 5, 120, lambda: query.isActive)
            assert query.exception() is None and len(first) == 5, query.exception()
            _produce_raw(bootstrap_servers, topic, [side.framed(topic, 3, v2=True), side.framed(topic, 4)])
            records = _consume_records(bootstrap_servers, out, 7, 120, lambda: query.isActive)
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
    assert len(records) == 7
    decoded = [(None if r.key is None else r.key.decode(), r.value) for r in records]
    errors = [key for key, value in decoded if value is None]
    assert [key for key, value in decoded if value is not None] == [None] * 5
    assert len(errors) == 2
    assert f"schema id {UNKNOWN_ID}" in errors[0]
    assert side.parse_error in errors[1]
    assert [side.read_back(out, value) for _, value in decoded if value is not None] == [
        (i, [str(i)]) for i in range(5)
    ]
