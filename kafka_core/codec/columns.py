"""Columnar view of decoded records: pyarrow arrays, no Python object per record.

pyarrow is an optional dependency (extras ``arrow``/``spark``), so it is imported on first use.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def headers_type() -> pa.DataType:
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]))


@cache
def arrow_schema(binary_view: bool = False, headers: bool = True) -> pa.Schema:
    """Schema of ``RecordColumns.to_arrow()`` (keys and values as binary_view after a zero-copy
    decode); ``headers=False``: what the Cython decoder imports when no record has headers."""
    import pyarrow as pa

    binary = pa.binary_view() if binary_view else pa.binary()
    fields = [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms"), nullable=False),
        pa.field("timestamp_type", pa.int8(), nullable=False),
        pa.field("key", binary),
        pa.field("value", binary),
    ]
    if headers:
        fields.append(pa.field("headers", headers_type(), nullable=False))
    return pa.schema(fields)


class ConstantColumns:
    """Columns of one value repeated per row (an empty headers column; the consumer's topic
    and partition columns).

    Building them per decode or fetch cost more than decoding the records; instead one array per
    value is kept, grown by doubling, and sliced (zero-copy) to the rows needed. The arrays are
    built from their buffers: ``pa.repeat`` of a string is slow and page-faults its way up
    through regrowth, and ``fill_null`` of a list takes a quarter of a second.
    """

    MAX_KEYS = 64  # distinct values kept (least recently used dropped first)
    MIN_ROWS = 1 << 16

    def __init__(self) -> None:
        self._arrays: dict[tuple[Any, Any], Any] = {}

    def column(self, value: Any, type_: Any, n: int) -> Any:
        """``value`` hashable: an empty list is given as ``()``."""
        key = (value, type_)
        array = self._arrays.pop(key, None)
        if array is None or len(array) < n:
            while len(self._arrays) >= self.MAX_KEYS:
                del self._arrays[next(iter(self._arrays))]
            array = _repeated(value, type_, max(n, self.MIN_ROWS, 2 * len(array) if array is not None else 0))
        self._arrays[key] = array  # most recently used last
        return array if len(array) == n else array.slice(0, n)


def _repeated(value: Any, type_: Any, n: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_list(type_) and not value:  # offsets all zero, no entries
        entries = pa.array([], type=type_.value_type)
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(bytes(4 * (n + 1)))], children=[entries])
    if not pa.types.is_string(type_):
        return pa.nulls(n, type_).fill_null(pa.scalar(value, type_))
    data = value.encode()
    if len(data) * (n + 1) > 0x7FFFFFFF:  # int32 offsets: let pyarrow say it does not fit
        return pa.repeat(pa.scalar(value, type_), n)
    # offsets 0, L, 2L, ... nL as a cumulative sum; data is the value n times over
    ends = pc.cumulative_sum(pa.nulls(n + 1, pa.int32()).fill_null(len(data)))
    offsets = pc.subtract(ends, pa.scalar(len(data), pa.int32()))
    return pa.Array.from_buffers(type_, n, [None, offsets.buffers()[1], pa.py_buffer(data * n)])


CONSTANTS = ConstantColumns()


def empty_headers(n: int) -> pa.ListArray:
    """A headers column of n empty lists (a slice of one cached array)."""
    return CONSTANTS.column((), headers_type(), n)


class BatchInfo(NamedTuple):
    """Batch-level facts a consumer needs (transactions, control markers, offset gaps)."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    control_type: int  # -1 unless is_control: 0 = ABORT marker, 1 = COMMIT marker
    record_count: int  # data records of this batch present in the columns (0 for control batches)


class RecordColumns:
    """Decoded data records as pyarrow arrays; control records are left out (see ``batches``).

    The Cython decoder imports one ``pa.RecordBatch`` (schema ``arrow_schema()``, either binary
    flavour) and the arrays are taken from it on first access: a caller that only reads keys and
    values, or only wants ``to_arrow()``, does not pay for wrapping the other columns. When no
    record has headers that batch leaves the headers column out (``headers=False``; importing
    its four Arrow nodes was a twentieth of a decode) and an all-empty one is made on demand.
    That decoder builds the object itself (``__new__``, then ``_arrays = [None] * 6``,
    ``_batch``, ``batches``): a Python-level constructor call was a measurable part of a small
    decode.
    """

    __slots__ = ("_arrays", "_batch", "batches")

    def __init__(
        self,
        offsets: pa.Int64Array,
        timestamps: pa.Int64Array,
        timestamp_types: pa.Int8Array,
        keys: pa.BinaryArray,
        values: pa.BinaryArray,
        headers: pa.ListArray,
        batches: list[BatchInfo],
    ) -> None:
        self._arrays: list[Any] = [offsets, timestamps, timestamp_types, keys, values, headers]
        self._batch: pa.RecordBatch | None = None
        self.batches = batches

    def _column(self, i: int) -> Any:
        array = self._arrays[i]
        if array is None:
            batch = self._batch
            assert batch is not None
            no_headers = i == 5 and batch.num_columns == 5
            array = empty_headers(batch.num_rows) if no_headers else batch.column(i)
            if i == 1:  # stored as timestamp[ms] for to_arrow(); int64 here
                import pyarrow as pa

                array = array.view(pa.int64())
            self._arrays[i] = array
        return array

    @property
    def offsets(self) -> pa.Int64Array:
        return self._column(0)

    @property
    def timestamps(self) -> pa.Int64Array:
        return self._column(1)

    @property
    def timestamp_types(self) -> pa.Int8Array:
        return self._column(2)

    @property
    def keys(self) -> pa.Array:
        """binary, or binary_view after a zero-copy decode."""
        return self._column(3)

    @property
    def values(self) -> pa.Array:
        return self._column(4)

    @property
    def headers(self) -> pa.ListArray:
        return self._column(5)

    def __len__(self) -> int:
        if self._batch is not None:
            return self._batch.num_rows
        return len(self._arrays[0])

    def to_arrow(self) -> pa.RecordBatch:
        import pyarrow as pa

        batch = self._batch
        if batch is not None:
            if batch.num_columns == 5:
                view = pa.types.is_binary_view(batch.schema.field(3).type)
                batch = pa.RecordBatch.from_arrays([*batch.columns, self.headers], schema=arrow_schema(view))
                self._batch = batch
            return batch
        return pa.RecordBatch.from_arrays(
            [
                self.offsets,
                self.timestamps.view(pa.timestamp("ms")),
                self.timestamp_types,
                self.keys,
                self.values,
                self.headers,
            ],
            schema=arrow_schema(pa.types.is_binary_view(self.keys.type)),
        )

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records, {len(self.batches)} batches)"
