"""Streaming reads, side by side: Spark's own connector and kafka_core on the same topics.

Each case runs the same query through both formats (``foreachBatch`` collecting every
micro-batch's rows on the driver) and compares what each micro-batch held: the rows as multisets
(key, value, topic, partition, offset, timestamp, timestampType, headers) and, where admission
control decides it, how the records were cut into micro-batches. Running queries (processing-time
triggers) of the two formats run at the same time, to halve the waiting on two cores; only what
the queries produced is compared, never how long they took.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from conftest import FORMATS, OURS, T0, Rec, normalize, reader, wait_ready

Produce = Callable[[str, Sequence[Rec]], None]
# How long a running query may take to show what a case waits for (a loaded 2-core machine).
DEADLINE_S = 180.0


def _records(partition: int, count: int, *, start: int = 0, tag: str = "v") -> list[Rec]:
    """Records with keys (some null), values, headers on every other one, distinct timestamps."""
    return [
        Rec(
            partition=partition,
            key=None if i % 5 == 4 else f"k{partition}-{i}".encode(),
            value=f"{tag}{partition}-{i}".encode(),
            headers=(("i", str(i).encode()),) if i % 2 == 0 else (),
            timestamp_ms=T0 + i * 10 + partition,
        )
        for i in range(start, start + count)
    ]


class Batches:
    """Every micro-batch's rows of one query, as the driver saw them in ``foreachBatch``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[int, Counter[Any]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = Counter(normalize(r) for r in df.collect())
        with self.lock:
            self.batches.append((batch_id, rows))

    def nonempty(self) -> list[Counter[Any]]:
        with self.lock:
            return [rows for _id, rows in sorted(self.batches, key=lambda b: b[0]) if rows]

    def rows(self) -> Counter[Any]:
        total: Counter[Any] = Counter()
        for rows in self.nonempty():
            total += rows
        return total

    def count(self) -> int:
        return sum(self.rows().values())


def _options(bootstrap: str, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "includeHeaders": "true", **options}


def _schema(spark: Any, fmt: str, options: Mapping[str, str]) -> str:
    return str(reader(spark, fmt, options, stream=True).load().schema.json())


def _available_now(spark: Any, fmt: str, options: Mapping[str, str], checkpoint: str) -> Batches:
    """Run the query with Trigger.AvailableNow to its end; its micro-batches."""
    seen = Batches()
    q = (
        reader(spark, fmt, options, stream=True)
        .load()
        .writeStream.foreachBatch(seen)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(DEADLINE_S), f"{fmt}: Trigger.AvailableNow query still running"
    assert q.exception() is None, f"{fmt}: {q.exception()}"
    return seen


def _both_available_now(spark: Any, options: Mapping[str, str]) -> dict[str, Batches]:
    return {
        fmt: _available_now(spark, fmt, options, tempfile.mkdtemp(prefix=f"diff-{fmt}-")) for fmt in FORMATS
    }


class Running:
    """One processing-time query per format, both running at once."""

    def __init__(self, spark: Any, options: Mapping[str, str], trigger: str = "300 milliseconds") -> None:
        self.seen = {fmt: Batches() for fmt in FORMATS}
        self.queries = {}
        for fmt in FORMATS:
            self.queries[fmt] = (
                reader(spark, fmt, options, stream=True)
                .load()
                .writeStream.foreachBatch(self.seen[fmt])
                .option("checkpointLocation", tempfile.mkdtemp(prefix=f"diff-{fmt}-"))
                .trigger(processingTime=trigger)
                .start()
            )

    def started(self) -> None:
        """Until each query has planned its first micro-batch (its starting offsets are fixed)."""
        self.wait(lambda fmt: self.queries[fmt].lastProgress is not None, "a first trigger")

    def wait(self, done: Callable[[str], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        pending = list(FORMATS)
        while pending:
            for fmt in FORMATS:
                q = self.queries[fmt]
                if q.exception() is not None:
                    pytest.fail(f"{fmt} query failed: {q.exception()}")
            pending = [fmt for fmt in FORMATS if not done(fmt)]
            if pending and time.monotonic() > deadline:
                counts = {fmt: self.seen[fmt].count() for fmt in FORMATS}
                pytest.fail(f"{pending} did not reach {what} within {DEADLINE_S} s (rows so far: {counts})")
            time.sleep(0.2)

    def wait_rows(self, n: int) -> None:
        self.wait(lambda fmt: self.seen[fmt].count() >= n, f"{n} rows")

    def stop(self) -> None:
        for q in self.queries.values():
            q.stop()


@pytest.fixture
def running(spark: Any) -> Iterator[Callable[..., Running]]:
    made: list[Running] = []

    def start(options: Mapping[str, str], **kw: Any) -> Running:
        r = Running(spark, options, **kw)
        made.append(r)
        return r

    yield start
    for r in made:
        r.stop()


def _same_rows(seen: Mapping[str, Batches]) -> Counter[Any]:
    theirs, ours = seen["kafka"].rows(), seen[OURS].rows()
    if ours != theirs:
        pytest.fail(
            f"rows differ: only in kafka_core {list(ours - theirs)[:5]}, "
            f"only in the connector {list(theirs - ours)[:5]}"
        )
    return ours


def _cuts(batches: Batches) -> list[dict[tuple[str, int], tuple[int, int]]]:
    """Each non-empty micro-batch as {(topic, partition): (first offset, last offset)}."""
    out = []
    for rows in batches.nonempty():
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for row in rows:
            key = (row[2], row[3])
            lo, hi = ranges.get(key, (row[4], row[4]))
            ranges[key] = (min(lo, row[4]), max(hi, row[4]))
        out.append(ranges)
    return out


# -- Trigger.AvailableNow and admission control ----------------------------------------------


def test_available_now_reads_what_is_there(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce
) -> None:
    topic = make_topic(3)
    produce(topic, [r for p, n in enumerate((12, 7, 0)) for r in _records(p, n)])
    options = _options(bootstrap, subscribe=topic, startingOffsets="earliest")
    assert _schema(spark, "kafka", options) == _schema(spark, OURS, options)
    seen = _both_available_now(spark, options)
    rows = _same_rows(seen)
    assert sum(rows.values()) == 19
    assert [sum(b.values()) for b in seen[OURS].nonempty()] == [19]  # one micro-batch, as theirs
    assert [sum(b.values()) for b in seen["kafka"].nonempty()] == [19]


def test_max_offsets_per_trigger_cuts_the_same_micro_batches(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce
) -> None:
    topic = make_topic(3)
    produce(topic, [r for p, n in enumerate((40, 13, 2)) for r in _records(p, n)])
    options = _options(bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="17")
    seen = _both_available_now(spark, options)
    rows = _same_rows(seen)
    assert sum(rows.values()) == 55
    ours, theirs = _cuts(seen[OURS]), _cuts(seen["kafka"])
    assert len(ours) >= 3
    assert ours == theirs


def test_starting_offsets_json_in_a_stream(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce
) -> None:
    topic = make_topic(2)
    produce(topic, [r for p in range(2) for r in _records(p, 10)])
    start = f'{{"{topic}":{{"0":4,"1":-2}}}}'
    seen = _both_available_now(spark, _options(bootstrap, subscribe=topic, startingOffsets=start))
    rows = _same_rows(seen)
    assert sum(rows.values()) == 16


def test_min_offsets_per_trigger_waits_for_enough_records(
    spark: Any,
    bootstrap: str,
    make_topic: Callable[..., str],
    produce: Produce,
    running: Callable[..., Running],
) -> None:
    topic = make_topic(2)
    options = _options(
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="1h",
    )
    run = running(options)
    run.started()
    produce(topic, _records(0, 3) + _records(1, 3))  # 6 < 10: no micro-batch may read them
    time.sleep(5)  # many triggers (one per 300 ms) for either query to read them too early
    assert {fmt: run.seen[fmt].count() for fmt in FORMATS} == {"kafka": 0, OURS: 0}
    # 12 >= 10: one batch, all. Each partition's three land as one batch, but the two partitions'
    # may land a trigger apart: either alone makes 9, still too few, so no batch can take part.
    produce(topic, _records(0, 3, start=3) + _records(1, 3, start=3))
    run.wait_rows(12)
    rows = _same_rows(run.seen)
    assert sum(rows.values()) == 12
    assert [sum(b.values()) for b in run.seen[OURS].nonempty()] == [12]
    assert [sum(b.values()) for b in run.seen["kafka"].nonempty()] == [12]


def test_max_trigger_delay_lets_a_small_batch_through(
    spark: Any,
    bootstrap: str,
    make_topic: Callable[..., str],
    produce: Produce,
    running: Callable[..., Running],
) -> None:
    topic = make_topic(1)
    options = _options(
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="1000",
        maxTriggerDelay="2s",
    )
    run = running(options)
    run.started()
    produce(topic, _records(0, 5))  # far fewer than 1000: read once the delay has passed
    run.wait_rows(5)
    assert sum(_same_rows(run.seen).values()) == 5


def test_available_now_with_min_offsets_per_trigger_ends(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce
) -> None:
    """Trigger.AvailableNow does not wait for minOffsetsPerTrigger: it reads what is there and ends."""
    topic = make_topic(1)
    produce(topic, _records(0, 6))
    options = _options(
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="100",
        maxTriggerDelay="1h",
    )
    seen = _both_available_now(spark, options)
    assert sum(_same_rows(seen).values()) == 6


# -- topics and partitions that appear mid-query ---------------------------------------------


def test_partition_added_mid_query_is_read_from_its_start(
    spark: Any,
    bootstrap: str,
    admin: Any,
    make_topic: Callable[..., str],
    produce: Produce,
    running: Callable[..., Running],
) -> None:
    topic = make_topic(2)
    produce(topic, _records(0, 5) + _records(1, 5))
    run = running(_options(bootstrap, subscribe=topic, startingOffsets="earliest"))
    run.wait_rows(10)
    admin.create_partitions({topic: 3})[topic].result()
    wait_ready(admin, topic, 3)
    produce(topic, _records(2, 6) + _records(0, 2, start=5))
    run.wait_rows(18)
    rows = _same_rows(run.seen)
    assert sorted(r[4] for r in rows if r[3] == 2) == list(range(6))


def test_pattern_picks_up_a_topic_created_after_the_start(
    spark: Any,
    bootstrap: str,
    make_topic: Callable[..., str],
    produce: Produce,
    running: Callable[..., Running],
) -> None:
    prefix = f"diffstream-{uuid.uuid4().hex[:8]}"
    first = make_topic(1, name=f"{prefix}-a")
    produce(first, _records(0, 4))
    run = running(_options(bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest"))
    run.wait_rows(4)
    later = make_topic(2, name=f"{prefix}-b")
    produce(later, _records(0, 3, tag="b") + _records(1, 2, tag="b"))
    run.wait_rows(9)
    rows = _same_rows(run.seen)
    assert sum(1 for r in rows.elements() if r[2] == later) == 5


def test_default_latest_start_skips_what_was_there(
    spark: Any,
    bootstrap: str,
    make_topic: Callable[..., str],
    produce: Produce,
    running: Callable[..., Running],
) -> None:
    topic = make_topic(2)
    produce(topic, _records(0, 3))  # before the queries start: neither reads it
    run = running(_options(bootstrap, subscribe=topic))
    run.started()
    produce(topic, _records(0, 2, start=3, tag="new") + _records(1, 2, tag="new"))
    run.wait_rows(4)
    rows = _same_rows(run.seen)
    assert all(r[1].startswith(b"new") for r in rows)


# -- restart from the checkpoint ---------------------------------------------------------------


def test_restart_from_the_checkpoint_reads_on_where_it_stopped(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], produce: Produce
) -> None:
    topic = make_topic(2)
    produce(topic, _records(0, 9) + _records(1, 4))
    options = _options(bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    checkpoints = {fmt: tempfile.mkdtemp(prefix=f"diff-{fmt}-") for fmt in FORMATS}
    first = {fmt: _available_now(spark, fmt, options, checkpoints[fmt]) for fmt in FORMATS}
    assert sum(_same_rows(first).values()) == 13
    assert _cuts(first[OURS]) == _cuts(first["kafka"])
    produce(topic, _records(0, 3, start=9, tag="late") + _records(1, 1, start=4, tag="late"))
    # startingOffsets only applies to a new query: a restart goes on from its checkpoint
    restarted = {**options, "startingOffsets": "latest"}
    second = {fmt: _available_now(spark, fmt, restarted, checkpoints[fmt]) for fmt in FORMATS}
    rows = _same_rows(second)
    assert sum(rows.values()) == 4 and all(r[1].startswith(b"late") for r in rows)
