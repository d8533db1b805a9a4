"""Malformed input aimed at the Cython readers, which run with Cython's own bounds checks off:
every forged length, truncation and overflow must end in KafkaCodecError (or a clean stop at a
truncated tail), never in a crash or a read past the buffer."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("KAFKA_CORE_PURE_PYTHON=1: the Cython codec is deliberately absent", allow_module_level=True)

import pyarrow as pa

from kafka_core.codec._cython import columnar as ccol
from kafka_core.codec._cython import primitives as cprim  # a missing extension fails here
from kafka_core.codec._cython import records as crec
from kafka_core.errors import KafkaCodecError

HEADER = 61


def batch(compression: str = "none", **kwargs: Any) -> bytes:
    recs = [
        (b"k" * 3, b"v" * 200, [("hdr", b"x" * 5), ("null", None)]),
        (None, None),
        (b"", b"", [("\u00e9", b"")]),
        (b"key", b"value" * 30),
    ]
    return bytes(crec.encode_record_batch(recs, base_timestamp=1 << 41, compression=compression, **kwargs))


def decode_all(buf: Any, check_crc: bool = True) -> tuple[Any, Any]:
    """Both decoders; each returns its result or the KafkaCodecError it raised."""
    results = []
    for fn in (crec.decode_record_batches, ccol.decode_record_batches_columns):
        try:
            results.append(fn(buf, check_crc=check_crc))
        except KafkaCodecError as exc:
            results.append(exc)
    return results[0], results[1]


def with_crc(buf: bytearray) -> bytes:
    """Recompute the CRC so that a forged field reaches the record readers."""
    from kafka_core.codec.crc import crc32c

    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def set_length(buf: bytes, length: int) -> bytearray:
    out = bytearray(buf)
    struct.pack_into(">i", out, 8, length)
    return out


# ------------------------------------------------------------------------------------------
# truncation
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_truncation_at_every_byte_is_a_clean_stop(compression: str) -> None:
    full = batch(compression)
    first = crec.decode_record_batches(full)
    assert len(first) == 4
    for cut in range(len(full)):
        rows, cols = decode_all(full[:cut])
        assert rows == [], cut
        assert len(cols) == 0 and cols.batches == [], cut
        # a complete batch before the truncated one still comes out
        rows, cols = decode_all(full + full[:cut])
        assert [r.offset for r in rows] == [0, 1, 2, 3], cut
        assert len(cols) == 4, cut


def test_truncated_views_of_a_larger_buffer() -> None:
    full = bytearray(batch() * 2)
    view = memoryview(full)
    for cut in range(0, len(full), 7):
        rows, _cols = decode_all(view[:cut])
        assert isinstance(rows, list)


# ------------------------------------------------------------------------------------------
# forged batch header fields
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [-(1 << 31), -1, 0, 13, 14, 48])
def test_batch_length_below_minimum(length: int) -> None:
    for result in decode_all(bytes(set_length(batch(), length))):
        assert isinstance(result, KafkaCodecError)


@pytest.mark.parametrize("delta", [1, 100, 1 << 20])
def test_batch_length_past_the_end_is_a_clean_stop(delta: int) -> None:
    full = batch()
    rows, cols = decode_all(bytes(set_length(full, len(full) - 12 + delta)))
    assert rows == [] and len(cols) == 0


@pytest.mark.parametrize("delta", [-1, -7, -60])
def test_batch_length_shorter_than_the_records(delta: int) -> None:
    full = batch()
    forged = set_length(full, len(full) - 12 + delta)
    forged = bytearray(with_crc(forged[: len(full) + delta]))
    for result in decode_all(bytes(forged)):
        assert isinstance(result, KafkaCodecError)


@pytest.mark.parametrize("magic", [3, 127, 128, 255])
def test_unknown_magic(magic: int) -> None:
    buf = bytearray(batch())
    buf[16] = magic
    for result in decode_all(bytes(buf)):
        assert isinstance(result, KafkaCodecError)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression_id(codec: int) -> None:
    buf = bytearray(batch())
    buf[22] = (buf[22] & ~7) | codec
    for check_crc in (True, False):
        for result in decode_all(with_crc(buf), check_crc):
            assert isinstance(result, KafkaCodecError)


@pytest.mark.parametrize("count", [-(1 << 31), -1, 0, 3, 5, 1000, (1 << 31) - 1])
@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_forged_record_count(count: int, compression: str) -> None:
    buf = bytearray(batch(compression))
    struct.pack_into(">i", buf, 57, count)
    for result in decode_all(with_crc(buf)):
        assert isinstance(result, KafkaCodecError), count


def test_crc_mismatch_and_skipping_the_check() -> None:
    buf = bytearray(batch())
    buf[-2] ^= 0xFF  # inside the last value: the structure stays valid
    for result in decode_all(bytes(buf)):
        assert isinstance(result, KafkaCodecError)
        assert "CRC" in str(result)
    rows, cols = decode_all(bytes(buf), check_crc=False)
    assert len(rows) == 4 and len(cols) == 4


def test_garbage_compressed_payload() -> None:
    for compression in ("gzip", "snappy", "lz4", "zstd"):
        buf = bytearray(batch(compression))
        for i in range(HEADER, len(buf)):
            buf[i] = (buf[i] * 7 + 13) & 0xFF
        for result in decode_all(with_crc(buf)):
            assert isinstance(result, KafkaCodecError), compression


# ------------------------------------------------------------------------------------------
# forged records (hand-built so that each field sits where we want it)
# ------------------------------------------------------------------------------------------
def zz(value: int) -> bytes:
    return cprim.encode_varlong(value)


def raw_batch(records: list[bytes], count: int | None = None) -> bytes:
    body = b"".join(records)
    head = struct.pack(
        ">qiibIhiqqqhii",
        0,
        HEADER - 12 + len(body),
        -1,
        2,
        0,
        0,
        len(records) - 1,
        1000,
        1000,
        -1,
        -1,
        -1,
        len(records) if count is None else count,
    )
    return with_crc(bytearray(head + body))


def record(fields: bytes, length: int | None = None) -> bytes:
    return zz(len(fields) if length is None else length) + fields


GOOD_FIELDS = b"\x00" + zz(0) + zz(0) + zz(1) + b"k" + zz(1) + b"v" + zz(0)


def test_hand_built_batch_is_valid() -> None:
    rows, cols = decode_all(raw_batch([record(GOOD_FIELDS)]))
    assert [(r.key, r.value, r.timestamp) for r in rows] == [(b"k", b"v", 1000)]
    assert len(cols) == 1


@pytest.mark.parametrize(
    "rec",
    [
        record(GOOD_FIELDS, length=len(GOOD_FIELDS) + 1),  # length longer than the fields
        record(GOOD_FIELDS, length=len(GOOD_FIELDS) - 1),  # shorter
        record(GOOD_FIELDS, length=-1),
        record(GOOD_FIELDS, length=(1 << 31) - 1),
        record(GOOD_FIELDS, length=3),
        b"\xff\xff\xff\xff\x0f" + GOOD_FIELDS,  # record length varint overflows 32 bits
        b"\xff\xff\xff\xff\xff\x01" + GOOD_FIELDS,  # 6-byte varint
        record(b"\x00" + b"\xff" * 10 + b"\x01" + zz(0) + zz(-1) + zz(-1) + zz(0)),  # varlong too long
        record(b"\x00" + b"\xff" * 9 + b"\x7f" + zz(0) + zz(-1) + zz(-1) + zz(0)),  # varlong overflow
        record(b"\x00" + zz(0) + zz(0) + zz(-2) + zz(-1) + zz(0)),  # key length -2
        record(b"\x00" + zz(0) + zz(0) + zz(50) + b"k" + zz(-1) + zz(0)),  # key past the record
        record(b"\x00" + zz(0) + zz(0) + zz((1 << 31) - 1) + zz(-1) + zz(0)),
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-(1 << 31)) + zz(0)),  # value length negative
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(9) + b"v" + zz(0)),  # value past the record
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(-1)),  # negative header count
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1 << 30)),  # header count too large
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(-1) + zz(-1)),  # null header key
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(2) + b"\xff\xfe" + zz(-1)),  # bad UTF-8
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(9) + b"ab" + zz(-1)),  # key past
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"a" + zz(-5)),  # value -5
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"a" + zz(40) + b"x"),
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"a"),  # header value missing
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1)),  # header count missing
        record(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(0) + b"extra"),  # bytes left in record
    ],
)
def test_forged_record_fields(rec: bytes) -> None:
    for result in decode_all(raw_batch([rec])):
        assert isinstance(result, KafkaCodecError), result


def test_records_missing_or_left_over() -> None:
    good = record(GOOD_FIELDS)
    for buf in (raw_batch([good], count=2), raw_batch([good, good], count=1), raw_batch([good]) + b""):
        results = decode_all(buf)
        if buf == raw_batch([good]):
            continue
        for result in results:
            assert isinstance(result, KafkaCodecError)


def test_offset_and_timestamp_overflow() -> None:
    fields = b"\x00" + zz((1 << 63) - 1) + zz(0) + zz(-1) + zz(-1) + zz(0)
    for result in decode_all(raw_batch([record(fields)])):  # baseTimestamp 1000 + INT64_MAX
        assert isinstance(result, KafkaCodecError)
    buf = bytearray(raw_batch([record(b"\x00" + zz(0) + zz(5) + zz(-1) + zz(-1) + zz(0))]))
    struct.pack_into(">q", buf, 0, (1 << 63) - 2)  # baseOffset + 5 overflows
    for result in decode_all(bytes(buf)):
        assert isinstance(result, KafkaCodecError)


def test_control_record_key_too_short() -> None:
    buf = bytearray(raw_batch([record(b"\x00" + zz(0) + zz(0) + zz(2) + b"\x00\x00" + zz(-1) + zz(0))]))
    struct.pack_into(">h", buf, 21, 0x20)
    _rows, cols = decode_all(with_crc(buf))
    assert isinstance(cols, KafkaCodecError)


def test_every_single_byte_mutation() -> None:
    """Each byte of a real batch set to a few values: a result or KafkaCodecError, nothing else."""
    full = batch()
    outcomes = {"ok": 0, "error": 0}
    for pos in range(len(full)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            buf = bytearray(full)
            buf[pos] = value
            for result in decode_all(bytes(buf), check_crc=False):
                outcomes["error" if isinstance(result, KafkaCodecError) else "ok"] += 1
    assert outcomes["ok"] and outcomes["error"]


# ------------------------------------------------------------------------------------------
# encoder inputs read through raw pointers
# ------------------------------------------------------------------------------------------
def forged_binary(offsets: list[int], data: bytes = b"abcdef") -> pa.Array:
    """A binary array whose offsets are rewritten after pyarrow validated them."""
    raw = bytearray(struct.pack(f"<{len(offsets)}i", *range(len(offsets))))
    arr = pa.Array.from_buffers(pa.binary(), len(offsets) - 1, [None, pa.py_buffer(raw), pa.py_buffer(data)])
    struct.pack_into(f"<{len(offsets)}i", raw, 0, *offsets)
    return arr


@pytest.mark.parametrize("offsets", [[0, 2, 100], [0, 4, 2], [-5, 1, 2], [0, 3, 7], [0, 1, -(1 << 31)]])
def test_forged_arrow_offsets(offsets: list[int]) -> None:
    arr = forged_binary(offsets)
    with pytest.raises(KafkaCodecError):
        ccol.encode_record_batch_columns(None, arr, base_timestamp=1)
    with pytest.raises(KafkaCodecError):
        ccol.encode_record_batch_columns(arr, [b"x", b"y"], base_timestamp=1)


def test_unforged_arrow_offsets_encode() -> None:
    arr = forged_binary([0, 2, 6])
    out = ccol.encode_record_batch_columns(arr, arr, base_timestamp=1)
    assert [r.key for r in crec.decode_record_batches(out)] == [b"ab", b"cdef"]


def test_non_contiguous_buffers() -> None:
    strided = memoryview(bytearray(b"abcdefgh"))[::2]
    with pytest.raises(KafkaCodecError):
        crec.encode_record_batch([(strided, b"v")], base_timestamp=1)
    with pytest.raises(KafkaCodecError):
        crec.decode_record_batches(memoryview(bytearray(batch() * 2))[::2])


def test_bytearray_key_cannot_be_resized_while_encoding() -> None:
    key = bytearray(b"key")

    def headers() -> Any:
        with pytest.raises(BufferError):
            key.extend(b"x" * 1000)  # the encoder holds the buffer: resizing is refused
        yield ("h", b"v")

    out = crec.encode_record_batch([(key, b"v", headers())], base_timestamp=1)
    assert crec.decode_record_batches(out)[0].key == b"key"


# ------------------------------------------------------------------------------------------
# primitives
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fn", "data"),
    [
        (cprim.decode_varint, b"\xff\xff\xff\xff\x1f"),  # overflows 32 bits
        (cprim.decode_varint, b"\xff\xff\xff\xff\xff\x01"),  # 6 bytes
        (cprim.decode_unsigned_varint, b"\x80"),  # truncated
        (cprim.decode_varlong, b"\xff" * 9 + b"\x02"),  # overflows 64 bits
        (cprim.decode_varlong, b"\xff" * 10 + b"\x01"),  # 11 bytes
        (cprim.decode_compact_bytes, b"\x0a\x00"),  # length 9, one byte present
        (cprim.decode_compact_bytes, b"\xff\xff\xff\xff\x0f"),  # length 2**32 - 2
        (cprim.decode_compact_string, b"\x03\xff\xfe"),  # invalid UTF-8
        (cprim.decode_uuid, b"\x00" * 15),
    ],
)
def test_primitive_readers_reject(fn: Any, data: bytes) -> None:
    with pytest.raises(KafkaCodecError):
        fn(data)


@pytest.mark.parametrize("pos", [-1, -(1 << 70), 4, 5, 1 << 70])
def test_primitive_positions_out_of_range(pos: int) -> None:
    for fn in (cprim.decode_varint, cprim.decode_varlong, cprim.decode_compact_bytes, cprim.decode_uuid):
        with pytest.raises(KafkaCodecError):
            fn(b"\x00\x00\x00\x00", pos)


def test_primitive_boundaries() -> None:
    assert cprim.decode_varint(b"\xfe\xff\xff\xff\x0f") == ((1 << 31) - 1, 5)
    assert cprim.decode_varint(b"\xff\xff\xff\xff\x0f") == (-(1 << 31), 5)
    assert cprim.decode_varlong(b"\xff" * 9 + b"\x01") == (-(1 << 63), 10)
    assert cprim.decode_unsigned_varint(b"\xff\xff\xff\xff\x0f") == ((1 << 32) - 1, 5)
    assert cprim.decode_varlong(cprim.encode_varlong((1 << 63) - 1)) == ((1 << 63) - 1, 10)
