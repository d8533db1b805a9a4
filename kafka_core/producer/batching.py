"""Splitting a ``send_batch`` call into per-partition chunks that each fit one RecordBatch.

Columns stay as they came (lists or pyarrow arrays, sliced without copying) so that the codec's
columnar encoder reads them directly; sizes come from pyarrow compute kernels, not from Python
loops over the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kafka_core.errors import KafkaCodecError, KafkaConfigError
from kafka_core.producer.batches import BATCH_OVERHEAD, RECORD_OVERHEAD, TopicState, headers_size
from kafka_core.producer.partitioner import DefaultPartitioner, Partitioner, murmur2_partitions

__all__ = ["Chunk", "chunk_timestamps", "plan_chunks"]


@dataclass(slots=True)
class Chunk:
    partition: int
    keys: Any
    values: Any
    headers: Any
    timestamps: Any
    count: int
    size: int
    rows: Any  # row numbers in the send_batch call: a range, a list or a pyarrow integer array


def _is_arrow(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow")


def _arrow(obj: Any) -> Any:
    import pyarrow as pa

    return obj.combine_chunks() if isinstance(obj, pa.ChunkedArray) else obj


def _length(col: Any, what: str) -> int:
    try:
        return len(col)
    except TypeError:
        raise KafkaCodecError(
            f"{what} must be a sequence or a pyarrow array, not {type(col).__name__}"
        ) from None


def _data_bytes(col: Any, start: int, stop: int) -> int:
    """Bytes of keys/values in rows [start, stop) (nulls count 0)."""
    if col is None:
        return 0
    if _is_arrow(col):
        return _arrow_bytes(col, start, stop)
    n = 0
    for x in col[start:stop]:
        if x is not None:
            n += len(x)
    return n


def _arrow_bytes(col: Any, start: int, stop: int) -> int:
    """Data bytes of rows [start, stop) of a (large_)binary/string array, read off its offsets."""
    import pyarrow as pa

    t = col.type
    fmt: Literal["i", "q"]
    if pa.types.is_binary(t) or pa.types.is_string(t):
        fmt = "i"
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        fmt = "q"
    else:
        import pyarrow.compute as pc

        total = pc.sum(pc.binary_length(col.slice(start, stop - start))).as_py()
        return int(total or 0)
    offsets = memoryview(col.buffers()[1]).cast(fmt)
    return int(offsets[col.offset + stop] - offsets[col.offset + start])


def _header_bytes(col: Any, start: int, stop: int) -> int:
    if col is None:
        return 0
    if _is_arrow(col):
        return int(col.slice(start, stop - start).nbytes)
    return sum(headers_size(h) for h in col[start:stop] if h)


def _take(col: Any, rows: Any) -> Any:
    """Rows of ``col``; ``rows`` is a list of ints or a pyarrow integer array."""
    if col is None:
        return None
    if _is_arrow(col):
        import pyarrow as pa

        return col.take(rows if _is_arrow(rows) else pa.array(rows, pa.int64()))
    if _is_arrow(rows):
        rows = rows.to_pylist()
    return [col[i] for i in rows]


def _slice(col: Any, start: int, stop: int) -> Any:
    if col is None:
        return None
    if _is_arrow(col):
        return col.slice(start, stop - start)
    return col[start:stop]


def _key_list(keys: Any) -> list[Any]:
    if _is_arrow(keys):
        return keys.to_pylist()
    return list(keys)


def _arrow_order(keys: Any, num: int, sticky: int) -> tuple[Any, list[tuple[int, int, int]]]:
    """Rows in partition order for pyarrow keys, and each partition's [start, stop) in it.

    murmur2 runs over the Arrow buffers in one C loop; null keys go to the sticky partition. The
    sort is stable, so each key's records keep their order.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = murmur2_partitions(keys, num)
    if parts.null_count:
        parts = parts.fill_null(pa.scalar(sticky, pa.int32()))
    order = pc.sort_indices(parts)
    counts = pc.value_counts(parts)
    sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
    bounds = []
    start = 0
    for p in sorted(sizes):
        bounds.append((p, start, start + sizes[p]))
        start += sizes[p]
    return order, bounds


def plan_chunks(
    t: TopicState,
    partitioner: Partitioner,
    values: Any,
    keys: Any,
    partition: int | None,
    headers: Any,
    timestamps: Any,
    batch_size: int,
) -> list[Chunk]:
    """Group rows by partition (explicit, by key, or sticky), then cut each group by size.

    Called with the accumulator lock held (partitioner state is shared with ``send``).
    """
    if values is None:
        raise KafkaCodecError("values may not be None (individual values may be null)")
    if _is_arrow(values):
        values = _arrow(values)
    n = _length(values, "values")
    for name, col in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
        if col is not None and _length(col, name) != n:
            raise KafkaCodecError(f"{name} has {_length(col, name)} entries, values has {n}")
    if keys is not None and _is_arrow(keys):
        keys = _arrow(keys)
        if keys.null_count == len(keys):
            keys = None
    if n == 0:
        return []
    num = t.num_partitions
    groups: list[tuple[int, Any]]  # partition, and its rows (None: all; a list or a pyarrow array)
    if partition is not None:
        if not 0 <= partition < num:
            raise KafkaConfigError(f"partition {partition} out of range: {t.topic!r} has {num}")
        groups = [(partition, None)]
    elif keys is None and t.sticky is not None:
        groups = [(t.sticky, None)]
        partitioner.on_new_batch(t.topic, num, t.sticky)
        t.sticky = partitioner.sticky(t.topic, num)
    elif keys is not None and _is_arrow(keys) and type(partitioner) is DefaultPartitioner:
        order, bounds = _arrow_order(keys, num, partitioner.sticky(t.topic, num))
        if len(bounds) == 1:
            groups = [(bounds[0][0], None)]
        else:
            # One take per column in partition order, then zero-copy slices per partition.
            cols = [_take(c, order) for c in (keys, values, headers, timestamps)]
            cut: list[Chunk] = []
            for p, start, stop in bounds:
                gk, gv, gh, gt = (_slice(c, start, stop) for c in cols)
                cut.extend(_cut(p, gk, gv, gh, gt, order.slice(start, stop - start), batch_size))
            return cut
    else:
        key_list = _key_list(keys) if keys is not None else [None] * n
        by_part: dict[int, list[int]] = {}
        for i, k in enumerate(key_list):
            by_part.setdefault(partitioner.partition(t.topic, k, num), []).append(i)
        groups = list(by_part.items()) if len(by_part) > 1 else [(next(iter(by_part)), None)]
    chunks: list[Chunk] = []
    for p, rows in groups:
        if rows is None:
            gk, gv, gh, gt, index = keys, values, headers, timestamps, range(n)
        else:
            gk, gv, gh, gt = (
                _take(keys, rows),
                _take(values, rows),
                _take(headers, rows),
                _take(timestamps, rows),
            )
            index = rows
        chunks.extend(_cut(p, gk, gv, gh, gt, index, batch_size))
    return chunks


def _cut(
    p: int, keys: Any, values: Any, headers: Any, timestamps: Any, index: Sequence[int], batch_size: int
) -> list[Chunk]:
    n = len(index)
    budget = max(1, batch_size - BATCH_OVERHEAD)

    def size_of(start: int, stop: int) -> int:
        return (
            _data_bytes(values, start, stop)
            + _data_bytes(keys, start, stop)
            + _header_bytes(headers, start, stop)
            + RECORD_OVERHEAD * (stop - start)
        )

    total = size_of(0, n)
    per_row = max(1, total // n)
    out: list[Chunk] = []
    start = 0
    while start < n:
        k = min(n - start, max(1, budget // per_row))
        size = size_of(start, start + k) if (start, k) != (0, n) else total
        while size > budget and k > 1:
            k = max(1, k * budget // size - 1) if size > 2 * budget else k - max(1, k // 16)
            size = size_of(start, start + k)
        stop = start + k
        out.append(
            Chunk(
                partition=p,
                keys=_slice(keys, start, stop),
                values=_slice(values, start, stop),
                headers=_slice(headers, start, stop),
                timestamps=_slice(timestamps, start, stop),
                count=k,
                size=size + BATCH_OVERHEAD,
                rows=index[start:stop],
            )
        )
        start = stop
    return out


def chunk_timestamps(col: Any) -> list[int | None]:
    """Per-record timestamps (ms) of a send_batch chunk, for its RecordMetadata."""
    if hasattr(col, "to_pylist"):
        import pyarrow as pa

        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        return list(col.to_pylist())
    return [None if x is None else int(x) for x in col]
