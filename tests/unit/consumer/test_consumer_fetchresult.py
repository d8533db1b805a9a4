"""One partition's fetch data: filtering below the position, control records, aborted transactions."""

from __future__ import annotations

import struct

import pytest
from prerequisites import need_module

from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import encode_record_batch
from kafka_core.consumer.fetch.results import PartitionFetch, aborted_ranges, scan_batches
from kafka_core.errors import KafkaCodecError

TP = TopicPartition("t", 0)


def batch(base: int, n: int, **kw) -> bytes:
    return bytes(encode_record_batch([(None, b"v%d" % (base + i)) for i in range(n)], base_offset=base, **kw))


def marker(base: int, pid: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return bytes(
        encode_record_batch(
            [(key, value)],
            base_offset=base,
            producer_id=pid,
            producer_epoch=0,
            transactional=True,
            control=True,
        )
    )


def txn(base: int, n: int, pid: int) -> bytes:
    return batch(base, n, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)


def offsets(pf: PartitionFetch) -> list[int]:
    return [m.offset for m in pf.messages(None)]


def column_offsets(pf: PartitionFetch) -> list[int]:
    b = pf.columns(None)
    return [] if b is None else b.column("offset").to_pylist()


def test_scan_batches_and_partial_tail():
    data = batch(0, 3) + batch(3, 2)
    heads = scan_batches(data + batch(5, 4)[:30])
    assert [(h.base_offset, h.last_offset) for h in heads] == [(0, 2), (3, 4)]


def test_drops_below_position_and_sets_next_offset():
    pf = PartitionFetch(TP, 2, batch(0, 3) + batch(3, 2))
    assert offsets(pf) == [2, 3, 4]
    assert pf.exhausted and pf.position_after() == 5


def test_columns_drop_below_position():
    pf = PartitionFetch(TP, 4, batch(0, 3) + batch(3, 2))
    assert column_offsets(pf) == [4]


def test_partial_take_positions():
    pf = PartitionFetch(TP, 0, batch(0, 5))
    assert [m.offset for m in pf.messages(2)] == [0, 1]
    assert pf.position_after() == 2 and not pf.exhausted
    assert [m.offset for m in pf.messages(10)] == [2, 3, 4]
    assert pf.position_after() == 5


def test_control_records_skipped_and_position_moves_past_marker():
    data = txn(0, 2, pid=7) + marker(2, 7, commit=True)
    pf = PartitionFetch(TP, 0, data)
    assert offsets(pf) == [0, 1] and pf.position_after() == 3
    pf = PartitionFetch(TP, 0, data)
    assert column_offsets(pf) == [0, 1]


def test_read_committed_drops_aborted_transactions():
    data = (
        txn(0, 2, pid=7)
        + batch(2, 1)
        + txn(3, 2, pid=8)
        + marker(5, 7, commit=False)
        + marker(6, 8, commit=True)
    )
    data += txn(7, 1, pid=7) + marker(8, 7, commit=True)
    aborted = [(7, 0)]
    pf = PartitionFetch(TP, 0, data, aborted=aborted, read_committed=True)
    assert offsets(pf) == [2, 3, 4, 7]
    pf = PartitionFetch(TP, 0, data, aborted=aborted, read_committed=True)
    assert column_offsets(pf) == [2, 3, 4, 7]
    # read_uncommitted sees everything but the markers
    assert offsets(PartitionFetch(TP, 0, data, aborted=aborted)) == [0, 1, 2, 3, 4, 7]


def test_aborted_ranges_ignore_other_producers():
    heads = scan_batches(txn(0, 2, pid=1) + txn(2, 2, pid=2) + marker(4, 1, commit=False))
    assert aborted_ranges(heads, [(1, 0)]) == [(0, 1)]
    assert aborted_ranges(heads, []) == []


def test_corrupt_batch_delivers_what_precedes_then_errors():
    bad = bytearray(batch(3, 3))
    bad[-2] ^= 0x55
    pf = PartitionFetch(TP, 1, batch(0, 3) + bytes(bad) + batch(6, 2))
    assert offsets(pf) == [1, 2]
    assert pf.exhausted and pf.position_after() == 3
    err = pf.take_error()
    assert isinstance(err, KafkaCodecError)
    assert (err.topic, err.partition, err.offset, err.last_offset) == ("t", 0, 3, 5)


def test_corrupt_batch_skipped_once_position_is_past_it():
    bad = bytearray(batch(3, 3))
    bad[-2] ^= 0x55
    pf = PartitionFetch(TP, 6, batch(0, 3) + bytes(bad) + batch(6, 2))
    assert offsets(pf) == [6, 7] and pf.take_error() is None


@pytest.mark.parametrize("columns", [False, True])
def test_corrupt_first_batch_raises_nothing_delivered(columns):
    bad = bytearray(batch(0, 3))
    bad[-1] ^= 1
    pf = PartitionFetch(TP, 0, bytes(bad))
    got = column_offsets(pf) if columns else offsets(pf)
    assert got == []
    assert pf.take_error().offset == 0


def test_constant_columns_are_exact_and_sliced_from_one_array() -> None:
    pa = need_module("pyarrow")
    from kafka_core.codec.columns import ConstantColumns

    cache = ConstantColumns()
    for n in (0, 1, 5, 70_000, 3, 150_000):
        topic = cache.column("tøpic-ü", pa.string(), n)
        part = cache.column(7, pa.int32(), n)
        topic.validate(full=True)
        assert (len(topic), len(part)) == (n, n)
        assert topic.type == pa.string() and part.type == pa.int32()
        if n:
            assert set(topic.unique().to_pylist()) == {"tøpic-ü"} and set(part.unique().to_pylist()) == {7}
    assert cache.column("", pa.string(), 4).to_pylist() == [""] * 4
    for i in range(cache.MAX_KEYS + 10):  # bounded: the least recently used go first
        cache.column(f"t{i}", pa.string(), 2)
    assert len(cache._arrays) == cache.MAX_KEYS
