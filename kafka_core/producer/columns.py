"""``send_batch`` with a column encoder: rows of an Arrow table (or a struct column) encoded to
one binary value each (e.g. Avro under a registered schema) before the columnar record writer.

An encoder is passed in (``kafka_core.schema_registry.columnar`` makes them); this layer knows
only its one method."""

from __future__ import annotations

from typing import Any, Protocol


class ColumnEncoder(Protocol):
    def encode_column(self, values: Any, topic: str) -> Any:
        """A pyarrow binary array: one encoded value per row of ``values`` (nulls stay null)."""
        ...


def encode_columns(
    topic: str, values: Any, keys: Any, key_encoder: ColumnEncoder | None, value_encoder: ColumnEncoder | None
) -> tuple[Any, Any]:
    if value_encoder is not None:
        values = value_encoder.encode_column(values, topic)
    if key_encoder is not None and keys is not None:
        keys = key_encoder.encode_column(keys, topic)
    return values, keys
