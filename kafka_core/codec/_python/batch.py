"""The pure-Python twin of ``_codec/batch.pyx`` (with ``reader.pxd``), shared by records.py and
columnar.py: the batch walk and the record parser (the Cython twins cimport batch and reader).

The walk goes over concatenated batches, stops cleanly at a truncated trailing batch, and hands
magic 0/1 entries to ``kafka_core.codec.legacy``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec import compression as _compression
from kafka_core.codec import legacy as _legacy
from kafka_core.codec.crc import crc32c
from kafka_core.errors import KafkaCodecError

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_CRC = struct.Struct(">I")
_LENGTH_AND_MAGIC = struct.Struct(">qi")
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MIN_RECORD_SIZE = 7  # length varint + attributes + 5 one-byte varints
_LEGACY_MIN_SIZE = 14  # smallest v0 message

_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20


def _varint_slow(data: bytes, pos: int, max_bytes: int, bits: int, what: str, where: int) -> tuple[int, int]:
    """Strict LEB128 + zigzag read; ``data[pos]`` is known to have its high bit set."""
    result = 0
    shift = 0
    for i in range(max_bytes):
        byte = data[pos + i]  # IndexError past the data: reported by the caller
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >> bits:
                raise KafkaCodecError(f"{what} at byte {where + pos}: varint overflows {bits} bits")
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    raise KafkaCodecError(f"{what} at byte {where + pos}: varint longer than {max_bytes} bytes")


def _parse_records(data: bytes, count: int, where: int, sink: list) -> None:
    """Parse ``count`` records filling ``data`` exactly; append
    ``(timestamp_delta, offset_delta, key, value, headers)`` to ``sink``. ``where`` is the
    position of ``data[0]`` in the caller's buffer (for error messages; compressed payloads
    report positions inside the decompressed data plus the payload's start)."""
    end = len(data)
    pos = 0
    slow = _varint_slow
    append = sink.append
    try:
        for _ in range(count):
            start = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = slow(data, pos, 5, 32, "record length", where)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise KafkaCodecError(
                    f"record at byte {where + start}: length {length} is invalid "
                    f"({end - pos} bytes left in the batch)"
                )
            pos += 1  # attributes (unused)
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                ts_delta, pos = slow(data, pos, 10, 64, "timestamp delta", where)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                offset_delta, pos = slow(data, pos, 5, 32, "offset delta", where)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                klen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                klen, pos = slow(data, pos, 5, 32, "key length", where)
            if klen >= 0:
                if pos + klen > rec_end:
                    raise KafkaCodecError(
                        f"record at byte {where + start}: key length {klen} runs past the record"
                    )
                key = data[pos : pos + klen]
                pos += klen
            elif klen == -1:
                key = None
            else:
                raise KafkaCodecError(f"record at byte {where + start}: key length {klen} is invalid")
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                vlen, pos = slow(data, pos, 5, 32, "value length", where)
            if vlen >= 0:
                if pos + vlen > rec_end:
                    raise KafkaCodecError(
                        f"record at byte {where + start}: value length {vlen} runs past the record"
                    )
                value = data[pos : pos + vlen]
                pos += vlen
            elif vlen == -1:
                value = None
            else:
                raise KafkaCodecError(f"record at byte {where + start}: value length {vlen} is invalid")
            b = data[pos]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                hcount, pos = slow(data, pos, 5, 32, "header count", where)
            headers: list = []
            if hcount:
                if hcount < 0 or hcount * 2 > rec_end - pos:
                    raise KafkaCodecError(f"record at byte {where + start}: header count {hcount} is invalid")
                for _h in range(hcount):
                    b = data[pos]
                    if b < 0x80:
                        hklen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hklen, pos = slow(data, pos, 5, 32, "header key length", where)
                    if hklen < 0 or pos + hklen > rec_end:
                        if hklen == -1:
                            raise KafkaCodecError(f"record at byte {where + start}: header key is null")
                        raise KafkaCodecError(
                            f"record at byte {where + start}: header key length {hklen} is invalid"
                        )
                    try:
                        hkey = data[pos : pos + hklen].decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise KafkaCodecError(
                            f"record at byte {where + start}: header key is not valid UTF-8 ({exc.reason})"
                        ) from None
                    pos += hklen
                    b = data[pos]
                    if b < 0x80:
                        hvlen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hvlen, pos = slow(data, pos, 5, 32, "header value length", where)
                    if hvlen >= 0:
                        if pos + hvlen > rec_end:
                            raise KafkaCodecError(
                                f"record at byte {where + start}: header value length {hvlen} runs past the record"
                            )
                        hval = data[pos : pos + hvlen]
                        pos += hvlen
                    elif hvlen == -1:
                        hval = None
                    else:
                        raise KafkaCodecError(
                            f"record at byte {where + start}: header value length {hvlen} is invalid"
                        )
                    headers.append((hkey, hval))
            if pos != rec_end:
                raise KafkaCodecError(
                    f"record at byte {where + start}: length {length} disagrees with its fields "
                    f"({pos - (rec_end - length)} bytes)"
                )
            append((ts_delta, offset_delta, key, value, headers))
    except IndexError:
        raise KafkaCodecError(
            f"record batch at byte {where}: records run past the end of the batch ({count} records declared)"
        ) from None
    if pos != end:
        raise KafkaCodecError(
            f"record batch at byte {where}: {end - pos} bytes left over after {count} records"
        )


class _Batch:
    """Parsed v2 batch header plus its raw records."""

    __slots__ = (
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "is_control",
        "is_transactional",
        "last_offset_delta",
        "log_append_time",
        "max_timestamp",
        "producer_epoch",
        "producer_id",
        "records",
    )
    base_offset: int
    base_sequence: int
    base_timestamp: int
    is_control: bool
    is_transactional: bool
    last_offset_delta: int
    log_append_time: bool
    max_timestamp: int
    producer_epoch: int
    producer_id: int
    records: list[Any]  # (timestamp delta, offset delta, key, value, headers) per record


def _walk(buf: Buffer, check_crc: bool) -> Iterator[_Batch | tuple[int, list[Any]]]:
    """Yield a ``_Batch`` per v2 batch and ``(entry_offset, legacy_records)`` per legacy entry."""
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    n = len(view)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        base_offset, length = _LENGTH_AND_MAGIC.unpack_from(view, pos)
        if length < _LEGACY_MIN_SIZE:
            raise KafkaCodecError(
                f"batch at byte {pos}: batch length {length} is below the minimum ({_LEGACY_MIN_SIZE})"
            )
        end = pos + LOG_OVERHEAD + length
        if end > n:
            break  # truncated trailing batch (a Fetch response may end mid-batch)
        magic = view[pos + 16]
        if magic == 2:
            yield _decode_v2(view, pos, end, length, check_crc)
        elif magic == 0 or magic == 1:
            records, _ = _legacy.decode_legacy_entry(view, pos, check_crc=check_crc)
            yield (base_offset, records)
        else:
            raise KafkaCodecError(
                f"batch at byte {pos}: unknown magic {magic if magic < 128 else magic - 256}"
            )
        pos = end


def _decode_v2(view: memoryview, pos: int, end: int, length: int, check_crc: bool) -> _Batch:
    if length < MIN_BATCH_LENGTH:
        raise KafkaCodecError(
            f"batch at byte {pos}: batch length {length} is below the v2 minimum ({MIN_BATCH_LENGTH})"
        )
    (
        base_offset,
        _length,
        _leader_epoch,
        _magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _HEADER.unpack_from(view, pos)
    if check_crc:
        computed = crc32c(view[pos + _ATTRIBUTES_OFFSET : end])
        if computed != crc:
            raise KafkaCodecError(
                f"batch at byte {pos}: CRC mismatch (expected {crc:#010x}, computed {computed:#010x})"
            )
    codec = attributes & 0x07
    if codec > 4:
        raise KafkaCodecError(f"batch at byte {pos}: unknown compression id {codec}")
    if count < 0:
        raise KafkaCodecError(f"batch at byte {pos}: negative record count {count}")
    payload_start = pos + HEADER_SIZE
    if codec == 0:
        data = bytes(view[payload_start:end])
    elif count == 0 and payload_start == end:
        data = b""
    else:
        if count * MIN_RECORD_SIZE > _compression.MAX_DECOMPRESSED_SIZE:
            raise KafkaCodecError(f"batch at byte {pos}: record count {count} is implausible")
        try:
            data = _compression.decompress(codec, view[payload_start:end])
        except KafkaCodecError as exc:
            raise KafkaCodecError(f"batch at byte {pos}: {exc}") from None
    if count * MIN_RECORD_SIZE > len(data):
        raise KafkaCodecError(
            f"batch at byte {pos}: record count {count} is larger than {len(data)} bytes of records can hold"
        )
    batch = _Batch()
    batch.base_offset = base_offset
    batch.base_sequence = base_sequence
    batch.base_timestamp = base_timestamp
    batch.max_timestamp = max_timestamp
    batch.last_offset_delta = last_offset_delta
    batch.producer_id = producer_id
    batch.producer_epoch = producer_epoch
    batch.is_transactional = bool(attributes & _ATTR_TRANSACTIONAL)
    batch.is_control = bool(attributes & _ATTR_CONTROL)
    batch.log_append_time = bool(attributes & _ATTR_TIMESTAMP_TYPE)
    records: list = []
    _parse_records(data, count, payload_start if codec == 0 else pos, records)
    batch.records = records
    return batch


def check_control_records(batch: _Batch) -> None:
    """Every record of a control batch is a marker whose key holds version and type (4 bytes),
    and its offset and timestamp fit int64: the row and columnar decoders reject the rest alike."""
    base_ts = None if batch.log_append_time else batch.base_timestamp
    for tsd, od, key, _value, _headers in batch.records:
        if key is None or len(key) < 4:
            raise KafkaCodecError(
                f"control batch with base offset {batch.base_offset}: control record key is "
                f"{'null' if key is None else f'{len(key)} bytes'}, needs 4 (offset delta {od})"
            )
        _check_int64(batch.base_offset + od, "offset", batch)
        if base_ts is not None:
            _check_int64(base_ts + tsd, "timestamp", batch)


def _check_int64(value: int, what: str, batch: _Batch) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"batch with base offset {batch.base_offset}: {what} {value} overflows int64")
