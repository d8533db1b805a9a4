"""chaos.evidence.whole_log: reads to the end ListOffsets gives; a short or missing Fetch answer,
or one whose high watermark lags that end, is asked again, never taken for the log's end (Tansu
leaves a busy partition out of its answer, and its Fetch high watermark can lag)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_core import codec as K
from kafka_core.client.metadata import TopicPartition
from kafka_core.devtools.chaos.evidence import whole_log
from kafka_core.errors import KafkaTimeoutError

TOPIC = "t"


def _answer(records: bytes | None, high_watermark: int, *, partition_present: bool = True) -> Any:
    partitions = (
        [SimpleNamespace(partition_index=0, error_code=0, records=records, high_watermark=high_watermark)]
        if partition_present
        else []
    )
    return SimpleNamespace(responses=[SimpleNamespace(partitions=partitions)])


class _Client:
    """Answers each Fetch from a script; records the offsets asked for."""

    def __init__(self, answers: list[Any], end: int) -> None:
        self.answers, self.asked, self.end = answers, [], end

    def list_offsets(self, timestamps: dict[tuple[str, int], int]) -> dict[Any, Any]:
        assert timestamps == {(TOPIC, 0): -1}
        return {TopicPartition(TOPIC, 0): SimpleNamespace(offset=self.end)}

    def send_to_leader(self, topic: str, partition: int, request: Any, max_version: int) -> Any:
        self.asked.append(request.topics[0].partitions[0].fetch_offset)
        return self.answers.pop(0)


def _batch(base: int, values: list[bytes]) -> bytes:
    return bytes(K.encode_record_batch([(None, v) for v in values], base_offset=base))


def test_a_missing_empty_or_lagging_answer_before_the_end_is_asked_again() -> None:
    client = _Client(
        [
            _answer(_batch(0, [b"a", b"b"]), 5),
            _answer(None, -1, partition_present=False),  # Tansu, busy
            _answer(None, 2),  # a high watermark lagging ListOffsets' end
            _answer(_batch(2, [b"c", b"d", b"e"]), 5),
        ],
        end=5,
    )
    got = [(b.base_offset, values) for b, values in whole_log(client, TOPIC, 0)]
    assert got == [(0, [b"a", b"b"]), (2, [b"c", b"d", b"e"])]
    assert client.asked == [0, 2, 2, 2]  # and none at 5: the end


def test_no_batch_for_patience_answers_raises_naming_the_offset() -> None:
    client = _Client([_answer(_batch(0, [b"a"]), 1)] + [_answer(None, 1)] * 4, end=3)
    with pytest.raises(
        KafkaTimeoutError,
        match=r"t-0: no batch at offset 1 in 4 Fetch answers \(high watermark 1, reading until 3\)",
    ):
        list(whole_log(client, TOPIC, 0, patience=4))


def test_an_empty_log_ends_at_once() -> None:
    client = _Client([], end=0)
    assert list(whole_log(client, TOPIC, 0)) == []
    assert client.asked == []
