"""``topics watch`` without a broker: produce rates per partition, the busiest first, plain and
JSON frames, and the loop's exits through main() with an admin double."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kafka_core.admin import PartitionDescription, Result, TopicDescription
from kafka_core.cli import main, watch
from kafka_core.cli.lagrates import PartitionRates
from kafka_core.cli.topicwatch import TopicFrame, topic_frame_json, topic_frame_text
from kafka_core.client.metadata import ListedOffset, TopicPartition
from kafka_core.protocol.errors import ErrorCode, error_for


class FakeAdmin:
    """Each refresh's end offsets from a script (a list of ``{partition: end}``); None: the
    topic does not exist."""

    def __init__(self, script: list[dict[int, int] | None]) -> None:
        self.script = script
        self.reads = 0

    def describe_topics(self, names: list[str], timeout_ms: float | None = None) -> dict[str, Any]:
        step = self.script[min(self.reads, len(self.script) - 1)]
        if step is None:
            return {names[0]: Result(error=error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, names[0]))}
        parts = [PartitionDescription(p, p % 2 + 1, (1, 2), (1, 2)) for p in step]
        return {names[0]: Result(TopicDescription(names[0], None, False, parts))}

    def list_offsets(
        self, specs: dict[TopicPartition, str], timeout_ms: float | None = None
    ) -> dict[Any, Any]:
        step = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        assert step is not None and set(specs.values()) == {"latest"}
        return {tp: Result(ListedOffset(step[tp.partition])) for tp in specs}

    def close(self) -> None:
        pass


def watch_topic(monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin, *extra: str) -> int:
    monkeypatch.setattr(watch, "open_admin", lambda args: admin)
    return main(["topics", "watch", "orders", "--interval", "1", *extra])


def test_produce_rates_per_partition_busiest_first(
    monkeypatch: pytest.MonkeyPatch, clock: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    clock[0] = 4
    script: list[dict[int, int] | None] = [
        {0: 100, 1: 100, 2: 100},
        {0: 110, 1: 300, 2: 100},
        {0: 120, 1: 500, 2: 100, 3: 0},  # a partition added while watching
        {0: 130, 1: 700, 2: 100, 3: 40},
    ]
    code = watch_topic(monkeypatch, FakeAdmin(script), "--json", "--top", "3")
    assert code == 0
    frames = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["refresh"] for f in frames] == [1, 2, 3, 4]
    assert frames[0]["total"]["produced_per_s"] is None
    assert [p["partition"] for p in frames[0]["partitions"]] == [0, 1, 2]  # no rates yet: in order
    assert frames[1]["total"]["produced_per_s"] == 210.0
    assert [p["partition"] for p in frames[1]["partitions"]] == [1, 0, 2]
    last = frames[3]
    assert last["partition_count"] == 4 and len(last["partitions"]) == 3
    assert [(p["partition"], p["produced_per_s"]) for p in last["partitions"]] == [
        (1, 200.0),  # 100 -> 700 over 3 s
        (3, 40.0),  # 0 -> 40 since it appeared, 1 s
        (0, 10.0),
    ]
    assert last["partitions"][0]["leader"] == 2 and last["partitions"][0]["end"] == 700


def test_a_topic_that_does_not_exist_is_exit_4(
    monkeypatch: pytest.MonkeyPatch, clock: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert watch_topic(monkeypatch, FakeAdmin([None])) == 4
    assert capsys.readouterr().err.strip() == "kafka-core topics watch: error: topic 'orders' does not exist"


def test_a_topic_deleted_while_watching_is_shown_and_the_watch_goes_on(
    monkeypatch: pytest.MonkeyPatch, clock: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    code = watch_topic(monkeypatch, FakeAdmin([{0: 5}, None]))
    out = capsys.readouterr().out
    assert code == 0
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 3 and "\x1b" not in out
    assert blocks[2].splitlines()[-1] == "refresh failed: topic 'orders' does not exist"


def test_plain_block() -> None:
    rows = (
        PartitionRates("orders", 1, None, 700, None, None, None, 200.0),
        PartitionRates("orders", 0, None, 130, None, None, None, 7.5),
    )
    frame = TopicFrame(
        "orders", datetime(2026, 12, 2, 11, 0, 1, tzinfo=UTC), 4, 2.0, 6.0, 3, 207.5, rows, {0: 1, 1: 2}
    )
    lines = topic_frame_text(frame).splitlines()
    assert lines[0] == "orders  [11:00:01 UTC, every 2 s]"
    assert lines[1] == "3 partitions; produced 208/s over the last 6 s; top 2 by produce rate"
    assert [line.split() for line in lines[2:]] == [
        ["partition", "leader", "end", "produced/s"],
        ["---------", "------", "---", "----------"],
        ["1", "2", "700", "200"],
        ["0", "1", "130", "7.5"],
    ]
    assert topic_frame_json(frame)["partitions"][1] == {
        "partition": 0,
        "leader": 1,
        "end": 130,
        "produced_per_s": 7.5,
    }
