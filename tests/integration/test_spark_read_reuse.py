"""A worker's read tasks share one consumer per partition (kafka_core.spark.read), as Spark's
connector shares its consumers: every task still yields exactly its range, whatever the tasks
before it read, left unfinished, or read of a topic since deleted and created again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from prerequisites import need_module

need_module("pyspark")
need_module("pyarrow")

from kafka_core import KafkaClient, KafkaProducer  # noqa: E402
from kafka_core.admin.sync import KafkaAdmin  # noqa: E402
from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.devbroker import KafkaCluster  # noqa: E402
from kafka_core.devtools.brokers.common import admin_create_topic  # noqa: E402
from kafka_core.spark.options import parse_source  # noqa: E402
from kafka_core.spark.planning import OffsetRange  # noqa: E402
from kafka_core.spark.read import read_range  # noqa: E402


def produce(bootstrap: str, topic: str, values: list[bytes], batch_size: int = 1 << 20) -> None:
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, batch_size=batch_size) as p:
        for v in values:
            p.send(topic, v, partition=0)
        p.flush()


def rows(bootstrap: str, topic: str, start: int, end: int) -> list[tuple[int, bytes]]:
    options = parse_source({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True)
    out: list[tuple[int, bytes]] = []
    for batch in read_range(options, OffsetRange(topic, 0, start, end)):
        out.extend(zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True))
    return out


def expected(values: list[bytes], start: int, end: int) -> list[tuple[int, bytes]]:
    return [(o, values[o]) for o in range(start, end)]


def test_consecutive_repeated_and_backward_ranges_read_exactly_their_records(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1, "reuse")
    values = [f"v{i}".encode() * (1 + i % 5) for i in range(400)]
    produce(bootstrap_servers, topic, values)
    # micro-batch after micro-batch, then a retried one, one going back, the whole log
    for start, end in ((0, 100), (100, 250), (250, 400), (100, 250), (20, 30), (0, 400), (399, 400)):
        assert rows(bootstrap_servers, topic, start, end) == expected(values, start, end), (start, end)


def test_a_read_left_unfinished_does_not_change_the_next(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1, "reuse")
    values = [(f"r{i}-".encode() * 300) for i in range(3000)]  # ~2 MB: several batches a range
    produce(bootstrap_servers, topic, values, batch_size=16_384)
    options = parse_source(
        {
            "kafka.bootstrap.servers": bootstrap_servers,
            "subscribe": topic,
            "kafka.max.partition.fetch.bytes": "65536",
        },
        streaming=True,
    )
    reader = read_range(options, OffsetRange(topic, 0, 0, 3000))
    first: Any = next(reader)
    assert first.num_rows > 0
    reader.close()  # Spark stops a task's iterator early (a LIMIT), or the task fails
    assert rows(bootstrap_servers, topic, 1000, 3000) == expected(values, 1000, 3000)
    assert rows(bootstrap_servers, topic, 0, 1000) == expected(values, 0, 1000)


def test_a_topic_created_again_is_read_from_its_new_log(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = f"reuse-{uuid.uuid4().hex[:10]}"
    admin_create_topic(bootstrap, topic, 1, 1)
    old = [f"old{i}".encode() for i in range(50)]
    produce(bootstrap, topic, old)
    assert rows(bootstrap, topic, 0, 50) == expected(old, 0, 50)
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.delete_topics([topic])
    with KafkaClient(bootstrap) as client:  # the deletion is asynchronous
        deadline = time.monotonic() + 30
        while (meta := client.metadata([topic], allow_auto_topic_creation=False).topic(topic)) is not None:
            if meta.error_code:
                break
            assert time.monotonic() < deadline, f"{topic} still there 30 s after its deletion"
            time.sleep(0.2)
    admin_create_topic(bootstrap, topic, 1, 1)
    new = [f"new{i}".encode() for i in range(30)]
    produce(bootstrap, topic, new)
    assert rows(bootstrap, topic, 0, 30) == expected(new, 0, 30)


def test_records_deleted_between_tasks_are_not_served_from_what_the_last_task_fetched(
    real_kafka: KafkaCluster,
) -> None:
    """The kept consumer's Fetch still in flight when a task ends takes the records produced
    next; deleted before the next task starts, they are found missing (failOnDataLoss=false:
    skipped), as Spark's connector finds them, not served from that answer."""
    bootstrap = real_kafka.bootstrap
    topic = f"reuse-{uuid.uuid4().hex[:10]}"
    admin_create_topic(bootstrap, topic, 1, 1)
    first = [b"a%d" % i for i in range(10)]
    produce(bootstrap, topic, first)
    assert rows(bootstrap, topic, 0, 10) == expected(first, 0, 10)
    produce(bootstrap, topic, [b"b%d" % i for i in range(10)])  # offsets 10-19
    time.sleep(1.0)  # a Fetch in flight at the task's end has answered by now
    tp = TopicPartition(topic, 0)
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.delete_records({tp: 15})[tp].result()
    options = parse_source(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": "false"}, streaming=True
    )
    offsets = [
        o
        for batch in read_range(options, OffsetRange(topic, 0, 10, 20))
        for o in batch.column("offset").to_pylist()
    ]
    assert offsets == list(range(15, 20))
