"""Records as objects: the pure-Python twin of ``_codec/records.pyx`` (docs/codec.md).

KafkaRecord, and RecordBatch v2 encode/decode of record lists; the byte layout, inputs and
errors are those of the Cython module. The shared writer and batch walk are in ``writer`` and
``batch``; the columnar functions in ``columnar``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec._python.batch import (
    _INT64_MAX,
    _INT64_MIN,
    _check_int64,
    _walk,
    check_control_records,
)
from kafka_core.codec._python.writer import _encode
from kafka_core.errors import KafkaCodecError

__all__ = [
    "KafkaRecord",
    "KafkaShareRecord",
    "decode_record_batches",
    "decode_share_records",
    "encode_record_batch",
]


def _i64(value: Any, what: str) -> int:
    """An integer (operator.index) that fits int64, or KafkaCodecError (as the Cython twin)."""
    if type(value) is not int:
        try:
            value = int(operator.index(value))
        except TypeError:
            raise KafkaCodecError(f"{what} must be an integer, not {type(value).__name__}") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"{what} {value} does not fit in int64")
    return value


def _ranged(value: Any, lo: int, hi: int, what: str) -> int:
    v = _i64(value, what)
    if v < lo or v > hi:
        raise KafkaCodecError(f"{what} {value} is out of range {lo}..{hi}")
    return v


def _headers_list(headers: Any) -> Any:
    if type(headers) is list:
        return headers
    try:
        return list(headers)
    except TypeError:
        return headers


class KafkaRecord:
    """One record, as encoded into / decoded from a batch.

    Validated at construction like the Cython KafkaRecord (same errors); unlike it, the
    attributes stay assignable (docs/codec.md, "Twins")."""

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
        self.timestamp = None if timestamp is None else _i64(timestamp, "timestamp")
        self.offset = _i64(offset, "offset")
        self.timestamp_type = _ranged(timestamp_type, -1, 1, "timestamp_type")
        self.producer_id = _i64(producer_id, "producer_id")
        self.producer_epoch = _ranged(producer_epoch, -32768, 32767, "producer_epoch")
        self.is_transactional = bool(is_transactional)
        self.is_control = bool(is_control)

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


_new = object.__new__
_INT32 = (-(1 << 31), (1 << 31) - 1)


class KafkaShareRecord(KafkaRecord):
    """A record of a share group: a KafkaRecord with the topic, partition and delivery count,
    built by decode_share_records in one object (the Cython twin's docstring says more).
    Compared and hashed by identity."""

    __slots__ = ("delivery_count", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Iterable[tuple[str, Buffer | None]] | None = None,
        timestamp: int | None = -1,
        timestamp_type: int = 0,
        delivery_count: int = 1,
    ) -> None:
        super().__init__(key, value, list(headers or ()), timestamp, offset, timestamp_type)
        self.topic = topic
        self.partition = _ranged(partition, *_INT32, "partition")
        self.delivery_count = _ranged(delivery_count, *_INT32, "delivery_count")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (
                self.topic,
                self.partition,
                self.offset,
                self.key,
                self.value,
                self.headers,
                self.timestamp,
                self.timestamp_type,
                self.delivery_count,
            ),
        )

    def _copy_as(self, cls: type[KafkaShareRecord]) -> KafkaShareRecord:
        """A copy of this record as ``cls`` (a subclass; the caller sets what it changes)."""
        if not (isinstance(cls, type) and issubclass(cls, KafkaShareRecord)):
            raise TypeError(f"cls must be KafkaShareRecord or a subclass, not {cls!r}")
        o = _new(cls)
        for name in _SHARE_FIELDS:
            setattr(o, name, getattr(self, name))
        return o


_SHARE_FIELDS = (*KafkaRecord.__slots__, *KafkaShareRecord.__slots__)


def _record(
    key: Any,
    value: Any,
    headers: Any,
    ts: int,
    offset: int,
    ts_type: int,
    pid: int,
    epoch: int,
    txn: bool,
    ctrl: bool,
) -> KafkaRecord:
    """A decoded record: its fields are already valid, so __init__'s checks are skipped."""
    r = _new(KafkaRecord)
    r.key = key
    r.value = value
    r.headers = headers
    r.timestamp = ts
    r.offset = offset
    r.timestamp_type = ts_type
    r.producer_id = pid
    r.producer_epoch = epoch
    r.is_transactional = txn
    r.is_control = ctrl
    return r


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


def decode_record_batches(buf: Buffer, *, check_crc: bool = True) -> list[KafkaRecord]:
    """Decode every complete batch in ``buf`` (v2, and legacy v0/v1 message sets)."""
    out: list[KafkaRecord] = []
    append = out.append
    for batch in _walk(buf, check_crc):
        if isinstance(batch, tuple):
            for offset, ts, ts_type, key, value in batch[1]:
                append(_record(key, value, [], ts, offset, ts_type, -1, -1, False, False))
            continue
        base_offset = batch.base_offset
        pid = batch.producer_id
        epoch = batch.producer_epoch
        txn = batch.is_transactional
        ctrl = batch.is_control
        if ctrl:
            check_control_records(batch)
        if batch.log_append_time:
            ts = batch.max_timestamp
            for _tsd, od, key, value, headers in batch.records:
                offset = base_offset + od
                if not _INT64_MIN <= offset <= _INT64_MAX:
                    _check_int64(offset, "offset", batch)
                append(_record(key, value, headers, ts, offset, 1, pid, epoch, txn, ctrl))
        else:
            base_ts = batch.base_timestamp
            for tsd, od, key, value, headers in batch.records:
                offset = base_offset + od
                ts = base_ts + tsd
                if not (_INT64_MIN <= offset <= _INT64_MAX and _INT64_MIN <= ts <= _INT64_MAX):
                    _check_int64(offset, "offset", batch)
                    _check_int64(ts, "timestamp", batch)
                append(_record(key, value, headers, ts, offset, 0, pid, epoch, txn, ctrl))
    return out


def decode_share_records(
    buf: Buffer,
    topic: str,
    partition: int,
    acquired: Iterable[tuple[int, int, int]],
    *,
    record_type: type[KafkaShareRecord] = KafkaShareRecord,
    check_crc: bool = True,
) -> list[KafkaShareRecord]:
    """Decode the records of ``buf`` whose offsets a share group acquired (the Cython twin's
    docstring says more): (first, last, delivery_count) ranges in offset order."""
    if not (isinstance(record_type, type) and issubclass(record_type, KafkaShareRecord)):
        raise TypeError(f"record_type must be KafkaShareRecord or a subclass, not {record_type!r}")
    part = _ranged(partition, *_INT32, "partition")
    ranges = [(int(a), int(z), int(c)) for a, z, c in acquired]
    out: list[KafkaShareRecord] = []
    append = out.append
    at = 0
    for r in decode_record_batches(buf, check_crc=check_crc):
        offset = r.offset
        if at >= len(ranges) or offset < ranges[at][0]:
            at = 0  # before the current range (or past them all): look from the start
        while at < len(ranges) and ranges[at][1] < offset:
            at += 1
        if at == len(ranges) or ranges[at][0] > offset:
            continue  # not acquired by this member: left out
        o = _new(record_type)
        o.key, o.value, o.headers, o.timestamp = r.key, r.value, r.headers, r.timestamp
        o.offset, o.timestamp_type = offset, r.timestamp_type
        o.producer_id, o.producer_epoch = r.producer_id, r.producer_epoch
        o.is_transactional, o.is_control = r.is_transactional, r.is_control
        o.topic = topic
        o.partition = part
        o.delivery_count = ranges[at][2]
        append(o)
    return out
