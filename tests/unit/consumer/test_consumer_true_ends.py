"""End offsets checked against the last batch (a broker such as Tansu answers ListOffsets latest
with the last batch's base offset + 1): one probing Fetch per leader for every partition, read
from batch headers alone, not one Fetch per partition (a wide topic's ends in one round trip)."""

from __future__ import annotations

from typing import Any

from fakes.consumer_client import FakeClient, FakeLog
from fakes.consumer_helpers import T, new, run

from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import encode_record_batch
from kafka_core.consumer.fetch.results import last_offset_at

PARTITIONS = 200


class BaseOffsetBroker(FakeClient):
    """Answers ListOffsets latest with the last batch's base offset + 1, as Tansu does, and cuts
    each partition's Fetch data at the partition_max_bytes asked (all but the first partition,
    as Apache Kafka does)."""

    def listed_end(self, log: FakeLog) -> int:
        return log.batches[-1][0] + 1 if log.batches else log.end

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        resp = await super().send(node, body, version, **kw)
        limits = [p.partition_max_bytes for t in body.topics for p in t.partitions]
        first = True
        for t in resp.responses:
            for p, limit in zip(t.partitions, limits, strict=False):
                if p.records and not first:
                    p.records = bytes(p.records)[:limit]
                first = first and not p.records
        return resp


def _fill(client: FakeClient, partition: int, last_batch: int) -> None:
    """Two batches of 10 records, then one of ``last_batch``; 200-byte values, so each batch is
    larger than a probe's partition_max_bytes and comes cut short."""
    log = client.log(T, partition)
    for n in (10, 10, last_batch):
        log.append([(None, b"x" * 200, []) for _ in range(n)])


def test_end_offsets_of_many_partitions_take_one_probe_not_one_each() -> None:
    client = BaseOffsetBroker({T: PARTITIONS})
    for p in range(PARTITIONS):
        _fill(client, p, 5 + p % 7)

    async def main() -> dict[TopicPartition, int]:
        c = new(client)
        try:
            return await c.end_offsets([TopicPartition(T, p) for p in range(PARTITIONS)])
        finally:
            await c.close()

    ends = run(main())
    assert ends == {TopicPartition(T, p): 25 + p % 7 for p in range(PARTITIONS)}
    assert len(client.fetch_requests) == 1  # one leader: one probe for all its partitions
    asked = [p.partition_max_bytes for t in client.fetch_bodies[0].topics for p in t.partitions]
    assert len(asked) == PARTITIONS and max(asked) < 2_000  # each batch came cut short


def test_a_partition_whose_probe_fails_keeps_its_listed_offset() -> None:
    client = BaseOffsetBroker({T: 2})
    _fill(client, 0, 5)  # partition 1 is empty: listed 0, never probed
    tp0, tp1 = TopicPartition(T, 0), TopicPartition(T, 1)

    async def main() -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        c = new(client)
        try:
            client.fail_fetches = 1  # the probe's connection drops
            failed = await c.end_offsets([tp0, tp1])
            return failed, await c.end_offsets([tp0])
        finally:
            await c.close()

    failed, again = run(main())
    assert failed == {tp0: 21, tp1: 0}  # the listed offset (the last batch's base + 1)
    assert again == {tp0: 25}


def test_last_offset_at_reads_headers_even_of_a_batch_cut_short() -> None:
    first = bytes(encode_record_batch([(None, b"v%d" % i, []) for i in range(10)], base_offset=100))
    second = bytes(encode_record_batch([(None, b"w%d" % i, []) for i in range(5)], base_offset=110))
    data = first + second
    assert last_offset_at(data, 100) == 109
    assert last_offset_at(data, 112) == 114
    assert last_offset_at(data[: len(first) + 27], 112) == 114  # the second's header only
    assert last_offset_at(data[: len(first) + 26], 112) is None  # too short to tell
    assert last_offset_at(data, 99) is None and last_offset_at(data, 115) is None
    assert last_offset_at(b"", 0) is None
    assert last_offset_at(b"\x00" * 8 + b"\xff\xff\xff\xff" + b"\x00" * 20, 0) is None  # a negative length
