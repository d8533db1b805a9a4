"""Options of Spark's connector that this source takes or refuses: each one either does what the
connector does with it or fails the query at once, naming it and why (none accepted and ignored)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.spark.offsets import OffsetReader, transient
from kafka_core.spark.options import parse_source

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
T0 = TopicPartition("t", 0)


def test_fetch_offset_options_parsed_with_the_connectors_defaults() -> None:
    default = parse_source(BOOT, streaming=True)
    assert (default.fetch_offset_attempts, default.fetch_offset_interval_ms) == (3, 1000)
    opts = parse_source(
        {**BOOT, "fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "0"}, streaming=False
    )
    assert (opts.fetch_offset_attempts, opts.fetch_offset_interval_ms) == (5, 0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fetchOffset.numRetries": "0"}, "'fetchOffset.numRetries' must be at least 1"),
        ({"fetchOffset.numRetries": "three"}, "'fetchOffset.numRetries' must be an integer"),
        ({"fetchOffset.retryIntervalMs": "-1"}, "'fetchOffset.retryIntervalMs' must be at least 0"),
        ({"groupIdPrefix": "team-a"}, "option 'groupIdPrefix' is not supported"),
        ({"kafka.group.id": "g"}, "'kafka.group.id' ('g') is not supported without 'commitOffsetsToGroup'"),
        ({"kafka.session.timeout.ms": "6000"}, "'kafka.session.timeout.ms' is not supported"),
        ({"kafka.heartbeat.interval.ms": "100"}, "'kafka.heartbeat.interval.ms' is not supported"),
        ({"kafka.max.poll.interval.ms": "100"}, "'kafka.max.poll.interval.ms' is not supported"),
        ({"kafka.auto.commit.interval.ms": "100"}, "'kafka.auto.commit.interval.ms' is not supported"),
        ({"kafka.group.instance.id": "i"}, "'kafka.group.instance.id' is not supported"),
        ({"kafka.group.protocol": "consumer"}, "'kafka.group.protocol' is not supported"),
        ({"kafka.client.rack": "r1"}, "no KIP-392 follower fetching"),
    ],
)
def test_refused_by_name_with_the_reason(options: dict[str, str], message: str) -> None:
    for streaming in (True, False):
        with pytest.raises(KafkaConfigError) as info:
            parse_source({**BOOT, **options}, streaming=streaming)
        assert message in str(info.value)
        assert "joins no" in str(info.value) or "must be" in str(info.value)


def test_kafka_group_id_names_the_commit_group() -> None:
    opts = parse_source({**BOOT, "kafka.group.id": "lag", "commitOffsetsToGroup": "lag"}, streaming=True)
    assert opts.commit_group == "lag" and "group_id" not in opts.consumer
    with pytest.raises(KafkaConfigError, match="name different groups"):
        parse_source({**BOOT, "kafka.group.id": "a", "commitOffsetsToGroup": "b"}, streaming=True)


def test_max_poll_records_reaches_the_tasks_consumer() -> None:
    opts = parse_source({**BOOT, "kafka.max.poll.records": "500"}, streaming=False)
    assert opts.consumer["max_poll_records"] == 500
    assert opts.client["client_id"] == "spark-kafka-source-kafka_core"


def test_transient_failures() -> None:
    assert transient(KafkaConnectionError("dropped"))
    assert transient(KafkaTimeoutError("slow"))
    assert transient(KafkaProtocolError(6, "NOT_LEADER_OR_FOLLOWER", True))
    assert not transient(KafkaProtocolError(29, "TOPIC_AUTHORIZATION_FAILED", False))
    assert not transient(KafkaAuthenticationError("bad password"))
    assert not transient(KafkaConfigError("bad option"))


class FlakyConsumer:
    """Fails the first ``failures`` calls with ``error``, then answers."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return dict.fromkeys(tps, 42)


def _reader(consumer: FlakyConsumer, **options: str) -> tuple[OffsetReader, list[str]]:
    """An offset reader on ``consumer``; ``events`` records its connection's closes."""
    reader = OffsetReader(
        parse_source({**BOOT, "fetchOffset.retryIntervalMs": "0", **options}, streaming=True)
    )
    events: list[str] = []

    def fake_open() -> tuple[Any, Any]:
        return object(), consumer

    def fake_close() -> None:
        events.append("close")  # the next attempt opens a new connection

    reader._open = fake_open  # type: ignore[method-assign]
    reader.close = fake_close  # type: ignore[method-assign]
    return reader, events


def test_offset_lookups_are_retried_on_a_new_connection(caplog: pytest.LogCaptureFixture) -> None:
    consumer = FlakyConsumer(2, KafkaConnectionError("connection to b1:9092 dropped"))
    reader, events = _reader(consumer)
    with caplog.at_level(logging.WARNING, logger="kafka_core.spark"):
        assert reader.latest([T0]) == {T0: 42}
    assert consumer.calls == 3 and events == ["close", "close"]  # the third attempt's is kept
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and "attempt 1 of 3" in warnings[0] and "b1:9092 dropped" in warnings[0]


def test_the_last_failure_is_raised_after_num_retries() -> None:
    consumer = FlakyConsumer(10, KafkaTimeoutError("ListOffsets timed out"))
    reader, _ = _reader(consumer, **{"fetchOffset.numRetries": "4"})
    with pytest.raises(KafkaTimeoutError, match="timed out") as info:
        reader.latest([T0])
    assert consumer.calls == 4
    assert "failed 4 times (option 'fetchOffset.numRetries')" in "".join(info.value.__notes__)


def test_final_errors_are_not_retried() -> None:
    consumer = FlakyConsumer(10, KafkaProtocolError(29, "TOPIC_AUTHORIZATION_FAILED", False))
    reader, _ = _reader(consumer)
    with pytest.raises(KafkaProtocolError, match="TOPIC_AUTHORIZATION_FAILED") as info:
        reader.latest([T0])
    assert consumer.calls == 1 and not getattr(info.value, "__notes__", None)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("startingOffset", "did you mean 'startingOffsets'"),
        ("maxOffsetPerTrigger", "did you mean 'maxOffsetsPerTrigger'"),
        ("failOnDataloss", None),  # names are case-insensitive, as Spark's
        ("subscribePatern", "did you mean 'subscribePattern'"),
        ("maxFilesPerTrigger", "did you mean 'maxOffsetsPerTrigger'"),
        ("zzz", "docs/spark.md, 'Source options'"),
    ],
)
def test_an_unknown_option_is_refused_with_the_closest_names(name: str, hint: str | None) -> None:
    """Spark's connector ignores an option it does not know: a misspelt startingOffsets would
    read from the default offsets. Here the read fails at once, naming it."""
    if hint is None:
        assert not parse_source({**BOOT, name: "false"}, streaming=True).fail_on_data_loss
        return
    with pytest.raises(KafkaConfigError) as info:
        parse_source({**BOOT, name: "1"}, streaming=True)
    assert f"option {name!r} is not an option of the kafka_core source" in str(info.value)
    assert hint in str(info.value)
