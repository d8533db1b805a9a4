"""``poll_columns`` with a column decoder: the key and/or value column of a polled batch replaced
by decoded, typed columns (e.g. Schema Registry Avro as Arrow structs).

A decoder is passed in (``kafka_core.schema_registry.columnar`` makes them); this layer knows
only its one method. In PERMISSIVE decoders' hands a bad record is a null row and its error is
in a ``key_error``/``value_error`` column; a decoder that raises (FAILFAST) leaves the consumer
positioned back at the batch's first records, so nothing is skipped.
"""

from __future__ import annotations

from typing import Any, Protocol


class ColumnDecoder(Protocol):
    def decode_column(self, values: Any, topics: Any) -> tuple[Any, Any | None]:
        """(decoded array, error texts or None) for a binary column and the topic of each row."""
        ...


def decode_columns(batch: Any, key_decoder: ColumnDecoder | None, value_decoder: ColumnDecoder | None) -> Any:
    """``batch`` (a poll_columns RecordBatch) with its key/value columns decoded."""
    import pyarrow as pa

    if batch is None or (key_decoder is None and value_decoder is None):
        return batch
    names = list(batch.schema.names)
    arrays = list(batch.columns)
    topics = batch.column("topic")
    for name, decoder in (("key", key_decoder), ("value", value_decoder)):
        if decoder is None:
            continue
        decoded, errors = decoder.decode_column(batch.column(name), topics)
        arrays[names.index(name)] = decoded
        if errors is not None:
            names.append(f"{name}_error")
            arrays.append(errors)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def first_offsets(batch: Any) -> dict[tuple[str, int], int]:
    """The first offset of each (topic, partition) in a poll_columns batch (to seek back to)."""
    first: dict[tuple[str, int], int] = {}
    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    for tp in zip(topics, partitions, offsets, strict=True):
        key = (tp[0], tp[1])
        if key not in first or tp[2] < first[key]:
            first[key] = tp[2]
    return first
