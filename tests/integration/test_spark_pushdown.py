"""Filter pushdown into offsets and subset read schemas, on a real local Spark against the broker:
the same rows with ``spark.sql.python.filterPushdown.enabled`` on and off, fewer records out of
the scan with it on, and a user's schema naming some of the source's columns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prerequisites import need_module

pyspark = need_module("pyspark")

from fakes.pushdown import at, out_of_order_stamp, scanned  # noqa: E402
from fakes.stamps import RECENT_MS  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from spark_cluster import local_session  # noqa: E402

from kafka_core import KafkaProducer  # noqa: E402

FMT = "kafka_core"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
BASE_MS = RECENT_MS  # within the broker's retention
N = 240  # records per partition


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_session("local[2]", "kafka_core-pushdown-tests") as session:
        session.conf.set("spark.sql.session.timeZone", "UTC")
        yield session


_TOPIC: dict[str, str] = {}  # the module's one topic, per broker


@pytest.fixture
def topic(bootstrap_servers: str, new_topic: Any) -> str:
    """Three partitions of N records; timestamps rise 10 ms per offset, with every fifth record
    set 25 ms back (a producer's CreateTime out of order) and every seventh 13 ms ahead."""
    if bootstrap_servers in _TOPIC:
        return _TOPIC[bootstrap_servers]
    name = _TOPIC[bootstrap_servers] = new_topic(partitions=3, prefix="pushdown")
    with KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5) as p:
        futures = [
            p.send(
                name,
                f"v{part}-{o}".encode(),
                key=f"k{o}".encode(),
                partition=part,
                headers=[("h", b"x")] if o % 2 else None,
                timestamp_ms=stamp(o),
            )
            for part in range(3)
            for o in range(N)
        ]
        p.flush()
        for f in futures:
            f.get(30)
    return name


def stamp(offset: int) -> int:
    return out_of_order_stamp(BASE_MS, 10, offset)


def read(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> Any:
    r = spark.read.format(FMT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def predicates(topic: str) -> list[str]:
    mid = stamp(120)
    return [
        "partition = 1",
        "partition in (0, 2) and offset < 7",
        f"topic = '{topic}' and offset >= 230",
        "offset in (3, 4, 5, 99, 239, 400)",
        "not (offset in (0, 1, 2)) and partition = 2",
        "offset between 10 and 12 or partition = 5",  # an OR: Spark pushes nothing of it
        f"timestamp > {at(mid)}",
        f"timestamp >= {at(mid)} and timestamp < {at(mid + 200)}",
        f"timestamp = {at(stamp(121))}",
        f"timestamp in ({at(stamp(200))}, {at(stamp(150))})",
        f"timestamp > {at(mid + 5)} and partition = 0 and offset < 200",  # between two records
        f"timestamp > {at(stamp(N) + 10_000)}",  # after every record: empty
        "offset > 5 and offset < 5",  # empty
        f"topic like '{topic[:5]}%' and offset = 17",
        "timestamp > now() - interval 3650 days and offset < 3",  # now() is folded, then pushed
    ]


def ids(row: Any) -> tuple[str, int, int]:
    return (row.topic, row.partition, row.offset)


def test_the_same_rows_with_and_without_pushdown(
    spark: SparkSession, bootstrap_servers: str, topic: str
) -> None:
    try:
        for predicate in predicates(topic):
            spark.conf.set(PUSHDOWN, "false")
            plain, plain_scanned = scanned(read(spark, bootstrap_servers, topic).load().where(predicate))
            spark.conf.set(PUSHDOWN, "true")
            pushed, pushed_scanned = scanned(read(spark, bootstrap_servers, topic).load().where(predicate))
            assert sorted(map(ids, pushed)) == sorted(map(ids, plain)), predicate
            assert [tuple(r) for r in sorted(pushed, key=ids)] == [tuple(r) for r in sorted(plain, key=ids)]
            assert plain_scanned == 3 * N, predicate
            assert len(plain) <= pushed_scanned <= plain_scanned, predicate
    finally:
        spark.conf.set(PUSHDOWN, "false")


def test_pushdown_reads_fewer_records(
    spark: SparkSession, bootstrap_servers: str, topic: str, on_tansu: bool
) -> None:
    # Tansu answers ListOffsets by time with offset 0 for these records (their CreateTime is
    # before it appended them): a start that moves nothing, still right.
    tail = 3 * N if on_tansu else 3 * 25
    cases = {
        "partition = 1 and offset >= 200": 40,
        f"timestamp > {at(stamp(N - 20))}": None,  # the tail of each partition
        f"timestamp > {at(stamp(N) + 10_000)}": None if on_tansu else 0,
    }
    try:
        spark.conf.set(PUSHDOWN, "true")
        for predicate, exact in cases.items():
            rows, count = scanned(read(spark, bootstrap_servers, topic).load().where(predicate))
            if exact is not None:
                assert count == exact == len(rows), predicate
            else:
                assert len(rows) <= count <= tail, (predicate, count)
    finally:
        spark.conf.set(PUSHDOWN, "false")


def test_pushdown_off_reads_with_any_filter(spark: SparkSession, bootstrap_servers: str, topic: str) -> None:
    """Spark 4.1+ refuses a reader implementing pushFilters where pushdown is off (its default):
    the source then hands out the plain reader."""
    spark.conf.set(PUSHDOWN, "false")
    df = read(spark, bootstrap_servers, topic).load().where("partition = 1 and value is not null")
    assert df.count() == N


def test_pushdown_with_explicit_offsets_and_headers(
    spark: SparkSession, bootstrap_servers: str, topic: str
) -> None:
    options = {
        "startingOffsets": f'{{"{topic}":{{"0":5,"1":-2,"2":100}}}}',
        "endingOffsets": f'{{"{topic}":{{"0":50,"1":60,"2":-1}}}}',
        "includeHeaders": "true",
        "minPartitions": "7",
    }
    predicate = f"offset >= 40 and timestamp > {at(stamp(30))}"
    try:
        spark.conf.set(PUSHDOWN, "false")
        plain = read(spark, bootstrap_servers, topic, **options).load().where(predicate).collect()
        spark.conf.set(PUSHDOWN, "true")
        pushed = read(spark, bootstrap_servers, topic, **options).load().where(predicate).collect()
    finally:
        spark.conf.set(PUSHDOWN, "false")
    assert sorted(tuple(r) for r in pushed) == sorted(tuple(r) for r in plain)
    assert len(plain) == 10 + 20 + (N - 100)


def test_a_schema_naming_some_columns_reads_only_those(
    spark: SparkSession, bootstrap_servers: str, topic: str
) -> None:
    full = read(spark, bootstrap_servers, topic, includeHeaders="true").load()
    want = sorted((bytes(r.value), r.timestamp) for r in full.select("value", "timestamp").collect())
    sub = read(spark, bootstrap_servers, topic).schema("timestamp timestamp, value binary").load()
    assert sub.columns == ["timestamp", "value"]
    assert sorted((bytes(r.value), r.timestamp) for r in sub.collect()) == want
    no_headers = read(spark, bootstrap_servers, topic, includeHeaders="true").schema(
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
    )
    assert no_headers.load().count() == 3 * N
    headers = (
        read(spark, bootstrap_servers, topic, includeHeaders="true")
        .schema("offset long, partition int, headers array<struct<key:string,value:binary>>")
        .load()
        .where("partition = 0 and offset < 4")
        .collect()
    )
    assert sorted((r.offset, r.headers) for r in headers) == [
        (0, None),
        (1, [pyspark.sql.Row(key="h", value=bytearray(b"x"))]),
        (2, None),
        (3, [pyspark.sql.Row(key="h", value=bytearray(b"x"))]),
    ]


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
        ("offset int", {}, "gives column 'offset' the type int; the kafka_core source reads it as bigint"),
        ("timestamp timestamp_ntz", {}, "reads it as timestamp"),
        ("value binary, headers array<struct<key:string,value:binary>>", {}, "set option 'includeHeaders'"),
    ],
)
def test_a_schema_with_a_column_the_source_lacks_fails_by_name(
    spark: SparkSession,
    bootstrap_servers: str,
    topic: str,
    schema: str,
    options: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(Exception, match=message):
        read(spark, bootstrap_servers, topic, **options).schema(schema).load().collect()
