"""The streaming reader's driver-side decisions, with a scripted view of Kafka (no broker, no Spark job)."""

from __future__ import annotations

import pickle

import pytest
from prerequisites import need_module

need_module("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows  # noqa: E402

from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.spark.options import parse_source  # noqa: E402
from kafka_core.spark.planning import DataLossError, OffsetLookups  # noqa: E402
from kafka_core.spark.stream import KafkaStreamReader  # noqa: E402

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class FakeKafka:
    """What the offset reader would answer: partitions, their earliest/latest, topic ids."""

    def __init__(self) -> None:
        self.first: dict[TopicPartition, int] = {T0: 0, T1: 0}
        self.end: dict[TopicPartition, int] = {T0: 100, T1: 300}
        self.ids = {"t": "id-1"}

    def partitions(self) -> list[TopicPartition]:
        return sorted(self.end)

    def topic_ids(self) -> dict[str, str]:
        return dict(self.ids)

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.first[tp] for tp in tps}

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.end[tp] for tp in tps}

    def lookups(self) -> OffsetLookups:
        return OffsetLookups(self.earliest, self.latest, lambda wanted: dict.fromkeys(wanted))

    def close(self) -> None:
        pass


def reader(kafka: FakeKafka, **options: str) -> KafkaStreamReader:
    opts = parse_source({"kafka.bootstrap.servers": "h:1", "subscribe": "t,u", **options}, streaming=True)
    r = KafkaStreamReader(opts)
    r._reader = kafka
    return r


def test_initial_offsets_follow_starting_offsets() -> None:
    kafka = FakeKafka()
    assert reader(kafka).initialOffset() == {"t": {"0": 100, "1": 300}}
    assert reader(kafka, startingOffsets="earliest").initialOffset() == {"t": {"0": 0, "1": 0}}


def test_max_offsets_per_trigger_and_all_available() -> None:
    kafka = FakeKafka()
    r = reader(kafka, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    start = r.initialOffset()
    assert r.getDefaultReadLimit() == ReadMaxRows(40)
    assert r.latestOffset(start, ReadMaxRows(40)) == {"t": {"0": 10, "1": 30}}
    # the engine may ask for everything (e.g. Trigger.Once): the limit option is ignored then
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 300}}
    # the engine's limit and the option: the smaller wins
    assert r.latestOffset(start, ReadMaxRows(4)) == {"t": {"0": 1, "1": 3}}


def test_reported_latest_is_kafkas_newest_not_the_limited_end() -> None:
    """Under maxOffsetsPerTrigger the progress's latestOffset shows the backlog, as Spark's
    connector reports it: the newest offsets in Kafka, not the batch's capped end."""
    kafka = FakeKafka()
    r = reader(kafka, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    assert r.reportLatestOffset() is None  # nothing planned yet
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxRows(40))
    assert end == {"t": {"0": 10, "1": 30}}
    assert r.reportLatestOffset() == {"t": {"0": 100, "1": 300}}
    kafka.end = {T0: 150, T1: 300}  # more arrives: the next report follows Kafka
    assert r.latestOffset(end, ReadMaxRows(40)) != kafka.end
    assert r.reportLatestOffset() == {"t": {"0": 150, "1": 300}}
    # minOffsetsPerTrigger skipping a batch still reports what is there
    w = reader(kafka, startingOffsets="latest", minOffsetsPerTrigger="500", maxTriggerDelay="1h")
    begin = w.initialOffset()
    kafka.end = {T0: 160, T1: 300}
    assert w.latestOffset(begin, ReadMinRows(500)) == begin
    assert w.reportLatestOffset() == {"t": {"0": 160, "1": 300}}


def test_available_now_stops_at_the_target() -> None:
    kafka = FakeKafka()
    r = reader(kafka, startingOffsets="earliest", maxOffsetsPerTrigger="200")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    kafka.end = {T0: 1000, T1: 1000}  # arrives after the query started: not read
    offsets = start
    for _ in range(10):
        nxt = r.latestOffset(offsets, r.getDefaultReadLimit())
        if nxt == offsets:
            break
        offsets = nxt
    assert offsets == {"t": {"0": 100, "1": 300}}


def test_min_offsets_wait_until_max_trigger_delay() -> None:
    kafka = FakeKafka()
    r = reader(kafka, startingOffsets="latest", minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    start = r.initialOffset()
    assert r.getDefaultReadLimit() == ReadMinRows(50)
    kafka.end = {T0: 120, T1: 310}  # 30 new records: not enough, and the delay has not passed
    assert r.latestOffset(start, ReadMinRows(50)) == start
    kafka.end = {T0: 140, T1: 320}  # 60: enough
    assert r.latestOffset(start, ReadMinRows(50)) == {"t": {"0": 140, "1": 320}}
    r2 = reader(kafka, startingOffsets="latest", minOffsetsPerTrigger="500", maxTriggerDelay="0s")
    start = r2.initialOffset()
    kafka.end = {T0: 141, T1: 320}
    assert r2.latestOffset(start, ReadMinRows(500)) == {"t": {"0": 141, "1": 320}}  # delay over


def test_new_partitions_start_at_earliest() -> None:
    kafka = FakeKafka()
    r = reader(kafka, failOnDataLoss="false")
    start = r.initialOffset()
    kafka.first[U0] = 5
    kafka.end[U0] = 25
    kafka.ids["u"] = "id-u"
    end = r.latestOffset(start, ReadAllAvailable())
    assert end["u"] == {"0": 25}
    parts = r.partitions(start, end)
    assert [(r.topic, r.start, r.end) for p in parts for r in p.ranges] == [("u", 5, 25)]


def test_added_partition_not_starting_at_zero_is_data_loss() -> None:
    """As Spark's connector: records of a new partition deleted before the query saw it are lost."""
    kafka = FakeKafka()
    r = reader(kafka)
    start = r.initialOffset()
    kafka.first[U0], kafka.end[U0] = 5, 25
    kafka.ids["u"] = "id-u"
    with pytest.raises(DataLossError, match=r"u.*offsets 0 to 4.*first offset is 5"):
        r.latestOffset(start, ReadAllAvailable())
    kafka.first[U0] = 0  # from offset 0: nothing lost
    assert reader(kafka).latestOffset(start, ReadAllAvailable())["u"] == {"0": 25}


def test_recreated_topic_is_data_loss_per_option() -> None:
    kafka = FakeKafka()
    strict = reader(kafka, startingOffsets="earliest")
    lenient = reader(kafka, startingOffsets="earliest", failOnDataLoss="false")
    starts = [strict.initialOffset(), lenient.initialOffset()]
    kafka.ids["t"] = "id-2"
    kafka.end = {T0: 7, T1: 9}
    with pytest.raises(DataLossError, match="deleted and recreated"):
        strict.latestOffset(starts[0], ReadAllAvailable())
    end = lenient.latestOffset(starts[1], ReadAllAvailable())
    parts = lenient.partitions({"t": {"0": 100, "1": 300}}, end)
    assert [[(r.partition, r.start, r.end) for r in p.ranges] for p in parts] == [[(0, 0, 7), (1, 0, 9)]]


def test_offsets_going_backwards_in_a_plan() -> None:
    kafka = FakeKafka()
    strict = reader(kafka)
    with pytest.raises(DataLossError, match="went backwards from 100 to 10"):
        strict.partitions({"t": {"0": 100}}, {"t": {"0": 10}})
    lenient = reader(kafka, failOnDataLoss="false")
    [part] = lenient.partitions({"t": {"0": 100}}, {"t": {"0": 10}})
    assert [(r.start, r.end) for r in part.ranges] == [(0, 10)]


def test_small_ranges_share_a_task() -> None:
    """A micro-batch's ranges under ``minRecordsPerPartition`` (10,000 unless given) are one
    task's, in partition order; 1 plans a task per range, as does ``minPartitions``."""
    kafka = FakeKafka()
    start, end = {"t": {"0": 0, "1": 0}}, {"t": {"0": 7, "1": 9}}

    def plan(**options: str) -> list[list[tuple[int, int, int]]]:
        parts = reader(kafka, **options).partitions(start, end)
        return [[(r.partition, r.start, r.end) for r in p.ranges] for p in parts]

    assert plan() == [[(0, 0, 7), (1, 0, 9)]]
    assert plan(minRecordsPerPartition="8") == [[(1, 0, 9)], [(0, 0, 7)]]  # 9 is a task alone
    assert plan(minRecordsPerPartition="7") == [[(0, 0, 7)], [(1, 0, 9)]]
    assert plan(minRecordsPerPartition="1") == [[(0, 0, 7)], [(1, 0, 9)]]
    assert plan(minPartitions="2") == [[(0, 0, 7)], [(1, 0, 9)]]
    assert plan(maxRecordsPerPartition="10") == [[(0, 0, 7)], [(1, 0, 9)]]


def test_vanished_partition() -> None:
    kafka = FakeKafka()
    r = reader(kafka)
    start = r.initialOffset()
    del kafka.end[T1]
    with pytest.raises(DataLossError, match=r"\(t-1\): offsets from 300 on.*partition is gone"):
        r.latestOffset(start, ReadAllAvailable())


def test_executor_copy_carries_no_connection() -> None:
    r = reader(FakeKafka())
    r.initialOffset()
    copy = pickle.loads(pickle.dumps(r))
    assert copy._reader is None and copy.options == r.options
