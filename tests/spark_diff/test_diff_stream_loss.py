"""Streaming data loss, side by side: records deleted between micro-batches (issue 23, Left 2).

Each format runs two Trigger.AvailableNow queries on one checkpoint of its own: the first reads
what is there, then records are produced and some deleted (DeleteRecords), then the second run
plans from the checkpoint's offsets, now below the log start. With failOnDataLoss=false both must
give the same rows; with true both must fail (messages compared loosely). A partition added after
the first run whose first offset is above 0 is the other case: no checkpointed offset exists for
it, so whether either format calls it loss is what the cases pin.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import CONNECTOR, FORMATS, OURS, Rec, normalize, reader, sample_records, wait_ready

from kafka_core.client.metadata import TopicPartition

Produce = Callable[[str, Sequence[Rec]], None]
Seen = tuple[Counter[Any], Counter[Any], str | None]
DEADLINE_S = 180.0


def _run(spark: Any, fmt: str, options: dict[str, str], checkpoint: str) -> tuple[Counter[Any], str | None]:
    """One Trigger.AvailableNow run to its end: its rows and its failure's message, if any."""
    rows: Counter[Any] = Counter()

    def collect(df: Any, _batch_id: int) -> None:
        rows.update(normalize(r) for r in df.collect())

    q = (
        reader(spark, fmt, options, stream=True)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(DEADLINE_S), f"{fmt}: query still running"
    except Exception as exc:  # StreamingQueryException: the run failed
        return rows, str(exc)
    failure = q.exception()
    return rows, None if failure is None else str(failure)


def _delete_below(admin: Any, topic: str, partition: int, offset: int) -> None:
    tp = TopicPartition(topic, partition)
    admin.delete_records({tp: offset})[tp].result()


def _options(bootstrap: str, topic: str, fail_on_data_loss: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "includeHeaders": "true",
        "subscribe": topic,
        "startingOffsets": "earliest",
        "failOnDataLoss": fail_on_data_loss,
    }


def _both(spark: Any, options: dict[str, str], between: Callable[[], None]) -> dict[str, Seen]:
    """Per format: the first run's rows, the second run's rows and its failure."""
    checkpoints = {fmt: tempfile.mkdtemp(prefix=f"diff-loss-{fmt}-") for fmt in FORMATS}
    first = {fmt: _run(spark, fmt, options, checkpoints[fmt]) for fmt in FORMATS}
    for fmt, (_rows, failure) in first.items():
        assert failure is None, f"{fmt}'s first run failed: {failure}"
    between()
    second = {fmt: _run(spark, fmt, options, checkpoints[fmt]) for fmt in FORMATS}
    return {fmt: (first[fmt][0], second[fmt][0], second[fmt][1]) for fmt in FORMATS}


@dataclass(frozen=True)
class LossCase:
    """What every case here needs, with its failOnDataLoss ("true" or "false")."""

    spark: Any
    bootstrap: str
    admin: Any
    make_topic: Callable[..., str]
    produce: Produce
    fail_on_data_loss: str

    def topic_with(self, records: Sequence[Rec]) -> str:
        """A fresh one-partition topic holding ``records``."""
        topic = self.make_topic(1)
        self.produce(topic, records)
        return topic

    def compare(self, topic: str, between: Callable[[], None]) -> tuple[Seen, Seen]:
        """Both formats' two runs on ``topic``, ``between`` done between them: the connector's
        (first rows, second rows, second failure), then ours; the first runs' rows must agree."""
        seen = _both(self.spark, _options(self.bootstrap, topic, self.fail_on_data_loss), between)
        theirs, ours = seen[CONNECTOR], seen[OURS]
        assert ours[0] == theirs[0]
        return theirs, ours


@pytest.fixture(params=["true", "false"])
def case(
    request: pytest.FixtureRequest,
    spark: Any,
    bootstrap: str,
    admin: Any,
    make_topic: Callable[..., str],
    produce: Produce,
) -> LossCase:
    """Each case once per failOnDataLoss value, its set-up written once."""
    return LossCase(spark, bootstrap, admin, make_topic, produce, request.param)


def test_records_deleted_between_micro_batches(case: LossCase) -> None:
    topic = case.topic_with(sample_records(0, 10))

    def between() -> None:
        case.produce(topic, sample_records(0, 10, tag="w"))
        _delete_below(case.admin, topic, 0, 15)

    theirs, ours = case.compare(topic, between)
    assert sum(ours[0].values()) == 10
    if case.fail_on_data_loss == "true":
        assert theirs[2] is not None, "the connector read past deleted records with failOnDataLoss=true"
        assert ours[2] is not None, f"kafka_core read past deleted records: {list(ours[1])[:3]}"
        assert "failondataloss" in ours[2].lower(), ours[2][:1500]
        assert "failondataloss" in theirs[2].lower() or "data loss" in theirs[2].lower(), theirs[2][:1500]
    else:
        assert theirs[2] is None and ours[2] is None, (theirs[2], ours[2])
        assert ours[1] == theirs[1], (list(ours[1] - theirs[1])[:5], list(theirs[1] - ours[1])[:5])
        assert sorted(r[4] for r in ours[1]) == list(range(15, 20))


def test_added_partition_first_seen_above_offset_zero(case: LossCase) -> None:
    topic = case.topic_with(sample_records(0, 5))

    def between() -> None:
        case.admin.create_partitions({topic: 2})[topic].result()
        wait_ready(case.admin, topic, 2)
        case.produce(topic, sample_records(1, 6))
        _delete_below(case.admin, topic, 1, 4)

    theirs, ours = case.compare(topic, between)
    assert (ours[2] is None) == (theirs[2] is None), f"connector: {theirs[2]!s:.800} / ours: {ours[2]!s:.800}"
    assert ours[1] == theirs[1], (list(ours[1] - theirs[1])[:5], list(theirs[1] - ours[1])[:5])
