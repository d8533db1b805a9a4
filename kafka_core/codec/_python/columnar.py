"""Columns: the pure-Python twin of ``_codec/columnar.pyx`` (docs/codec.md).

Same inputs, outputs and errors as the Cython module; it goes through Python lists, so it is
the slow path. ``zero_copy=True`` gives the same ``binary_view`` types, but copies.
"""

from __future__ import annotations

from array import array
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec._python.batch import _walk, check_control_records
from kafka_core.codec._python.writer import _encode
from kafka_core.codec.columns import BatchInfo, RecordColumns, headers_type
from kafka_core.errors import KafkaCodecError

__all__ = ["decode_record_batches_columns", "encode_record_batch_columns", "set_decode_helper"]

_helper = [False]


def set_decode_helper(enabled: bool) -> bool:
    """As the Cython twin's, for the same API; this twin always decodes on one thread."""
    previous = _helper[0]
    _helper[0] = bool(enabled)
    return previous


def _is_arrow(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow")


def _binary_column(col: Any, what: str) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not isinstance(col, pa.Array):
            raise KafkaCodecError(f"{what}: expected a pyarrow Array, not {type(col).__name__}")
        t = col.type
        if (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_string_view(t)
            or pa.types.is_binary_view(t)
        ):
            col = col.cast(pa.large_binary())
        elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)):
            raise KafkaCodecError(f"{what}: expected a binary or string array, not {t}")
        return col.to_pylist()
    if isinstance(col, (str, bytes, bytearray, memoryview)):
        raise KafkaCodecError(f"{what}: expected a sequence of bytes-like objects, not {type(col).__name__}")
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"{what}: expected a sequence, not {type(col).__name__}") from None


def _timestamp_column(col: Any) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = col.type
        if pa.types.is_timestamp(t):
            if t.unit != "ms":
                raise KafkaCodecError(f"timestamps: expected milliseconds, got timestamp[{t.unit}]")
            col = col.cast(pa.int64())
        elif not pa.types.is_integer(t):
            raise KafkaCodecError(f"timestamps: expected an int64 or timestamp[ms] array, not {t}")
        return col.to_pylist()
    if isinstance(col, (str, bytes, bytearray)):
        raise KafkaCodecError(f"timestamps: expected a sequence of ints, not {type(col).__name__}")
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"timestamps: expected a sequence, not {type(col).__name__}") from None


def _headers_column(col: Any) -> list:
    if _is_arrow(col):
        import pyarrow as pa

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        return col.to_pylist()  # list of lists of {"key", "value"} dicts (or None)
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"headers: expected a sequence, not {type(col).__name__}") from None


def encode_record_batch_columns(
    keys: Any,
    values: Any,
    *,
    headers: Any = None,
    timestamps: Any = None,
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
    """Encode columns (sequences or pyarrow arrays) as one v2 batch; same bytes as
    ``encode_record_batch`` with the equivalent records."""
    if values is None:
        raise KafkaCodecError("values may not be None (individual values may be null)")
    value_list = _binary_column(values, "values")
    n = len(value_list)
    if keys is None:
        key_list: list = [None] * n
    else:
        key_list = _binary_column(keys, "keys")
        if len(key_list) != n:
            raise KafkaCodecError(f"keys has {len(key_list)} entries, values has {n}")
    header_list = None
    if headers is not None:
        header_list = _headers_column(headers)
        if len(header_list) != n:
            raise KafkaCodecError(f"headers has {len(header_list)} entries, values has {n}")
    ts_list = None
    if timestamps is not None:
        ts_list = _timestamp_column(timestamps)
        if len(ts_list) != n:
            raise KafkaCodecError(f"timestamps has {len(ts_list)} entries, values has {n}")
    return _encode(
        key_list,
        value_list,
        header_list,
        ts_list,
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


def decode_record_batches_columns(
    buf: Buffer, *, check_crc: bool = True, zero_copy: bool = False
) -> RecordColumns:
    """Decode every complete batch in ``buf`` into pyarrow columns (control records left out);
    ``zero_copy`` gives binary_view keys and values, as the Cython twin (copied here)."""
    import pyarrow as pa

    offsets = array("q")
    timestamps = array("q")
    ts_types = array("b")
    keys: list = []
    values: list = []
    header_offsets = array("i", [0])
    header_keys: list = []
    header_values: list = []
    batches: list[BatchInfo] = []
    for batch in _walk(buf, check_crc):
        if isinstance(batch, tuple):
            entry_offset, legacy_records = batch
            for offset, ts, ts_type, key, value in legacy_records:
                offsets.append(offset)
                timestamps.append(ts)
                ts_types.append(ts_type)
                keys.append(key)
                values.append(value)
                header_offsets.append(len(header_keys))
            first = legacy_records[0][0] if legacy_records else entry_offset
            batches.append(BatchInfo(first, entry_offset, -1, -1, -1, False, False, -1, len(legacy_records)))
            continue
        base_offset = batch.base_offset
        last_offset = base_offset + batch.last_offset_delta
        if batch.is_control:
            check_control_records(batch)
            control_type = -1
            if batch.records:
                control_type = int.from_bytes(batch.records[0][2][2:4], "big", signed=True)
            batches.append(
                BatchInfo(
                    base_offset,
                    last_offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.is_transactional,
                    True,
                    control_type,
                    0,
                )
            )
            continue
        log_append = batch.log_append_time
        base_ts = batch.max_timestamp if log_append else batch.base_timestamp
        try:
            for tsd, od, key, value, headers in batch.records:
                offsets.append(base_offset + od)
                timestamps.append(base_ts if log_append else base_ts + tsd)
                keys.append(key)
                values.append(value)
                if headers:
                    for hk, hv in headers:
                        header_keys.append(hk)
                        header_values.append(hv)
                header_offsets.append(len(header_keys))
        except OverflowError:
            raise KafkaCodecError(
                f"batch with base offset {base_offset}: an offset or timestamp overflows int64"
            ) from None
        ts_types.extend([1 if log_append else 0] * len(batch.records))
        batches.append(
            BatchInfo(
                base_offset,
                last_offset,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.is_transactional,
                False,
                -1,
                len(batch.records),
            )
        )
    n = len(offsets)
    binary = pa.binary_view() if zero_copy else pa.binary()
    htype = headers_type()
    struct_type = htype.value_type
    header_struct = pa.StructArray.from_arrays(
        [pa.array(header_keys, pa.string()), pa.array(header_values, pa.binary())],
        fields=list(struct_type),
    )
    headers_arr = pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(header_offsets)]),
        header_struct,
        type=htype,
    )
    return RecordColumns(
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(timestamps)]),
        pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(ts_types)]),
        pa.array(keys, binary),
        pa.array(values, binary),
        headers_arr,
        batches,
    )
