"""Columnar view of decoded records: pyarrow arrays, no Python object per record.

pyarrow is an optional dependency (extras ``arrow``/``spark``), so it is imported on first use.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def headers_type() -> pa.DataType:
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]))


@cache
def arrow_schema() -> pa.Schema:
    """Schema of ``RecordColumns.to_arrow()``."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("ms"), nullable=False),
            pa.field("timestamp_type", pa.int8(), nullable=False),
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
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
    """Decoded data records as pyarrow arrays; control records are left out (see ``batches``)."""

    __slots__ = ("offsets", "timestamps", "timestamp_types", "keys", "values", "headers", "batches")

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
        self.offsets = offsets
        self.timestamps = timestamps
        self.timestamp_types = timestamp_types
        self.keys = keys
        self.values = values
        self.headers = headers
        self.batches = batches

    def __len__(self) -> int:
        return len(self.offsets)

    def to_arrow(self) -> pa.RecordBatch:
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [
                self.offsets,
                self.timestamps.view(pa.timestamp("ms")),
                self.timestamp_types,
                self.keys,
                self.values,
                self.headers,
            ],
            schema=arrow_schema(),
        )

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records, {len(self.batches)} batches)"
