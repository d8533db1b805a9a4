"""A user's read schema naming some of the source's columns (no broker, no Spark session): what
the reader is told to build, and the typed errors for a column the source does not have."""

from __future__ import annotations

import pytest
from prerequisites import need_module

need_module("pyspark")

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kafka_core.errors import KafkaConfigError  # noqa: E402
from kafka_core.spark.read import arrow_read_schema  # noqa: E402
from kafka_core.spark.source import KafkaBatchReader, KafkaDataSource, read_schema  # noqa: E402

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


def header(value: DataType) -> DataType:
    return ArrayType(StructType([StructField("key", StringType()), StructField("value", value)]))


TYPES: dict[str, DataType] = {
    "binary": BinaryType(),
    "string": StringType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "timestamp": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
    "array<struct<key:string,value:binary>>": header(BinaryType()),
    "array<struct<key:string,value:string>>": header(StringType()),
}


def ddl(text: str) -> StructType:
    """``name type, ...`` (the types above): StructType.fromDDL needs a running session."""
    pairs = [part.strip().split(" ", 1) for part in text.split(", ")]
    return StructType([StructField(name, TYPES[kind]) for name, kind in pairs])


def reader(schema: str | StructType, **options: str) -> KafkaBatchReader:
    parsed = ddl(schema) if isinstance(schema, str) else schema
    made = KafkaDataSource({**BASE, **options}).reader(parsed)
    assert isinstance(made, KafkaBatchReader)
    return made


def test_the_source_s_own_schema_builds_every_column() -> None:
    assert reader(read_schema(False)).options.columns is None
    assert reader(read_schema(True), includeHeaders="true").options.columns is None


def test_a_subset_in_any_order_builds_only_those() -> None:
    opts = reader("timestamp timestamp, value binary").options
    assert opts.columns == ("timestamp", "value") and not opts.include_headers
    assert arrow_read_schema(False, opts.columns).names == ["timestamp", "value"]
    assert str(arrow_read_schema(False, opts.columns).field("timestamp").type) == "timestamp[us, tz=UTC]"


def test_headers_left_out_are_not_built() -> None:
    schema = StructType([f for f in read_schema(True).fields if f.name != "headers"])
    opts = reader(schema, includeHeaders="true").options
    assert opts.columns == tuple(schema.names) and not opts.include_headers
    opts = reader(
        "offset long, headers array<struct<key:string,value:binary>>", includeHeaders="true"
    ).options
    assert opts.columns == ("offset", "headers") and opts.include_headers


@pytest.mark.parametrize(
    ("schema", "options", "message"),
    [
        (
            "value binary, payload string",
            {},
            "names column 'payload', which the kafka_core source does not have",
        ),
        (
            "value string",
            {},
            "gives column 'value' the type string; the kafka_core source reads it as binary",
        ),
        (
            "partition bigint",
            {},
            "gives column 'partition' the type bigint; the kafka_core source reads it as int",
        ),
        ("timestamp timestamp_ntz", {}, "reads it as timestamp"),
        ("value binary, value binary", {}, "names column 'value' twice"),
        ("headers array<struct<key:string,value:binary>>", {}, "set option 'includeHeaders' to true"),
        ("headers array<struct<key:string,value:string>>", {"includeHeaders": "true"}, "type array<struct"),
        ("keyError string", {}, "does not have: its columns are key, value, topic"),
    ],
)
def test_a_column_the_source_lacks_fails_by_name(schema: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        reader(schema, **options)
