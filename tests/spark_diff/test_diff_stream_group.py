"""Committing to a consumer group under Trigger.Once and Trigger.AvailableNow, beside the connector.

Spark's connector reads with a consumer group of its own (``kafka.group.id`` names it) but never
commits offsets to Kafka (SPARK-27549): the group stays without offsets whatever the trigger.
kafka_core commits only when ``commitOffsetsToGroup`` is set; these cases pin what that group
holds after each one-shot trigger (docs/spark.md, "Committing a query's offsets").
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from conftest import CONNECTOR, OURS, Rec, normalize, reader, sample_records

from kafka_core.client.metadata import TopicPartition

Produce = Callable[[str, Sequence[Rec]], None]
DEADLINE_S = 180.0


def _run(spark: Any, fmt: str, options: dict[str, str], trigger: str) -> Counter[Any]:
    rows: Counter[Any] = Counter()

    def collect(df: Any, _batch_id: int) -> None:
        rows.update(normalize(r) for r in df.collect())

    kind = {"once": {"once": True}, "availableNow": {"availableNow": True}}[trigger]
    q = (
        reader(spark, fmt, options, stream=True)
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", tempfile.mkdtemp(prefix=f"diff-group-{fmt}-"))
        .trigger(**kind)
        .start()
    )
    assert q.awaitTermination(DEADLINE_S), f"{fmt}: query still running"
    assert q.exception() is None, f"{fmt}: {q.exception()}"
    return rows


@pytest.mark.parametrize("trigger", ["once", "availableNow"])
def test_one_shot_trigger_group_commits(
    spark: Any,
    bootstrap: str,
    admin: Any,
    make_topic: Callable[..., str],
    produce: Produce,
    trigger: str,
) -> None:
    topic = make_topic(2)
    produce(topic, sample_records(0, 5) + sample_records(1, 7))
    theirs_group, ours_group = (f"diff-group-{who}-{uuid.uuid4().hex[:8]}" for who in ("kafka", "ours"))
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest"}
    theirs = _run(spark, CONNECTOR, {**base, "kafka.group.id": theirs_group}, trigger)
    ours = _run(spark, OURS, {**base, "commitOffsetsToGroup": ours_group}, trigger)
    assert ours == theirs and sum(ours.values()) == 12
    # The connector's consumers use the group but never commit to it.
    assert admin.list_group_offsets(theirs_group) == {}
    committed = {tp: om.offset for tp, om in admin.list_group_offsets(ours_group).items()}
    if trigger == "availableNow":  # Spark plans once more before ending: the last batch is committed
        assert committed == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 7}
    else:  # one plan only: the group holds the starting offsets, behind by the whole batch
        assert committed == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}
