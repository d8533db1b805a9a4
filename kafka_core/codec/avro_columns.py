"""Avro <-> Arrow, a column at a time: Confluent-framed (or bare) Avro values decoded into typed
Arrow arrays, each record by its writer schema resolved to one reader schema.

The hot loop is the Cython module ``avro`` (``_codec/avro.pyx``) or its pure-Python twin, chosen
as the rest of the codec is (``kafka_core.codec.IMPLEMENTATION``). Writer schemas come from a
callable (schema id -> schema), so this layer knows nothing of registries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal, NamedTuple

from kafka_core.codec.avro_plan import Builders, Program, assemble
from kafka_core.codec.avro_schema import AvroSchemaError, AvroType, arrow_type, parse_schema
from kafka_core.codec.extension import extension_module
from kafka_core.errors import KafkaCodecError

Mode = Literal["FAILFAST", "PERMISSIVE"]
WriterSchema = str | dict[str, Any] | AvroType
WriterLookup = Callable[[int], WriterSchema]
UNFRAMED_ID = -1  # the entry of the one writer schema of unframed values

__all__ = ["AvroColumnDecoder", "AvroSchemaError", "DecodedColumn", "Mode", "implementation"]


def implementation() -> ModuleType:
    """The decoder module: Cython when the codec is, else the twin."""
    return extension_module("avro", "Avro codec")


class DecodedColumn(NamedTuple):
    """Decoded values, and in PERMISSIVE mode the error of each failed row (null elsewhere)."""

    values: Any  # pyarrow.Array of the reader schema's Arrow type
    errors: Any  # pyarrow.StringArray, or None in FAILFAST mode


class AvroColumnDecoder:
    """Decodes columns of Avro values read with one reader schema.

    ``writer_schemas(id)`` gives the schema a framed value's id names (called once per id). A
    ``ValueError`` or ``LookupError`` it raises (no such id, not an Avro schema) fails that id's
    records; anything else (a registry out of reach) propagates from ``decode``, and the id is
    looked up again by the next one, so an outage is never taken for bad records. Unframed
    values (``framed=False``) are read with ``writer_schema`` (default: the reader schema).
    Thread-safe: compiling a new id takes a lock.
    """

    def __init__(
        self,
        reader_schema: WriterSchema,
        writer_schemas: WriterLookup | None = None,
        *,
        framed: bool = True,
        writer_schema: WriterSchema | None = None,
        codec: ModuleType | None = None,
    ) -> None:
        """``codec``: the decoder module, when not the one this process chose (the parity
        tests run both twins)."""
        self._codec = codec
        self.reader = _parse(reader_schema)
        self.arrow_type = arrow_type(self.reader)
        self.framed = framed
        self._lookup = writer_schemas
        self._builders = Builders(self.reader)
        self._program = Program(self._builders)
        self._tables = self._program.builder_tables()
        self._lock = threading.Lock()  # guards _program (compiling new writer ids)
        if not framed:
            self._program.add_writer(
                UNFRAMED_ID, self.reader if writer_schema is None else _parse(writer_schema)
            )

    def decode(self, values: Any, mode: Mode = "FAILFAST") -> DecodedColumn:
        """``values``: a pyarrow binary-like array (or a list of bytes/None). A null value is a
        null row. FAILFAST raises KafkaCodecError at the first bad record; PERMISSIVE makes it
        a null row with its error in ``errors``."""
        import pyarrow as pa

        if mode not in ("FAILFAST", "PERMISSIVE"):
            raise ValueError(f"mode must be FAILFAST or PERMISSIVE, not {mode!r}")
        values = _binary(values)
        impl = self._codec or implementation()
        if self.framed:
            self._learn(impl.framed_ids(values))
        with self._lock:
            code, blob, ids, pcs = self._program.packed()
        raw, errors = impl.decode_avro(
            code, blob, ids, pcs, *self._tables, values, self.framed, mode == "PERMISSIVE"
        )
        column = assemble(self._builders, raw)
        error_column = None
        if mode == "PERMISSIVE":
            texts: list[str | None] = [None] * len(values)
            for row, text in errors:
                texts[row] = text
            error_column = pa.array(texts, pa.string())
        return DecodedColumn(column, error_column)

    def prepare(self, schema_ids: set[int]) -> None:
        """Compile the programs of these writer ids now rather than at the first value that names
        them (what the lookup raises still fails only those values, later)."""
        if self.framed:
            self._learn(set(schema_ids))

    def _learn(self, ids: set[int]) -> None:
        with self._lock:
            known = self._program.entries
            for schema_id in sorted(ids - known.keys()):
                if self._lookup is None:
                    self._program.add_writer(
                        schema_id, None, f"unknown schema id {schema_id}: no writer schema lookup"
                    )
                    continue
                try:
                    writer = _parse(self._lookup(schema_id))
                except (ValueError, LookupError) as exc:  # what the records name is at fault
                    self._program.add_writer(
                        schema_id, None, f"schema id {schema_id}: {type(exc).__name__}: {exc}"
                    )
                    continue
                self._program.add_writer(schema_id, writer)


def _parse(schema: WriterSchema) -> AvroType:
    return schema if isinstance(schema, AvroType) else parse_schema(schema)


def _binary(values: Any) -> Any:
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        return pa.array(values, pa.binary())
    t = values.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return values
    if (
        pa.types.is_binary_view(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
    ):
        return values.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
    raise KafkaCodecError(f"Avro values must be a binary column, not {t}")
