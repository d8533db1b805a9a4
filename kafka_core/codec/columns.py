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
def arrow_schema(binary_view: bool = False) -> pa.Schema:
    """Schema of ``RecordColumns.to_arrow()`` (keys and values as binary_view after a zero-copy decode)."""
    import pyarrow as pa

    binary = pa.binary_view() if binary_view else pa.binary()

    return pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("ms"), nullable=False),
            pa.field("timestamp_type", pa.int8(), nullable=False),
            pa.field("key", binary),
            pa.field("value", binary),
            pa.field("headers", headers_type(), nullable=False),
        ]
    )


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
    values, or only wants ``to_arrow()``, does not pay for wrapping the other columns. That
    decoder builds the object itself (``__new__``, then ``_arrays = [None] * 6``, ``_batch``,
    ``batches``): a Python-level constructor call was a measurable part of a small decode.
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
            array = self._batch.column(i)  # type: ignore[union-attr]
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

        if self._batch is not None:
            return self._batch
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
