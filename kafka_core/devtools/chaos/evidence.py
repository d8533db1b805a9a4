"""Whose duplicate is it? The batch headers of both copies of a record, read back from the log.

A record stored at two offsets by an idempotent producer is the client's fault when the copies
carry different producer ids, epochs or sequence numbers (the client sent the records again as new
data). When both copies carry the same producer id, epoch and base sequence, the client retried one
batch as Kafka's protocol requires, and the broker appended it twice: Kafka dedupes such a retry
(the last five batches of each producer), librdkafka's mock cluster does so only for transactional
producers (its ``rd_kafka_mock_validate_records`` returns early without a transactional id).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import BatchInfo, decode_record_batches_columns
from kafka_core.errors import KafkaProtocolError, KafkaTimeoutError
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import FetchRequest

__all__ = ["batch_at", "judge_duplicates", "read_log", "whole_log"]

_FETCH_BY_NAME_MAX_VERSION = 12  # the request names the topic (v13+ would want its id)
_MAX_BYTES = 1 << 20


def read_log(
    client: Any, topic: str, partition: int, offset: int, *, max_bytes: int = _MAX_BYTES
) -> tuple[Any | None, int]:
    """The partition's log from ``offset`` as the broker stores it: read_uncommitted, control
    batches included, no CRC check (the mock cluster writes its COMMIT/ABORT markers with CRC 0).
    Returns the decoded columns (None when nothing came) and the high watermark."""
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=100,  # Tansu answers max_wait_ms=0 with no partitions at all; data returns at once
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )
    response = client.send_to_leader(topic, partition, request, max_version=_FETCH_BY_NAME_MAX_VERSION)
    for t in response.responses:
        for p in t.partitions:
            if p.partition_index != partition:
                continue
            if p.error_code:
                raise error_for(p.error_code, f"Fetch {topic}-{partition} at offset {offset}")
            columns = decode_record_batches_columns(p.records, check_crc=False) if p.records else None
            return columns, p.high_watermark
    return None, -1


def whole_log(
    client: Any,
    topic: str,
    partition: int,
    *,
    until: int | None = None,
    max_bytes: int = _MAX_BYTES,
    patience: int = 50,
) -> Iterator[tuple[BatchInfo, list[bytes | None]]]:
    """Every batch of the partition below ``until`` (default: the end offset ListOffsets gives
    now), control batches included, each with its records' values. The end comes from ListOffsets,
    not from Fetch's high watermark, which on Tansu can lag it. An answer without the partition or
    without a batch before the end is asked again (Tansu leaves a busy partition out of a Fetch
    answer): ``patience`` such answers in a row raise KafkaTimeoutError naming the offset, never a
    short log."""
    if until is None:
        until = client.list_offsets({(topic, partition): -1})[TopicPartition(topic, partition)].offset
    offset, empty = 0, 0
    while True:
        if offset >= until:
            return
        columns, high_watermark = read_log(client, topic, partition, offset, max_bytes=max_bytes)
        if columns is None:
            empty += 1
            if empty >= patience:
                raise KafkaTimeoutError(
                    f"{topic}-{partition}: no batch at offset {offset} in {patience} Fetch answers "
                    f"(high watermark {high_watermark}, reading until {until})"
                )
            continue
        empty = 0
        values = columns.values.to_pylist()
        at = 0
        for batch in columns.batches:
            data, at = values[at : at + batch.record_count], at + batch.record_count
            if batch.last_offset >= offset:
                yield batch, data
                offset = batch.last_offset + 1


def batch_at(client: Any, topic: str, partition: int, offset: int) -> BatchInfo | None:
    """The header of the batch holding ``offset``, fetched from the partition's leader."""
    try:
        columns, _ = read_log(client, topic, partition, offset)
    except KafkaProtocolError:
        return None
    for batch in columns.batches if columns is not None else ():
        if batch.base_offset <= offset <= batch.last_offset:
            return batch
    return None


def judge_duplicates(
    bootstrap: str, topic: str, duplicates: dict[int, list[tuple[int, int]]], limit: int = 200
) -> tuple[list[int], list[dict[str, Any]]]:
    """Split duplicated records into the broker's (same producer id, epoch and base sequence in
    both copies: a retry appended twice) and the rest; returns (broker's seqs, evidence)."""
    from kafka_core.sync_client import KafkaClient

    broker: list[int] = []
    evidence: list[dict[str, Any]] = []
    cache: dict[tuple[int, int], BatchInfo | None] = {}
    with KafkaClient(bootstrap) as client:
        for seq, places in list(duplicates.items())[:limit]:
            headers = []
            for partition, offset in places:
                hit = next(
                    (
                        b
                        for (p, _), b in cache.items()
                        if p == partition and b and b.base_offset <= offset <= b.last_offset
                    ),
                    None,
                )
                if hit is None:
                    hit = cache[(partition, offset)] = batch_at(client, topic, partition, offset)
                headers.append(hit)
            keys = {(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers if h is not None}
            same = len(keys) == 1 and None not in headers and next(iter(keys))[0] >= 0
            if same:
                broker.append(seq)
            if len(evidence) < 50 and (same or len(evidence) < 10):
                evidence.append(
                    {
                        "seq": seq,
                        "copies": [
                            {
                                "partition": p,
                                "offset": o,
                                "batch": None
                                if h is None
                                else {
                                    "base_offset": h.base_offset,
                                    "producer_id": h.producer_id,
                                    "epoch": h.producer_epoch,
                                    "base_sequence": h.base_sequence,
                                },
                            }
                            for (p, o), h in zip(places, headers, strict=True)
                        ],
                        "verdict": "broker" if same else "client",
                    }
                )
    return broker, evidence
