"""The pure-Python twin of ``_codec/writer.pxi``, shared by records.py and columnar.py: the batch
writer (the Cython twins include writer.pxi).

The encoder computes the exact size first and writes into one ``bytearray`` (records first,
then the header and the CRC32C over attributes..end).
"""

from __future__ import annotations

import operator
import time
from typing import Any

from kafka_core.codec import compression as _compression
from kafka_core.codec._python.batch import (
    _ATTR_CONTROL,
    _ATTR_TIMESTAMP_TYPE,
    _ATTR_TRANSACTIONAL,
    _ATTRIBUTES_OFFSET,
    _CRC,
    _CRC_OFFSET,
    _HEADER,
    _INT16_MAX,
    _INT16_MIN,
    _INT32_MAX,
    _INT32_MIN,
    _INT64_MAX,
    _INT64_MIN,
    HEADER_SIZE,
    LOG_OVERHEAD,
)
from kafka_core.codec.crc import crc32c
from kafka_core.errors import KafkaCodecError


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
    prepared: list[tuple[Any, ...]] = []
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
