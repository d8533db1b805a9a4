"""The share consumer's pieces without a broker: acknowledgement types, acknowledgement ranges,
the acknowledgement book (explicit and implicit mode, bad input changing nothing), chunks
(only acquired offsets handed over, delivery counts, gaps, the columnar path) and from_config."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prerequisites import need_module

import kafka_core
import kafka_core.aio
from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import KafkaRecord, encode_record_batch
from kafka_core.errors import KafkaConfigError
from kafka_core.share import AcknowledgeType, KafkaAcknowledgementError, ShareRecord
from kafka_core.share.acks import AckBook
from kafka_core.share.fetch import Chunk
from kafka_core.share.options import share_keywords
from kafka_core.share.records import AcknowledgeMode, ack_ranges

TP = TopicPartition("t", 0)


def test_exports_and_acknowledge_type_parsing() -> None:
    assert kafka_core.AcknowledgeType is AcknowledgeType
    assert kafka_core.KafkaShareConsumer.__name__ == "KafkaShareConsumer"
    assert kafka_core.aio.KafkaShareConsumer.__module__ == "kafka_core.share.consumer"
    assert [int(t) for t in AcknowledgeType] == [1, 2, 3, 4]  # 4: RENEW (KIP-1222)
    assert AcknowledgeType.parse("renew") is AcknowledgeType.RENEW
    assert AcknowledgeType.parse("accept") is AcknowledgeType.ACCEPT
    assert AcknowledgeType.parse(" Release ") is AcknowledgeType.RELEASE
    assert AcknowledgeType.parse(3) is AcknowledgeType.REJECT
    for bad in ("renewal", 0, 5, True, None, 1.0):
        with pytest.raises(KafkaConfigError, match="acknowledgement type"):
            AcknowledgeType.parse(bad)
    with pytest.raises(KafkaConfigError, match="implicit' or 'explicit"):
        AcknowledgeMode.parse("auto")


def test_ack_ranges_merge_runs_of_one_type() -> None:
    assert ack_ranges({}) == []
    assert ack_ranges({5: 1, 3: 1, 4: 1}) == [(3, 5, 1)]
    assert ack_ranges({1: 1, 2: 2, 3: 2, 5: 2, 6: 0}) == [(1, 1, 1), (2, 3, 2), (5, 5, 2), (6, 6, 0)]


def _rec(offset: int, count: int = 1) -> ShareRecord:
    return ShareRecord("t", 0, offset, value=b"v", delivery_count=count)


def _book(mode: AcknowledgeMode, offsets: list[int], counts: int = 1) -> AckBook:
    book = AckBook(mode)
    book.delivered_records(TP, [_rec(o, counts) for o in offsets], 30_000)
    return book


def run(fn: Any) -> Any:
    async def main() -> Any:
        return fn()

    return asyncio.run(main())


def test_explicit_book_refuses_twice_never_and_unacknowledged_polls() -> None:
    def body() -> None:
        book = _book(AcknowledgeMode.EXPLICIT, [0, 1, 2])
        with pytest.raises(KafkaAcknowledgementError, match=r"3 record.*not acknowledged"):
            book.settle_before_poll()
        book.acknowledge("t", 0, 0, AcknowledgeType.ACCEPT)
        with pytest.raises(KafkaAcknowledgementError, match="already acknowledged"):
            book.acknowledge("t", 0, 0, AcknowledgeType.REJECT)
        with pytest.raises(KafkaAcknowledgementError, match="not delivered to this consumer"):
            book.acknowledge("t", 0, 99, AcknowledgeType.ACCEPT)
        with pytest.raises(KafkaAcknowledgementError, match="not delivered"):
            book.acknowledge("other", 0, 1, AcknowledgeType.ACCEPT)
        # a batch with one bad key changes nothing
        with pytest.raises(KafkaAcknowledgementError):
            book.acknowledge_many([("t", 0, 1), ("t", 0, 0)], AcknowledgeType.RELEASE)
        with pytest.raises(KafkaAcknowledgementError, match="twice"):
            book.acknowledge_many([("t", 0, 1), ("t", 0, 1)], AcknowledgeType.RELEASE)
        assert book.delivered == {TP: {1: 1, 2: 1}}
        book.acknowledge_many([("t", 0, 1), ("t", 0, 2)], AcknowledgeType.RELEASE)
        book.settle_before_poll()  # all acknowledged: polling is fine
        assert {tp: a.as_dict() for tp, a in book.take_pending(None).items()} == {TP: {0: 1, 1: 2, 2: 2}}
        snap = book.snapshot()
        assert (snap["records_accepted"], snap["records_released"], snap["records_rejected"]) == (1, 2, 0)

    run(body)


def test_implicit_book_accepts_at_the_next_poll_and_refuses_acknowledge() -> None:
    def body() -> None:
        book = _book(AcknowledgeMode.IMPLICIT, [4, 5], counts=2)
        with pytest.raises(KafkaAcknowledgementError, match="explicit"):
            book.acknowledge("t", 0, 4, AcknowledgeType.ACCEPT)
        book.settle_before_poll()
        assert {tp: a.as_dict() for tp, a in book.take_pending({TP}).items()} == {TP: {4: 1, 5: 1}}
        book.acquired([Chunk(TP, None, [(4, 5, 2), (6, 6, 1)], 0.0, 30.0)])
        snap = book.snapshot()
        assert (snap["records_acquired"], snap["records_redelivered"]) == (3, 2)

    run(body)


def test_explicit_close_releases_what_was_not_acknowledged() -> None:
    def body() -> None:
        book = _book(AcknowledgeMode.EXPLICIT, [0, 1])
        book.acknowledge("t", 0, 1, AcknowledgeType.REJECT)
        book.settle_for_close()
        assert {tp: a.as_dict() for tp, a in book.take_pending(None).items()} == {TP: {0: 2, 1: 3}}

    run(body)


def _batch(offsets: list[int]) -> bytes:
    recs = [
        KafkaRecord(key=None, value=f"v{o}".encode(), headers=[], timestamp=0, offset=o - offsets[0])
        for o in offsets
    ]
    return bytes(encode_record_batch(recs, base_offset=offsets[0]))


def test_chunk_hands_over_only_acquired_offsets_with_their_counts() -> None:
    data = _batch([10, 11, 12, 13, 14])
    chunk = Chunk(TP, memoryview(data), [(11, 12, 3), (14, 15, 1)], 0.0, 30.0)
    first = chunk.take(2)
    assert [(r.offset, r.delivery_count, r.value) for r in first] == [(11, 3, b"v11"), (12, 3, b"v12")]
    assert not chunk.exhausted
    rest = chunk.take(None)
    assert [(r.offset, r.delivery_count) for r in rest] == [(14, 1)]
    assert chunk.exhausted
    assert chunk.gaps == [15]  # acquired, but no record: acknowledged as a gap


def test_chunk_columns_carry_delivery_count_and_undelivered_rows() -> None:
    need_module("pyarrow")
    data = _batch([0, 1, 2, 3])
    chunk = Chunk(TP, data, [(1, 3, 2)], 0.0, 30.0)
    table = chunk.take_columns(2)
    assert table.column_names[:3] == ["topic", "partition", "offset"]
    assert table.column("delivery_count").to_pylist() == [2, 2]
    assert table.column("offset").to_pylist() == [1, 2]
    assert chunk.undelivered() == [3]
    tail = chunk.take(None)  # the rest as objects, from the same rows
    assert [r.offset for r in tail] == [3]


def test_from_config_maps_java_names_and_refuses_consumer_group_ones() -> None:
    kw = share_keywords(
        {
            "bootstrap.servers": "h:1",
            "group.id": "g",
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": "7",
            "client.id": "me",
        },
        {"topics": ["t"]},
    )
    assert kw == {
        "bootstrap_servers": "h:1",
        "group_id": "g",
        "share_acknowledgement_mode": "explicit",
        "max_poll_records": 7,
        "client_id": "me",
        "topics": ["t"],
    }
    with pytest.raises(KafkaConfigError, match=r"share\.auto\.offset\.reset"):
        share_keywords({"auto.offset.reset": "earliest"}, {})
    with pytest.raises(KafkaConfigError, match=r"max\.poll\.records"):
        share_keywords({"max.poll.records": "many"}, {})
    with pytest.raises(KafkaConfigError, match="unknown"):
        share_keywords({"no.such.option": "1"}, {})


def test_pending_acknowledgements_keep_ranges_and_merge_them() -> None:
    from kafka_core.share.records import Acks

    acks = Acks()
    assert not acks and acks.ranges() == []
    assert acks.add_range(10, 19, 1) == 10
    assert acks.add_range(0, 9, 1) == 10
    assert acks.add_range(20, 20, 2) == 1
    assert acks.ranges() == [(0, 19, 1), (20, 20, 2)]  # sorted, one type merged
    offsets = acks.keys()
    assert len(acks) == 21 and 5 in offsets and 21 not in offsets
    assert acks.add({21: 0, 23: 3}) == 2  # a gap and a single reject
    assert acks.ranges() == [(0, 19, 1), (20, 20, 2), (21, 21, 0), (23, 23, 3)]
    assert set(acks.keys()) == set(range(22)) | {23}


def test_implicit_book_accepts_a_whole_poll_as_one_range() -> None:
    def body() -> None:
        book = _book(AcknowledgeMode.IMPLICIT, list(range(100, 600)))
        assert book.snapshot()["records_awaiting_acknowledgement"] == 500
        book.settle_before_poll()
        pending = book.take_pending(None)
        assert pending[TP].runs == [(100, 599, 1)] and not pending[TP].offsets
        assert book.snapshot()["records_accepted"] == 500
        assert book.unacknowledged_after_send() == 0

    run(body)


def test_share_records_are_one_codec_object_each_and_pickle() -> None:
    from kafka_core.codec import KafkaShareRecord
    from kafka_core.share.records import deserialize, share_records

    buf = bytes(encode_record_batch([(b"k%d" % i, b"%d" % i) for i in range(6)], base_offset=10))
    recs = share_records("t", 0, buf, [(11, 12, 2), (15, 15, 1)])
    assert [(r.offset, r.delivery_count, r.value) for r in recs] == [
        (11, 2, b"1"),
        (12, 2, b"2"),
        (15, 1, b"5"),
    ]
    assert all(type(r) is ShareRecord and isinstance(r, KafkaShareRecord) for r in recs)
    assert recs[0].topic_partition == TP and len(set(recs)) == 3
    assert share_records("t", 0, None, [(0, 5, 1)]) == []
    ints = deserialize(recs, None, int)
    assert [(r.offset, r.key, r.value, r.delivery_count) for r in ints] == [
        (11, b"k1", 1, 2),
        (12, b"k2", 2, 2),
        (15, b"k5", 5, 1),
    ]
    import pickle

    back = pickle.loads(pickle.dumps(ints[2]))
    assert (back.offset, back.key, back.value, back.delivery_count, back.topic) == (15, b"k5", 5, 1, "t")
    again = pickle.loads(pickle.dumps(recs[1]))
    assert type(again) is ShareRecord and (again.offset, again.value) == (12, b"2")
