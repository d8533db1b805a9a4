"""The sink, side by side: the same DataFrame written by Spark's own connector and by kafka_core,
each to topics of its own, and what landed in Kafka compared (read back by the connector).

What is compared per record: the partition (where it is determined: an explicit partition
column, or a key hashed by murmur2; a null key is spread by a sticky partitioner on both sides,
so its partition is not compared), the key, the value and the headers, and the order within
each partition for a one-task write. Bad columns: both refuse before any job runs, each naming
the same column.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from conftest import CONNECTOR, FORMATS, OURS, Rec, normalize, reader

Produce = Callable[[str, Sequence[Rec]], None]
HEADERS = "array<struct<key:string,value:binary>>"


def _write(df: Any, fmt: str, bootstrap: str, **options: str) -> None:
    w = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        w = w.option(key, value)
    w.mode("append").save()


def _landed(spark: Any, bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` as the connector reads it: (partition, offset, key, value, headers)."""
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "includeHeaders": "true",
    }
    rows = reader(spark, CONNECTOR, options).load().select("partition", "offset", "key", "value", "headers")
    return sorted(normalize(tuple(r)) for r in rows.collect())


def _comparable(records: Sequence[tuple[Any, ...]], *, partitions: bool) -> Counter[Any]:
    """(partition where it is determined, key, value, headers) per record."""
    out: Counter[Any] = Counter()
    for partition, _offset, key, value, headers in records:
        known = partitions and key is not None
        out[(partition if known else None, key, value, headers)] += 1
    return out


def _per_partition(records: Sequence[tuple[Any, ...]]) -> dict[int, list[tuple[Any, ...]]]:
    out: dict[int, list[tuple[Any, ...]]] = {}
    for partition, _offset, key, value, headers in sorted(records):
        out.setdefault(partition, []).append((key, value, headers))
    return out


def _same(theirs: Counter[Any], ours: Counter[Any]) -> None:
    if ours != theirs:
        pytest.fail(
            f"landed records differ: only from kafka_core {list(ours - theirs)[:5]}, "
            f"only from the connector {list(theirs - ours)[:5]}"
        )


def _write_both(
    spark: Any,
    bootstrap: str,
    make_topic: Callable[..., str],
    df: Any,
    *,
    partitions: int = 3,
    compare_partitions: bool = True,
    ordered: bool = False,
    **options: str,
) -> Counter[Any]:
    """Write ``df`` with each format to a new topic of its own (``topic`` option); compare."""
    landed = {}
    for fmt in FORMATS:
        topic = make_topic(partitions, prefix=f"sink-{fmt.replace('_', '')}")
        _write(df, fmt, bootstrap, topic=topic, **options)
        landed[fmt] = _landed(spark, bootstrap, topic)
    ours = _comparable(landed[OURS], partitions=compare_partitions)
    _same(_comparable(landed[CONNECTOR], partitions=compare_partitions), ours)
    if ordered:
        assert _per_partition(landed[OURS]) == _per_partition(landed[CONNECTOR])
    return ours


# -- columns and types -------------------------------------------------------------------------


def test_string_key_and_value(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    data = [(f"k{i % 7}", f"value {i}") for i in range(40)]
    df = spark.createDataFrame(data, "key string, value string").coalesce(1)
    landed = _write_both(spark, bootstrap, make_topic, df, ordered=True)
    assert sum(landed.values()) == 40
    assert len({p for p, *_ in landed}) > 1  # the keys were spread by hashing, the same way


def test_binary_key_and_value(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    data = [(bytes([i, 0, 255 - i]), bytes(range(i % 9))) for i in range(30)]
    df = spark.createDataFrame(data, "key binary, value binary").coalesce(1)
    landed = _write_both(spark, bootstrap, make_topic, df, ordered=True)
    assert sum(landed.values()) == 30 and (None, b"") not in {(k, v) for _p, k, v, _h in landed}


def test_value_only(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    df = spark.createDataFrame([(f"v{i}",) for i in range(12)], "value string")
    landed = _write_both(spark, bootstrap, make_topic, df, compare_partitions=False)
    assert sum(landed.values()) == 12 and all(k is None for _p, k, _v, _h in landed)


def test_null_keys_and_null_values(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    data = [(None, "no key"), ("k1", None), (None, None), ("k2", "both"), ("k1", "again")]
    df = spark.createDataFrame(data, "key string, value string").coalesce(1)
    landed = _write_both(spark, bootstrap, make_topic, df)
    assert landed[(None, None, None, None)] == 1  # a tombstone without a key
    assert any(k == b"k1" and v is None for _p, k, v, _h in landed)  # a tombstone


def test_headers_column(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    data = [
        ("k1", "v1", [("a", b"1"), ("b", b"")]),
        ("k2", "v2", [("a", None)]),
        ("k3", "v3", []),
        ("k4", "v4", None),
        ("k5", "v5", [("dup", b"x"), ("dup", b"y")]),
    ]
    df = spark.createDataFrame(data, f"key string, value string, headers {HEADERS}")
    landed = _write_both(spark, bootstrap, make_topic, df)
    assert sum(landed.values()) == 5
    by_key = {k: h for _p, k, _v, h in landed}
    assert by_key[b"k5"] == (("dup", b"x"), ("dup", b"y"))


def test_partition_column(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    data = [("k", f"v{i}", i % 3) for i in range(9)] + [(None, "anywhere", None)]
    df = spark.createDataFrame(data, "key string, value string, partition int").coalesce(1)
    landed = {}
    for fmt in FORMATS:
        topic = make_topic(3, prefix=f"sink-{fmt.replace('_', '')}")
        _write(df, fmt, bootstrap, topic=topic)
        landed[fmt] = _landed(spark, bootstrap, topic)
    # the explicit partition wins over the key's hash: compare the partition of every keyed row
    ours = _comparable(landed[OURS], partitions=True)
    _same(_comparable(landed[CONNECTOR], partitions=True), ours)
    assert sorted(p for p, k, _v, _h in ours.elements() if k == b"k") == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # order within each partition, the keyless row (placed by the sticky partitioner) left out
    keyed = {p: [r for r in rs if r[0] == b"k"] for p, rs in _per_partition(landed[OURS]).items()}
    theirs = {p: [r for r in rs if r[0] == b"k"] for p, rs in _per_partition(landed[CONNECTOR]).items()}
    assert keyed == theirs


def test_topic_column_routes_each_row(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    landed: dict[str, dict[str, Counter[Any]]] = {}
    for fmt in FORMATS:
        a, b = make_topic(2, prefix="sink-a"), make_topic(2, prefix="sink-b")
        data = [(a if i % 3 else b, f"k{i}", f"v{i}") for i in range(15)]
        df = spark.createDataFrame(data, "topic string, key string, value string")
        _write(df, fmt, bootstrap)
        landed[fmt] = {
            "a": _comparable(_landed(spark, bootstrap, a), partitions=True),
            "b": _comparable(_landed(spark, bootstrap, b), partitions=True),
        }
    assert landed[OURS] == landed[CONNECTOR]
    assert sum(landed[OURS]["a"].values()) == 10 and sum(landed[OURS]["b"].values()) == 5


def test_topic_option_against_a_topic_column(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    """Both: the option wins over the column."""
    counts: dict[str, tuple[int, int]] = {}
    for fmt in FORMATS:
        column_topic, option_topic = make_topic(1, prefix="sink-col"), make_topic(1, prefix="sink-opt")
        df = spark.createDataFrame([(column_topic, f"v{i}") for i in range(6)], "topic string, value string")
        _write(df, fmt, bootstrap, topic=option_topic)
        counts[fmt] = (
            len(_landed(spark, bootstrap, column_topic)),
            len(_landed(spark, bootstrap, option_topic)),
        )
    assert counts[OURS] == counts[CONNECTOR] == (0, 6)


def test_streaming_sink(spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce) -> None:
    """readStream (the connector's source for both) -> writeStream of each format."""
    source = make_topic(2)
    produce(
        source,
        [
            Rec(p, f"k{i}".encode(), f"v{p}-{i}".encode(), (("h", b"1"),) if i % 2 else ())
            for p in range(2)
            for i in range(8)
        ],
    )
    landed = {}
    for fmt in FORMATS:
        out = make_topic(3, prefix=f"sink-{fmt.replace('_', '')}")
        stream = reader(
            spark,
            CONNECTOR,
            {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": source,
                "startingOffsets": "earliest",
                "includeHeaders": "true",
            },
            stream=True,
        ).load()
        q = (
            stream.select("key", "value", "headers")
            .writeStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("checkpointLocation", tempfile.mkdtemp(prefix=f"sink-{fmt}-"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(180), f"{fmt}: streaming write still running"
        assert q.exception() is None, f"{fmt}: {q.exception()}"
        landed[fmt] = _comparable(_landed(spark, bootstrap, out), partitions=True)
    _same(landed[CONNECTOR], landed[OURS])
    assert sum(landed[OURS].values()) == 16


# -- refused before any job ------------------------------------------------------------------


def _refusal(
    spark: Any, bootstrap: str, fmt: str, df: Any, options: Mapping[str, str]
) -> tuple[str, list[int]]:
    sc = spark.sparkContext
    group = f"sink-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, f"{fmt} write")
    try:
        _write(df, fmt, bootstrap, **options)
    except Exception as exc:
        return str(exc), list(sc.statusTracker().getJobIdsForGroup(group))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    pytest.fail(f"{fmt} wrote {df.schema.simpleString()} without an error")


@pytest.mark.parametrize(
    ("schema", "row", "column"),
    [
        ("key string, value int", ("k", 1), "value"),
        ("key int, value string", (1, "v"), "key"),
        ("partition string, value string", ("0", "v"), "partition"),
        ("headers array<string>, value string", (["h"], "v"), "headers"),
        ("key string, data string", ("k", "v"), "value"),
    ],
    ids=["value-int", "key-int", "partition-string", "headers-array-of-string", "no-value"],
)
def test_wrong_column_is_refused_before_any_job(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], schema: str, row: tuple[Any, ...], column: str
) -> None:
    topic = make_topic(1, prefix="sink-refused")
    df = spark.createDataFrame([row], schema)
    for fmt in FORMATS:
        message, jobs = _refusal(spark, bootstrap, fmt, df, {"topic": topic})
        assert not jobs, f"{fmt} ran jobs {jobs} before refusing: {message[:300]}"
        assert column in message.lower(), f"{fmt}'s error does not name {column!r}: {message[:800]}"
    assert not _landed(spark, bootstrap, topic)


def test_topic_column_of_the_wrong_type(spark: Any, bootstrap: str, make_topic: Callable[..., str]) -> None:
    """Refused (naming 'topic') without the option; with it, the column is ignored and the rows
    land in the option's topic: Spark's connector checks the column only when it is used."""
    df = spark.createDataFrame([(7, f"v{i}") for i in range(3)], "topic int, value string")
    for fmt in FORMATS:
        message, jobs = _refusal(spark, bootstrap, fmt, df, {})
        assert not jobs and "topic" in message.lower(), f"{fmt}: {jobs} {message[:800]}"
        topic = make_topic(1, prefix="sink-topic-int")
        _write(df, fmt, bootstrap, topic=topic)
        assert len(_landed(spark, bootstrap, topic)) == 3, fmt


def test_headers_with_string_values_a_kept_difference(
    spark: Any, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    """array<struct<key:string,value:string>>: the connector refuses it before any job, naming
    'headers'; kafka_core writes the values as UTF-8 (kept on purpose, docs/spark.md)."""
    df = spark.createDataFrame(
        [("k", "v", [("a", "x")])], "key string, value string, headers array<struct<key:string,value:string>>"
    )
    message, jobs = _refusal(
        spark, bootstrap, CONNECTOR, df, {"topic": make_topic(1, prefix="sink-strheaders")}
    )
    assert not jobs and "headers" in message.lower(), message[:800]
    topic = make_topic(1, prefix="sink-strheaders")
    _write(df, OURS, bootstrap, topic=topic)
    assert [r[4] for r in _landed(spark, bootstrap, topic)] == [(("a", b"x"),)]


def test_no_topic_anywhere_is_refused_before_any_job(spark: Any, bootstrap: str) -> None:
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    for fmt in FORMATS:
        message, jobs = _refusal(spark, bootstrap, fmt, df, {})
        assert not jobs, f"{fmt} ran jobs {jobs} before refusing: {message[:300]}"
        assert "topic" in message.lower(), f"{fmt}'s error does not name 'topic': {message[:800]}"
