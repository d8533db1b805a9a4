"""failOnDataLoss messages: each names the topic, the partition, the lost offsets, the likely
cause and the option that lets the query go on (no broker, no Spark job)."""

from __future__ import annotations

import logging

import pytest
from prerequisites import need_module

need_module("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from kafka_core.client.metadata import TopicPartition  # noqa: E402
from kafka_core.spark import loss  # noqa: E402
from kafka_core.spark.options import parse_source  # noqa: E402
from kafka_core.spark.planning import DataLossError, OffsetLookups  # noqa: E402
from kafka_core.spark.stream import KafkaStreamReader  # noqa: E402

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
OPTION_HINT = "set 'failOnDataLoss' to 'false'"


def test_lost_offsets_are_said_with_inclusive_bounds() -> None:
    assert loss.lost_offsets(5, 6) == "offset 5"
    assert loss.lost_offsets(0, 5) == "offsets 0 to 4 (5 offsets)"
    assert loss.lost_offsets(100, None) == "offsets from 100 on"


def test_message_names_where_what_why_and_the_option() -> None:
    text = loss.loss_message("orders", 3, loss.lost_offsets(0, 5), loss.retention(5), fail=True)
    assert "topic 'orders' partition 3 (orders-3)" in text
    assert "offsets 0 to 4" in text
    assert "log start offset moved past them (it is now 5)" in text and "DeleteRecords" in text
    assert "retention.ms" in text and OPTION_HINT in text
    lenient = loss.loss_message("orders", 3, loss.lost_offsets(0, 5), loss.retention(5), fail=False)
    assert "failOnDataLoss=false" in lenient and OPTION_HINT not in lenient


class FakeKafka:
    def __init__(self) -> None:
        self.end = {T0: 100, T1: 300}
        self.ids = {"orders": "id-1"}

    def partitions(self) -> list[TopicPartition]:
        return sorted(self.end)

    def topic_ids(self) -> dict[str, str]:
        return dict(self.ids)

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.end[tp] for tp in tps}

    def lookups(self) -> OffsetLookups:
        return OffsetLookups(self.earliest, self.latest, lambda wanted: dict.fromkeys(wanted))

    def close(self) -> None:
        pass


def reader(kafka: FakeKafka, **options: str) -> KafkaStreamReader:
    opts = parse_source(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "orders", "startingOffsets": "earliest", **options},
        streaming=True,
    )
    r = KafkaStreamReader(opts)
    r._reader = kafka
    return r


def test_recreated_topic_names_the_partition_its_offsets_and_the_id_change() -> None:
    kafka = FakeKafka()
    r = reader(kafka)
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    kafka.ids["orders"] = "id-2"
    kafka.end = {T0: 3, T1: 4}
    with pytest.raises(DataLossError) as info:
        r.latestOffset(end, ReadAllAvailable())
    text = str(info.value)
    assert "(orders-0): offsets from 100 on cannot be read" in text
    assert "topic id changed from id-1 to id-2" in text and OPTION_HINT in text


def test_lenient_recreated_topic_warns_per_partition(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafka_core.spark")
    kafka = FakeKafka()
    r = reader(kafka, failOnDataLoss="false")
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    kafka.ids["orders"] = "id-2"
    kafka.end = {T0: 3, T1: 4}
    assert r.latestOffset(end, ReadAllAvailable()) == {"orders": {"0": 3, "1": 4}}
    warnings = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert (
        "(orders-0): offsets from 100 on" in warnings[0] and "(orders-1): offsets from 300 on" in warnings[1]
    )
    assert all("deleted and recreated" in w and "failOnDataLoss=false" in w for w in warnings)


def test_offsets_going_backwards_in_a_stream_plan() -> None:
    r = reader(FakeKafka())
    with pytest.raises(DataLossError) as info:
        r.partitions({"orders": {"1": 300}}, {"orders": {"1": 4}})
    text = str(info.value)
    assert "(orders-1): offsets from 300 on" in text
    assert "went backwards from 300 to 4" in text and "deleted and recreated" in text
    assert OPTION_HINT in text
