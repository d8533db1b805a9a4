"""Wire primitives shared by the record codec and the protocol layer.

Varints follow Kafka's (protobuf-style) encoding: unsigned LEB128, and signed values
zigzag-mapped first. 32-bit varints take at most 5 bytes, 64-bit varlongs at most 10; a longer
or overflowing encoding is rejected rather than silently truncated.
"""

from __future__ import annotations

import uuid

from kafka_core._typing import Buffer
from kafka_core.errors import KafkaCodecError

__all__ = [
    "decode_compact_bytes",
    "decode_compact_string",
    "decode_unsigned_varint",
    "decode_uuid",
    "decode_varint",
    "decode_varlong",
    "encode_compact_bytes",
    "encode_compact_string",
    "encode_unsigned_varint",
    "encode_uuid",
    "encode_varint",
    "encode_varlong",
    "new_buffer",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "zigzag_decode",
    "zigzag_encode",
]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1
_ZERO_UUID = uuid.UUID(int=0)


def zigzag_encode(value: int) -> int:
    """Map a signed 64-bit integer to an unsigned one (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} does not fit in 64 bits")
    return ((value << 1) ^ (value >> 63)) & _UINT64_MAX


def zigzag_decode(value: int) -> int:
    if not 0 <= value <= _UINT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} is not an unsigned 64-bit value")
    return (value >> 1) ^ -(value & 1)


def _size_of_unsigned(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def size_of_unsigned_varint(value: int) -> int:
    if not 0 <= value <= _UINT32_MAX:
        raise KafkaCodecError(f"unsigned varint: {value} does not fit in 32 bits")
    return _size_of_unsigned(value)


def size_of_varint(value: int) -> int:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise KafkaCodecError(f"varint: {value} does not fit in 32 bits")
    return _size_of_unsigned(zigzag_encode(value))


def size_of_varlong(value: int) -> int:
    return _size_of_unsigned(zigzag_encode(value))


def _encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_unsigned(buf: Buffer, pos: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    view = memoryview(buf)
    end = len(view)
    if pos < 0:
        raise KafkaCodecError(f"{what}: negative position {pos}")
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise KafkaCodecError(f"{what}: truncated at byte {pos + i} (buffer is {end} bytes)")
        byte = view[pos + i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >> bits:
                raise KafkaCodecError(f"{what}: value overflows {bits} bits at byte {pos}")
            return result, pos + i + 1
        shift += 7
    raise KafkaCodecError(f"{what}: longer than {max_bytes} bytes at byte {pos}")


def encode_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= _UINT32_MAX:
        raise KafkaCodecError(f"unsigned varint: {value} does not fit in 32 bits")
    return _encode_unsigned(value)


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Return ``(value, next_pos)``."""
    return _decode_unsigned(buf, pos, 5, 32, "unsigned varint")


def encode_varint(value: int) -> bytes:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise KafkaCodecError(f"varint: {value} does not fit in 32 bits")
    return _encode_unsigned(zigzag_encode(value))


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    raw, pos = _decode_unsigned(buf, pos, 5, 32, "varint")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varlong(value: int) -> bytes:
    return _encode_unsigned(zigzag_encode(value))


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    raw, pos = _decode_unsigned(buf, pos, 10, 64, "varlong")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_compact_bytes(value: Buffer | None) -> bytes:
    """Length+1 as an unsigned varint (0 means null), then the bytes."""
    if value is None:
        return b"\x00"
    data = bytes(value)
    return _encode_unsigned(len(data) + 1) + data


def decode_compact_bytes(buf: Buffer, pos: int = 0) -> tuple[bytes | None, int]:
    length, pos = _decode_unsigned(buf, pos, 5, 32, "compact bytes length")
    if length == 0:
        return None, pos
    length -= 1
    view = memoryview(buf)
    if pos + length > len(view):
        raise KafkaCodecError(
            f"compact bytes: length {length} at byte {pos} runs past the buffer ({len(view)} bytes)"
        )
    return bytes(view[pos : pos + length]), pos + length


def encode_compact_string(value: str | None) -> bytes:
    return encode_compact_bytes(None if value is None else value.encode("utf-8"))


def decode_compact_string(buf: Buffer, pos: int = 0) -> tuple[str | None, int]:
    start = pos
    data, pos = decode_compact_bytes(buf, pos)
    if data is None:
        return None, pos
    try:
        return data.decode("utf-8"), pos
    except UnicodeDecodeError as exc:
        raise KafkaCodecError(f"compact string at byte {start}: invalid UTF-8 ({exc.reason})") from None


def encode_uuid(value: uuid.UUID | None) -> bytes:
    """16 big-endian bytes; None is written as the all-zero UUID, as Kafka does."""
    return (value or _ZERO_UUID).bytes


def decode_uuid(buf: Buffer, pos: int = 0) -> tuple[uuid.UUID, int]:
    view = memoryview(buf)
    if pos < 0 or pos + 16 > len(view):
        raise KafkaCodecError(f"uuid: needs 16 bytes at byte {pos}, buffer is {len(view)} bytes")
    return uuid.UUID(bytes=bytes(view[pos : pos + 16])), pos + 16


def new_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes for a reader to fill (the Cython twin skips clearing it)."""
    if size < 0:
        raise ValueError("size must not be negative")
    return bytearray(size)
