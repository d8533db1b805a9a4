"""The Spark bench's methods and what runs on the executors: the confluent-kafka peers' partition
functions and the ceilings' Python Data Source (no broker). Kept apart from the driver so that the
executors import only this (see bench/e2e_spark.py for what each method measures)."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator
from typing import Any

from bench.common import produce_all

# method -> (operation, role); roles: the jar-free peer, Spark's own JVM connector (format "kafka",
# the one users would otherwise pick), ours, the ceiling of the Python Data Source boundary
METHODS: dict[str, tuple[str, str]] = {
    "foreachPartition-confluent": ("write", "peer"),
    "kafka-connector-write": ("write", "connector"),
    "kafka_core-write": ("write", "ours"),
    "ceiling-arrow-writer": ("write", "ceiling"),
    "mapPartitions-confluent": ("read", "peer"),
    "kafka-connector-read": ("read", "connector"),
    "kafka_core-read": ("read", "ours"),
    "ceiling-arrow-reader": ("read", "ceiling"),
}
LEGACY_METHODS = {"kafka_core": ("write", "ours")}  # results.json written before the read existed
CLIENTS = tuple(METHODS)
ANCHOR = "foreachPartition-confluent"  # the write's peer (kept for callers of the write-only bench)
CONNECTOR_METHODS = tuple(m for m, (_, role) in METHODS.items() if role == "connector")
OPERATIONS = ("write", "read")
# ours / peer (the write stays at 8x foreachPartition; the read's old 5x peer target is withdrawn)
TARGETS = {"write": 8.0}
CONNECTOR_TARGET = 1.0  # ours / Spark's connector, write and read, warm and first job
# Where the Python Data Source boundary keeps the read below the connector: ours / same-run ceiling
CEILING_TARGETS = {"read": 0.9}
PARTITIONS = 4
KEY_SIZE = 16
VALUE_SIZE = 100
BATCH_ROWS = 10_000  # rows per prebuilt Arrow batch of the read ceiling (Spark's default Arrow batch)
WARM_UP_ROWS = 1_000
PEER_DEADLINE_S = 300.0
CEILING_SOURCE = "bench_ceiling"


def method_role(client: str) -> tuple[str, str]:
    return METHODS.get(client) or LEGACY_METHODS.get(client) or ("?", "?")


# --------------------------------------------------------------------------- executor side


def write_partition_confluent(rows: Iterable[Any], bootstrap: str, topic: str) -> None:
    """Runs on an executor: one Producer per partition, flushed and checked before the task ends."""
    produce_all(bootstrap, topic, ((row[0], row[1]) for row in rows))


def read_partitions_confluent(partitions: Iterable[int], bootstrap: str, topic: str) -> Iterator[tuple]:
    """Runs on an executor: every record of the given Kafka partitions, from the earliest offset to
    the end, as ``(key, value, topic, partition, offset, timestamp ms, confluent timestamp type)``.

    The end: the listed end offset (ListOffsets latest), then whatever is already fetched. The
    test broker lists the base offset of the last batch + 1, inside that batch; the rest of the
    batch arrives with it, so a non-blocking drain after it completes the partition (on Apache
    Kafka, whose listed end is right, the drain finds nothing). ``consume`` waits for as many
    messages as asked, so it asks for no more than remain before the listed end.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    for partition in partitions:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-spark-read",  # required by the client; nothing is committed
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "queued.min.messages": 1_000_000,
                "log_level": 3,
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            last = low - 1
            deadline = time.monotonic() + PEER_DEADLINE_S
            consume = consumer.consume
            while True:
                reached = last >= high - 1
                messages = consume(10_000, 0) if reached else consume(min(10_000, high - 1 - last), 1.0)
                if not messages:
                    if reached:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"partition {partition}: stuck at {last}, listed end {high}")
                    continue
                for m in messages:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    ts_type, ts = m.timestamp()
                    yield (m.key(), m.value(), topic, partition, m.offset(), ts, ts_type)
                end_offset = messages[-1].offset()
                last = last if end_offset is None else end_offset
        finally:
            consumer.close()


# --------------------------------------------------------------------------- ceilings (no broker)


@functools.cache
def ceiling_source() -> type:
    """The ceilings' Python Data Source ("bench_ceiling"), made on first use so that importing
    this module does not need pyspark. Read: prebuilt Arrow batches of the Kafka read schema,
    ``rows`` over ``partitions`` input partitions. Write: an Arrow writer that only counts rows
    (and fails the job in ``commit`` if ``expected`` is given and not met)."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    class CeilingReader(DataSourceReader):
        def __init__(self, options: Any, schema: Any) -> None:
            self.rows = int(options.get("rows", "0"))
            self.partitions_ = int(options.get("partitions", str(PARTITIONS)))
            self.batch_rows = int(options.get("batch_rows", str(BATCH_ROWS)))
            self.schema = schema

        def partitions(self) -> list[Any]:
            share, extra = divmod(self.rows, self.partitions_)
            return [InputPartition((p, share + (p < extra))) for p in range(self.partitions_)]

        def read(self, partition: Any) -> Iterator[Any]:
            index, rows = partition.value
            batch = prebuilt_kafka_batch(self.schema, index, min(rows, self.batch_rows))
            while rows > 0:
                yield batch if rows >= batch.num_rows else batch.slice(0, rows)
                rows -= batch.num_rows

    class CountingWriter(DataSourceArrowWriter):
        def __init__(self, options: Any) -> None:
            self.expected = int(options.get("expected", "-1"))

        def write(self, iterator: Iterator[Any]) -> Any:
            message = WriterCommitMessage()
            message.rows = sum(batch.num_rows for batch in iterator)  # type: ignore[attr-defined]
            return message

        def commit(self, messages: list[Any]) -> None:
            total = sum(m.rows for m in messages)
            if self.expected >= 0 and total != self.expected:
                raise RuntimeError(f"the counting sink got {total} rows, expected {self.expected}")

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return CEILING_SOURCE

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> Any:
            return CeilingReader(self.options, schema)

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return CountingWriter(self.options)

    return CeilingSource


def kafka_schema() -> Any:
    """Spark's Kafka source schema (without headers): the one the connector and ours declare."""
    from kafka_core.spark import read_schema

    return read_schema(False)


def prebuilt_kafka_batch(schema: Any, partition: int, rows: int) -> Any:
    """One RecordBatch of ``rows`` records like the topic's, in the exact Arrow schema Spark wants."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    keys = [b"%0*d" % (KEY_SIZE, i) for i in range(rows)]
    filler = b"v" * (VALUE_SIZE - KEY_SIZE)
    now_us = int(time.time() * 1e6)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array([k + filler for k in keys], pa.binary()),
        pa.array(["bench"] * rows, pa.string()),
        pa.array([partition] * rows, pa.int32()),
        pa.array(range(rows), pa.int64()),
        pa.array([now_us] * rows, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0] * rows, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=to_arrow_schema(schema, timezone="UTC"))
