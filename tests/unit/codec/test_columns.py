"""Columnar decoding (RecordColumns, BatchInfo, arrow schema) through the chosen implementation."""

from __future__ import annotations

import pytest
from prerequisites import need_module

pa = need_module("pyarrow")

from kafka_core import codec as K  # noqa: E402
from kafka_core.codec import legacy  # noqa: E402
from kafka_core.codec.columns import BatchInfo, RecordColumns, arrow_schema, headers_type  # noqa: E402

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def control_batch(kind: int, *, base_offset: int, pid: int = 9, epoch: int = 1) -> bytes:
    key = b"\x00\x00" + kind.to_bytes(2, "big")
    return bytes(
        K.encode_record_batch(
            [(key, b"\x00\x00\x00\x00\x00\x00")],
            base_offset=base_offset,
            base_timestamp=0,
            producer_id=pid,
            producer_epoch=epoch,
            transactional=True,
            control=True,
        )
    )


def test_schema_and_types():
    ht = headers_type()
    assert ht == pa.list_(
        pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
    )
    schema = arrow_schema()
    assert schema.names == ["offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    assert schema.field("timestamp").type == pa.timestamp("ms")
    assert not schema.field("offset").nullable and schema.field("key").nullable
    assert headers_type() is ht and arrow_schema() is schema  # cached


def test_export():
    assert K.RecordColumns is RecordColumns and K.BatchInfo is BatchInfo


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_columns_match_rows(compression):
    recs = [
        K.KafkaRecord(
            None if i % 3 == 0 else b"k%d" % i,
            None if i % 4 == 1 else b"v" * i,
            [(f"h{j}", None if j else b"x") for j in range(i % 3)],
            timestamp=100 + i,
        )
        for i in range(25)
    ]
    buf = K.encode_record_batch(
        recs,
        base_offset=40,
        base_timestamp=90,
        compression=compression,
        producer_id=3,
        producer_epoch=2,
        base_sequence=17,
    )
    cols = K.decode_record_batches_columns(buf)
    rows = K.decode_record_batches(buf)
    assert len(cols) == 25
    assert cols.offsets.type == pa.int64() and cols.timestamps.type == pa.int64()
    assert cols.timestamp_types.type == pa.int8()
    assert cols.keys.type == pa.binary() and cols.values.type == pa.binary()
    assert cols.headers.type == headers_type()
    assert cols.offsets.to_pylist() == [r.offset for r in rows]
    assert cols.timestamps.to_pylist() == [r.timestamp for r in rows]
    assert cols.timestamp_types.to_pylist() == [0] * 25
    assert cols.keys.to_pylist() == [r.key for r in rows]
    assert cols.values.to_pylist() == [r.value for r in rows]
    assert cols.headers.to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    assert cols.batches == [BatchInfo(40, 64, 3, 2, 17, False, False, -1, 25)]
    for arr in (cols.offsets, cols.timestamps, cols.timestamp_types, cols.keys, cols.values, cols.headers):
        arr.validate(full=True)


def test_to_arrow():
    buf = K.encode_record_batch([(b"k", b"v", [("a", b"b")]), (None, None)], base_timestamp=1_700_000_000_123)
    table = K.decode_record_batches_columns(buf).to_arrow()
    assert table.schema == arrow_schema()
    assert table.num_rows == 2
    assert table.column("timestamp").to_pylist()[0].year == 2023
    assert table.column("headers").to_pylist() == [[{"key": "a", "value": b"b"}], []]
    table.validate(full=True)


@pytest.mark.parametrize("zero_copy", [False, True])
def test_records_without_headers_get_an_empty_headers_column(zero_copy):
    """The Cython decoder leaves the column out of its import and makes it on demand; either
    way it must be the column a decode with headers gives, as the twin does."""
    from kafka_core.codec import columns

    buf = K.encode_record_batch([(b"k%d" % i, b"v" * i) for i in range(50)], base_timestamp=5)
    cols = K.decode_record_batches_columns(buf, zero_copy=zero_copy)
    assert cols.headers.type == headers_type() and cols.headers.to_pylist() == [[]] * 50
    assert cols.headers.null_count == 0
    table = cols.to_arrow()
    assert table.schema == arrow_schema(zero_copy) and table.num_columns == 6
    assert table.column("headers").to_pylist() == [[]] * 50
    assert table.column("value").to_pylist() == [b"v" * i for i in range(50)]
    table.validate(full=True)
    # the cached all-empty column grows, and a slice of it is what a shorter decode gets
    for n in (0, 1, 70_000, 3):
        empty = columns.empty_headers(n)
        assert len(empty) == n and empty.type == headers_type()
        empty.validate(full=True)
        assert empty.to_pylist() == [[]] * n


def test_the_decode_helper_switch_changes_no_result():
    """Both twins have set_decode_helper (the Cython one's helper thread: test_columnar_helper)."""
    buf = b"".join(
        K.encode_record_batch([(b"k", bytes(3000))] * 100, base_offset=100 * i, base_timestamp=1)
        for i in range(3)
    )
    previous = K.set_decode_helper(True)
    try:
        assert K.set_decode_helper(True) is True
        with_helper = K.decode_record_batches_columns(buf).to_arrow()
        assert K.set_decode_helper(False) is True
        assert K.decode_record_batches_columns(buf).to_arrow().equals(with_helper)
        assert with_helper.num_rows == 300
    finally:
        K.set_decode_helper(previous)


def test_empty():
    cols = K.decode_record_batches_columns(b"")
    assert len(cols) == 0 and cols.batches == []
    assert cols.to_arrow().num_rows == 0
    assert cols.to_arrow().schema == arrow_schema()
    assert "0 records" in repr(cols)


def test_control_batches_are_listed_not_rows():
    data1 = bytes(
        K.encode_record_batch(
            [(b"a", b"1"), (b"b", b"2")],
            base_offset=0,
            base_timestamp=5,
            producer_id=9,
            producer_epoch=1,
            transactional=True,
        )
    )
    commit = control_batch(1, base_offset=2)
    data2 = bytes(
        K.encode_record_batch(
            [(b"c", b"3")],
            base_offset=3,
            base_timestamp=6,
            producer_id=9,
            producer_epoch=1,
            transactional=True,
        )
    )
    abort = control_batch(0, base_offset=4)
    cols = K.decode_record_batches_columns(data1 + commit + data2 + abort)
    assert cols.offsets.to_pylist() == [0, 1, 3]
    assert cols.keys.to_pylist() == [b"a", b"b", b"c"]
    assert [
        (b.base_offset, b.last_offset, b.is_control, b.control_type, b.record_count, b.is_transactional)
        for b in cols.batches
    ] == [
        (0, 1, False, -1, 2, True),
        (2, 2, True, 1, 0, True),
        (3, 3, False, -1, 1, True),
        (4, 4, True, 0, 0, True),
    ]
    # the row decoder returns the control records too
    rows = K.decode_record_batches(data1 + commit + data2 + abort)
    assert [r.is_control for r in rows] == [False, False, True, False, True]


def test_log_append_time_columns():
    buf = K.encode_record_batch(
        [K.KafkaRecord(b"a", b"1", timestamp=3), K.KafkaRecord(b"b", b"2", timestamp=8)],
        base_timestamp=1,
        log_append_time=True,
    )
    cols = K.decode_record_batches_columns(buf)
    assert cols.timestamps.to_pylist() == [8, 8]
    assert cols.timestamp_types.to_pylist() == [1, 1]


def test_many_batches_and_legacy():
    bufs = [
        bytes(
            K.encode_record_batch(
                [(b"k", b"%d" % i)] * (i + 1),
                base_offset=i * 10,
                base_timestamp=i,
                compression=COMPRESSIONS[i % 5],
            )
        )
        for i in range(7)
    ]
    old = legacy.encode_legacy_message_set([(b"x", b"y", 4)], magic=1, base_offset=100)
    cols = K.decode_record_batches_columns(b"".join(bufs) + old)
    assert len(cols) == sum(range(1, 8)) + 1
    assert [b.record_count for b in cols.batches] == [1, 2, 3, 4, 5, 6, 7, 1]
    assert cols.offsets.to_pylist()[-1] == 100
    assert cols.timestamp_types.to_pylist()[-1] == 0


def test_truncated_tail():
    buf = bytes(K.encode_record_batch([(b"k", b"v")], base_timestamp=0))
    cols = K.decode_record_batches_columns(buf + buf[:40])
    assert len(cols) == 1 and len(cols.batches) == 1


def test_record_columns_object():
    cols = RecordColumns(
        pa.array([1], pa.int64()),
        pa.array([2], pa.int64()),
        pa.array([0], pa.int8()),
        pa.array([b"k"]),
        pa.array([None], pa.binary()),
        pa.array([[]], headers_type()),
        [BatchInfo(1, 1, -1, -1, -1, False, False, -1, 1)],
    )
    assert len(cols) == 1
    assert repr(cols) == "RecordColumns(1 records, 1 batches)"
    batch = cols.to_arrow()
    assert batch.to_pylist()[0]["value"] is None
    assert BatchInfo._fields == (
        "base_offset",
        "last_offset",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
        "control_type",
        "record_count",
    )


def test_arrow_input_round_trip():
    """Columns decoded from one batch feed encode_record_batch_columns unchanged."""
    recs = [K.KafkaRecord(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], timestamp=10 + i) for i in range(5)]
    buf = K.encode_record_batch(recs, base_timestamp=10, compression="zstd")
    cols = K.decode_record_batches_columns(buf)
    table = cols.to_arrow()
    again = K.encode_record_batch_columns(
        table.column("key"),
        table.column("value"),
        headers=table.column("headers"),
        timestamps=table.column("timestamp"),
        base_timestamp=10,
        compression="zstd",
    )
    assert again == buf
