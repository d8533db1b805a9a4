"""failOnDataLoss on Apache Kafka: records deleted before the query reads them stop it with one
message naming the topic, the partition, the lost offsets, the cause and the option."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from prerequisites import need_module

pyspark = need_module("pyspark")

from pyspark.sql import SparkSession  # noqa: E402
from spark_cluster import local_session  # noqa: E402

from kafka_core import KafkaProducer  # noqa: E402
from kafka_core.admin.sync import KafkaAdmin  # noqa: E402
from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.devbroker import KafkaCluster  # noqa: E402
from kafka_core.devtools.brokers.common import admin_create_topic  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_session("local[2]", "kafka_core-data-loss") as session:
        yield session


def test_deleted_records_stop_a_read_with_where_what_why_and_the_option(
    spark: SparkSession, real_kafka: KafkaCluster
) -> None:
    bootstrap = real_kafka.bootstrap
    topic = f"loss-{uuid.uuid4().hex[:10]}"
    admin_create_topic(bootstrap, topic, 1, 1)
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for i in range(10):
            p.send(topic, f"v{i}".encode(), partition=0)
        p.flush()
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        assert admin.delete_records({TopicPartition(topic, 0): 4})[TopicPartition(topic, 0)].result() == 4

    def read(fail: str) -> list[bytes]:
        df = (
            spark.read.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", f'{{"{topic}":{{"0":0}}}}')
            .option("failOnDataLoss", fail)
            .load()
        )
        return sorted(r.value for r in df.select("value").collect())

    with pytest.raises(Exception) as info:
        read("true")
    text = str(info.value)
    assert f"topic '{topic}' partition 0 ({topic}-0): offsets 0 to 3 (4 offsets) cannot be read" in text
    assert "log start offset moved past them (it is now 4)" in text and "DeleteRecords" in text
    assert "set 'failOnDataLoss' to 'false'" in text
    assert read("false") == [f"v{i}".encode() for i in range(4, 10)]
