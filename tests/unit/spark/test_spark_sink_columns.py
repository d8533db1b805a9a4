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
