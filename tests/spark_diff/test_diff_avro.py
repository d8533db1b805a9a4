"""valueFormat=avro against Spark's own ``from_avro`` (spark-avro, the jar of this pyspark's version):
Confluent-framed records read by ``format("kafka_core")`` with the registry, and by
``format("kafka")`` + ``from_avro`` with the 5-byte header cut off by ``substring`` and the schema
given by hand. Same Spark schema, same rows; also a writer schema older than the reader's
(from_avro's ``avroSchema`` option), and PERMISSIVE on a corrupt record."""

from __future__ import annotations

import datetime
import decimal
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Rec

SCHEMA = {
    "type": "record",
    "name": "Everything",
    "namespace": "diff.avro",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {
            "name": "decfx",
            "type": {
                "type": "fixed",
                "name": "D8",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "wide", "type": ["int", "long"]},
        {"name": "mixed", "type": ["null", "int", "string"]},
        {"name": "tags", "type": {"type": "map", "values": ["null", "long"]}},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "n", "type": "int"}],
                },
            },
        },
    ],
}
OLD = {  # an older writer: fewer fields, narrower types
    "type": "record",
    "name": "Order",
    "namespace": "diff.avro",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "price", "type": "float"},
        {"name": "gone", "type": "string"},
    ],
}
NEW = {
    "type": "record",
    "name": "Order",
    "namespace": "diff.avro",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "note", "type": "string", "default": "none"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["a"]},
    ],
}
UTC = datetime.UTC


def _norm(value: Any) -> Any:
    """A collected value, hashable: maps as sorted pairs, rows and lists as tuples."""
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list | tuple):
        return tuple(_norm(v) for v in value)
    return value


def multiset(rows: list[Any]) -> Counter[Any]:
    return Counter(_norm(r) for r in rows)


def _row(rng: random.Random, n: int) -> dict[str, Any]:
    base = datetime.datetime(2020, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=rng.randrange(10**8))
    return {
        "i": rng.randrange(-(2**31), 2**31),
        "l": rng.randrange(-(2**63), 2**63),
        "f": rng.choice([0.0, -1.5, 3.25, 1e20]),
        "d": rng.uniform(-1e9, 1e9),
        "b": rng.random() < 0.5,
        "s": rng.choice(["", "plain", "ünïcødé ✓", "x" * 40]),
        "raw": rng.randbytes(rng.randrange(0, 20)),
        "fx": rng.randbytes(4),
        "e": rng.choice(["RED", "GREEN", "BLUE"]),
        "dec": decimal.Decimal(rng.randrange(-(10**19), 10**19)).scaleb(-4),
        "decfx": decimal.Decimal(rng.randrange(-(10**17), 10**17)).scaleb(-2),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randrange(-30000, 30000)),
        "ms": base.replace(microsecond=base.microsecond // 1000 * 1000),
        "us": base + datetime.timedelta(microseconds=rng.randrange(10**6)),
        "local": base.replace(tzinfo=None),
        "opt": None if n % 3 == 0 else f"o{n}",
        "wide": rng.randrange(-(2**40), 2**40),
        "mixed": [None, {"member0": n, "member1": None}, {"member0": None, "member1": f"m{n}"}][n % 3],
        "tags": [("a", n), ("b", None)][: n % 3],
        "items": [{"sku": f"s{k}", "n": k} for k in range(n % 4)],
    }


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    from kafka_core.devtools.registry import RegistryServer

    with RegistryServer() as server:
        yield server.url


def _register(url: str, subject: str, schema: dict[str, Any]) -> int:
    from kafka_core.schema_registry import Schema, SchemaRegistryClient

    with SchemaRegistryClient({"url": url}) as client:
        return int(client.register_schema(subject, Schema(json.dumps(schema), "AVRO")))


def _encode(schema: dict[str, Any], schema_id: int, rows: list[dict[str, Any]]) -> list[bytes]:
    import pyarrow as pa

    from kafka_core.codec.avro_columns import AvroColumnDecoder
    from kafka_core.codec.avro_encode import AvroColumnEncoder

    arrow = pa.array(rows, AvroColumnDecoder(schema).arrow_type)
    return AvroColumnEncoder(schema, schema_id).encode(arrow).to_pylist()


def _both(
    spark: Any,
    bootstrap: str,
    registry: str,
    topic: str,
    writer: dict[str, Any],
    reader: dict[str, Any],
    mode: str = "FAILFAST",
) -> tuple[Any, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    ours = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry)
        .option("valueSchema", json.dumps(reader))
        .option("mode", mode)
        .load()
        .select("value.*")
    )
    options = {"mode": mode}
    if reader != writer:
        options["avroSchema"] = json.dumps(reader)
    theirs = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .select(
            from_avro(F.expr("substring(value, 6, length(value) - 5)"), json.dumps(writer), options).alias(
                "v"
            )
        )
        .select("v.*")
    )
    return ours, theirs


def test_same_schema_and_rows_as_from_avro(
    spark: Any, bootstrap: str, registry: str, make_topic: Callable[..., str], produce: Callable[..., None]
) -> None:
    topic = make_topic(2)
    schema_id = _register(registry, f"{topic}-value", SCHEMA)
    rng = random.Random(34)
    values = _encode(SCHEMA, schema_id, [_row(rng, n) for n in range(300)])
    produce(topic, [Rec(partition=n % 2, key=None, value=v) for n, v in enumerate(values)])
    ours, theirs = _both(spark, bootstrap, registry, topic, SCHEMA, SCHEMA)
    assert ours.schema.json() == theirs.schema.json()
    assert multiset(ours.collect()) == multiset(theirs.collect())


def test_an_older_writer_read_with_a_newer_reader(
    spark: Any, bootstrap: str, registry: str, make_topic: Callable[..., str], produce: Callable[..., None]
) -> None:
    topic = make_topic(1)
    schema_id = _register(registry, f"{topic}-value", OLD)
    values = _encode(OLD, schema_id, [{"id": n, "price": n / 4, "gone": "x"} for n in range(50)])
    produce(topic, [Rec(partition=0, key=None, value=v) for v in values])
    ours, theirs = _both(spark, bootstrap, registry, topic, OLD, NEW)
    assert ours.schema.json() == theirs.schema.json()
    assert multiset(ours.collect()) == multiset(theirs.collect())


def test_permissive_nulls_a_corrupt_record_as_from_avro_does(
    spark: Any, bootstrap: str, registry: str, make_topic: Callable[..., str], produce: Callable[..., None]
) -> None:
    topic = make_topic(1)
    schema_id = _register(registry, f"{topic}-value", OLD)
    good = _encode(OLD, schema_id, [{"id": 1, "price": 2.5, "gone": "x"}])[0]
    produce(topic, [Rec(partition=0, key=None, value=v) for v in (good, good[:-3], good)])
    ours, theirs = _both(spark, bootstrap, registry, topic, OLD, OLD, mode="PERMISSIVE")
    assert multiset(ours.collect()) == multiset(theirs.collect())
