"""Every malformed-input class of docs/codec.md raises KafkaCodecError, plus mutation fuzzing:
decoding damaged real batches either succeeds or raises KafkaCodecError, never anything else."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core import codec as K
from kafka_core.codec import compression as C
from kafka_core.codec import crc32c, legacy
from kafka_core.errors import KafkaCodecError

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def batch(
    records: bytes,
    count: int,
    *,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    magic: int = 2,
    length_delta: int = 0,
) -> bytes:
    """A v2 batch around raw ``records`` bytes (already compressed if ``attributes`` says so), with a
    correct CRC."""
    after_crc = (
        struct.pack(
            ">hiqqqhii", attributes, max(count - 1, 0), base_timestamp, max_timestamp, -1, -1, -1, count
        )
        + records
    )
    crc = crc32c(after_crc)
    return (
        struct.pack(">qiib", base_offset, 9 + len(after_crc) + length_delta, -1, magic)
        + struct.pack(">I", crc)
        + after_crc
    )


def rec(body: bytes, length: int | None = None) -> bytes:
    """A record: zigzag length varint + body (``length`` forces another declared length)."""
    return K.encode_varint(len(body) if length is None else length) + body


OK_BODY = b"\x00\x00\x00\x02k\x02v\x00"  # attrs, ts delta 0, offset delta 0, key "k", value "v", 0 headers


def decode_all(buf, check_crc=True):
    rows = K.decode_record_batches(buf, check_crc=check_crc)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return rows
    K.decode_record_batches_columns(buf, check_crc=check_crc)
    return rows


def fails(buf, match=None, check_crc=True):
    with pytest.raises(KafkaCodecError, match=match):
        K.decode_record_batches(buf, check_crc=check_crc)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return
    with pytest.raises(KafkaCodecError, match=match):
        K.decode_record_batches_columns(buf, check_crc=check_crc)


def test_handmade_batch_is_valid():
    [r] = decode_all(batch(rec(OK_BODY), 1))
    assert (r.key, r.value) == (b"k", b"v")


# --------------------------------------------------------------------------- batch framing
@pytest.mark.parametrize("length", [-1, 0, 5, 13, -(1 << 31)])
def test_batch_length_below_any_minimum(length):
    buf = struct.pack(">qi", 0, length) + b"\x00" * 80
    fails(buf, "length")


@pytest.mark.parametrize("length", [14, 30, 48])
def test_v2_batch_length_below_header(length):
    buf = struct.pack(">qiib", 0, length, -1, 2) + b"\x00" * 100
    fails(buf, "49")


@pytest.mark.parametrize("magic", [3, 4, 127, -1, -128])
def test_unknown_magic(magic):
    good = bytearray(batch(rec(OK_BODY), 1))
    good[16] = magic & 0xFF
    fails(bytes(good), "magic")


def test_crc_mismatch_reports_both():
    good = bytearray(batch(rec(OK_BODY), 1))
    good[-1] ^= 1
    with pytest.raises(KafkaCodecError, match="CRC") as info:
        K.decode_record_batches(good)
    stored = struct.unpack_from(">I", good, 17)[0]
    computed = crc32c(bytes(good[21:]))
    assert f"{stored:#010x}" in str(info.value)
    assert f"{computed:#010x}" in str(info.value)
    assert "expected" in str(info.value) and "computed" in str(info.value)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression(codec):
    fails(batch(rec(OK_BODY), 1, attributes=codec), "compression")


def test_errors_name_the_byte_position():
    first = batch(rec(OK_BODY), 1)
    with pytest.raises(KafkaCodecError, match=f"byte {len(first)}"):
        K.decode_record_batches(first + batch(rec(OK_BODY), 1, attributes=6))


# ------------------------------------------------------------------------------ record count
@pytest.mark.parametrize("count", [-1, -(1 << 31)])
def test_negative_record_count(count):
    fails(batch(rec(OK_BODY), count), "count")


@pytest.mark.parametrize("count", [2, 3, 1000, (1 << 31) - 1])
def test_record_count_larger_than_records(count):
    fails(batch(rec(OK_BODY), count))


@pytest.mark.parametrize("compression", COMPRESSIONS[1:])
def test_record_count_larger_than_compressed_records(compression):
    cid = COMPRESSIONS.index(compression)
    fails(batch(C.compress(cid, rec(OK_BODY)), 5, attributes=cid))
    fails(batch(C.compress(cid, rec(OK_BODY)), (1 << 31) - 1, attributes=cid))


def test_records_left_over():
    fails(batch(rec(OK_BODY) * 3, 2), "left over")
    fails(batch(rec(OK_BODY) + b"\x00", 1), "left over")
    fails(batch(rec(OK_BODY), 0), "left over")


@pytest.mark.parametrize("compression", COMPRESSIONS[1:])
def test_records_left_over_compressed(compression):
    cid = COMPRESSIONS.index(compression)
    fails(batch(C.compress(cid, rec(OK_BODY) * 3), 2, attributes=cid), "left over")


# ------------------------------------------------------------------------------------ records
@pytest.mark.parametrize(
    "records",
    [
        rec(OK_BODY, len(OK_BODY) + 1) + b"\x00",  # length longer than the fields
        rec(OK_BODY, len(OK_BODY) - 1),  # shorter
        rec(OK_BODY, 3),
        rec(OK_BODY, -1),
        rec(OK_BODY, 0),
        rec(OK_BODY, 1000),  # past the batch
        rec(OK_BODY + b"\x00\x00", len(OK_BODY) + 2),  # trailing junk inside the record
    ],
)
def test_record_length_disagrees(records):
    fails(batch(records, 1))


@pytest.mark.parametrize(
    "records",
    [
        b"\x80\x80\x80\x80\x80\x00" + OK_BODY,  # record length: 6-byte varint
        b"\xfe\xff\xff\xff\x1f" + OK_BODY,  # record length overflows 32 bits
        rec(b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00\x02k\x02v\x00"),  # 11-byte timestamp delta
        rec(b"\x00" + b"\xff" * 9 + b"\x03" + b"\x00\x02k\x02v\x00"),  # timestamp delta overflows 64 bits
        rec(b"\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x02k\x02v\x00"),  # offset delta overflows
        rec(b"\x00\x00\x00" + b"\x80\x80\x80\x80\x80\x01" + b"k\x02v\x00"),  # key length too long
    ],
)
def test_varint_overflow(records):
    fails(batch(records, 1), "varint")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"\x00\x00\x00\x03\x02v\x00", "key length -2"),  # key length -2
        (b"\x00\x00\x00\x7f\x02v\x00", "key length -64"),
        (b"\x00\x00\x00\x0ck\x02v\x00", "key length 6"),  # key runs past the record
        (b"\x00\x00\x00\x02k\x05\x00", "value length -3"),
        (b"\x00\x00\x00\x02k\x08v\x00", "value length 4"),  # value runs past the record
        (b"\x00\x00\x00\x02k\x02v\x01", "header count -1"),
        (b"\x00\x00\x00\x02k\x02v\x40", "header count 32"),
        (b"\x00\x00\x00\x02k\x02v\x02\x01\x00", "header key is null"),
        (b"\x00\x00\x00\x02k\x02v\x02\x03\x00", "header key length -2"),
        (b"\x00\x00\x00\x02k\x02v\x02\x0ah\x00", "header key length 5"),
        (b"\x00\x00\x00\x02k\x02v\x02\x02h\x03", "header value length -2"),
        (b"\x00\x00\x00\x02k\x02v\x02\x02h\x0ax", "header value length 5"),
        (b"\x00\x00\x00\x02k\x02v\x02\x04\xc3\x28\x00", "UTF-8"),  # invalid UTF-8 header key
        (b"\x00\x00\x00\x02k\x02v\x02\x02\xff\x00", "UTF-8"),
    ],
)
def test_bad_record_fields(body, match):
    fails(batch(rec(body), 1), match)


def test_truncated_inside_record():
    full = rec(b"\x00\x00\x00\x02k\x02v\x02\x02h\x02x")
    for cut in range(1, len(full)):
        fails(batch(full[:cut], 1))


@pytest.mark.parametrize("compression", COMPRESSIONS[1:])
def test_bad_record_inside_compressed_payload(compression):
    cid = COMPRESSIONS.index(compression)
    fails(batch(C.compress(cid, rec(b"\x00\x00\x00\x03\x02v\x00")), 1, attributes=cid), "key length")


@pytest.mark.parametrize("compression", COMPRESSIONS[1:])
@pytest.mark.parametrize("garbage", [b"", b"\x01", b"\xff" * 40, b"garbage inside a compressed payload" * 3])
def test_garbage_compressed_payload(compression, garbage):
    cid = COMPRESSIONS.index(compression)
    fails(batch(garbage, 1, attributes=cid), compression)


@pytest.mark.parametrize("compression", COMPRESSIONS[1:])
def test_truncated_compressed_payload(compression):
    cid = COMPRESSIONS.index(compression)
    packed = C.compress(cid, rec(OK_BODY) * 50)
    for cut in (1, len(packed) // 2, len(packed) - 1):
        fails(batch(packed[:cut], 50, attributes=cid))


def test_decoded_timestamp_or_offset_overflowing_int64():
    big = (1 << 63) - 1
    fails(batch(rec(b"\x00\x02\x00\x02k\x02v\x00"), 1, base_timestamp=big), "int64")  # delta +1
    fails(batch(rec(b"\x00\x00\x02\x02k\x02v\x00"), 1, base_offset=big), "int64")  # offset delta +1


def test_control_batch_with_short_key_in_columns():
    need_module("pyarrow")
    buf = batch(rec(b"\x00\x00\x00\x02k\x02v\x00"), 1, attributes=0x20)
    with pytest.raises(KafkaCodecError, match="control record key is 1 bytes"):
        K.decode_record_batches(buf)  # rows and columns agree (issue 13)
    with pytest.raises(KafkaCodecError, match="control"):
        K.decode_record_batches_columns(buf)


def test_legacy_errors_are_codec_errors():
    good = legacy.encode_legacy_message_set([(b"k", b"v")], magic=1, timestamp=1)
    bad = bytearray(good)
    bad[-1] ^= 1
    fails(bytes(bad), "CRC")
    bad = bytearray(good)
    bad[17] = 0x05  # compression id 5
    fails(bytes(bad), check_crc=False)


# ---------------------------------------------------------------------------- encode errors
@pytest.mark.parametrize("records", [[], (), iter([])])
def test_empty_batch(records):
    with pytest.raises(KafkaCodecError, match="cannot encode an empty record batch"):
        K.encode_record_batch(records)


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([("key", b"v")], "record 0.*key"),
        ([(b"k", "value")], "record 0.*value"),
        ([(b"k", b"v"), (1, b"v")], "record 1.*key"),
        ([(b"k", 3.5)], "value"),
        ([(b"k", b"v", [(None, b"x")])], "header key"),
        ([(b"k", b"v", [(b"bytes-key", b"x")])], "header key"),
        ([(b"k", b"v", [("h", "str value")])], "header.*value"),
        ([(b"k", b"v", [("h",)])], "header"),
        ([(b"k", b"v", ["hx"])], "header"),
        ([(b"k", b"v", [("h", b"x", b"y")])], "header"),
        ([(b"k", b"v", 5)], "headers"),
        ([(b"k", b"v", [("\ud800", b"x")])], "UTF-8"),
        ([(b"k",)], "tuple"),
        ([(b"k", b"v", [], 4)], "tuple"),
        ([b"kv"], "record 0"),
        ([None], "record 0"),
        ([{"key": b"k"}], "record 0"),
        (lambda: [K.KafkaRecord(b"k", b"v", timestamp=1 << 63)], "timestamp"),
        (lambda: [K.KafkaRecord(b"k", b"v", timestamp="now")], "timestamp"),
        (lambda: [K.KafkaRecord(b"k", object())], "value"),
        ([(memoryview(b"abcdef")[::2], b"v")], "contiguous"),
    ],
)
def test_bad_records(records, match):
    with pytest.raises(KafkaCodecError, match=match):
        # a KafkaRecord may refuse a bad attribute already when built (the Cython one types them)
        K.encode_record_batch(records() if callable(records) else records, base_timestamp=0)


def test_records_not_iterable():
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch(5)


def test_timestamp_delta_overflow():
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch([K.KafkaRecord(b"k", b"v", timestamp=(1 << 63) - 1)], base_timestamp=-(1 << 63))


@pytest.mark.parametrize(
    "opts",
    [
        {"compression": "brotli"},
        {"compression": "none", "base_offset": 1 << 63},
        {"base_offset": "0"},
        {"base_timestamp": -(1 << 63) - 1},
        {"producer_id": 1 << 63},
        {"producer_epoch": 1 << 15},
        {"base_sequence": 1 << 31},
        {"partition_leader_epoch": -(1 << 31) - 1},
        {"compression": "gzip", "compression_level": 42},
        {"compression": "zstd", "compression_level": "high"},
    ],
)
def test_bad_options(opts):
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch([(b"k", b"v")], **opts)
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch_columns([b"k"], [b"v"], **opts)


def test_bad_columns():
    with pytest.raises(KafkaCodecError, match="empty"):
        K.encode_record_batch_columns(None, [])
    with pytest.raises(KafkaCodecError, match="values"):
        K.encode_record_batch_columns([b"k"], None)
    with pytest.raises(KafkaCodecError, match="keys"):
        K.encode_record_batch_columns([b"k", b"k"], [b"v"])
    with pytest.raises(KafkaCodecError, match="headers"):
        K.encode_record_batch_columns(None, [b"v"], headers=[[], []])
    with pytest.raises(KafkaCodecError, match="timestamps"):
        K.encode_record_batch_columns(None, [b"v"], timestamps=[1, 2])
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch_columns(None, b"not a column")
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch_columns(None, [b"v"], timestamps=[1 << 64])
    with pytest.raises(KafkaCodecError):
        K.encode_record_batch_columns(None, ["str"])


def test_bad_arrow_columns():
    pa = need_module("pyarrow")
    with pytest.raises(KafkaCodecError, match="binary or string"):
        K.encode_record_batch_columns(None, pa.array([1, 2]))
    with pytest.raises(KafkaCodecError, match="milliseconds"):
        K.encode_record_batch_columns(None, [b"v"], timestamps=pa.array([1], pa.timestamp("us")))
    with pytest.raises(KafkaCodecError, match="timestamps"):
        K.encode_record_batch_columns(None, [b"v"], timestamps=pa.array([1.5]))


# ---------------------------------------------------------------------------- mutation fuzz
def _corpus() -> list[bytes]:
    recs = [
        K.KafkaRecord(
            None if i % 4 == 0 else f"key-{i}".encode(),
            None if i % 5 == 0 else f"value-{i} ".encode() * (i % 7),
            [(f"h{j}", None if j % 2 else b"hv" * j) for j in range(i % 3)],
            timestamp=None if i % 2 else 1_700_000_000_000 + i,
        )
        for i in range(12)
    ]
    out = [
        bytes(
            K.encode_record_batch(
                recs,
                base_offset=1000,
                base_timestamp=1_700_000_000_000,
                compression=c,
                producer_id=5,
                producer_epoch=1,
                base_sequence=0,
            )
        )
        for c in COMPRESSIONS
    ]
    out.append(
        bytes(
            K.encode_record_batch(
                [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                control=True,
                transactional=True,
                base_timestamp=0,
            )
        )
    )
    out.extend(
        legacy.encode_legacy_message_set(
            [(r.key, r.value) for r in recs[:5]], magic=magic, compression=c, timestamp=1, base_offset=7
        )
        for magic in (0, 1)
        for c in ("none", "gzip", "snappy", "lz4")
    )
    out.append(out[0] + out[3] + out[-1])
    return out


CORPUS = _corpus()
UNCOMPRESSED_RECORDS = CORPUS[0][61:]
RECORD_COUNT = 12

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 1 << 16), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 16)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 16)),
    st.tuples(
        st.just("extreme"),
        st.integers(0, 1 << 16),
        st.sampled_from([b"\xff" * 5, b"\x80" * 10, b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00"]),
    ),
)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op in ops:
        kind, pos = op[0], op[1]
        if kind == "truncate":
            del buf[pos % (len(buf) + 1) :]
            continue
        if kind == "insert":
            p = pos % (len(buf) + 1)
            buf[p:p] = op[2]
            continue
        if not buf:
            continue
        p = pos % len(buf)
        if kind == "flip":
            buf[p] ^= 1 << op[2]
        elif kind == "set":
            buf[p] = op[2]
        elif kind == "delete":
            del buf[p : p + op[2]]
        elif kind == "extreme":
            buf[p : p + len(op[2])] = op[2]
    return bytes(buf)


def refresh_crcs(data: bytes) -> bytes:
    """Recompute the CRC of every v2 batch that still parses as one, so that the mutation
    reaches the decoder's later checks."""
    buf = bytearray(data)
    pos = 0
    while len(buf) - pos >= 61:
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        end = pos + 12 + length
        if length < 49 or end > len(buf) or buf[pos + 16] != 2:
            break
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
        pos = end
    return bytes(buf)


def must_not_escape(data: bytes) -> None:
    for check_crc in (True, False):
        with contextlib.suppress(KafkaCodecError):
            decode_all(data, check_crc=check_crc)


fuzz = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.timeout(120)
@fuzz
@given(sample=st.sampled_from(CORPUS), ops=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_batches(sample, ops):
    must_not_escape(mutate(sample, ops))


@pytest.mark.timeout(120)
@fuzz
@given(sample=st.sampled_from(CORPUS), ops=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_batches_with_valid_crc(sample, ops):
    must_not_escape(refresh_crcs(mutate(sample, ops)))


@pytest.mark.timeout(120)
@fuzz
@given(
    compression=st.sampled_from(COMPRESSIONS),
    ops=st.lists(mutation, min_size=1, max_size=3),
    count=st.sampled_from([RECORD_COUNT, RECORD_COUNT - 1, RECORD_COUNT + 1, 0, 1]),
)
def test_mutated_records_recompressed(compression, ops, count):
    """Damage the records themselves, then compress and frame them properly: exercises the record
    parser behind every codec with a valid CRC."""
    cid = COMPRESSIONS.index(compression)
    records = mutate(UNCOMPRESSED_RECORDS, ops)
    must_not_escape(batch(C.compress(cid, records), count, attributes=cid))


@pytest.mark.timeout(60)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data):
    must_not_escape(data)
    must_not_escape(refresh_crcs(struct.pack(">qi", 0, len(data) + 9) + b"\xff\xff\xff\xff\x02" + data))
