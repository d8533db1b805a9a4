"""Pure-Python twin of ``kafka_core.producer._cython.accel`` (source: ``_codec/accel.pyx``): the
same names and API, used when the extension is not built or ``KAFKA_CORE_PURE_PYTHON=1``.

The C module adds a path for keyed records (straight into their murmur2 partition's batch) and
futures the garbage collector does not track; here those records take the accumulator's general
path, and a record's future is the tuple future itself.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafka_core._typing import Buffer

__all__ = ["BatchBase", "Budget", "FastAppend", "murmur2", "murmur2_partitions", "setup"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: Buffer) -> int:
    """Kafka's murmur2 (the Java client's ``Utils.murmur2``), as a signed 32-bit int like Java."""
    buf = bytes(data)
    length = len(buf)
    h = (_SEED ^ length) & _MASK
    end4 = length & ~3
    for (k,) in struct.iter_unpack("<I", buf[:end4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    # The switch in Java falls through: 3 mixes bytes 2, 1 and 0; the multiply happens once.
    if tail:
        if tail == 3:
            h ^= buf[end4 + 2] << 16
        if tail >= 2:
            h ^= buf[end4 + 1] << 8
        h ^= buf[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partitions(
    offsets: Buffer,
    data: Buffer,
    first: int,
    length: int,
    large: bool,
    num_partitions: int,
    validity: Buffer | None = None,
) -> bytearray:
    """Partition of every key of an Arrow (large_)binary array, from its buffers: int32s, -1
    where the key is null. ``first`` is the array's offset into its buffers. Every offset is
    checked against the data buffer before it is read."""
    if num_partitions < 1:
        raise ValueError("num_partitions must be positive")
    width = 8 if large else 4
    off = memoryview(offsets).cast("B")
    if first < 0 or length < 0 or off.nbytes < (first + length + 1) * width:
        raise ValueError("offsets buffer too short for the array")
    bits = None if validity is None else memoryview(validity).cast("B")
    if bits is not None and bits.nbytes * 8 < first + length:
        raise ValueError("validity buffer too short for the array")
    ends = off[: off.nbytes // width * width].cast("q" if large else "i")
    raw = bytes(memoryview(data).cast("B"))
    size = len(raw)
    out = bytearray(4 * length)
    parts = memoryview(out).cast("i")
    for i in range(length):
        j = first + i
        if bits is not None and not (bits[j >> 3] >> (j & 7)) & 1:
            parts[i] = -1
            continue
        start, stop = ends[j], ends[j + 1]
        if start < 0 or stop < start or stop > size:
            raise ValueError(f"key {i}: offsets {start}..{stop} outside the data buffer ({size} bytes)")
        parts[i] = (murmur2(raw[start:stop]) & 0x7FFFFFFF) % num_partitions
    return out


def setup(tuple_future: type) -> type:
    """Returns the record future type ``send`` makes: here ``tuple_future`` itself."""
    global _record_future
    _record_future = tuple_future
    return tuple_future


class Budget:
    """Bytes of buffer memory in use, and the limit (``buffer_memory``)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.used = 0
        self.limit = limit


class BatchBase:
    """The fields of ``ProducerBatch`` that ``send`` touches (the rest live in the subclass)."""

    __slots__ = ("count", "result", "size", "values")

    count: int
    size: int
    values: list[Any]
    result: Any


def FastAppend(acc: Any, slow: Callable[..., Any], overhead: int, murmur2_keys: bool) -> Any:
    """``send`` for the common case (a null key into the sticky batch); anything else goes to
    ``slow`` (the accumulator's general path). Takes the accumulator's lock, the one that guards
    what it touches. A closure rather than a class (named as the C module's class): a plain
    function is the cheapest call in CPython, and this runs once per record. Its ``gated`` is
    set (under the accumulator's lock) while a transactional producer may not take records:
    every send then goes to the general path, which raises why."""
    fast: dict[str, Any] = acc.fast
    lock = acc.lock
    mem: Budget = acc.mem
    batch_size: int = acc.batch_size

    def append(
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
    ) -> Any:
        if (
            key is None
            and partition is None
            and headers is None
            and timestamp_ms is None
            and type(value) is bytes
        ):
            size = len(value) + overhead
            with lock:
                b = fast.get(topic) if not append.gated else None  # type: ignore[attr-defined]
                if b is not None:
                    used = mem.used + size
                    if b.size + size <= batch_size and used <= mem.limit:
                        index = b.count
                        b.count = index + 1
                        b.values.append(value)
                        b.size += size
                        mem.used = used
                        return _record_future((b.result, index))
        return slow(topic, value, key, partition, headers, timestamp_ms)

    append.gated = False  # type: ignore[attr-defined]
    return append


# The record future type (futures.py's tuple future), given by :func:`setup`: this module
# cannot import futures.py, which chooses between it and the C module.
_record_future: Any = None
