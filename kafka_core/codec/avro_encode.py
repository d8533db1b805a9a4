"""Arrow -> Avro: a column (or a table's rows) encoded to Avro values, Confluent-framed when given
a schema id. The inverse of ``avro_columns``: Arrow types as spark-avro maps them (timestamps in
microseconds, decimals as decimal128, maps as lists of pairs, unions of several types as structs
of ``member0``, ``member1``, ...), and fields matched by name.

Each schema is compiled once into nested writer functions; values are walked column-major per
batch through ``to_pylist`` (pyarrow's C conversion), not through a Python dict built per record.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable
from typing import Any

from kafka_core.codec.avro_schema import AvroSchemaError, AvroType, parse_schema, union_shape
from kafka_core.errors import KafkaCodecError

__all__ = ["AvroColumnEncoder"]

Writer = Callable[[bytearray, Any], None]
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)


def _varint(out: bytearray, n: int) -> None:
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


class AvroColumnEncoder:
    """Encodes Arrow values with one Avro schema; ``schema_id`` set: Confluent-framed."""

    def __init__(self, schema: str | dict[str, Any] | AvroType, schema_id: int | None = None) -> None:
        self.schema = schema if isinstance(schema, AvroType) else parse_schema(schema)
        self.header = b"" if schema_id is None else b"\x00" + schema_id.to_bytes(4, "big")
        self._write = _writer(self.schema, "value")

    def encode(self, values: Any) -> Any:
        """A pyarrow array (a struct column for a record schema), or a Table/RecordBatch whose
        columns are the record's fields: one binary value per row (null rows stay null)."""
        import pyarrow as pa

        if isinstance(values, (pa.Table, pa.RecordBatch)):
            if isinstance(values, pa.Table):
                values = values.combine_chunks().to_batches()
                values = values[0] if values else None
            if values is None:
                return pa.array([], pa.binary())
            values = pa.StructArray.from_arrays(values.columns, names=values.schema.names)
        elif isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        out: list[bytes | None] = []
        header, write = self.header, self._write
        for value in values.to_pylist():
            if value is None and self.schema.kind not in ("null", "union"):
                out.append(None)
                continue
            buf = bytearray(header)
            try:
                write(buf, value)
            except (AvroSchemaError, KafkaCodecError) as exc:
                raise KafkaCodecError(f"row {len(out)}: {exc}") from None
            out.append(bytes(buf))
        return pa.array(out, pa.binary())


def _writer(t: AvroType, path: str) -> Writer:
    k = t.kind
    if k == "null":

        def write_null(out: bytearray, v: Any) -> None:
            if v is not None:
                raise KafkaCodecError(f"{path}: {v!r} given for null")

        return write_null
    if k == "boolean":
        return lambda out, v: out.append(1 if _present(v, path) else 0)
    if k in ("int", "long"):
        limit = 1 << (31 if k == "int" else 63)
        convert = _int_converter(t)

        def write_int(out: bytearray, v: Any) -> None:
            n = convert(_present(v, path))
            if not -limit <= n < limit:
                raise KafkaCodecError(f"{path}: {n} is out of range for Avro {k}")
            _varint(out, n)

        return write_int
    if k == "float":
        return lambda out, v: out.extend(_F32.pack(_present(v, path)))
    if k == "double":
        return lambda out, v: out.extend(_F64.pack(_present(v, path)))
    if t.logical == "decimal":
        return _decimal_writer(t, path)
    if k in ("string", "bytes", "enum", "fixed"):
        return _bytes_writer(t, path)
    if k == "array":
        assert t.items is not None
        item = _writer(t.items, path + "[]")

        def write_array(out: bytearray, v: Any) -> None:
            v = _present(v, path)
            if v:
                _varint(out, len(v))
                for x in v:
                    item(out, x)
            out.append(0)

        return write_array
    if k == "map":
        assert t.values is not None
        value = _writer(t.values, path + "{}")

        def write_map(out: bytearray, v: Any) -> None:
            pairs = _present(v, path)
            pairs = list(pairs.items()) if isinstance(pairs, dict) else pairs
            if pairs:
                _varint(out, len(pairs))
                for key, x in pairs:
                    data = key.encode()
                    _varint(out, len(data))
                    out += data
                    value(out, x)
            out.append(0)

        return write_map
    if k == "record":
        fields = [(f.name, _writer(f.type, f"{path}.{f.name}")) for f in t.fields]

        def write_record(out: bytearray, v: Any) -> None:
            v = _present(v, path)
            for name, write in fields:
                write(out, v.get(name))

        return write_record
    return _union_writer(t, path)


def _present(v: Any, path: str) -> Any:
    if v is None:
        raise KafkaCodecError(f"{path}: null for a field its Avro schema does not let be null")
    return v


def _int_converter(t: AvroType) -> Callable[[Any], int]:
    if t.logical == "date":
        return lambda v: (v - _EPOCH_DATE).days if isinstance(v, datetime.date) else int(v)
    if t.logical in (
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    ):
        per_second = 1000 if t.logical.endswith("millis") else 1_000_000
        local = t.logical.startswith("local")

        def stamp(v: Any) -> int:
            if not isinstance(v, datetime.datetime):
                return int(v)
            if v.tzinfo is None and not local:
                v = v.replace(tzinfo=datetime.UTC)
            delta = v - (_EPOCH_NAIVE if v.tzinfo is None else _EPOCH)
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros if per_second == 1_000_000 else micros // 1000

        return stamp
    return lambda v: v if type(v) is int else int(v)


def _bytes_writer(t: AvroType, path: str) -> Writer:
    k = t.kind
    if k == "enum":
        index = {s: i for i, s in enumerate(t.symbols)}

        def write_enum(out: bytearray, v: Any) -> None:
            i = index.get(_present(v, path), -1)
            if i < 0:
                raise KafkaCodecError(f"{path}: {v!r} is not a symbol of enum {t.name}")
            _varint(out, i)

        return write_enum
    if k == "fixed":

        def write_fixed(out: bytearray, v: Any) -> None:
            v = _present(v, path)
            if len(v) != t.size:
                raise KafkaCodecError(f"{path}: {len(v)} bytes for fixed {t.name} of {t.size}")
            out += v

        return write_fixed

    def write_bytes(out: bytearray, v: Any) -> None:
        data = _present(v, path)
        if isinstance(data, str):
            data = data.encode()
        _varint(out, len(data))
        out += data

    return write_bytes


def _decimal_writer(t: AvroType, path: str) -> Writer:
    scale, size = t.scale, t.size

    def write_decimal(out: bytearray, v: Any) -> None:
        d = _present(v, path)
        if not isinstance(d, decimal.Decimal):
            d = decimal.Decimal(d)
        unscaled = int(d.scaleb(scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))
        if len(str(abs(unscaled))) > t.precision:
            raise KafkaCodecError(f"{path}: {d} has more than the {t.precision} digits of its decimal")
        n = size or max(1, (unscaled.bit_length() + 8) // 8)
        data = unscaled.to_bytes(n, "big", signed=True)
        if t.kind == "bytes":
            _varint(out, n)
        out += data

    return write_decimal


def _union_writer(t: AvroType, path: str) -> Writer:
    null_at = next((i for i, b in enumerate(t.branches) if b.kind == "null"), -1)
    rest = [(i, b) for i, b in enumerate(t.branches) if b.kind != "null"]
    shape = union_shape(t)
    if shape == "null":
        return lambda out, v: out.append(0)
    if shape == "struct":  # {"member0": ..., "member1": ...}: the one that is set
        members = [(f"member{j}", i, _writer(b, f"{path}.member{j}")) for j, (i, b) in enumerate(rest)]

        def write_members(out: bytearray, v: Any) -> None:
            if v is not None:
                for name, i, write in members:
                    x = v.get(name)
                    if x is not None:
                        _varint(out, i)
                        write(out, x)
                        return
            if null_at < 0:
                raise KafkaCodecError(f"{path}: no member set and the union has no null")
            _varint(out, null_at)

        return write_members
    if shape == "single":
        ((i, branch),) = rest
    else:  # {int, long} or {float, double}: the wider one
        i, branch = rest[0] if rest[0][1].kind in ("long", "double") else rest[1]
    write = _writer(branch, path)

    def write_nullable(out: bytearray, v: Any) -> None:
        if v is None:
            if null_at < 0:
                raise KafkaCodecError(f"{path}: null for a union without null")
            _varint(out, null_at)
        else:
            _varint(out, i)
            write(out, v)

    return write_nullable
