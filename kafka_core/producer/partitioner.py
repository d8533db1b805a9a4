"""Partitioners: Java-compatible murmur2 for keys, sticky (KIP-480) for null keys, round robin.

Byte-exact murmur2 matters: a key must land on the partition the Java client (and librdkafka's
``murmur2_random``) picks, or keyed data written by mixed clients loses its per-key order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kafka_core.errors import KafkaConfigError
from kafka_core.producer._python import accel as _python_accel
from kafka_core.producer._speedups import accel

__all__ = [
    "DefaultPartitioner",
    "Partitioner",
    "RoundRobinPartitioner",
    "make_partitioner",
    "murmur2",
    "murmur2_partition",
    "murmur2_partitions",
    "murmur2_py",
]

# The pure-Python murmur2 (the twin's), kept by this name for callers that compare the two.
murmur2_py = _python_accel.murmur2
murmur2: Any = accel.murmur2


def murmur2_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """Partition of a key: positive part by mask (never abs()), modulo the partition count."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _bytes_view(buf: Any) -> memoryview:
    return memoryview(buf if buf is not None else b"").cast("B")


def murmur2_partitions(keys: Any, num_partitions: int) -> Any:
    """murmur2 partition of every key of a pyarrow binary or string array, as an int32 array
    (null where the key is null): one C loop over the Arrow buffers instead of a call per key."""
    import pyarrow as pa

    t = keys.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        keys = keys.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        keys = keys.cast(pa.binary())
    n = len(keys)
    if n == 0:
        return pa.array([], pa.int32())
    large = pa.types.is_large_binary(keys.type)
    validity, offsets, data = keys.buffers()[:3]
    raw = accel.murmur2_partitions(
        _bytes_view(offsets),
        _bytes_view(data),
        keys.offset,
        n,
        large,
        num_partitions,
        _bytes_view(validity) if keys.null_count else None,
    )
    parts = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(raw)])
    if keys.null_count:
        import pyarrow.compute as pc

        parts = pc.if_else(keys.is_valid(), parts, pa.scalar(None, pa.int32()))
    return parts


class Partitioner:
    """Base: choose a partition for a record; ``on_new_batch`` lets sticky strategies move on."""

    def partition(self, topic: str, key: Any, num_partitions: int) -> int:
        raise NotImplementedError

    def sticky(self, topic: str, num_partitions: int) -> int | None:
        """The partition every null-key record of ``topic`` goes to now, or None when per-record."""
        return None

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        """Called when the batch of the sticky partition filled up (KIP-480 switches then)."""


class DefaultPartitioner(Partitioner):
    """murmur2 of the key; null keys stick to one random partition until its batch is full."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}
        self._cache: dict[bytes, int] = {}

    def partition(self, topic: str, key: Any, num_partitions: int) -> int:
        if key is None:
            return self.sticky(topic, num_partitions)
        if murmur2 is not murmur2_py:  # C murmur2: cheaper than a cache lookup
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        cache = self._cache
        k = key if type(key) is bytes else bytes(key)
        h = cache.get(k)
        if h is None:
            h = murmur2(k) & 0x7FFFFFFF
            if len(cache) >= 100_000:
                cache.clear()
            cache[k] = h
        return h % num_partitions

    def sticky(self, topic: str, num_partitions: int) -> int:
        current = self._sticky.get(topic)
        if current is None or current >= num_partitions:
            current = self._rng.randrange(num_partitions)
            self._sticky[topic] = current
        return current

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        if self._sticky.get(topic) != previous:
            return
        if num_partitions <= 1:
            self._sticky[topic] = 0
            return
        nxt = self._rng.randrange(num_partitions - 1)
        self._sticky[topic] = nxt + 1 if nxt >= previous else nxt


class RoundRobinPartitioner(Partitioner):
    """Each record to the next partition, keys ignored (Java's RoundRobinPartitioner)."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(self, topic: str, key: Any, num_partitions: int) -> int:
        n = self._next.get(topic, 0)
        self._next[topic] = n + 1
        return n % num_partitions


class CallablePartitioner(Partitioner):
    """A user function ``fn(topic, key, num_partitions) -> int``; its result is checked."""

    def __init__(self, fn: Callable[[str, Any, int], int]) -> None:
        self._fn = fn

    def partition(self, topic: str, key: Any, num_partitions: int) -> int:
        p = self._fn(topic, key, num_partitions)
        if type(p) is not int or not 0 <= p < num_partitions:
            raise KafkaConfigError(
                f"partitioner returned {p!r} for topic {topic!r} with {num_partitions} partitions"
            )
        return p


def make_partitioner(spec: str | Callable[[str, Any, int], int] | Partitioner) -> Partitioner:
    if isinstance(spec, Partitioner):
        return spec
    if callable(spec):
        return CallablePartitioner(spec)
    if spec in ("murmur2", "default", "sticky"):
        return DefaultPartitioner()
    if spec in ("round_robin", "roundrobin"):
        return RoundRobinPartitioner()
    raise KafkaConfigError(f"unknown partitioner {spec!r}: use 'murmur2', 'round_robin' or a callable")
