"""Legacy message sets (magic 0 and 1) through kafka_core.codec's decoders and legacy.py."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core import codec as K
from kafka_core.codec import compression as C
from kafka_core.codec import legacy
from kafka_core.errors import KafkaCodecError

LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


def message(magic: int, attributes: int, key, value, timestamp: int = 0) -> bytes:
    """One message (without offset and size), written by hand from the format description."""
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">I", zlib.crc32(body)) + body


def entry(offset: int, msg: bytes) -> bytes:
    return struct.pack(">qi", offset, len(msg)) + msg


def test_handwritten_v0_and_v1():
    buf = entry(5, message(0, 0, b"k", b"v")) + entry(6, message(0, 0, None, None))
    assert buf == legacy.encode_legacy_message_set([(b"k", b"v"), (None, None)], magic=0, base_offset=5)
    out = K.decode_record_batches(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in out] == [
        (5, -1, -1, b"k", b"v"),
        (6, -1, -1, None, None),
    ]
    for r in out:
        assert r.headers == [] and r.producer_id == -1 and r.producer_epoch == -1
        assert not r.is_transactional and not r.is_control

    buf = entry(0, message(1, 0, b"k", b"v", 1234)) + entry(1, message(1, 0x08, b"", b"", 99))
    out = K.decode_record_batches(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in out] == [
        (0, 1234, 0, b"k", b"v"),
        (1, 99, 1, b"", b""),
    ]


@pytest.mark.parametrize("compression", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_encoded_message_sets_decode(magic, compression):
    recs = [(b"k%d" % i if i % 3 else None, b"v" * i if i % 4 else None, 1000 + i) for i in range(10)]
    buf = legacy.encode_legacy_message_set(recs, magic=magic, compression=compression, base_offset=50)
    out = K.decode_record_batches(buf)
    assert [r.offset for r in out] == list(range(50, 60))
    assert [(r.key, r.value) for r in out] == [(k, v) for k, v, _ in recs]
    if magic == 0:
        assert {(r.timestamp, r.timestamp_type) for r in out} == {(-1, -1)}
    else:
        assert [r.timestamp for r in out] == [ts for *_, ts in recs]
        assert {r.timestamp_type for r in out} == {0}
    assert legacy.decode_legacy_message_set(buf) == [
        (r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in out
    ]


@pytest.mark.parametrize("compression", LEGACY_CODECS[1:])
def test_magic1_wrapper_relative_offsets(compression):
    recs = [(b"k", b"v%d" % i) for i in range(4)]
    buf = legacy.encode_legacy_message_set(
        recs, magic=1, compression=compression, base_offset=1000, timestamp=3
    )
    # one wrapper entry carrying the last offset; inner offsets 0..3
    assert struct.unpack_from(">q", buf)[0] == 1003
    inner = C.decompress(C.codec_id(compression), _wrapper_value(buf))
    assert [o for o, _, _ in legacy._split_entries(memoryview(inner), strict=True, what="t")] == [0, 1, 2, 3]
    assert [r.offset for r in K.decode_record_batches(buf)] == [1000, 1001, 1002, 1003]


def _wrapper_value(buf: bytes) -> bytes:
    magic = buf[16]
    pos = 12 + 6 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", buf, pos)
    pos += 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", buf, pos)
    return buf[pos + 4 : pos + 4 + vlen]


def test_magic1_wrapper_with_gaps_in_relative_offsets():
    # compacted: inner relative offsets 0, 2, 5; the wrapper holds the absolute last offset 105
    inner = b"".join(entry(o, message(1, 0, b"k", b"%d" % o, 10 + o)) for o in (0, 2, 5))
    wrapper = entry(105, message(1, 1, None, C.compress(1, inner), 15))
    out = K.decode_record_batches(wrapper)
    assert [(r.offset, r.value, r.timestamp) for r in out] == [
        (100, b"0", 10),
        (102, b"2", 12),
        (105, b"5", 15),
    ]


def test_magic0_wrapper_absolute_offsets():
    inner = b"".join(entry(o, message(0, 0, None, b"%d" % o)) for o in (40, 41, 43))
    wrapper = entry(43, message(0, 1, None, C.compress(1, inner)))
    assert [r.offset for r in K.decode_record_batches(wrapper)] == [40, 41, 43]


def test_magic1_log_append_time_wrapper():
    buf = legacy.encode_legacy_message_set(
        [(b"a", b"1", 5), (b"b", b"2", 6)], magic=1, compression="gzip", timestamp=777, log_append_time=True
    )
    out = K.decode_record_batches(buf)
    assert [(r.timestamp, r.timestamp_type) for r in out] == [(777, 1), (777, 1)]


def test_nested_wrappers():
    inner_most = b"".join(entry(o, message(1, 0, b"k", b"deep%d" % o, 1)) for o in (0, 1))
    middle = entry(1, message(1, 2, None, C.compress(2, inner_most), 1)) + entry(
        2, message(1, 0, None, b"flat", 2)
    )
    outer = entry(12, message(1, 1, None, C.compress(1, middle), 2))
    out = K.decode_record_batches(outer)
    # outer shift: 12 - 2 = 10 -> middle wrapper at 11 (inner shift 11 - 1 = 10), flat at 12
    assert [(r.offset, r.value) for r in out] == [(10, b"deep0"), (11, b"deep1"), (12, b"flat")]


def test_nesting_too_deep():
    payload = entry(0, message(1, 0, None, b"x", 0))
    for _ in range(legacy.MAX_NESTING + 1):
        payload = entry(0, message(1, 1, None, C.compress(1, payload), 0))
    with pytest.raises(KafkaCodecError, match="nested"):
        K.decode_record_batches(payload)


def test_magic0_lz4_broken_header_checksum_tolerated():
    recs = [(b"k", b"old lz4 %d" % i) for i in range(3)]
    broken = legacy.encode_legacy_message_set(recs, magic=0, compression="lz4", broken_lz4_checksum=True)
    assert [r.value for r in K.decode_record_batches(broken)] == [v for _, v in recs]
    fixed = legacy.encode_legacy_message_set(recs, magic=0, compression="lz4")
    assert [r.value for r in K.decode_record_batches(fixed)] == [v for _, v in recs]
    # magic 1 must have the correct checksum
    broken1 = legacy.encode_legacy_message_set(recs, magic=1, compression="lz4", broken_lz4_checksum=True)
    with pytest.raises(KafkaCodecError, match="lz4"):
        K.decode_record_batches(broken1)


def test_mixed_legacy_and_v2_and_truncation():
    v0 = legacy.encode_legacy_message_set([(b"a", b"0")], magic=0, base_offset=0)
    v1 = legacy.encode_legacy_message_set(
        [(b"b", b"1"), (b"c", b"2")], magic=1, compression="snappy", base_offset=1, timestamp=9
    )
    v2 = bytes(K.encode_record_batch([(b"d", b"3")], base_offset=3, base_timestamp=10))
    out = K.decode_record_batches(v0 + v1 + v2)
    assert [(r.offset, r.key) for r in out] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    for cut in range(len(v1)):
        assert [r.key for r in K.decode_record_batches(v0 + v1[:cut])] == [b"a"]
        assert [t[3] for t in legacy.decode_legacy_message_set(v0 + v1[:cut])] == [b"a"]


def test_legacy_columns():
    need_module("pyarrow")
    v0 = legacy.encode_legacy_message_set([(b"a", b"0"), (None, b"1")], magic=0, base_offset=0)
    v1 = legacy.encode_legacy_message_set(
        [(b"b", None, 5), (b"c", b"2", 6)], magic=1, compression="gzip", base_offset=2
    )
    cols = K.decode_record_batches_columns(v0 + v1)
    assert cols.offsets.to_pylist() == [0, 1, 2, 3]
    assert cols.timestamps.to_pylist() == [-1, -1, 5, 6]
    assert cols.timestamp_types.to_pylist() == [-1, -1, 0, 0]
    assert cols.keys.to_pylist() == [b"a", None, b"b", b"c"]
    assert cols.values.to_pylist() == [b"0", b"1", None, b"2"]
    assert cols.headers.to_pylist() == [[], [], [], []]
    assert [
        (b.base_offset, b.last_offset, b.record_count, b.producer_id, b.is_control) for b in cols.batches
    ] == [(0, 0, 1, -1, False), (1, 1, 1, -1, False), (2, 3, 2, -1, False)]


# ------------------------------------------------------------------------------------ errors
def test_crc_mismatch_and_skip():
    buf = bytearray(legacy.encode_legacy_message_set([(b"k", b"v")], magic=1, timestamp=0))
    buf[-1] ^= 0x20
    with pytest.raises(KafkaCodecError, match="CRC"):
        K.decode_record_batches(buf)
    assert [r.value for r in K.decode_record_batches(buf, check_crc=False)] == [b"V"]


@pytest.mark.parametrize(
    ("buf", "match"),
    [
        (entry(0, message(1, 1, None, None)), "null value"),
        (
            entry(0, message(1, 4, None, C.compress(4, entry(0, message(1, 0, None, b"x"))))),
            "compression id 4",
        ),
        (entry(0, message(1, 5, None, b"x")), "compression id 5"),
        (entry(0, message(0, 1, None, b"not gzip")), "gzip"),
        (entry(0, message(1, 1, None, C.compress(1, entry(0, message(1, 0, None, b"x"))[:-2]))), "runs past"),
        (entry(0, message(1, 1, None, C.compress(1, b"\x00" * 5))), "truncated"),
        (entry(0, message(1, 1, None, C.compress(1, struct.pack(">qi", 0, 3) + b"abc"))), "minimum"),
        (entry(0, message(1, 0, b"k", b"v")[:-1] + b"vv"), "left over|CRC"),
        (entry(0, message(1, 0, None, b"x"))[:-1], None),  # truncated entry: clean stop, not an error
    ],
)
def test_bad_messages(buf, match):
    if match is None:
        assert K.decode_record_batches(buf) == []
        return
    with pytest.raises(KafkaCodecError, match=match):
        K.decode_record_batches(buf, check_crc=False)


def test_bad_field_lengths():
    body = struct.pack(">bBq", 1, 0, 0) + struct.pack(">i", -2) + struct.pack(">i", -1)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaCodecError, match="key length"):
        K.decode_record_batches(entry(0, msg))
    body = struct.pack(">bBq", 1, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 50) + b"short"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaCodecError, match="value length"):
        K.decode_record_batches(entry(0, msg))
    body = struct.pack(">bB", 1, 0) + struct.pack(">ii", -1, -1)  # magic 1 without timestamp: too short
    msg = struct.pack(">I", zlib.crc32(body)) + body
    with pytest.raises(KafkaCodecError, match="too short"):
        K.decode_record_batches(entry(0, msg))


def test_inner_magic_must_be_legacy():
    inner = entry(0, message(1, 0, None, b"x"))
    inner = inner[:16] + b"\x02" + inner[17:]
    with pytest.raises(KafkaCodecError, match="magic"):
        K.decode_record_batches(entry(0, message(1, 1, None, C.compress(1, inner))), check_crc=False)


def test_decode_legacy_entry_api():
    buf = b"pad" + legacy.encode_legacy_message_set([(b"k", b"v", 1)], magic=1)
    records, end = legacy.decode_legacy_entry(buf, 3)
    assert records == [(0, 1, 0, b"k", b"v")] and end == len(buf)
    with pytest.raises(KafkaCodecError):
        legacy.decode_legacy_entry(buf[:-1], 3)
    with pytest.raises(KafkaCodecError):
        legacy.decode_legacy_entry(buf, 100)


def test_encoder_rejects():
    with pytest.raises(KafkaCodecError):
        legacy.encode_legacy_message_set([(b"k", b"v")], magic=2)
    with pytest.raises(KafkaCodecError):
        legacy.encode_legacy_message_set([(b"k", b"v")], compression="zstd")
    with pytest.raises(KafkaCodecError):
        legacy.encode_legacy_message_set([])


@settings(max_examples=60, deadline=None)
@given(
    recs=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=50), st.none() | st.binary(max_size=50), st.integers(0, 1 << 41)
        ),
        min_size=1,
        max_size=8,
    ),
    magic=st.sampled_from([0, 1]),
    compression=st.sampled_from(LEGACY_CODECS),
    base_offset=st.integers(0, 1 << 40),
)
def test_round_trip_property(recs, magic, compression, base_offset):
    buf = legacy.encode_legacy_message_set(
        recs, magic=magic, compression=compression, base_offset=base_offset
    )
    out = K.decode_record_batches(buf)
    assert [(r.offset, r.key, r.value) for r in out] == [
        (base_offset + i, k, v) for i, (k, v, _) in enumerate(recs)
    ]
    assert [r.timestamp for r in out] == ([ts for *_, ts in recs] if magic == 1 else [-1] * len(recs))


def test_producer_side_wrapper_keeps_inner_offsets():
    # a producer writes the wrapper with offset 0 (the broker assigns the real one): the base
    # 0 - last_inner is negative, and the inner offsets stay as they are (Java does the same)
    buf = legacy.encode_legacy_message_set(
        [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], magic=1, compression="gzip", base_offset=-2, timestamp=0
    )
    assert struct.unpack_from(">q", buf)[0] == 0
    assert [r.offset for r in K.decode_record_batches(buf)] == [0, 1, 2]
