"""Filter pushdown into offset ranges (kafka_core.spark.pushdown), without a broker or Spark:
the rows the narrowed ranges hold, filtered by what is handed back to Spark, are exactly the rows
the filters keep from the whole ranges."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prerequisites import need_module

need_module("pyspark")

from pyspark.sql.datasource import (  # noqa: E402
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.spark.planning import OffsetRange  # noqa: E402
from kafka_core.spark.pushdown import MAX_INTERVALS, Pushdown, in_pushdown_planner, narrow, push  # noqa: E402

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
UTC = dt.UTC


def ts(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


def holds(f: Any, row: dict[str, Any]) -> bool:
    """Spark's meaning of a filter on a row (no nulls in these columns)."""
    kind = type(f).__name__
    if kind == "Not":
        return not holds(f.child, row)
    v = row[f.attribute[0]]
    return {
        "EqualTo": lambda: v == f.value,
        "EqualNullSafe": lambda: v == f.value,
        "GreaterThan": lambda: v > f.value,
        "GreaterThanOrEqual": lambda: v >= f.value,
        "LessThan": lambda: v < f.value,
        "LessThanOrEqual": lambda: v <= f.value,
        "In": lambda: v in f.value,
        "IsNull": lambda: False,
        "IsNotNull": lambda: True,
        "StringStartsWith": lambda: v.startswith(f.value),
        "StringEndsWith": lambda: v.endswith(f.value),
        "StringContains": lambda: f.value in v,
    }[kind]()


# A log: two topics, three partitions each, 30 records; timestamps out of order in places (as
# producers' CreateTime can be), with the log's max-so-far property ListOffsets relies on.
TOPICS = ("orders", "orders-dlq")
ROWS = [
    {
        "topic": t,
        "partition": p,
        "offset": o,
        "timestamp": ts(1_000 + 10 * o + (7 if o % 4 == 1 else 0) - (5 if o % 5 == 3 else 0)),
    }
    for t in TOPICS
    for p in range(3)
    for o in range(30)
]
RANGES = [OffsetRange(t, p, 0, 30) for t in TOPICS for p in range(3)]


def for_times(since_ms: int) -> dict[TopicPartition, int | None]:
    """What ListOffsets by time answers: the first offset whose timestamp is >= since."""
    out: dict[TopicPartition, int | None] = {}
    for r in RANGES:
        found = [
            row["offset"]
            for row in ROWS
            if (row["topic"], row["partition"]) == (r.topic, r.partition) and row["timestamp"] >= ts(since_ms)
        ]
        out[r.tp] = min(found) if found else None
    return out


def run(filters: list[Any]) -> tuple[list[dict[str, Any]], list[Any], int]:
    """(rows read and kept by what Spark still checks, the filters handed back, records read)."""
    pushdown, remaining = push(filters, COLUMNS)
    for r in remaining:
        assert any(r is f for f in filters), "Spark takes back only its own filter objects"
    since = None if pushdown.since_ms is None else for_times(pushdown.since_ms)
    kept = [r for r in RANGES if pushdown.keeps(r.tp)]
    ranges = narrow(kept, pushdown, since)
    read = [
        row
        for r in ranges
        for row in ROWS
        if (row["topic"], row["partition"]) == (r.topic, r.partition) and r.start <= row["offset"] < r.end
    ]
    assert len(read) == sum(r.size for r in ranges), "ranges overlap"
    return [row for row in read if all(holds(f, row) for f in remaining)], remaining, len(read)


def expected(filters: list[Any]) -> list[dict[str, Any]]:
    return [row for row in ROWS if all(holds(f, row) for f in filters)]


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["topic"], row["partition"], row["offset"])


CASES = [
    [EqualTo(("partition",), 1)],
    [EqualTo(("topic",), "orders"), GreaterThanOrEqual(("offset",), 25)],
    [In(("partition",), (0, 2)), LessThan(("offset",), 3)],
    [In(("offset",), (1, 2, 3, 17, 29, 40))],
    [Not(In(("offset",), (0, 1, 2)))],
    [Not(EqualTo(("topic",), "orders"))],
    [
        StringEndsWith(("topic",), "-dlq"),
        StringStartsWith(("topic",), "ord"),
        StringContains(("topic",), "s-"),
    ],
    [GreaterThan(("offset",), 10), LessThanOrEqual(("offset",), 12), EqualNullSafe(("partition",), 2)],
    [GreaterThan(("timestamp",), ts(1_150))],
    [GreaterThanOrEqual(("timestamp",), ts(1_150)), LessThan(("timestamp",), ts(1_200))],
    [EqualTo(("timestamp",), ts(1_107))],
    [In(("timestamp",), (ts(1_207), ts(1_107)))],
    [GreaterThan(("timestamp",), ts(999_999))],  # after every record: empty
    [GreaterThan(("offset",), 5), LessThan(("offset",), 5)],  # empty
    [IsNull(("offset",))],
    [IsNotNull(("topic",)), GreaterThan(("timestamp",), ts(1_000) + dt.timedelta(microseconds=1))],
    [GreaterThan(("partition",), 0), GreaterThan(("timestamp",), ts(1_280)), LessThan(("offset",), 29)],
]


@pytest.mark.parametrize("filters", CASES, ids=[repr(c)[:80] for c in CASES])
def test_pushed_ranges_keep_exactly_the_rows_the_filters_keep(filters: list[Any]) -> None:
    got, _remaining, _read = run(filters)
    assert sorted(map(key, got)) == sorted(map(key, expected(filters)))


def test_fewer_records_are_read_and_only_timestamps_go_back_to_spark() -> None:
    filters = [
        EqualTo(("topic",), "orders"),
        GreaterThan(("offset",), 20),
        GreaterThan(("timestamp",), ts(1_250)),
    ]
    _got, remaining, read = run(filters)
    assert remaining == [filters[2]]  # topic and offset are exact; timestamps are checked again
    assert read < len(ROWS) // 4
    _, _, everything = run([])
    assert everything == len(ROWS)


def test_filters_on_other_columns_or_types_go_back_untouched() -> None:
    filters = [
        EqualTo(("value",), b"x"),
        EqualTo(("partition",), "1"),  # not an int: not decided here
        In(("offset",), (1, None)),  # NULL in the list
        EqualTo(("headers", "key"), "a"),  # a nested column
        LessThan(("timestamp",), ts(5)),  # an upper bound on time: nothing to push
        GreaterThan(("timestamp",), dt.datetime(2026, 1, 1)),  # no zone
        GreaterThan(("timestamp",), ts(-5)),  # before the epoch: ListOffsets cannot ask it
    ]
    pushdown, remaining = push(filters, COLUMNS)
    assert remaining == filters
    assert pushdown.empty and pushdown == Pushdown()


def test_a_column_left_out_of_the_schema_is_not_pushed() -> None:
    f = EqualTo(("partition",), 1)
    pushdown, remaining = push([f], ("value", "timestamp"))
    assert remaining == [f] and pushdown.empty


def test_timestamp_bounds_in_milliseconds() -> None:
    micro = dt.timedelta(microseconds=1)
    assert push([GreaterThan(("timestamp",), ts(5))], COLUMNS)[0].since_ms == 6
    assert push([GreaterThan(("timestamp",), ts(5) + 999 * micro)], COLUMNS)[0].since_ms == 6
    assert push([GreaterThanOrEqual(("timestamp",), ts(5))], COLUMNS)[0].since_ms == 5
    assert push([GreaterThanOrEqual(("timestamp",), ts(5) + micro)], COLUMNS)[0].since_ms == 6
    both = [GreaterThan(("timestamp",), ts(5)), GreaterThanOrEqual(("timestamp",), ts(9))]
    assert push(both, COLUMNS)[0].since_ms == 9


def test_a_long_scattered_in_list_reads_one_span_and_spark_checks_it() -> None:
    values = tuple(range(0, 4 * (MAX_INTERVALS + 10), 4))
    f = In(("offset",), values)
    pushdown, remaining = push([f], COLUMNS)
    assert remaining == [f]
    assert pushdown.offsets == ((0, values[-1] + 1),)


def test_only_spark_s_pushdown_worker_gets_the_pushdown_reader() -> None:
    assert not in_pushdown_planner()
    namespace: dict[str, Any] = {"__name__": "pyspark.sql.worker.data_source_pushdown_filters"}
    exec("def call(f):\n    return f()\n", namespace)
    assert namespace["call"](in_pushdown_planner)


offset_filter = st.one_of(
    st.builds(EqualTo, st.just(("offset",)), st.integers(-2, 32)),
    st.builds(GreaterThan, st.just(("offset",)), st.integers(-2, 32)),
    st.builds(GreaterThanOrEqual, st.just(("offset",)), st.integers(-2, 32)),
    st.builds(LessThan, st.just(("offset",)), st.integers(-2, 32)),
    st.builds(LessThanOrEqual, st.just(("offset",)), st.integers(-2, 32)),
    st.builds(In, st.just(("offset",)), st.lists(st.integers(-2, 32), min_size=1, max_size=6).map(tuple)),
)
partition_filter = st.one_of(
    st.builds(EqualTo, st.just(("partition",)), st.integers(-1, 3)),
    st.builds(LessThan, st.just(("partition",)), st.integers(-1, 3)),
    st.builds(In, st.just(("topic",)), st.lists(st.sampled_from([*TOPICS, "x"]), min_size=1).map(tuple)),
    st.builds(StringStartsWith, st.just(("topic",)), st.sampled_from(["o", "orders-", "x"])),
)
time_filter = st.one_of(
    st.builds(GreaterThan, st.just(("timestamp",)), st.integers(900, 1_400).map(ts)),
    st.builds(GreaterThanOrEqual, st.just(("timestamp",)), st.integers(900, 1_400).map(ts)),
    st.builds(LessThan, st.just(("timestamp",)), st.integers(900, 1_400).map(ts)),
)
any_filter = st.one_of(
    offset_filter, partition_filter, time_filter, offset_filter.map(Not), partition_filter.map(Not)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(any_filter, max_size=4))
def test_any_and_of_filters_keeps_the_same_rows(filters: list[Any]) -> None:
    got, _remaining, read = run(filters)
    assert sorted(map(key, got)) == sorted(map(key, expected(filters)))
    assert read <= len(ROWS)
