"""The sink's column checks on the driver, as Spark's connector makes them (no Spark job)."""

from __future__ import annotations

import pytest

from kafka_core.errors import KafkaConfigError
from kafka_core.spark.write import check_sink_schema


def test_topic_column_type_is_checked_only_when_the_column_is_used() -> None:
    # the option names the topic: the column is ignored, whatever its type (as the connector)
    check_sink_schema({"topic": "int", "value": "string"}, "orders")
    with pytest.raises(KafkaConfigError, match="column 'topic' must be a string, not int"):
        check_sink_schema({"topic": "int", "value": "string"}, None)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"value": "int"}, "value"),
        ({"key": "int", "value": "string"}, "key"),
        ({"partition": "string", "value": "string"}, "partition"),
        ({"headers": "array<string>", "value": "string"}, "headers"),
        ({"data": "string"}, "value"),
    ],
)
def test_wrong_columns_name_the_column(fields: dict[str, str], named: str) -> None:
    with pytest.raises(KafkaConfigError, match=f"'{named}'"):
        check_sink_schema(fields, "orders")


def test_no_topic_anywhere() -> None:
    with pytest.raises(KafkaConfigError, match="option 'topic'"):
        check_sink_schema({"value": "binary"}, None)


def test_rows_of_struct_columns_are_built_as_the_dataframe_types_them() -> None:
    """PySpark 4.0's stream writer hands Rows, not Arrow batches: a struct value column a registry
    format encodes comes as nested Rows, dicts for maps and naive local datetimes (it was sent to
    ``pa.array(..., binary)`` and failed). The driver gives the sink the column's Arrow type."""
    import datetime
    import os
    import time

    from prerequisites import need_module

    need_module("pyspark")
    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql import types as T

    from kafka_core.spark.options import parse_sink
    from kafka_core.spark.registry import with_column_types
    from kafka_core.spark.write import _rows_to_batch

    schema = T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField(
                "value",
                T.StructType(
                    [
                        T.StructField("id", T.IntegerType()),
                        T.StructField("at", T.TimestampType()),
                        T.StructField("tags", T.MapType(T.StringType(), T.StringType())),
                        T.StructField("items", T.ArrayType(T.StructType([T.StructField("n", T.LongType())]))),
                    ]
                ),
            ),
        ]
    )
    sink = with_column_types(
        parse_sink(
            {
                "kafka.bootstrap.servers": "x:1",
                "topic": "t",
                "valueFormat": "avro",
                "valueSchema": '"string"',
                "schema.registry.url": "http://r",
            }
        ),
        schema,
    )
    assert sink.value_format is not None and sink.key_format is None
    value_type = sink.value_format.arrow_type
    assert value_type.field("id").type == pa.int32() and pa.types.is_map(value_type.field("tags").type)
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"  # pyspark's naive datetimes are local time
    time.tzset()
    try:
        local = datetime.datetime(2026, 1, 1, 7, 30)
        rows = [
            Row(key="k", value=Row(id=1, at=local, tags={"a": "b"}, items=[Row(n=5)])),
            Row(key=None, value=None),
        ]
        batch = _rows_to_batch(rows, (None, value_type))
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()
    assert batch.column("key").to_pylist() == [b"k", None]
    assert batch.column("value").type == value_type
    first = batch.column("value").to_pylist()[0]
    assert first["at"] == datetime.datetime(2026, 1, 1, 12, 30, tzinfo=datetime.UTC)
    assert (first["id"], first["tags"], first["items"]) == (1, [("a", "b")], [{"n": 5}])
    assert batch.column("value").to_pylist()[1] is None
