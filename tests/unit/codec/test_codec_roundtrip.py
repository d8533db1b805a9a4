"""RecordBatch v2 encode/decode through the chosen implementation: layout, round trips, options."""

from __future__ import annotations

import struct
import time
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core import codec as K
from kafka_core.codec import crc32c
from kafka_core.errors import KafkaCodecError

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADER = struct.Struct(">qiibIhiqqqhii")
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)

payload = st.none() | st.binary(max_size=300)
header = st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=40))
headers = st.lists(header, max_size=4)
timestamp = st.none() | st.integers(0, 1 << 45) | st.integers(-(1 << 40), 1 << 40)
record = st.builds(lambda k, v, h, ts: K.KafkaRecord(k, v, h, ts), payload, payload, headers, timestamp)

props = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse_header(buf: bytes | bytearray) -> dict:
    names = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
    )
    return dict(zip(names, HEADER.unpack_from(buf), strict=True))


def expect(
    records,
    *,
    base_offset=0,
    base_timestamp,
    log_append_time=False,
    producer_id=-1,
    producer_epoch=-1,
    transactional=False,
    control=False,
):
    """The KafkaRecords that decoding must give back for ``records``."""
    stamps = [base_timestamp if r.timestamp is None else r.timestamp for r in records]
    out = []
    for i, r in enumerate(records):
        ts = max(stamps) if log_append_time else stamps[i]
        out.append(
            K.KafkaRecord(
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                [(k, None if v is None else bytes(v)) for k, v in r.headers],
                ts,
                base_offset + i,
                1 if log_append_time else 0,
                producer_id,
                producer_epoch,
                transactional,
                control,
            )
        )
    return out


# ---------------------------------------------------------------------------------- layout
def test_golden_bytes_single_record():
    buf = K.encode_record_batch([(b"k", b"v")], base_timestamp=1000)
    assert type(buf) is bytearray
    record = bytes([0x10, 0x00, 0x00, 0x00, 0x02]) + b"k" + b"\x02v" + b"\x00"
    after_crc = struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + record
    expected = (
        struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2)
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )
    assert bytes(buf) == expected


def test_golden_bytes_headers_nulls_and_options():
    buf = K.encode_record_batch(
        [K.KafkaRecord(None, None, [("h", b"xy"), ("n", None)], timestamp=990), (b"", b"", [])],
        base_offset=42,
        base_timestamp=1000,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        transactional=True,
        partition_leader_epoch=5,
        log_append_time=True,
    )
    rec0 = b"\x00" + b"\x13" + b"\x00" + b"\x01" + b"\x01" + b"\x04" + b"\x02h\x04xy" + b"\x02n\x01"
    rec1 = b"\x00" + b"\x00" + b"\x02" + b"\x00" + b"\x00" + b"\x00"
    records = bytes([len(rec0) * 2]) + rec0 + bytes([len(rec1) * 2]) + rec1
    after_crc = struct.pack(">hiqqqhii", 0x18, 1, 1000, 1000, 7, 3, 11, 2) + records
    expected = (
        struct.pack(">qiib", 42, 9 + len(after_crc), 5, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    )
    assert bytes(buf) == expected


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_header_fields(compression):
    recs = [K.KafkaRecord(b"k%d" % i, b"v" * i, timestamp=1000 + (i * 7) % 13) for i in range(20)]
    buf = K.encode_record_batch(
        recs,
        base_offset=123456789012,
        base_timestamp=999,
        compression=compression,
        producer_id=1 << 40,
        producer_epoch=17,
        base_sequence=99,
        partition_leader_epoch=3,
    )
    h = parse_header(buf)
    assert h["base_offset"] == 123456789012
    assert h["batch_length"] == len(buf) - 12
    assert h["partition_leader_epoch"] == 3
    assert h["magic"] == 2
    assert h["crc"] == crc32c(bytes(buf[21:]))
    assert h["attributes"] == COMPRESSIONS.index(compression)
    assert h["last_offset_delta"] == 19
    assert h["base_timestamp"] == 999
    assert h["max_timestamp"] == max(r.timestamp for r in recs)
    assert (h["producer_id"], h["producer_epoch"], h["base_sequence"], h["record_count"]) == (
        1 << 40,
        17,
        99,
        20,
    )


@pytest.mark.parametrize(
    ("opts", "bits"),
    [
        ({}, 0),
        ({"log_append_time": True}, 8),
        ({"transactional": True}, 16),
        ({"control": True}, 32),
        (
            {"transactional": True, "control": True, "log_append_time": True, "compression": "zstd"},
            8 | 16 | 32 | 4,
        ),
    ],
)
def test_attribute_bits(opts, bits):
    buf = K.encode_record_batch([(b"\x00\x00\x00\x01", b"")], base_timestamp=1, **opts)
    assert parse_header(buf)["attributes"] == bits


def test_compressed_payload_is_the_compressed_records():
    from kafka_core.codec import compression as C

    recs = [(b"key", b"value" * 10, [("a", b"b")])] * 30
    plain = K.encode_record_batch(recs, base_timestamp=5)
    for name in COMPRESSIONS[1:]:
        packed = K.encode_record_batch(recs, base_timestamp=5, compression=name)
        cid = COMPRESSIONS.index(name)
        assert bytes(packed[61:]) == C.compress(cid, bytes(plain[61:]))
        assert C.decompress(cid, bytes(packed[61:])) == bytes(plain[61:])


def test_default_base_timestamp_is_now():
    before = int(time.time() * 1000)
    buf = K.encode_record_batch([(b"k", b"v")])
    after = int(time.time() * 1000)
    h = parse_header(buf)
    assert before - 1 <= h["base_timestamp"] <= after + 1
    assert h["max_timestamp"] == h["base_timestamp"]
    [rec] = K.decode_record_batches(buf)
    assert rec.timestamp == h["base_timestamp"]


def test_multi_byte_varints():
    recs = [K.KafkaRecord(b"k" * 200, b"v" * 70000, [("h" * 130, b"x" * 20000)] * 3, timestamp=1 << 50)]
    recs += [(None, b"%d" % i) for i in range(20000)]  # offset deltas up to 3 bytes
    buf = K.encode_record_batch(recs, base_timestamp=-(1 << 50))
    out = K.decode_record_batches(buf)
    assert out == expect(
        [r if isinstance(r, K.KafkaRecord) else K.KafkaRecord(*r) for r in recs], base_timestamp=-(1 << 50)
    )


# ------------------------------------------------------------------------------ round trips
@props
@given(
    records=st.lists(record, min_size=1, max_size=12),
    compression=st.sampled_from(COMPRESSIONS),
    base_offset=st.integers(0, 1 << 62),
    base_timestamp=st.integers(0, 1 << 45),
    log_append_time=st.booleans(),
    producer=st.tuples(
        st.integers(-1, 1 << 62), st.integers(-1, (1 << 15) - 1), st.integers(-1, (1 << 31) - 1)
    ),
    transactional=st.booleans(),
    control=st.booleans(),
)
def test_round_trip(
    records, compression, base_offset, base_timestamp, log_append_time, producer, transactional, control
):
    pid, epoch, seq = producer
    if control:  # a control record's key holds version and type: shorter keys are malformed
        records = [
            K.KafkaRecord(b"\x00\x00\x00\x01" + bytes(r.key or b""), r.value, r.headers, r.timestamp)
            for r in records
        ]
    opts = dict(
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
        control=control,
        log_append_time=log_append_time,
    )
    buf = K.encode_record_batch(records, **opts)
    assert K.encode_record_batch(records, **opts) == buf  # deterministic
    out = K.decode_record_batches(buf)
    assert out == expect(
        records,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        log_append_time=log_append_time,
        producer_id=pid,
        producer_epoch=epoch,
        transactional=transactional,
        control=control,
    )
    for r in out:
        assert r.key is None or type(r.key) is bytes
        assert r.value is None or type(r.value) is bytes
        assert type(r.headers) is list
        assert all(type(h) is tuple and type(h[0]) is str for h in r.headers)
    assert K.decode_record_batches(bytes(buf)) == out
    assert K.decode_record_batches(memoryview(buf)) == out
    assert K.decode_record_batches(buf, check_crc=False) == out


@props
@given(
    records=st.lists(record, min_size=1, max_size=6),
    compression=st.sampled_from(COMPRESSIONS),
    extreme=st.sampled_from([-(1 << 63), (1 << 63) - 1, 0]),
)
def test_round_trip_extreme_timestamps(records, compression, extreme):
    records = [
        K.KafkaRecord(r.key, r.value, r.headers, extreme if r.timestamp is not None else None)
        for r in records
    ]
    buf = K.encode_record_batch(records, base_timestamp=extreme, compression=compression)
    assert K.decode_record_batches(buf) == expect(records, base_timestamp=extreme)


def test_tuple_and_bytes_like_inputs():
    buf_ref = K.encode_record_batch([(b"key", b"value", [("h", b"hv")]), (None, b"v2")], base_timestamp=7)
    variants = [
        [(bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"hv"))]), (None, bytearray(b"v2"))],
        [(array("B", b"key"), memoryview(b"xvalue")[1:], (("h", memoryview(b"hv")),)), [None, b"v2"]],
        [K.KafkaRecord(b"key", b"value", [("h", b"hv")], offset=99), K.KafkaRecord(None, b"v2")],
        iter([[b"key", b"value", [["h", b"hv"]]], (None, b"v2", [])]),
        ((b"key", b"value", ({"key": "h", "value": b"hv"},)), (None, b"v2", None)),
    ]
    for recs in variants:
        assert K.encode_record_batch(recs, base_timestamp=7) == buf_ref


def test_wide_buffer_formats_are_raw_bytes():
    data = array("i", [1, 2, 3])
    [rec] = K.decode_record_batches(K.encode_record_batch([(data, None)], base_timestamp=0))
    assert rec.key == data.tobytes()


def test_record_offset_is_ignored_and_deltas_are_positions():
    recs = [K.KafkaRecord(b"a", b"1", offset=500), K.KafkaRecord(b"b", b"2", offset=3)]
    out = K.decode_record_batches(K.encode_record_batch(recs, base_offset=10, base_timestamp=0))
    assert [r.offset for r in out] == [10, 11]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_many_batches_concatenated(compression):
    bufs, expected = [], []
    for b in range(5):
        recs = [
            K.KafkaRecord(b"k%d" % i, b"b%d-%d" % (b, i), [("n", b"%d" % i)], timestamp=b * 100 + i)
            for i in range(b + 1)
        ]
        bufs.append(
            bytes(
                K.encode_record_batch(
                    recs, base_offset=b * 10, base_timestamp=b * 100, compression=compression
                )
            )
        )
        expected += expect(recs, base_offset=b * 10, base_timestamp=b * 100)
    assert K.decode_record_batches(b"".join(bufs)) == expected


def test_truncated_trailing_batch_stops_cleanly():
    first = bytes(K.encode_record_batch([(b"a", b"1"), (b"b", b"2")], base_timestamp=0))
    second = bytes(
        K.encode_record_batch([(b"c", b"3" * 100)], base_offset=2, base_timestamp=0, compression="gzip")
    )
    full = K.decode_record_batches(first + second)
    assert len(full) == 3
    for cut in range(len(second)):
        assert K.decode_record_batches(first + second[:cut]) == full[:2], cut
    assert K.decode_record_batches(b"") == []
    assert K.decode_record_batches(first[:11]) == []
    assert K.decode_record_batches(first[:60]) == []


def test_log_append_time_uses_max_timestamp():
    recs = [
        K.KafkaRecord(b"a", b"1", timestamp=50),
        K.KafkaRecord(b"b", b"2", timestamp=70),
        K.KafkaRecord(b"c", b"3"),
    ]
    out = K.decode_record_batches(K.encode_record_batch(recs, base_timestamp=60, log_append_time=True))
    assert [(r.timestamp, r.timestamp_type) for r in out] == [(70, 1)] * 3


def test_control_records_are_included():
    buf = K.encode_record_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")],
        base_offset=9,
        base_timestamp=0,
        producer_id=4,
        producer_epoch=2,
        transactional=True,
        control=True,
    )
    [rec] = K.decode_record_batches(buf)
    assert rec.is_control and rec.is_transactional
    assert (rec.offset, rec.producer_id, rec.producer_epoch) == (9, 4, 2)
    assert rec.key == b"\x00\x00\x00\x01"


def _handmade_batch(
    records: bytes,
    count: int,
    *,
    attributes: int = 0,
    last_offset_delta: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
) -> bytes:
    after_crc = (
        struct.pack(
            ">hiqqqhii", attributes, last_offset_delta, base_timestamp, max_timestamp, -1, -1, -1, count
        )
        + records
    )
    return (
        struct.pack(">qiib", base_offset, 9 + len(after_crc), -1, 2)
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )


def test_empty_batch_and_offset_gaps():
    # compaction leaves empty batches and gaps in offset deltas
    empty = _handmade_batch(b"", 0, last_offset_delta=4, base_offset=100)
    rec_a = b"\x00\x00\x00\x02a\x00\x00"  # offset delta 0
    rec_b = b"\x00\x02\x0a\x02b\x00\x00"  # timestamp delta 1, offset delta 5
    gaps = _handmade_batch(
        bytes([len(rec_a) * 2]) + rec_a + bytes([len(rec_b) * 2]) + rec_b,
        2,
        last_offset_delta=5,
        base_offset=200,
        base_timestamp=10,
    )
    out = K.decode_record_batches(empty + gaps)
    assert [(r.offset, r.timestamp, r.key) for r in out] == [(200, 10, b"a"), (205, 11, b"b")]
    cols = K.decode_record_batches_columns(empty + gaps)
    assert cols.offsets.to_pylist() == [200, 205]
    assert [(b.base_offset, b.last_offset, b.record_count) for b in cols.batches] == [
        (100, 104, 0),
        (200, 205, 2),
    ]


def test_record_attributes_byte_is_ignored():
    rec = b"\x7f\x00\x00\x02a\x00\x00"
    [out] = K.decode_record_batches(_handmade_batch(bytes([len(rec) * 2]) + rec, 1))
    assert out.key == b"a"


def test_crc_check_can_be_skipped():
    buf = bytearray(K.encode_record_batch([(b"k", b"v")], base_timestamp=0))
    buf[17] ^= 0xFF
    with pytest.raises(KafkaCodecError, match="CRC"):
        K.decode_record_batches(buf)
    assert [r.key for r in K.decode_record_batches(buf, check_crc=False)] == [b"k"]


# ------------------------------------------------------------------------------- KafkaRecord
def test_kafka_record_defaults_and_attributes():
    r = K.KafkaRecord()
    assert (r.key, r.value, list(r.headers), r.timestamp, r.offset, r.timestamp_type) == (
        None,
        None,
        [],
        None,
        -1,
        0,
    )
    assert (r.producer_id, r.producer_epoch, r.is_transactional, r.is_control) == (-1, -1, False, False)
    r = K.KafkaRecord(b"k", b"v", [("a", b"b")], 5, 6, 1, 7, 8, True, True)
    assert (r.key, r.value, r.headers, r.timestamp, r.offset, r.timestamp_type) == (
        b"k",
        b"v",
        [("a", b"b")],
        5,
        6,
        1,
    )
    assert (r.producer_id, r.producer_epoch, r.is_transactional, r.is_control) == (7, 8, True, True)
    kw = K.KafkaRecord(
        key=b"k",
        value=b"v",
        headers=[("a", b"b")],
        timestamp=5,
        offset=6,
        timestamp_type=1,
        producer_id=7,
        producer_epoch=8,
        is_transactional=True,
        is_control=True,
    )
    assert kw == r


def test_kafka_record_eq_and_repr():
    base = dict(
        key=b"k",
        value=b"v",
        headers=[("a", b"b")],
        timestamp=5,
        offset=6,
        timestamp_type=1,
        producer_id=7,
        producer_epoch=8,
        is_transactional=True,
        is_control=False,
    )
    a = K.KafkaRecord(**base)
    assert a == K.KafkaRecord(**base)
    changes = dict(
        key=b"x",
        value=None,
        headers=[],
        timestamp=6,
        offset=7,
        timestamp_type=0,
        producer_id=1,
        producer_epoch=2,
        is_transactional=False,
        is_control=True,
    )
    for name, value in changes.items():
        assert a != K.KafkaRecord(**{**base, name: value}), name
    assert a != (b"k", b"v")
    text = repr(a)
    for part in ("offset=6", "timestamp=5", "key=b'k'", "value=b'v'", "headers=[('a', b'b')]"):
        assert part in text


# -------------------------------------------------------------------------- columnar encoding
def test_columns_encode_same_bytes_as_rows():
    pa = need_module("pyarrow")
    keys = [b"a", None, b"c"]
    values = [b"1", b"2", None]
    hdrs = [[("x", b"y")], [], [("z", None)]]
    stamps = [10, None, 30]
    rows = [K.KafkaRecord(k, v, h, t) for k, v, h, t in zip(keys, values, hdrs, stamps, strict=True)]
    for compression in COMPRESSIONS:
        opts = dict(base_timestamp=20, compression=compression, base_offset=5, producer_id=3)
        ref = K.encode_record_batch(rows, **opts)
        assert K.encode_record_batch_columns(keys, values, headers=hdrs, timestamps=stamps, **opts) == ref
        assert (
            K.encode_record_batch_columns(
                pa.array(keys, pa.binary()),
                pa.array(values, pa.large_binary()),
                headers=hdrs,
                timestamps=pa.array(stamps, pa.int64()),
                **opts,
            )
            == ref
        )
        assert (
            K.encode_record_batch_columns(
                pa.chunked_array([pa.array(keys[:1], pa.binary()), pa.array(keys[1:], pa.binary())]),
                pa.array(values, pa.binary()),
                headers=hdrs,
                timestamps=pa.array(stamps, pa.timestamp("ms")),
                **opts,
            )
            == ref
        )


def test_columns_encode_strings_and_defaults():
    pa = need_module("pyarrow")
    ref = K.encode_record_batch([(None, b"h\xc3\xa9"), (None, b"b")], base_timestamp=1)
    assert K.encode_record_batch_columns(None, pa.array(["hé", "b"]), base_timestamp=1) == ref
    assert (
        K.encode_record_batch_columns(None, pa.array(["hé", "b"], pa.large_string()), base_timestamp=1) == ref
    )
    assert K.encode_record_batch_columns([None, None], [b"h\xc3\xa9", b"b"], base_timestamp=1) == ref


@props
@given(records=st.lists(record, min_size=1, max_size=10), compression=st.sampled_from(COMPRESSIONS))
def test_columns_round_trip_property(records, compression):
    need_module("pyarrow")
    keys = [r.key for r in records]
    values = [r.value for r in records]
    hdrs = [r.headers for r in records]
    stamps = [r.timestamp for r in records]
    buf = K.encode_record_batch_columns(
        keys, values, headers=hdrs, timestamps=stamps, base_timestamp=77, compression=compression
    )
    assert buf == K.encode_record_batch(records, base_timestamp=77, compression=compression)
    cols = K.decode_record_batches_columns(buf)
    rows = K.decode_record_batches(buf)
    assert cols.keys.to_pylist() == [r.key for r in rows]
    assert cols.values.to_pylist() == [r.value for r in rows]
    assert cols.offsets.to_pylist() == [r.offset for r in rows]
    assert cols.timestamps.to_pylist() == [r.timestamp for r in rows]
    assert cols.headers.to_pylist() == [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    # the decoded columns encode back to the same batch
    again = K.encode_record_batch_columns(
        cols.keys,
        cols.values,
        headers=cols.headers,
        timestamps=cols.timestamps,
        base_timestamp=77,
        compression=compression,
    )
    assert again == buf
