"""Filter pushdown and subset read schemas, side by side (issue 41): a query with a ``where`` on
``timestamp``, ``offset``, ``partition`` and ``topic`` gives the same rows from kafka_core, with
``spark.sql.python.filterPushdown.enabled`` on (the predicates become offset ranges before any
fetch), as from Spark's connector, which scans the whole range and filters after the read; a
schema naming some of the source's columns gives the rows the connector gives for the same
``select``. Each case checks it returned some rows and not all, so it cannot pass on an empty
or an unfiltered read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from conftest import CONNECTOR, OURS, T0, Rec, multiset, reader
from fakes.pushdown import at, out_of_order_stamp, scanned

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
N = 60  # records per partition
PARTITIONS = 3


def stamp(offset: int) -> int:
    """Record timestamps 1 s apart, some out of order."""
    return out_of_order_stamp(T0, 1000, offset)


@pytest.fixture(scope="module")
def topic(make_topic: Callable[..., str], produce: Callable[[str, Sequence[Rec]], None]) -> str:
    name = make_topic(PARTITIONS, prefix=f"diffpush-{uuid.uuid4().hex[:6]}")
    produce(
        name,
        [
            Rec(
                partition=p,
                key=None if o % 9 == 4 else f"k{p}-{o}".encode(),
                value=f"v{p}-{o}".encode(),
                headers=(("h", str(o).encode()),) if o % 2 else (),
                timestamp_ms=stamp(o),
            )
            for p in range(PARTITIONS)
            for o in range(N)
        ],
    )
    return name


@pytest.fixture
def pushdown(spark: Any) -> Iterator[None]:
    """Pushdown on for the test (Spark's connector has no use for the setting)."""
    spark.conf.set(PUSHDOWN, "true")
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, "false")


def rows_of(spark: Any, bootstrap: str, fmt: str, topic: str, where: str, **options: str) -> Any:
    df = reader(spark, fmt, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}).load()
    return multiset(df.where(where).collect())


def predicates(topic: str) -> list[str]:
    mid = stamp(30)
    return [
        "partition = 1",
        "partition in (0, 2) and offset < 7",
        f"topic = '{topic}' and offset >= 55",
        "offset in (3, 4, 5, 59, 400)",
        "not (offset in (0, 1, 2)) and partition = 2",
        "offset between 10 and 12 or partition = 5",  # an OR: nothing of it is pushed
        f"timestamp > {at(mid)}",
        f"timestamp >= {at(mid)} and timestamp < {at(mid + 4000)}",
        f"timestamp = {at(stamp(31))}",
        f"timestamp in ({at(stamp(50))}, {at(stamp(40))})",
        f"timestamp > {at(mid + 500)} and partition = 0 and offset < 50",  # between two records
        f"timestamp <= {at(stamp(2))} and offset < 10",
        f"topic like '{topic[:8]}%' and offset = 17",
        "timestamp > now() - interval 3650 days and offset < 3",  # now() is folded, then pushed
    ]


@pytest.mark.usefixtures("pushdown")
def test_filters_pushed_into_offsets_give_the_connectors_rows(spark: Any, bootstrap: str, topic: str) -> None:
    for where in predicates(topic):
        theirs = rows_of(spark, bootstrap, CONNECTOR, topic, where)
        ours = rows_of(spark, bootstrap, OURS, topic, where)
        assert 0 < sum(theirs.values()) < PARTITIONS * N, where  # a filter that keeps some rows
        assert ours == theirs, (
            f"{where}: only in kafka_core {list(ours - theirs)[:3]}, "
            f"only in the connector {list(theirs - ours)[:3]}"
        )


@pytest.mark.usefixtures("pushdown")
def test_filters_that_keep_nothing_give_nothing_on_both(spark: Any, bootstrap: str, topic: str) -> None:
    for where in (f"timestamp > {at(stamp(N) + 60_000)}", "offset > 5 and offset < 5", "partition = 7"):
        assert rows_of(spark, bootstrap, CONNECTOR, topic, where) == rows_of(
            spark, bootstrap, OURS, topic, where
        )
        assert not rows_of(spark, bootstrap, OURS, topic, where), where


@pytest.mark.usefixtures("pushdown")
def test_pushdown_with_explicit_offsets_and_headers(spark: Any, bootstrap: str, topic: str) -> None:
    options = {
        "startingOffsets": f'{{"{topic}":{{"0":5,"1":-2,"2":20}}}}',
        "endingOffsets": f'{{"{topic}":{{"0":50,"1":40,"2":-1}}}}',
        "includeHeaders": "true",
    }
    where = f"offset >= 30 and timestamp > {at(stamp(25))}"
    theirs = rows_of(spark, bootstrap, CONNECTOR, topic, where, **options)
    assert rows_of(spark, bootstrap, OURS, topic, where, **options) == theirs
    assert sum(theirs.values()) == 20 + 10 + (N - 30)


@pytest.mark.parametrize(
    ("schema", "options"),
    [
        ("timestamp timestamp, value binary", {}),
        ("key binary, offset long, partition int", {}),
        ("topic string, timestampType int, key binary", {}),
        (
            "offset long, partition int, headers array<struct<key:string,value:binary>>",
            {"includeHeaders": "true"},
        ),
        ("value binary, offset long", {"includeHeaders": "true"}),  # headers read, not asked for
    ],
)
def test_a_schema_naming_some_columns_gives_the_connectors_select(
    spark: Any, bootstrap: str, topic: str, schema: str, options: dict[str, str]
) -> None:
    columns = [part.split()[0] for part in schema.split(", ")]
    common = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}
    theirs_df = reader(spark, CONNECTOR, common).load().select(*columns)
    ours_df = reader(spark, OURS, common).schema(schema).load()
    assert ours_df.columns == columns
    assert ours_df.schema.json() == theirs_df.schema.json()
    theirs = multiset(theirs_df.collect())
    assert sum(theirs.values()) == PARTITIONS * N
    assert multiset(ours_df.collect()) == theirs


@pytest.mark.usefixtures("pushdown")
def test_a_subset_schema_with_a_pushed_filter(spark: Any, bootstrap: str, topic: str) -> None:
    """A schema of four columns, two of them the filter's, with the filter pushed into offsets."""
    where = f"partition = 2 and timestamp > {at(stamp(40))}"
    theirs = multiset(
        reader(spark, CONNECTOR, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
        .load()
        .where(where)
        .select("offset", "value")
        .collect()
    )
    ours = multiset(
        reader(spark, OURS, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
        .schema("offset long, value binary, partition int, timestamp timestamp")
        .load()
        .where(where)
        .select("offset", "value")
        .collect()
    )
    assert 0 < sum(theirs.values()) < N and ours == theirs


@pytest.mark.usefixtures("pushdown")
def test_pushed_filters_are_not_read_at_all(spark: Any, bootstrap: str, topic: str) -> None:
    """What makes pushdown worth having: kafka_core's scan hands Spark only the records of the
    offsets the filter leaves, where the connector's scans every record."""
    where = "partition = 1 and offset >= 50"
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    assert scanned(reader(spark, OURS, options).load().where(where))[1] == 10
    assert scanned(reader(spark, CONNECTOR, options).load().where(where))[1] == PARTITIONS * N
