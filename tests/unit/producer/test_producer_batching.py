"""send_batch planning: rows grouped by partition and cut by size, Arrow columns sized off
their offsets."""

from __future__ import annotations

import pytest
from fakes.accumulator import make_accumulator
from hypothesis import given
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core.errors import KafkaCodecError, KafkaConfigError
from kafka_core.producer.batching import plan_chunks
from kafka_core.producer.partitioner import murmur2_partition


def test_plan_chunks_cuts_arrow_columns_by_size() -> None:
    pa = need_module("pyarrow")
    acc = make_accumulator(batch_size=1 << 20)
    acc.set_partitions("t", 3)
    values = pa.array([b"v" * 100] * 25_000, pa.binary())
    chunks = plan_chunks(acc.topics["t"], acc.partitioner, values, None, None, None, None, 1 << 20)
    assert len({c.partition for c in chunks}) == 1
    assert sum(c.count for c in chunks) == 25_000
    assert all(c.size <= 1 << 20 for c in chunks)
    assert [c.rows[0] for c in chunks] == sorted(c.rows[0] for c in chunks)
    assert chunks[0].values.equals(values.slice(0, chunks[0].count))


def test_plan_chunks_groups_keys_by_partition() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 4)
    keys = [b"k%d" % i for i in range(100)]
    values = [b"v%d" % i for i in range(100)]
    chunks = plan_chunks(acc.topics["t"], acc.partitioner, values, keys, None, None, None, 1 << 20)
    seen = {}
    for c in chunks:
        for row, k, v in zip(c.rows, c.keys, c.values, strict=True):
            assert k == keys[row] and v == values[row]
            assert c.partition == murmur2_partition(k, 4)
            seen[row] = c.partition
    assert sorted(seen) == list(range(100))


@given(
    st.lists(st.none() | st.sampled_from([b"a", b"b", b"c", b"dd", b"eee"]), min_size=1, max_size=300),
    st.integers(1, 6),
    st.integers(200, 3000),
)
def test_plan_chunks_arrow_keys_keep_per_key_order(keys: list, num: int, batch_size: int) -> None:
    """pyarrow keys: every row once, in its murmur2 partition (null keys sticky), in input order
    within each partition, and the columns taken along with their rows."""
    pa = need_module("pyarrow")
    acc = make_accumulator()
    acc.set_partitions("t", num)
    values = pa.array([b"v%d" % i for i in range(len(keys))])
    headers = [[("i", b"%d" % i)] for i in range(len(keys))]
    chunks = plan_chunks(
        acc.topics["t"], acc.partitioner, values, pa.array(keys, pa.binary()), None, headers, None, batch_size
    )
    placed: dict[int, list[int]] = {}
    for c in chunks:
        rows = list(c.rows) if not hasattr(c.rows, "to_pylist") else c.rows.to_pylist()
        got_values = c.values.to_pylist()
        for j, row in enumerate(rows):
            assert got_values[j] == values[row].as_py() and c.headers[j] == headers[row]
            if keys[row] is not None:
                assert c.partition == murmur2_partition(keys[row], num)
            placed.setdefault(c.partition, []).append(row)
    assert sorted(r for rows in placed.values() for r in rows) == list(range(len(keys)))
    assert all(rows == sorted(rows) for rows in placed.values())
    null_parts = {p for p, rows in placed.items() for r in rows if keys[r] is None}
    assert len(null_parts) <= 1


def test_plan_chunks_rejects_mismatched_columns() -> None:
    acc = make_accumulator()
    acc.set_partitions("t", 1)
    with pytest.raises(KafkaCodecError):
        plan_chunks(acc.topics["t"], acc.partitioner, [b"a", b"b"], [b"k"], None, None, None, 1000)
    with pytest.raises(KafkaConfigError):
        plan_chunks(acc.topics["t"], acc.partitioner, [b"a"], None, 3, None, None, 1000)


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string", "large_string"])
def test_arrow_sizes_read_off_offsets_match_pyarrow(kind: str) -> None:
    pa = need_module("pyarrow")
    pc = need_module("pyarrow.compute")
    from kafka_core.producer.batching import _arrow_bytes

    typ = getattr(pa, kind)()
    raw = [None if i % 5 == 0 else "x" * (i % 17) for i in range(200)]
    vals = [v if v is None or "string" in kind else v.encode() for v in raw]
    sliced = pa.array(vals, typ).slice(13, 150)
    for start, stop in ((0, 150), (7, 99), (40, 41), (5, 5)):
        expected = pc.sum(pc.binary_length(sliced.slice(start, stop - start))).as_py() or 0
        assert _arrow_bytes(sliced, start, stop) == expected
