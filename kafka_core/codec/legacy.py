"""Legacy message sets: Kafka's message formats v0 and v1 (magic 0 and 1), shared by both twins.

Layout of one entry of a message set (all big-endian)::

    offset int64 | messageSize int32 | crc uint32 (CRC32 IEEE of magic..end) | magic int8 |
    attributes int8 | [timestamp int64, magic 1 only] | key bytes (int32 length, -1 = null) |
    value bytes (int32 length, -1 = null)

attributes: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4; zstd needs magic 2), bit 3
timestamp type (magic 1: 1 = LogAppendTime). A compressed message is a *wrapper*: its value is a
compressed message set of inner messages. For magic 1 the inner offsets are relative: the
wrapper carries the absolute offset of the last inner message, so
``absolute = wrapper_offset - last_inner_offset + inner_offset`` (when that base is negative, as
in a wrapper a producer built before the broker assigned offsets, the inner offsets are kept, as
Java does); for magic 0 inner offsets are absolute. When a magic 1 wrapper says LogAppendTime, every inner message takes the wrapper's
timestamp. Magic 0 messages have no timestamp: timestamp -1 and timestamp type -1 (Java's
NO_TIMESTAMP_TYPE).

Decoding yields plain tuples ``(offset, timestamp, timestamp_type, key, value)``; the record
codec (either twin) turns them into its own ``KafkaRecord`` (no headers, producer id -1).
``encode_legacy_message_set`` writes real v0/v1 bytes (used by the tests and tools).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec import compression as _compression
from kafka_core.errors import KafkaCodecError

__all__ = [
    "LegacyRecord",
    "decode_legacy_entry",
    "decode_legacy_message_set",
    "encode_legacy_message_set",
]

LegacyRecord = tuple[int, int, int, "bytes | None", "bytes | None"]

_ENTRY = struct.Struct(">qi")  # offset, messageSize
_MSG_V0 = struct.Struct(">IbB")  # crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

LOG_OVERHEAD = 12
MIN_MESSAGE_SIZE = (14, 22)  # per magic: crc + magic + attributes [+ timestamp] + key/value lengths
#: A compressed wrapper inside a compressed wrapper is tolerated this many levels deep.
MAX_NESTING = 4


def _bytes_field(view: memoryview, pos: int, end: int, what: str, at: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise KafkaCodecError(f"legacy message at byte {at}: {what} length runs past the message")
    (length,) = _I32.unpack_from(view, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise KafkaCodecError(f"legacy message at byte {at}: {what} length {length} is invalid")
    return bytes(view[pos : pos + length]), pos + length


def _decode_message(
    view: memoryview,
    pos: int,
    end: int,
    offset: int,
    check_crc: bool,
    depth: int,
    out: list,
    base: int,
) -> None:
    """Decode the message in ``view[pos:end]`` (after offset and size) whose offset is ``offset``;
    append its records to ``out``. ``base`` is the absolute position of ``view`` in the caller's
    buffer (for messages)."""
    at = base + pos - LOG_OVERHEAD
    if end - pos < MIN_MESSAGE_SIZE[0]:
        raise KafkaCodecError(f"legacy message at byte {at}: {end - pos} bytes is too short")
    crc, magic, attributes = _MSG_V0.unpack_from(view, pos)
    if magic not in (0, 1):
        raise KafkaCodecError(f"legacy message at byte {at}: unknown magic {magic}")
    if end - pos < MIN_MESSAGE_SIZE[magic]:
        raise KafkaCodecError(
            f"legacy message at byte {at}: {end - pos} bytes is too short for magic {magic}"
        )
    if check_crc:
        computed = zlib.crc32(view[pos + 4 : end])
        if computed != crc:
            raise KafkaCodecError(
                f"legacy message at byte {at}: CRC mismatch (expected {crc:#010x}, computed {computed:#010x})"
            )
    p = pos + 6
    if magic == 1:
        (timestamp,) = _I64.unpack_from(view, p)
        p += 8
        ts_type = 1 if attributes & 0x08 else 0
    else:
        timestamp = -1
        ts_type = -1
    key, p = _bytes_field(view, p, end, "key", at)
    value, p = _bytes_field(view, p, end, "value", at)
    if p != end:
        raise KafkaCodecError(f"legacy message at byte {at}: {end - p} bytes left over after the value")
    codec = attributes & 0x07
    if codec == 0:
        out.append((offset, timestamp, ts_type, key, value))
        return
    if codec > 3:
        raise KafkaCodecError(
            f"legacy message at byte {at}: compression id {codec} is not valid for magic {magic}"
        )
    if value is None:
        raise KafkaCodecError(f"legacy message at byte {at}: compressed wrapper with a null value")
    if depth >= MAX_NESTING:
        raise KafkaCodecError(f"legacy message at byte {at}: compressed wrappers nested too deep")
    if codec == 3 and magic == 0:
        inner = _compression.decompress_lz4_legacy(value)
    else:
        inner = _compression.decompress(codec, value)
    entries = _split_entries(memoryview(inner), strict=True, what=f"compressed message set at byte {at}")
    if not entries:
        return
    # As Java's DeepRecordsIterator: a negative base (a producer-side wrapper, offset 0) leaves
    # the inner offsets as they are.
    shift = offset - entries[-1][0] if magic == 1 else 0
    if shift < 0:
        shift = 0
    inner_view = memoryview(inner)
    children: list = []
    for inner_offset, start, stop in entries:
        if not -(1 << 63) <= shift + inner_offset < (1 << 63):
            raise KafkaCodecError(f"legacy message at byte {at}: inner offset {inner_offset} overflows int64")
        _decode_message(inner_view, start, stop, shift + inner_offset, check_crc, depth + 1, children, 0)
    if magic == 1 and ts_type == 1:
        children = [(o, timestamp, 1, k, v) for (o, _t, _tt, k, v) in children]
    out.extend(children)


def _split_entries(view: memoryview, *, strict: bool, what: str) -> list[tuple[int, int, int]]:
    """(offset, message start, message end) of each entry; a trailing partial entry is an error
    when ``strict``, else the walk stops there."""
    n = len(view)
    pos = 0
    entries = []
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            if strict:
                raise KafkaCodecError(f"{what}: truncated entry at byte {pos}")
            break
        offset, size = _ENTRY.unpack_from(view, pos)
        if size < MIN_MESSAGE_SIZE[0]:
            raise KafkaCodecError(f"{what}: message size {size} at byte {pos} is below the minimum 14")
        start = pos + LOG_OVERHEAD
        if start + size > n:
            if strict:
                raise KafkaCodecError(f"{what}: message at byte {pos} runs past the end")
            break
        entries.append((offset, start, start + size))
        pos = start + size
    return entries


def decode_legacy_entry(
    buf: Buffer, pos: int = 0, *, check_crc: bool = True
) -> tuple[list[LegacyRecord], int]:
    """Decode the one legacy entry (offset, size, message) at ``pos`` of ``buf``, which must hold
    it whole; return its records (several for a compressed wrapper) and the position after it."""
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    n = len(view)
    if pos < 0 or n - pos < LOG_OVERHEAD:
        raise KafkaCodecError(f"legacy message at byte {pos}: truncated entry header")
    offset, size = _ENTRY.unpack_from(view, pos)
    if size < MIN_MESSAGE_SIZE[0]:
        raise KafkaCodecError(f"legacy message at byte {pos}: message size {size} is below the minimum 14")
    end = pos + LOG_OVERHEAD + size
    if end > n:
        raise KafkaCodecError(f"legacy message at byte {pos}: message size {size} runs past the buffer")
    out: list = []
    _decode_message(view, pos + LOG_OVERHEAD, end, offset, check_crc, 0, out, 0)
    return out, end


def decode_legacy_message_set(buf: Buffer, *, check_crc: bool = True) -> list[LegacyRecord]:
    """Decode a whole v0/v1 message set; a trailing partial entry ends it cleanly (as in a Fetch
    response)."""
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    out: list = []
    for offset, start, stop in _split_entries(view, strict=False, what="message set"):
        _decode_message(view, start, stop, offset, check_crc, 0, out, 0)
    return out


# --------------------------------------------------------------------------------------------
# encoding (tests, tools)
# --------------------------------------------------------------------------------------------
def _encode_message(
    magic: int, attributes: int, timestamp: int, key: Buffer | None, value: Buffer | None
) -> bytes:
    body = bytearray()
    body += struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            data = bytes(field)
            body += _I32.pack(len(data))
            body += data
    return struct.pack(">I", zlib.crc32(body)) + bytes(body)


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY.pack(offset, len(message)) + message


def encode_legacy_message_set(
    records: Iterable[Any],
    *,
    magic: int = 1,
    base_offset: int = 0,
    compression: str | int = "none",
    compression_level: int | None = None,
    timestamp: int | None = None,
    log_append_time: bool = False,
    relative_offsets: bool | None = None,
    broken_lz4_checksum: bool = False,
) -> bytes:
    """Write ``records`` (``(key, value)`` or ``(key, value, timestamp)`` tuples) as a v0/v1
    message set, the way old producers and brokers did.

    Uncompressed: one entry per record, offsets ``base_offset + i``. Compressed: one wrapper
    entry at the last offset holding the compressed inner set; inner offsets are relative
    (0..n-1) for magic 1 and absolute for magic 0 (``relative_offsets`` overrides). ``timestamp``
    is the default record timestamp (now when None); a magic 1 wrapper carries the largest one
    (or, with ``log_append_time``, ``timestamp`` itself and the LogAppendTime flag).
    ``broken_lz4_checksum`` writes the LZ4 frame header checksum Kafka 0.8 computed (over the
    magic number too)."""
    if magic not in (0, 1):
        raise KafkaCodecError(f"legacy message sets have magic 0 or 1, not {magic}")
    codec = _compression.codec_id(compression)
    if codec == _compression.CODEC_ZSTD:
        raise KafkaCodecError("zstd needs magic 2")
    default_ts = int(time.time() * 1000) if timestamp is None else timestamp
    items = []
    for rec in records:
        if len(rec) == 3:
            key, value, ts = rec
            ts = default_ts if ts is None else ts
        else:
            key, value = rec
            ts = default_ts
        items.append((key, value, ts))
    if not items:
        raise KafkaCodecError("cannot encode an empty message set")
    ts_flag = 0x08 if (log_append_time and magic == 1) else 0
    if codec == 0:
        return b"".join(
            _entry(base_offset + i, _encode_message(magic, ts_flag, ts, k, v))
            for i, (k, v, ts) in enumerate(items)
        )
    if relative_offsets is None:
        relative_offsets = magic == 1
    inner = b"".join(
        _entry(i if relative_offsets else base_offset + i, _encode_message(magic, 0, ts, k, v))
        for i, (k, v, ts) in enumerate(items)
    )
    payload = _compression.compress(codec, inner, compression_level)
    if broken_lz4_checksum and codec == _compression.CODEC_LZ4:
        frame = bytearray(payload)
        frame[6] = (_compression.xxh32(frame[0:6]) >> 8) & 0xFF  # our frames: 2-byte descriptor
        payload = bytes(frame)
    wrapper_ts = default_ts if log_append_time else max(ts for _k, _v, ts in items)
    wrapper = _encode_message(magic, codec | ts_flag, wrapper_ts, None, payload)
    return _entry(base_offset + len(items) - 1, wrapper)
