"""The kafka_core PySpark data source on a real local Spark against the real broker."""

from __future__ import annotations

import json
import logging
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prerequisites import need_module

pyspark = need_module("pyspark")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from spark_cluster import local_session  # noqa: E402

from kafka_core import KafkaProducer  # noqa: E402
from kafka_core.devbroker import TansuBroker  # noqa: E402
from kafka_core.spark import KafkaDataSource, read_schema  # noqa: E402
from kafka_core.spark.tasks import RangePartition  # noqa: E402

FMT = "kafka_core"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_session("local[2]", "kafka_core-tests") as session:
        yield session


def _reader(spark: SparkSession, bootstrap: str, **options: str) -> Any:
    r = spark.read.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def _stream(spark: SparkSession, bootstrap: str, **options: str) -> Any:
    """A streaming read (from earliest unless ``startingOffsets`` says otherwise)."""
    r = spark.readStream.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    for k, v in {"startingOffsets": "earliest", **options}.items():
        r = r.option(k, v)
    return r.load()


def _write(df: Any, bootstrap: str, topic: str | None) -> None:
    w = df.write.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    (w if topic is None else w.option("topic", topic)).mode("append").save()


def _available_now(stream: Any, on_batch: Any, checkpoint: str) -> Any:
    """Run ``stream`` to the end of what is there now, each micro-batch to ``on_batch(df, id)``."""
    q = (
        stream.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    return q


def _total(offsets: str | None) -> int:
    """The sum of a progress report's offsets (Spark's JSON, ``{"topic": {"0": 23}}``)."""
    assert offsets, "no offsets in the progress report"
    return sum(int(o) for parts in json.loads(offsets).values() for o in parts.values())


def _produce(bootstrap: str, topic: str, n: int, partition: int | None = None, prefix: str = "") -> None:
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for i in range(n):
            p.send(topic, f"{prefix}v{i}".encode(), key=f"k{i}".encode(), partition=partition)
        p.flush()


def test_registered_without_setup_through_pyspark_kafka_core(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    """No register() call: Spark finds DefaultSource in the top-level pyspark_kafka_core module."""
    topic = new_topic(partitions=2)
    _produce(bootstrap_servers, topic, 10)
    df = _reader(spark, bootstrap_servers, subscribe=topic).load()
    assert df.count() == 10


def test_batch_write_then_read_round_trips_every_column(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=4)
    n = 30_000
    df = spark.range(n).select(
        F.format_string("key-%d", "id").alias("key"),  # string columns are cast to binary
        F.when(F.col("id") % 1000 == 7, F.lit(None))
        .otherwise(F.concat(F.lit("value-"), F.col("id").cast("string")))
        .cast("binary")
        .alias("value"),
        F.array(
            F.struct(F.lit("h1").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))
        ).alias("headers"),
    )
    _write(df, bootstrap_servers, topic)
    back = _reader(spark, bootstrap_servers, subscribe=topic, includeHeaders="true").load()
    assert back.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = back.select(
        F.col("key").cast("string").alias("k"),
        F.col("value").cast("string").alias("v"),
        "topic",
        "partition",
        "offset",
        F.col("headers")[0]["value"].cast("string").alias("h"),
        "timestampType",
    ).collect()
    assert len(rows) == n
    by_key = {r.k: r for r in rows}
    assert len(by_key) == n
    for i in (0, 7, 1007, n - 1):
        r = by_key[f"key-{i}"]
        assert r.v == (None if i % 1000 == 7 else f"value-{i}")  # null value: a tombstone
        assert r.h == str(i) and r.topic == topic and r.timestampType == 0
    # keyed rows land where the Java client's murmur2 puts them, offsets dense per partition
    from kafka_core.producer.partitioner import murmur2_partition

    assert all(r.partition == murmur2_partition(r.k.encode(), 4) for r in rows[:2000])
    per_partition: dict[int, list[int]] = {}
    for r in rows:
        per_partition.setdefault(r.partition, []).append(r.offset)
    assert all(sorted(o) == list(range(len(o))) for o in per_partition.values())


def test_peers_read_what_the_sink_wrote(spark: SparkSession, bootstrap_servers: str, new_topic: Any) -> None:
    from confluent_kafka import Consumer

    topic = new_topic(partitions=1)
    df = spark.createDataFrame(
        [(b"k1", b"v1", [("a", b"x")]), (None, b"v2", [])],
        "key binary, value binary, headers array<struct<key:string,value:binary>>",
    )
    _write(df, bootstrap_servers, topic)
    c = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "peer", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append((m.key(), m.value(), m.headers() or []))
    c.close()
    assert sorted(got, key=lambda x: x[1]) == [(b"k1", b"v1", [("a", b"x")]), (None, b"v2", [])]


def test_topic_and_partition_columns(spark: SparkSession, bootstrap_servers: str, new_topic: Any) -> None:
    t1, t2 = new_topic(partitions=3), new_topic(partitions=3)
    rows = [(t1 if i % 2 else t2, i % 3 if i % 5 else None, f"v{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string")
    _write(df, bootstrap_servers, None)
    back = _reader(spark, bootstrap_servers, subscribe=f"{t1},{t2}").load()
    got = {(r.topic, r.value.decode()): r.partition for r in back.collect()}
    assert len(got) == 300
    for topic, part, value in rows:
        if part is not None:
            assert got[(topic, value)] == part
    # the topic option wins over the column, as in Spark
    t3 = new_topic(partitions=3)
    _write(df, bootstrap_servers, t3)
    assert _reader(spark, bootstrap_servers, subscribe=t3).load().count() == 300


def test_exact_ranges_offsets_json_and_splitting(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=2)
    _produce(bootstrap_servers, topic, 500, partition=0)
    _produce(bootstrap_servers, topic, 40, partition=1)
    ranges = json.dumps({topic: {"0": 120, "1": -2}}), json.dumps({topic: {"0": 430, "1": -1}})
    df = _reader(
        spark,
        bootstrap_servers,
        subscribe=topic,
        startingOffsets=ranges[0],
        endingOffsets=ranges[1],
        minPartitions="7",
    ).load()
    assert df.rdd.getNumPartitions() >= 7  # the big partition is cut into several tasks
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(120, 430)] + [(1, o) for o in range(40)]
    df = _reader(
        spark, bootstrap_servers, assign=json.dumps({topic: [0]}), maxRecordsPerPartition="100"
    ).load()
    assert df.rdd.getNumPartitions() == 5
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(500))


def test_starting_timestamp(spark: SparkSession, bootstrap_servers: str, new_topic: Any) -> None:
    topic = new_topic(partitions=1)
    _produce(bootstrap_servers, topic, 20, prefix="old-")
    time.sleep(1.2)
    cut = int(time.time() * 1000)
    time.sleep(0.2)
    _produce(bootstrap_servers, topic, 15, prefix="new-")
    df = _reader(spark, bootstrap_servers, subscribe=topic, startingTimestamp=str(cut)).load()
    values = [r.value.decode() for r in df.collect()]
    assert len(values) == 15 and all(v.startswith("new-") for v in values)
    future = str(int(time.time() * 1000) + 3_600_000)
    with pytest.raises(Exception, match="no record at or after the given timestamp"):
        _reader(spark, bootstrap_servers, subscribe=topic, startingTimestamp=future).load().count()
    df = _reader(
        spark,
        bootstrap_servers,
        subscribe=topic,
        startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    ).load()
    assert df.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "x", "assign": '{"x":[0]}'}, "only one of the options"),
        ({}, "one of the options 'assign', 'subscribe' or 'subscribePattern' must be specified"),
        ({"subscribe": "x", "startingOffsets": "latest"}, "can't be 'latest' for batch"),
        ({"subscribe": "x", "startingOffsets": "{nope"}, "'startingOffsets' is not valid JSON"),
        (
            {"assign": '{"no-such-topic-kc":[0]}'},
            "'assign' names topic 'no-such-topic-kc', which does not exist",
        ),
        (
            {"subscribe": "x", "kafka.auto.offset.reset": "earliest"},
            "'kafka.auto.offset.reset' is not supported",
        ),
        ({"subscribe": "x", "startingOffset": "earliest"}, "did you mean 'startingOffsets'"),
        ({"subscribe": "x", "groupIdPrefix": "team-a"}, "option 'groupIdPrefix' is not supported"),
        ({"subscribe": "x", "kafka.group.id": "team-a"}, "'kafka.group.id' ('team-a') is not supported"),
    ],
)
def test_bad_read_options_fail_before_any_task(
    spark: SparkSession, bootstrap_servers: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(PySparkException) as info:
        _reader(spark, bootstrap_servers, **options).load().count()
    assert message in str(info.value)


@pytest.mark.timeout(45)  # a hang guard: before the bootstrap check, planning waited 60 s
def test_no_broker_at_the_address_fails_the_read_within_seconds(spark: SparkSession) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PySparkException) as info:
        _reader(spark, f"127.0.0.1:{port}", subscribe="orders").load().count()
    assert f"no Kafka broker at kafka.bootstrap.servers 127.0.0.1:{port}" in str(info.value)


def test_missing_topic_reads_empty_with_a_warning_on_the_driver(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's connector reads a subscribed topic that does not exist as empty; so does this
    source, and its planning (which runs on the driver) says so."""
    topic = new_topic(partitions=1)
    _produce(bootstrap_servers, topic, 3)
    missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    options = {"kafka.bootstrap.servers": bootstrap_servers, "subscribe": f"{topic},{missing}"}
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        tasks = KafkaDataSource(options).reader(read_schema()).partitions()
    assert all(isinstance(t, RangePartition) for t in tasks)
    assert {r.topic for t in tasks if isinstance(t, RangePartition) for r in t.ranges} == {topic}
    warnings = [r.getMessage() for r in caplog.records if r.name == "kafka_core.spark"]
    assert len(warnings) == 1 and repr(missing) in warnings[0] and repr(topic) not in warnings[0]
    assert _reader(spark, bootstrap_servers, subscribe=missing).load().count() == 0
    caplog.clear()
    pattern = {"kafka.bootstrap.servers": bootstrap_servers, "subscribePattern": f"{missing}.*"}
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        assert KafkaDataSource(pattern).reader(read_schema()).partitions() == []
    assert any(f"subscribePattern '{missing}.*' matches no topic" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ("key binary", "the sink needs a 'value' column"),
        ("value int", "column 'value' must be string or binary, not int"),
        ("value binary, key double", "column 'key' must be string or binary, not double"),
        ("value binary, partition string", "column 'partition' must be an int"),
    ],
)
def test_bad_sink_columns_fail_before_any_task(
    spark: SparkSession, bootstrap_servers: str, frame: str, message: str
) -> None:
    df = spark.createDataFrame([], frame)
    with pytest.raises(PySparkException) as info:
        _write(df, bootstrap_servers, "t")
    assert message in str(info.value)
    no_topic = spark.createDataFrame([], "value binary")
    with pytest.raises(PySparkException, match="no topic to write to"):
        _write(no_topic, bootstrap_servers, None)


def test_a_failed_delivery_fails_the_task(spark: SparkSession, new_topic: Any) -> None:
    """Nothing listens there: the write must fail within its delivery timeout, not hang or pass."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    df = spark.createDataFrame([(b"v",)], "value binary")
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - whichever error surfaces, the job must fail
        (
            df.write.format(FMT)
            .option("kafka.bootstrap.servers", dead)
            .option("kafka.max.block.ms", "2000")
            .option("kafka.delivery.timeout.ms", "3000")
            .option("topic", "t")
            .mode("append")
            .save()
        )
    assert time.monotonic() - started < 120


def test_produce_partition_for_foreach_partition(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    from kafka_core.spark import produce_partition

    topic = new_topic(partitions=2)
    rdd = spark.sparkContext.parallelize([(f"k{i}".encode(), f"v{i}".encode()) for i in range(1000)], 4)
    rdd.foreachPartition(lambda rows: produce_partition(rows, topic, bootstrap_servers=bootstrap_servers))
    spark.range(200).selectExpr("cast(id as string) as value").foreachPartition(
        lambda rows: produce_partition(
            rows, topic, config={"bootstrap.servers": bootstrap_servers, "linger.ms": 1}
        )
    )
    assert _reader(spark, bootstrap_servers, subscribe=topic).load().count() == 1200


def test_streaming_available_now_with_admission_control(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=3)
    _produce(bootstrap_servers, topic, 900)
    batches: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append(df.count())

    with tempfile.TemporaryDirectory() as checkpoint:
        stream = _stream(spark, bootstrap_servers, subscribe=topic, maxOffsetsPerTrigger="250")
        q = _available_now(stream, collect, checkpoint)
        assert sum(batches) == 900
        assert max(batches) <= 250 + 3 and len([b for b in batches if b]) >= 4
        # the progress shows the backlog: each batch's end is capped, the latest is all 900
        reads = [p.sources[0] for p in q.recentProgress if p.numInputRows]
        assert len(reads) >= 4
        first = reads[0]
        assert _total(first.endOffset) <= 250 + 3, first.endOffset
        assert _total(first.latestOffset) == 900, first.latestOffset
        assert [_total(s.latestOffset) for s in reads] == [900] * len(reads)
        # a restart resumes from the checkpoint: only the new records
        _produce(bootstrap_servers, topic, 60, prefix="more-")
        batches.clear()
        _available_now(stream, collect, checkpoint)
        assert sum(batches) == 60


def test_small_micro_batches_read_their_partitions_in_one_task(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    """A micro-batch of a few records from each of 6 partitions is one task (a Python task costs
    Spark tens of milliseconds); every record is read once, each partition in offset order.
    ``minRecordsPerPartition`` 1 plans a task per partition, as Spark's connector."""
    topic = new_topic(partitions=6)
    _produce(bootstrap_servers, topic, 240)
    for option, most in (({}, 1), ({"minRecordsPerPartition": "1"}, 6)):
        seen: list[tuple[int, int]] = []
        tasks: list[int] = []

        def collect(
            df: Any, batch_id: int, seen: list[tuple[int, int]] = seen, tasks: list[int] = tasks
        ) -> None:
            rows = df.select(F.spark_partition_id().alias("task"), "partition", "offset").collect()
            if rows:
                tasks.append(df.rdd.getNumPartitions())
                by_task: dict[int, list[tuple[int, int]]] = {}
                for r in rows:
                    by_task.setdefault(r.task, []).append((r.partition, r.offset))
                for got in by_task.values():  # a task reads its ranges in turn, each in order
                    assert got == sorted(got)
                seen.extend(p for got in by_task.values() for p in got)

        with tempfile.TemporaryDirectory() as checkpoint:
            stream = _stream(spark, bootstrap_servers, subscribe=topic, maxOffsetsPerTrigger="60", **option)
            _available_now(stream, collect, checkpoint)
        assert len(seen) == 240 and len(set(seen)) == 240, option
        assert len(tasks) >= 4 and max(tasks) == most, (option, tasks)


def test_batch_read_packs_small_partitions_when_asked(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    """A batch read plans a task per partition (as the connector) unless ``minRecordsPerPartition``
    is given: then partitions of fewer records share tasks of at least that many."""
    topic = new_topic(partitions=8)
    _produce(bootstrap_servers, topic, 400)
    plain = _reader(spark, bootstrap_servers, subscribe=topic).load()
    packed = _reader(spark, bootstrap_servers, subscribe=topic, minRecordsPerPartition="100").load()
    assert plain.rdd.getNumPartitions() == 8
    assert 2 <= packed.rdd.getNumPartitions() <= 4
    key = ["partition", "offset", "key", "value"]
    assert sorted(packed.select(*key).collect()) == sorted(plain.select(*key).collect())
    assert packed.count() == 400


def test_streaming_write(spark: SparkSession, bootstrap_servers: str, new_topic: Any) -> None:
    source, sink = new_topic(partitions=2), new_topic(partitions=2)
    _produce(bootstrap_servers, source, 500)
    with tempfile.TemporaryDirectory() as checkpoint:
        q = (
            spark.readStream.format(FMT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", F.upper(F.col("value").cast("string")).alias("value"))
            .writeStream.format(FMT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
    values = {r.value.decode() for r in _reader(spark, bootstrap_servers, subscribe=sink).load().collect()}
    assert values == {f"V{i}" for i in range(500)}


def test_deleted_topic_is_data_loss_per_option(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any, tansu: TansuBroker | None
) -> None:
    """A stream whose topic is deleted and recreated: failOnDataLoss=true fails the query,
    false goes on and reads the new topic from its start."""
    from kafka_core import KafkaClient

    topic = new_topic(partitions=1)
    _produce(bootstrap_servers, topic, 100)
    seen: list[int] = []

    def run(checkpoint: str, fail: str) -> Any:
        stream = _stream(spark, bootstrap_servers, subscribe=topic, failOnDataLoss=fail)
        return _available_now(stream, lambda df, _i: seen.append(df.count()), checkpoint)

    with tempfile.TemporaryDirectory() as ck1, tempfile.TemporaryDirectory() as ck2:
        run(ck1, "true")
        run(ck2, "false")
        assert sum(seen) == 200
        with KafkaClient(bootstrap_servers) as client:
            client.delete_topics([topic])
        if tansu is not None:
            tansu.create_topic(topic, 1)
        _produce(bootstrap_servers, topic, 30, prefix="new-")
        seen.clear()
        with pytest.raises(Exception, match="failOnDataLoss"):
            run(ck1, "true").exception()
            raise AssertionError("the query did not fail")
        seen.clear()
        run(ck2, "false")
        assert sum(seen) == 30


def test_pattern_stream_picks_up_a_new_topic_from_its_start(
    spark: SparkSession, bootstrap_servers: str, new_topic: Any
) -> None:
    first = new_topic(partitions=2, prefix="pat")
    prefix = first[: first.index("-")]
    stem = first.split("-")[1][:6]
    pattern = f"{prefix}-{stem}.*"
    _produce(bootstrap_servers, first, 50)
    seen: list[str] = []

    def run(checkpoint: str) -> None:
        stream = _stream(spark, bootstrap_servers, subscribePattern=pattern, startingOffsets="latest")
        _available_now(
            stream, lambda df, _i: seen.extend(r.topic for r in df.select("topic").collect()), checkpoint
        )

    with tempfile.TemporaryDirectory() as checkpoint:
        run(checkpoint)  # starts at latest: nothing yet
        assert seen == []
        second = f"{prefix}-{stem}-second"
        _produce(bootstrap_servers, second, 30)  # a topic that did not exist: read from its start
        _produce(bootstrap_servers, first, 5)
        run(checkpoint)
    assert sorted(seen) == sorted([first] * 5 + [second] * 30)


@pytest.mark.parametrize("option", ["subscribe", "subscribePattern"])
def test_stream_started_before_its_topic_exists_reads_it_once_created(
    spark: SparkSession, bootstrap_servers: str, option: str
) -> None:
    """A running query (not AvailableNow) whose topic is created after it started: each
    trigger looks the topics up again, so every record comes, from the new topic's start."""
    from kafka_core import KafkaAdmin, NewTopic

    topic = f"late-spark-{uuid.uuid4().hex[:10]}"
    seen: list[bytes] = []
    triggers: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        triggers.append(batch_id)
        seen.extend(bytes(r.value) for r in df.select("value").collect())

    value = topic if option == "subscribe" else f"{topic[:-4]}.*"
    stream = _stream(spark, bootstrap_servers, **{option: value})
    with tempfile.TemporaryDirectory() as checkpoint:
        q = (
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 120
            while not q.recentProgress and time.monotonic() < deadline:  # the query runs, topic-less
                time.sleep(0.2)
            assert q.recentProgress, "the query made no progress"
            with KafkaAdmin(bootstrap_servers) as admin:
                [created] = admin.create_topics([NewTopic(topic, num_partitions=2)]).values()
                assert created.ok, created.error
            _produce(bootstrap_servers, topic, 5)
            while len(seen) < 5 and time.monotonic() < deadline and q.exception() is None:
                time.sleep(0.2)
            assert q.exception() is None
        finally:
            q.stop()
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(5))
