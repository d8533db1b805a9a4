"""RecordBatch v2 (magic 2) encoder/decoder: the pure-Python twin of ``_codec/records.pyx``.

The byte layout, inputs and errors are those of ``docs/codec.md``. The encoder computes the
exact size first and writes into one ``bytearray`` (records first, then the header and the
CRC32C over attributes..end); the decoder walks concatenated batches, stops cleanly at a
truncated trailing batch, and hands magic 0/1 entries to ``kafka_core.codec.legacy``.
"""

from __future__ import annotations

import operator
import struct
import time
from array import array
from collections.abc import Iterable
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec import compression as _compression
from kafka_core.codec import legacy as _legacy
from kafka_core.codec.columns import BatchInfo, RecordColumns, headers_type
from kafka_core.codec.crc import crc32c
from kafka_core.errors import KafkaCodecError

__all__ = [
    "KafkaRecord",
    "decode_record_batches",
    "decode_record_batches_columns",
    "encode_record_batch",
    "encode_record_batch_columns",
]

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


def _headers_list(headers: Any) -> Any:
    if type(headers) is list:
        return headers
    try:
        return list(headers)
    except TypeError:
        return headers


class KafkaRecord:
    """One record, as encoded into / decoded from a batch."""

    __slots__ = (
        "headers",
        "is_control",
        "is_transactional",
        "key",
        "offset",
        "producer_epoch",
        "producer_id",
        "timestamp",
        "timestamp_type",
        "value",
    )

    def __init__(
        self,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Iterable[tuple[str, Buffer | None]] = (),
        timestamp: int | None = None,
        offset: int = -1,
        timestamp_type: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None:
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
        self.offset = offset
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.is_transactional = is_transactional
        self.is_control = is_control

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaRecord):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.timestamp_type == other.timestamp_type
            and self.key == other.key
            and self.value == other.value
            and _headers_list(self.headers) == _headers_list(other.headers)
            and self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and self.is_transactional == other.is_transactional
            and self.is_control == other.is_control
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"KafkaRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------
def _usize(u: int) -> int:
    """Bytes of the unsigned LEB128 encoding of ``u`` (>= 0)."""
    if u < 0x80:
        return 1
    if u < 0x4000:
        return 2
    if u < 0x200000:
        return 3
    if u < 0x10000000:
        return 4
    n = 5
    u >>= 35
    while u:
        n += 1
        u >>= 7
    return n


def _put(buf: bytearray, pos: int, u: int) -> int:
    """Write unsigned LEB128 ``u`` at ``pos``; return the position after it."""
    while u >= 0x80:
        buf[pos] = (u & 0x7F) | 0x80
        u >>= 7
        pos += 1
    buf[pos] = u
    return pos + 1


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise KafkaCodecError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise KafkaCodecError(f"{name} {v} out of range [{lo}, {hi}]")
    return v


def _buffer(obj: Any, what: str, index: int) -> Any:
    """A bytes-like object usable with len() and slice assignment (bytes or a 'B' memoryview)."""
    t = type(obj)
    if t is bytes or t is bytearray:
        return obj
    if isinstance(obj, str):
        raise KafkaCodecError(f"record {index}: {what} must be bytes-like or None, not str (encode it first)")
    try:
        view = memoryview(obj)
    except TypeError:
        raise KafkaCodecError(
            f"record {index}: {what} must be bytes-like or None, not {t.__name__}"
        ) from None
    if not view.c_contiguous:
        raise KafkaCodecError(f"record {index}: {what} is a non-contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _prepare_headers(headers: Any, index: int) -> list[tuple[bytes, Any]]:
    out = []
    try:
        items = iter(headers)
    except TypeError:
        raise KafkaCodecError(
            f"record {index}: headers must be an iterable of (str, bytes | None) pairs, "
            f"not {type(headers).__name__}"
        ) from None
    for h in items:
        if type(h) is tuple and len(h) == 2:
            hk, hv = h
        elif isinstance(h, dict):
            try:
                hk, hv = h["key"], h["value"]
            except KeyError:
                raise KafkaCodecError(f"record {index}: header mapping needs 'key' and 'value'") from None
        else:
            if isinstance(h, (str, bytes, bytearray)):
                raise KafkaCodecError(
                    f"record {index}: a header must be a (str, bytes | None) pair, not {h!r:.60}"
                )
            try:
                hk, hv = h
            except (TypeError, ValueError):
                raise KafkaCodecError(
                    f"record {index}: a header must be a (str, bytes | None) pair, not {h!r:.60}"
                ) from None
        if type(hk) is not str:
            if hk is None:
                raise KafkaCodecError(f"record {index}: header key may not be None")
            if not isinstance(hk, str):
                raise KafkaCodecError(f"record {index}: header key must be str, not {type(hk).__name__}")
        try:
            hkb = hk.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise KafkaCodecError(
                f"record {index}: header key is not encodable as UTF-8 ({exc.reason})"
            ) from None
        if hv is not None and type(hv) is not bytes:
            hv = _buffer(hv, "header value", index)
        out.append((hkb, hv))
    return out


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode(
    keys: list,
    values: list,
    headers: list | None,
    timestamps: list | None,
    *,
    base_offset: int,
    base_timestamp: int | None,
    compression: Any,
    compression_level: int | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
    partition_leader_epoch: int,
    log_append_time: bool,
) -> bytearray:
    n = len(values)
    if n == 0:
        raise KafkaCodecError("cannot encode an empty record batch")
    if n - 1 > _INT32_MAX:
        raise KafkaCodecError(f"{n} records do not fit one batch")
    base_offset = _int("base_offset", base_offset, _INT64_MIN, _INT64_MAX)
    producer_id = _int("producer_id", producer_id, _INT64_MIN, _INT64_MAX)
    producer_epoch = _int("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX)
    base_sequence = _int("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX)
    partition_leader_epoch = _int("partition_leader_epoch", partition_leader_epoch, _INT32_MIN, _INT32_MAX)
    base_ts = (
        _now_ms()
        if base_timestamp is None
        else _int("base_timestamp", base_timestamp, _INT64_MIN, _INT64_MAX)
    )
    codec = _compression.codec_id(compression)
    attributes = codec
    if log_append_time:
        attributes |= _ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= _ATTR_TRANSACTIONAL
    if control:
        attributes |= _ATTR_CONTROL

    usize = _usize
    prepared = []
    append = prepared.append
    max_ts = None
    total = 0
    for i in range(n):
        key = keys[i]
        value = values[i]
        if key is None:
            klen = -1
            body = 2  # attributes + key length
        else:
            if type(key) is not bytes:
                key = _buffer(key, "key", i)
            klen = len(key)
            body = 1 + usize(klen << 1) + klen
        if value is None:
            vlen = -1
            body += 1
        else:
            if type(value) is not bytes:
                value = _buffer(value, "value", i)
            vlen = len(value)
            body += usize(vlen << 1) + vlen
        hlist = headers[i] if headers is not None else None
        if hlist:
            hlist = _prepare_headers(hlist, i)
            body += usize(len(hlist) << 1)
            for hk, hv in hlist:
                body += usize(len(hk) << 1) + len(hk)
                body += 1 if hv is None else usize(len(hv) << 1) + len(hv)
        else:
            if hlist is not None and not isinstance(hlist, (list, tuple)):
                hlist = _prepare_headers(hlist, i)  # validates odd empties (e.g. 0, "")
            hlist = None
            body += 1
        ts = timestamps[i] if timestamps is not None else None
        if ts is None:
            ts = base_ts
        elif type(ts) is not int or not _INT64_MIN <= ts <= _INT64_MAX:
            ts = _int(f"record {i}: timestamp", ts, _INT64_MIN, _INT64_MAX)
        if max_ts is None or ts > max_ts:
            max_ts = ts
        delta = ts - base_ts
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise KafkaCodecError(f"record {i}: timestamp {ts} is too far from base timestamp {base_ts}")
        zz_delta = (delta << 1) ^ (delta >> 63)
        body += usize(zz_delta) + usize(i << 1)
        if body > _INT32_MAX:
            raise KafkaCodecError(f"record {i}: {body} bytes do not fit a record")
        total += usize(body << 1) + body
        append((body, zz_delta, key, klen, value, vlen, hlist))

    if codec == 0:
        size = HEADER_SIZE + total
        if size - LOG_OVERHEAD > _INT32_MAX:
            raise KafkaCodecError(f"batch of {size} bytes is too large")
        buf = bytearray(size)
        _write_records(buf, HEADER_SIZE, prepared)
    else:
        raw = bytearray(total)
        _write_records(raw, 0, prepared)
        payload = _compression.compress(codec, raw, compression_level)
        del raw
        size = HEADER_SIZE + len(payload)
        if size - LOG_OVERHEAD > _INT32_MAX:
            raise KafkaCodecError(f"batch of {size} bytes is too large")
        buf = bytearray(size)
        buf[HEADER_SIZE:] = payload
    _HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        n - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    )
    with memoryview(buf) as view:
        crc = crc32c(view[_ATTRIBUTES_OFFSET:])
    _CRC.pack_into(buf, _CRC_OFFSET, crc)
    return buf


def _write_records(buf: bytearray, p: int, prepared: list) -> None:
    put = _put
    for i, (body, zz_delta, key, klen, value, vlen, hlist) in enumerate(prepared):
        u = body << 1
        if u < 0x80:
            buf[p] = u
            p += 1
        elif u < 0x4000:
            buf[p] = (u & 0x7F) | 0x80
            buf[p + 1] = u >> 7
            p += 2
        else:
            p = put(buf, p, u)
        p += 1  # attributes: 0 (the buffer is zero-filled)
        if zz_delta < 0x80:
            buf[p] = zz_delta
            p += 1
        else:
            p = put(buf, p, zz_delta)
        u = i << 1
        if u < 0x80:
            buf[p] = u
            p += 1
        elif u < 0x4000:
            buf[p] = (u & 0x7F) | 0x80
            buf[p + 1] = u >> 7
            p += 2
        else:
            p = put(buf, p, u)
        if klen < 0:
            buf[p] = 1
            p += 1
        else:
            u = klen << 1
            if u < 0x80:
                buf[p] = u
                p += 1
            else:
                p = put(buf, p, u)
            buf[p : p + klen] = key
            p += klen
        if vlen < 0:
            buf[p] = 1
            p += 1
        else:
            u = vlen << 1
            if u < 0x80:
                buf[p] = u
                p += 1
            elif u < 0x4000:
                buf[p] = (u & 0x7F) | 0x80
                buf[p + 1] = u >> 7
                p += 2
            else:
                p = put(buf, p, u)
            buf[p : p + vlen] = value
            p += vlen
        if hlist is None:
            p += 1  # header count 0
            continue
        p = put(buf, p, len(hlist) << 1)
        for hk, hv in hlist:
            n = len(hk)
            p = put(buf, p, n << 1)
            buf[p : p + n] = hk
            p += n
            if hv is None:
                buf[p] = 1
                p += 1
            else:
                n = len(hv)
                p = put(buf, p, n << 1)
                buf[p : p + n] = hv
                p += n


def encode_record_batch(
    records: Iterable[Any],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: str = "none",
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
) -> bytearray:
    """Encode ``records`` (KafkaRecord or ``(key, value[, headers])`` tuples) as one v2 batch."""
    keys: list = []
    values: list = []
    headers: list = []
    timestamps: list = []
    try:
        items = iter(records)
    except TypeError:
        raise KafkaCodecError(f"records must be an iterable, not {type(records).__name__}") from None
    for i, rec in enumerate(items):
        if isinstance(rec, KafkaRecord):
            keys.append(rec.key)
            values.append(rec.value)
            headers.append(rec.headers)
            timestamps.append(rec.timestamp)
            continue
        if isinstance(rec, (tuple, list)):
            if len(rec) == 2:
                keys.append(rec[0])
                values.append(rec[1])
                headers.append(None)
                timestamps.append(None)
                continue
            if len(rec) == 3:
                keys.append(rec[0])
                values.append(rec[1])
                headers.append(rec[2])
                timestamps.append(None)
                continue
            raise KafkaCodecError(
                f"record {i}: a tuple record is (key, value) or (key, value, headers), got {len(rec)} items"
            )
        raise KafkaCodecError(
            f"record {i}: expected a KafkaRecord or a (key, value[, headers]) tuple, not {type(rec).__name__}"
        )
    return _encode(
        keys,
        values,
        headers,
        timestamps,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        compression=compression,
        compression_level=compression_level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        control=control,
        partition_leader_epoch=partition_leader_epoch,
        log_append_time=log_append_time,
    )


def _is_arrow(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow")


def _binary_column(col: Any, what: str) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not isinstance(col, pa.Array):
            raise KafkaCodecError(f"{what}: expected a pyarrow Array, not {type(col).__name__}")
        t = col.type
        if (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_string_view(t)
            or pa.types.is_binary_view(t)
        ):
            col = col.cast(pa.large_binary())
        elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)):
            raise KafkaCodecError(f"{what}: expected a binary or string array, not {t}")
        return col.to_pylist()
    if isinstance(col, (str, bytes, bytearray, memoryview)):
        raise KafkaCodecError(f"{what}: expected a sequence of bytes-like objects, not {type(col).__name__}")
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"{what}: expected a sequence, not {type(col).__name__}") from None


def _timestamp_column(col: Any) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = col.type
        if pa.types.is_timestamp(t):
            if t.unit != "ms":
                raise KafkaCodecError(f"timestamps: expected milliseconds, got timestamp[{t.unit}]")
            col = col.cast(pa.int64())
        elif not pa.types.is_integer(t):
            raise KafkaCodecError(f"timestamps: expected an int64 or timestamp[ms] array, not {t}")
        return col.to_pylist()
    if isinstance(col, (str, bytes, bytearray)):
        raise KafkaCodecError(f"timestamps: expected a sequence of ints, not {type(col).__name__}")
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"timestamps: expected a sequence, not {type(col).__name__}") from None


def _headers_column(col: Any) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        return col.to_pylist()  # list of lists of {"key", "value"} dicts (or None)
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"headers: expected a sequence, not {type(col).__name__}") from None


def encode_record_batch_columns(
    keys: Any,
    values: Any,
    *,
    headers: Any = None,
    timestamps: Any = None,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: str = "none",
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
) -> bytearray:
    """Encode columns (sequences or pyarrow arrays) as one v2 batch; same bytes as
    ``encode_record_batch`` with the equivalent records."""
    if values is None:
        raise KafkaCodecError("values may not be None (individual values may be null)")
    value_list = _binary_column(values, "values")
    n = len(value_list)
    if keys is None:
        key_list: list = [None] * n
    else:
        key_list = _binary_column(keys, "keys")
        if len(key_list) != n:
            raise KafkaCodecError(f"keys has {len(key_list)} entries, values has {n}")
    header_list = None
    if headers is not None:
        header_list = _headers_column(headers)
        if len(header_list) != n:
            raise KafkaCodecError(f"headers has {len(header_list)} entries, values has {n}")
    ts_list = None
    if timestamps is not None:
        ts_list = _timestamp_column(timestamps)
        if len(ts_list) != n:
            raise KafkaCodecError(f"timestamps has {len(ts_list)} entries, values has {n}")
    return _encode(
        key_list,
        value_list,
        header_list,
        ts_list,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        compression=compression,
        compression_level=compression_level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        control=control,
        partition_leader_epoch=partition_leader_epoch,
        log_append_time=log_append_time,
    )


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------
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


def _walk(buf: Buffer, check_crc: bool):
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


def _check_int64(value: int, what: str, batch: _Batch) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"batch with base offset {batch.base_offset}: {what} {value} overflows int64")


def decode_record_batches(buf: Buffer, *, check_crc: bool = True) -> list[KafkaRecord]:
    """Decode every complete batch in ``buf`` (v2, and legacy v0/v1 message sets)."""
    out: list[KafkaRecord] = []
    append = out.append
    for batch in _walk(buf, check_crc):
        if type(batch) is tuple:
            for offset, ts, ts_type, key, value in batch[1]:
                append(KafkaRecord(key, value, [], ts, offset, ts_type, -1, -1, False, False))
            continue
        base_offset = batch.base_offset
        pid = batch.producer_id
        epoch = batch.producer_epoch
        txn = batch.is_transactional
        ctrl = batch.is_control
        if batch.log_append_time:
            ts = batch.max_timestamp
            for _tsd, od, key, value, headers in batch.records:
                offset = base_offset + od
                if not _INT64_MIN <= offset <= _INT64_MAX:
                    _check_int64(offset, "offset", batch)
                append(KafkaRecord(key, value, headers, ts, offset, 1, pid, epoch, txn, ctrl))
        else:
            base_ts = batch.base_timestamp
            for tsd, od, key, value, headers in batch.records:
                offset = base_offset + od
                ts = base_ts + tsd
                if not (_INT64_MIN <= offset <= _INT64_MAX and _INT64_MIN <= ts <= _INT64_MAX):
                    _check_int64(offset, "offset", batch)
                    _check_int64(ts, "timestamp", batch)
                append(KafkaRecord(key, value, headers, ts, offset, 0, pid, epoch, txn, ctrl))
    return out


def decode_record_batches_columns(buf: Buffer, *, check_crc: bool = True) -> RecordColumns:
    """Decode every complete batch in ``buf`` into pyarrow columns (control records left out)."""
    import pyarrow as pa

    offsets = array("q")
    timestamps = array("q")
    ts_types = array("b")
    keys: list = []
    values: list = []
    header_offsets = array("i", [0])
    header_keys: list = []
    header_values: list = []
    batches: list[BatchInfo] = []
    for batch in _walk(buf, check_crc):
        if type(batch) is tuple:
            entry_offset, legacy_records = batch
            for offset, ts, ts_type, key, value in legacy_records:
                offsets.append(offset)
                timestamps.append(ts)
                ts_types.append(ts_type)
                keys.append(key)
                values.append(value)
                header_offsets.append(len(header_keys))
            first = legacy_records[0][0] if legacy_records else entry_offset
            batches.append(BatchInfo(first, entry_offset, -1, -1, -1, False, False, -1, len(legacy_records)))
            continue
        base_offset = batch.base_offset
        last_offset = base_offset + batch.last_offset_delta
        if batch.is_control:
            control_type = -1
            if batch.records:
                key = batch.records[0][2]
                if key is None or len(key) < 4:
                    raise KafkaCodecError(
                        f"control batch with base offset {base_offset}: control record key is "
                        f"{'null' if key is None else f'{len(key)} bytes'}, needs 4"
                    )
                control_type = int.from_bytes(key[2:4], "big", signed=True)
            batches.append(
                BatchInfo(
                    base_offset,
                    last_offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.is_transactional,
                    True,
                    control_type,
                    0,
                )
            )
            continue
        log_append = batch.log_append_time
        base_ts = batch.max_timestamp if log_append else batch.base_timestamp
        try:
            for tsd, od, key, value, headers in batch.records:
                offsets.append(base_offset + od)
                timestamps.append(base_ts if log_append else base_ts + tsd)
                keys.append(key)
                values.append(value)
                if headers:
                    for hk, hv in headers:
                        header_keys.append(hk)
                        header_values.append(hv)
                header_offsets.append(len(header_keys))
        except OverflowError:
            raise KafkaCodecError(
                f"batch with base offset {base_offset}: an offset or timestamp overflows int64"
            ) from None
        ts_types.extend([1 if log_append else 0] * len(batch.records))
        batches.append(
            BatchInfo(
                base_offset,
                last_offset,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.is_transactional,
                False,
                -1,
                len(batch.records),
            )
        )
    n = len(offsets)
    htype = headers_type()
    struct_type = htype.value_type
    header_struct = pa.StructArray.from_arrays(
        [pa.array(header_keys, pa.string()), pa.array(header_values, pa.binary())],
        fields=list(struct_type),
    )
    headers_arr = pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(header_offsets)]),
        header_struct,
        type=htype,
    )
    return RecordColumns(
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(timestamps)]),
        pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(ts_types)]),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        headers_arr,
        batches,
    )
