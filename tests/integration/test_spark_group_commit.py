"""commitOffsetsToGroup on Apache Kafka: a streaming query's processed offsets show up as the
group's committed offsets and lag, seen through kafka_core's admin client."""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prerequisites import need_module

pyspark = need_module("pyspark")

from pyspark.sql import SparkSession  # noqa: E402
from spark_cluster import local_session  # noqa: E402

from kafka_core import KafkaProducer  # noqa: E402
from kafka_core.admin.sync import KafkaAdmin  # noqa: E402
from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.devbroker import KafkaCluster  # noqa: E402
from kafka_core.spark.group_commit import COMMIT_METADATA  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_session("local[2]", "kafka_core-group-commit") as session:
        yield session


@pytest.fixture(scope="module")
def kafka(real_kafka: KafkaCluster) -> str:
    return real_kafka.bootstrap


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"gc-{uuid.uuid4().hex[:10]}"
    from kafka_core.devtools.brokers.common import admin_create_topic

    admin_create_topic(bootstrap, name, partitions, 1)
    return name


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for part in range(partitions):
            for i in range(per_partition):
                p.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=part)
        p.flush()


def _stream(spark: SparkSession, bootstrap: str, topic: str, group: str, **options: str) -> Any:
    r = (
        spark.readStream.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("commitOffsetsToGroup", group)
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _available_now(stream: Any, checkpoint: str, seen: list[int]) -> Any:
    def collect(df: Any, _batch_id: int) -> None:
        seen.append(df.count())

    q = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(240)
    assert q.exception() is None
    return q


def _total(offsets: str) -> int:
    """The sum of a progress report's offsets (Spark's JSON, ``{"topic": {"0": 23}}``)."""
    return sum(int(o) for parts in json.loads(offsets).values() for o in parts.values())


def test_available_now_query_commits_every_batch_and_lag_shows(spark: SparkSession, kafka: str) -> None:
    topic = _topic(kafka, 2)
    group = f"spark-lag-{uuid.uuid4().hex[:8]}"
    _produce(kafka, topic, 30, 2)
    checkpoint = tempfile.mkdtemp(prefix="gc-ckpt-")
    seen: list[int] = []
    q = _available_now(_stream(spark, kafka, topic, group, maxOffsetsPerTrigger="20"), checkpoint, seen)
    assert sum(seen) == 60 and len(seen) >= 3  # several micro-batches: the last one counts too
    # each micro-batch's progress: its end cut by the limit, the latest all that is in Kafka
    reads = [p.sources[0] for p in q.recentProgress if p.numInputRows]
    assert _total(reads[0].endOffset) <= 20 + 2 and _total(reads[0].latestOffset) == 60, reads[0]
    with KafkaAdmin(bootstrap_servers=kafka) as admin:
        committed = admin.list_group_offsets(group)
        assert {tp: om.offset for tp, om in committed.items()} == {
            TopicPartition(topic, 0): 30,
            TopicPartition(topic, 1): 30,
        }
        assert all(om.metadata == COMMIT_METADATA for om in committed.values())
        assert admin.consumer_group_lag(group).total == 0
        # new records: the group lags until the query runs again (from its checkpoint)
        _produce(kafka, topic, 5, 2)
        lag = admin.consumer_group_lag(group)
        assert lag.total == 10 and lag.partitions[TopicPartition(topic, 1)].lag == 5
        seen.clear()
        # kafka.group.id may name the same group (the source's only group requests are these commits)
        _available_now(_stream(spark, kafka, topic, group, **{"kafka.group.id": group}), checkpoint, seen)
        assert sum(seen) == 10
        assert admin.consumer_group_lag(group).total == 0
        # the group has no members: Spark never joined it
        [description] = admin.describe_groups([group]).values()
        assert not description.result().members


def test_running_query_catches_the_group_up_without_new_data(spark: SparkSession, kafka: str) -> None:
    """A processing-time query: the last micro-batch's end is committed at the next trigger,
    even when that trigger finds nothing new (Spark's own commit(end) would wait for data)."""
    topic = _topic(kafka, 1)
    group = f"spark-lag-{uuid.uuid4().hex[:8]}"
    name = f"gc_{uuid.uuid4().hex[:8]}"
    q = (
        _stream(spark, kafka, topic, group)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="gc-ckpt-"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        _produce(kafka, topic, 12, 1)
        deadline = time.monotonic() + 120
        with KafkaAdmin(bootstrap_servers=kafka) as admin:
            committed: dict[TopicPartition, int] = {}
            while time.monotonic() < deadline:
                committed = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
                if committed.get(TopicPartition(topic, 0)) == 12:
                    break
                time.sleep(0.5)
            assert committed == {TopicPartition(topic, 0): 12}
            assert spark.sql(f"select count(*) from {name}").first()[0] == 12  # type: ignore[index]
            assert admin.consumer_group_lag(group).total == 0
        assert q.exception() is None
    finally:
        q.stop()
