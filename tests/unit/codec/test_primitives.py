"""Wire primitives (varints, compact strings/bytes, uuid), through the chosen implementation."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_core import codec as K
from kafka_core.errors import KafkaCodecError

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
UINT32 = st.integers(0, (1 << 32) - 1)

props = settings(max_examples=300, deadline=None)


def test_exports():
    for name in K.primitives.__all__:
        assert getattr(K, name) is getattr(K.primitives, name)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, 0),
        (-1, 1),
        (1, 2),
        (-2, 3),
        (2, 4),
        ((1 << 31) - 1, (1 << 32) - 2),
        (-(1 << 31), (1 << 32) - 1),
        ((1 << 63) - 1, (1 << 64) - 2),
        (-(1 << 63), (1 << 64) - 1),
    ],
)
def test_zigzag_known(value, encoded):
    assert K.zigzag_encode(value) == encoded
    assert K.zigzag_decode(encoded) == value


def test_zigzag_range():
    for bad in (1 << 63, -(1 << 63) - 1):
        with pytest.raises(KafkaCodecError):
            K.zigzag_encode(bad)
    for bad in (-1, 1 << 64):
        with pytest.raises(KafkaCodecError):
            K.zigzag_decode(bad)


@props
@given(INT64)
def test_zigzag_round_trip(v):
    assert K.zigzag_decode(K.zigzag_encode(v)) == v


# Vectors from Kafka's ByteUtilsTest
@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (8191, b"\xfe\x7f"),
        (-8192, b"\xff\x7f"),
        (8192, b"\x80\x80\x01"),
        (-8193, b"\x81\x80\x01"),
        (1048575, b"\xfe\xff\x7f"),
        (-1048576, b"\xff\xff\x7f"),
        (1048576, b"\x80\x80\x80\x01"),
        (-1048577, b"\x81\x80\x80\x01"),
        (134217727, b"\xfe\xff\xff\x7f"),
        (-134217728, b"\xff\xff\xff\x7f"),
        (134217728, b"\x80\x80\x80\x80\x01"),
        (-134217729, b"\x81\x80\x80\x80\x01"),
        ((1 << 31) - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(1 << 31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_vectors(value, encoded):
    assert K.encode_varint(value) == encoded
    assert K.decode_varint(encoded) == (value, len(encoded))
    assert K.size_of_varint(value) == len(encoded)
    assert K.encode_varlong(value) == encoded
    assert K.decode_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ((1 << 63) - 1, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
        (-(1 << 63), b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
        (1 << 35, b"\x80\x80\x80\x80\x80\x02"),
    ],
)
def test_varlong_vectors(value, encoded):
    assert K.encode_varlong(value) == encoded
    assert K.decode_varlong(encoded) == (value, len(encoded))
    assert K.size_of_varlong(value) == len(encoded)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varint_vectors(value, encoded):
    assert K.encode_unsigned_varint(value) == encoded
    assert K.decode_unsigned_varint(encoded) == (value, len(encoded))
    assert K.size_of_unsigned_varint(value) == len(encoded)


@props
@given(INT32, st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip_in_context(v, before, after):
    enc = K.encode_varint(v)
    assert len(enc) == K.size_of_varint(v) <= 5
    assert K.decode_varint(before + enc + after, len(before)) == (v, len(before) + len(enc))
    assert K.decode_varint(bytearray(enc)) == (v, len(enc))
    assert K.decode_varint(memoryview(before + enc), len(before)) == (v, len(before) + len(enc))


@props
@given(INT64)
def test_varlong_round_trip(v):
    enc = K.encode_varlong(v)
    assert len(enc) == K.size_of_varlong(v) <= 10
    assert K.decode_varlong(enc + b"\xff") == (v, len(enc))


@props
@given(UINT32)
def test_unsigned_varint_round_trip(v):
    enc = K.encode_unsigned_varint(v)
    assert len(enc) == K.size_of_unsigned_varint(v) <= 5
    assert K.decode_unsigned_varint(enc) == (v, len(enc))


def test_encode_ranges():
    for bad in (1 << 31, -(1 << 31) - 1):
        with pytest.raises(KafkaCodecError):
            K.encode_varint(bad)
        with pytest.raises(KafkaCodecError):
            K.size_of_varint(bad)
    for bad in (1 << 63, -(1 << 63) - 1):
        with pytest.raises(KafkaCodecError):
            K.encode_varlong(bad)
        with pytest.raises(KafkaCodecError):
            K.size_of_varlong(bad)
    for bad in (-1, 1 << 32):
        with pytest.raises(KafkaCodecError):
            K.encode_unsigned_varint(bad)
        with pytest.raises(KafkaCodecError):
            K.size_of_unsigned_varint(bad)


@pytest.mark.parametrize(
    ("decoder", "data"),
    [
        # longer than 5 bytes for 32-bit
        ("decode_varint", b"\x80\x80\x80\x80\x80\x00"),
        ("decode_unsigned_varint", b"\x80\x80\x80\x80\x80\x00"),
        # 5 bytes whose last byte carries bits past 32
        ("decode_varint", b"\xff\xff\xff\xff\x1f"),
        ("decode_unsigned_varint", b"\x80\x80\x80\x80\x10"),
        ("decode_varint", b"\xff\xff\xff\xff\x7f"),
        # longer than 10 bytes for 64-bit
        ("decode_varlong", b"\x80" * 10 + b"\x00"),
        # 10 bytes whose last byte carries bits past 64
        ("decode_varlong", b"\xff" * 9 + b"\x02"),
        ("decode_varlong", b"\xff" * 9 + b"\x7f"),
        # truncated
        ("decode_varint", b""),
        ("decode_varint", b"\x80"),
        ("decode_varlong", b"\xff\xff"),
        ("decode_unsigned_varint", b"\x80\x80"),
    ],
)
def test_decode_rejects(decoder, data):
    with pytest.raises(KafkaCodecError):
        getattr(K, decoder)(data)


def test_decode_positions():
    with pytest.raises(KafkaCodecError):
        K.decode_varint(b"\x00", 1)
    with pytest.raises(KafkaCodecError):
        K.decode_varint(b"\x00", -1)
    assert K.decode_varint(b"\x00\x02", 1) == (1, 2)


@props
@given(st.binary(max_size=12))
def test_decoders_never_escape(data):
    for name in (
        "decode_varint",
        "decode_varlong",
        "decode_unsigned_varint",
        "decode_compact_bytes",
        "decode_compact_string",
        "decode_uuid",
    ):
        with contextlib.suppress(KafkaCodecError):
            getattr(K, name)(data)


def test_compact_bytes():
    assert K.encode_compact_bytes(None) == b"\x00"
    assert K.encode_compact_bytes(b"") == b"\x01"
    assert K.encode_compact_bytes(b"abc") == b"\x04abc"
    assert K.encode_compact_bytes(bytearray(b"abc")) == b"\x04abc"
    assert K.encode_compact_bytes(memoryview(b"abc")) == b"\x04abc"
    assert K.decode_compact_bytes(b"\x00") == (None, 1)
    assert K.decode_compact_bytes(b"\x01") == (b"", 1)
    assert K.decode_compact_bytes(b"xx\x04abcz", 2) == (b"abc", 6)
    big = b"y" * 300
    assert K.encode_compact_bytes(big) == b"\xad\x02" + big
    assert K.decode_compact_bytes(K.encode_compact_bytes(big)) == (big, 302)
    with pytest.raises(KafkaCodecError):
        K.decode_compact_bytes(b"\x05abc")
    with pytest.raises(KafkaCodecError):
        K.decode_compact_bytes(b"")


def test_compact_string():
    assert K.encode_compact_string(None) == b"\x00"
    assert K.encode_compact_string("") == b"\x01"
    assert K.encode_compact_string("héllo") == b"\x07h\xc3\xa9llo"
    assert K.decode_compact_string(b"\x07h\xc3\xa9llo") == ("héllo", 7)
    assert K.decode_compact_string(b"\x00") == (None, 1)
    with pytest.raises(KafkaCodecError, match="UTF-8"):
        K.decode_compact_string(b"\x03\xff\xfe")
    with pytest.raises(KafkaCodecError):
        K.decode_compact_string(b"\x09abc")


@props
@given(st.none() | st.text(max_size=50))
def test_compact_string_round_trip(s):
    enc = K.encode_compact_string(s)
    assert K.decode_compact_string(enc) == (s, len(enc))


@props
@given(st.none() | st.binary(max_size=300))
def test_compact_bytes_round_trip(b):
    enc = K.encode_compact_bytes(b)
    assert K.decode_compact_bytes(enc + b"tail") == (b, len(enc))


def test_uuid():
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    assert K.encode_uuid(u) == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert K.encode_uuid(None) == b"\x00" * 16
    assert K.decode_uuid(b"x" + u.bytes, 1) == (u, 17)
    assert K.decode_uuid(b"\x00" * 16) == (uuid.UUID(int=0), 16)
    with pytest.raises(KafkaCodecError):
        K.decode_uuid(b"\x00" * 15)
    with pytest.raises(KafkaCodecError):
        K.decode_uuid(b"\x00" * 16, 1)


@props
@given(st.uuids())
def test_uuid_round_trip(u):
    assert K.decode_uuid(K.encode_uuid(u)) == (u, 16)


@pytest.mark.parametrize("size", [0, 1, 4096, 3 << 20])
def test_new_buffer_is_a_bytearray_of_the_size(size):
    buf = K.new_buffer(size)
    assert type(buf) is bytearray and len(buf) == size
    buf[-1:] = b"x" if size else b""  # writable, resizable like any bytearray


def test_new_buffer_rejects_negative_sizes():
    with pytest.raises(ValueError):
        K.new_buffer(-1)
