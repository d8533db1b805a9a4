"""commitOffsetsToGroup: what the streaming reader commits when, and that a failed commit never
fails the query (a scripted admin client; no broker, no Spark job)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from prerequisites import need_module

need_module("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from kafka_core.admin.results import Result  # noqa: E402
from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition  # noqa: E402
from kafka_core.errors import KafkaConfigError, KafkaConnectionError, KafkaError  # noqa: E402
from kafka_core.protocol.errors import error_for  # noqa: E402
from kafka_core.spark.group_commit import COMMIT_METADATA, GroupCommitter  # noqa: E402
from kafka_core.spark.options import parse_source  # noqa: E402
from kafka_core.spark.planning import OffsetLookups  # noqa: E402
from kafka_core.spark.stream import KafkaStreamReader  # noqa: E402

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
UNKNOWN_MEMBER_ID = 25


class FakeAdmin:
    """Records each alter_group_offsets call; ``fail`` scripts the next answers."""

    instances: list[FakeAdmin] = []

    def __init__(self, **client_options: Any) -> None:
        self.client_options = client_options
        self.calls: list[tuple[str, dict[TopicPartition, OffsetAndMetadata], Any]] = []
        self.raise_next: Exception | None = None
        self.refuse: dict[TopicPartition, KafkaError] = {}
        self.closed = False
        FakeAdmin.instances.append(self)

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, timeout_ms: Any = None
    ) -> dict[TopicPartition, Result[None]]:
        self.calls.append((group_id, dict(offsets), timeout_ms))
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        return {tp: Result(error=self.refuse[tp]) if tp in self.refuse else Result(None) for tp in offsets}

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAdmin.instances = []
    monkeypatch.setattr("kafka_core.admin.sync.KafkaAdmin", FakeAdmin)


def committed_offsets(admin: FakeAdmin) -> list[dict[TopicPartition, int]]:
    return [{tp: om.offset for tp, om in offsets.items()} for _g, offsets, _t in admin.calls]


def test_commits_only_what_changed_with_generation_free_admin_path() -> None:
    c = GroupCommitter("lag-watch", {"bootstrap_servers": "h:1"})
    assert c.commit({T0: 5, T1: 7})
    assert c.commit({T0: 5, T1: 7})  # nothing changed: nothing sent
    assert c.commit({T0: 9, T1: 7})
    [admin] = FakeAdmin.instances
    assert admin.client_options == {"bootstrap_servers": "h:1"}
    assert committed_offsets(admin) == [{T0: 5, T1: 7}, {T0: 9}]
    group, offsets, timeout = admin.calls[0]
    assert group == "lag-watch" and timeout and offsets[T0].metadata == COMMIT_METADATA
    assert c.committed == {T0: 9, T1: 7}


def test_a_failed_commit_warns_once_never_raises_and_is_retried(caplog: pytest.LogCaptureFixture) -> None:
    c = GroupCommitter("lag-watch", {"bootstrap_servers": "h:1"})
    caplog.set_level(logging.WARNING, "kafka_core.spark")
    FakeAdmin.instances.clear()
    c.commit({T0: 1})
    FakeAdmin.instances[0].raise_next = KafkaConnectionError("coordinator unreachable")
    assert not c.commit({T0: 2})
    # the failed client is closed and a new one is made for the retry
    assert FakeAdmin.instances[0].closed
    assert c.commit({T0: 2})
    assert committed_offsets(FakeAdmin.instances[1]) == [{T0: 2}]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'lag-watch'" in warnings[0] and "coordinator unreachable" in warnings[0]
    assert "goes on" in warnings[0]


def test_a_group_with_members_refuses_and_the_warning_says_why(caplog: pytest.LogCaptureFixture) -> None:
    c = GroupCommitter("busy", {"bootstrap_servers": "h:1"})
    caplog.set_level(logging.WARNING, "kafka_core.spark")
    c.commit({})
    assert not FakeAdmin.instances  # nothing to commit: no client made
    c.commit({T0: 1, T1: 1})
    admin = FakeAdmin.instances[0]
    admin.refuse = {T1: error_for(UNKNOWN_MEMBER_ID, "committing t-1 for group 'busy'")}
    assert not c.commit({T0: 3, T1: 3})
    assert not c.commit({T0: 3, T1: 3})  # the same failure again: no second warning
    assert c.committed == {T0: 3, T1: 1}
    assert committed_offsets(admin)[-1] == {T1: 3}  # T0 went through and is not resent
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "t-1" in warnings[0] and "UNKNOWN_MEMBER_ID" in warnings[0] and "active members" in warnings[0]


# -- the streaming reader ----------------------------------------------------------------------


class FakeKafka:
    def __init__(self) -> None:
        self.end = {T0: 100, T1: 300}

    def partitions(self) -> list[TopicPartition]:
        return sorted(self.end)

    def topic_ids(self) -> dict[str, str]:
        return {"t": "id-1"}

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.end[tp] for tp in tps}

    def lookups(self) -> OffsetLookups:
        return OffsetLookups(self.earliest, self.latest, lambda wanted: dict.fromkeys(wanted))

    def close(self) -> None:
        pass


def reader(**options: str) -> KafkaStreamReader:
    opts = parse_source(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": "earliest", **options},
        streaming=True,
    )
    r = KafkaStreamReader(opts)
    r._reader = FakeKafka()
    return r


def test_stream_commits_each_finished_batch_end_when_the_next_is_planned() -> None:
    r = reader(commitOffsetsToGroup="lag-watch", maxOffsetsPerTrigger="100")
    start = r.initialOffset()
    end1 = r.latestOffset(start, ReadAllAvailable())  # batch 0 planned from the start
    end2 = r.latestOffset(end1, ReadAllAvailable())  # batch 0 ran: its end is processed
    r.commit(end1)  # Spark's own (late) commit of batch 0: nothing new to send
    [admin] = FakeAdmin.instances
    assert committed_offsets(admin) == [{T0: 0, T1: 0}, {T0: 100, T1: 300}]
    assert end2 == end1
    r.commit({"t": {"0": 100, "1": 301}})  # commit() alone also reaches the group
    assert committed_offsets(admin)[-1] == {T1: 301}
    r.stop()
    assert admin.closed


def test_stream_commits_nothing_without_the_option() -> None:
    r = reader()
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    r.latestOffset(end, ReadAllAvailable())
    r.commit(end)
    assert not FakeAdmin.instances


def test_option_is_streaming_only_and_needs_a_group_id() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_source({**base, "commitOffsetsToGroup": " g "}, streaming=True).commit_group == "g"
    assert parse_source(base, streaming=True).commit_group is None
    with pytest.raises(KafkaConfigError, match="'commitOffsetsToGroup' is for streaming queries"):
        parse_source({**base, "commitOffsetsToGroup": "g"}, streaming=False)
    with pytest.raises(KafkaConfigError, match="'commitOffsetsToGroup' is empty"):
        parse_source({**base, "commitoffsetstogroup": " "}, streaming=True)
