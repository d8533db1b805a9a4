"""Partitioners: murmur2 byte-exact with the Java client, sticky null keys, round robin, callables."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_core.errors import KafkaConfigError
from kafka_core.producer.partitioner import (
    DefaultPartitioner,
    RoundRobinPartitioner,
    make_partitioner,
    murmur2,
    murmur2_partition,
    murmur2_py,
)

# Vectors from the Java client's Utils.murmur2 tests and published Kafka hash tables; they
# cover every tail length (0..3 bytes after the 4-byte blocks).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2_py(key) == expected  # the pure-Python twin, whichever murmur2 is in use


@settings(deadline=None)
@given(st.binary(max_size=80))
def test_murmur2_twins_agree(data: bytes) -> None:
    assert murmur2(data) == murmur2_py(data) == murmur2(bytearray(data))


def test_murmur2_accepts_any_bytes_like() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_partition_masks_instead_of_abs() -> None:
    # For negative hashes abs() and the mask differ; Java masks.
    for key, h in JAVA_VECTORS.items():
        assert murmur2_partition(key, 1000) == (h & 0x7FFFFFFF) % 1000
    differs = [k for k, h in JAVA_VECTORS.items() if h < 0 and abs(h) % 7 != (h & 0x7FFFFFFF) % 7]
    assert differs, "the vectors must include a case where abs() would pick another partition"
    for key in differs:
        assert murmur2_partition(key, 7) != abs(JAVA_VECTORS[key]) % 7


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    assert murmur2(data) & 0xFFFFFFFF == kp_murmur2(data) & 0xFFFFFFFF


def test_default_partitioner_keys_use_murmur2() -> None:
    p = DefaultPartitioner()
    for key in JAVA_VECTORS:
        assert p.partition("t", key, 12) == murmur2_partition(key, 12)
        assert p.partition("t", bytearray(key), 12) == murmur2_partition(key, 12)


@given(num=st.integers(2, 64), seed=st.integers(0, 2**32 - 1), switches=st.integers(1, 20))
def test_sticky_null_keys_stay_then_move_on_new_batch(num: int, seed: int, switches: int) -> None:
    p = DefaultPartitioner(random.Random(seed))
    first = p.sticky("t", num)
    assert 0 <= first < num
    assert all(p.partition("t", None, num) == first for _ in range(20))
    for _ in range(switches):
        before = p.sticky("t", num)
        p.on_new_batch("t", num, before)
        after = p.sticky("t", num)
        assert after != before and 0 <= after < num
        assert p.partition("t", None, num) == after


def test_sticky_ignores_stale_switch_and_single_partition() -> None:
    p = DefaultPartitioner(random.Random(1))
    current = p.sticky("t", 4)
    p.on_new_batch("t", 4, (current + 1) % 4)  # another partition filled: no switch
    assert p.sticky("t", 4) == current
    q = DefaultPartitioner()
    q.sticky("one", 1)
    q.on_new_batch("one", 1, 0)
    assert q.sticky("one", 1) == 0


def test_sticky_per_topic_and_shrinking_partition_count() -> None:
    p = DefaultPartitioner(random.Random(3))
    a = p.sticky("a", 100)
    p.sticky("b", 100)
    assert p.sticky("a", 100) == a
    assert 0 <= p.sticky("a", 1) < 1


def test_round_robin_cycles_ignoring_keys() -> None:
    p = RoundRobinPartitioner()
    assert [p.partition("t", b"same", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert p.sticky("t", 3) is None


def test_callable_partitioner_is_checked() -> None:
    p = make_partitioner(lambda topic, key, n: len(key) % n)
    assert p.partition("t", b"abcd", 3) == 1
    bad = make_partitioner(lambda topic, key, n: n)
    with pytest.raises(KafkaConfigError):
        bad.partition("t", b"x", 3)
    with pytest.raises(KafkaConfigError):
        make_partitioner(lambda topic, key, n: "0").partition("t", b"x", 3)


def test_make_partitioner_names() -> None:
    assert isinstance(make_partitioner("murmur2"), DefaultPartitioner)
    assert isinstance(make_partitioner("round_robin"), RoundRobinPartitioner)
    with pytest.raises(KafkaConfigError):
        make_partitioner("crc32")


# -- murmur2 over a whole Arrow key column (send_batch, the Spark sink) ---------------------------


@given(
    st.lists(st.none() | st.binary(max_size=40), max_size=60),
    st.integers(1, 50),
    st.integers(0, 5),
    st.booleans(),
)
def test_murmur2_partitions_matches_per_key(keys: list, num: int, skip: int, large: bool) -> None:
    import pyarrow as pa

    from kafka_core.producer.partitioner import murmur2_partitions

    arr = pa.array([b"pad"] * skip + keys, pa.large_binary() if large else pa.binary()).slice(skip)
    got = murmur2_partitions(arr, num).to_pylist()
    assert got == [None if k is None else murmur2_partition(k, num) for k in keys]


def test_murmur2_partitions_takes_strings() -> None:
    import pyarrow as pa

    from kafka_core.producer.partitioner import murmur2_partitions

    assert murmur2_partitions(pa.array(["ab", None]), 7).to_pylist() == [murmur2_partition(b"ab", 7), None]


def test_murmur2_partitions_checks_forged_offsets() -> None:
    """Both twins (the C one when in use, and the pure-Python one) refuse forged buffers."""
    import struct

    from kafka_core.producer._python import accel as python_accel
    from kafka_core.producer._speedups import accel

    offsets = memoryview(struct.pack("<3i", 0, 4, 1 << 30))
    for twin in {accel, python_accel}:
        with pytest.raises(ValueError, match="outside the data buffer"):
            twin.murmur2_partitions(offsets, memoryview(b"abcdefgh"), 0, 2, False, 4, None)
        with pytest.raises(ValueError, match="offsets buffer too short"):
            twin.murmur2_partitions(offsets, memoryview(b"abcdefgh"), 1, 5, False, 4, None)
        with pytest.raises(ValueError, match="num_partitions"):
            twin.murmur2_partitions(offsets, memoryview(b"abcdefgh"), 0, 1, False, 0, None)
