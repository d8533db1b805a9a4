"""Arrow -> Avro: a column (or a table's rows) encoded to Avro values, Confluent-framed when given
a schema id. The inverse of ``avro_columns``: Arrow types as spark-avro maps them (timestamps in
microseconds, decimals as decimal128, maps as lists of pairs, unions of several types as structs
of ``member0``, ``member1``, ...), and fields matched by name.

The schema and the Arrow column are compiled together into a flat plan: one node per schema node,
each holding its Arrow array's buffers (cast first to the one Arrow type the node reads, column
at a time). The Cython module ``avro_enc`` (``_codec/avro_enc.pyx``) or its pure-Python twin,
chosen as the rest of the codec is, walks the plan over the buffers row by row with no Python
object per row, and reports the first bad value as an error tuple that this module words.
"""

from __future__ import annotations

import decimal
from types import ModuleType
from typing import Any, NamedTuple

from kafka_core.codec.avro_ops import (
    E_DIGITS,
    E_ENUM,
    E_FIXED,
    E_FLOAT,
    E_NO_MEMBER,
    E_NOT_NULL,
    E_NULL,
    E_RANGE,
    E_TOO_BIG,
    E_UNION_NULL,
    OP_ARRAY,
    OP_BOOL,
    OP_BYTES,
    OP_DECIMAL,
    OP_DOUBLE,
    OP_ENUM,
    OP_FIXED,
    OP_FLOAT,
    OP_INT,
    OP_MAP,
    OP_MEMBERS,
    OP_NULL,
    OP_NULLABLE,
    OP_RECORD,
    OP_UNION_NULL,
)
from kafka_core.codec.avro_schema import AvroSchemaError, AvroType, parse_schema, union_shape
from kafka_core.codec.extension import extension_module
from kafka_core.errors import KafkaCodecError

__all__ = ["AvroColumnEncoder", "implementation"]


# (op, all_null, validity, offset, data, offsets, aux, p0, p1, p2, p3, tag, first_kid, n_kids):
# buffers are pyarrow Buffers or None; ``offset`` is the array's own, added to every row index.
Node = tuple[int, int, Any, int, Any, Any, Any, int, int, int, int, int, int, int]


class Encoded(NamedTuple):
    """What ``encode_avro`` returns: the first error (code, node, row, element, number), or the
    binary column's validity bitmap (None: no null row), int32 offsets and data."""

    error: tuple[int, int, int, int, int] | None
    validity: bytes | None
    offsets: bytes
    data: bytes


def implementation() -> ModuleType:
    """The encoder module: Cython when the codec is, else the twin."""
    return extension_module("avro_enc", "Avro encoder")


class AvroColumnEncoder:
    """Encodes Arrow values with one Avro schema; ``schema_id`` set: Confluent-framed."""

    def __init__(
        self,
        schema: str | dict[str, Any] | AvroType,
        schema_id: int | None = None,
        *,
        codec: ModuleType | None = None,
    ) -> None:
        """``codec``: the encoder module, when not the one this process chose (the parity tests
        run both twins)."""
        self.schema = schema if isinstance(schema, AvroType) else parse_schema(schema)
        self.header = b"" if schema_id is None else b"\x00" + schema_id.to_bytes(4, "big")
        self._codec = codec

    def encode(self, values: Any) -> Any:
        """A pyarrow array (a struct column for a record schema), or a Table/RecordBatch whose
        columns are the record's fields: one binary value per row (null rows stay null)."""
        import pyarrow as pa

        if isinstance(values, (pa.Table, pa.RecordBatch)):
            if isinstance(values, pa.Table):
                batches = values.combine_chunks().to_batches()
                if not batches:
                    return pa.array([], pa.binary())
                values = batches[0]
            values = pa.StructArray.from_arrays(values.columns, names=values.schema.names)
        elif not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array(values)
        values = _plain(values)
        plan = _Plan()
        try:
            root = plan.add(self.schema, values, "value")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise KafkaCodecError(f"value: {exc}") from None
        nullable_root = self.schema.kind in ("null", "union")
        impl = self._codec or implementation()
        result = Encoded(
            *impl.encode_avro(plan.nodes, plan.kids, root, self.header, len(values), nullable_root)
        )
        if result.error is not None:
            raise KafkaCodecError(plan.message(*result.error))
        buffers = [
            None if result.validity is None else pa.py_buffer(result.validity),
            pa.py_buffer(result.offsets),
            pa.py_buffer(result.data),
        ]
        return pa.Array.from_buffers(pa.binary(), len(values), buffers)


def _plain(arr: Any) -> Any:
    """One chunk, no dictionary or extension type: the array whose buffers hold the values."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    if isinstance(arr.type, pa.ExtensionType):
        arr = arr.storage
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


class _Plan:
    """Nodes built depth-first; a node's children are contiguous in ``kids``."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.kids: list[int] = []
        self.paths: list[str] = []
        self.types: list[AvroType] = []
        self.sources: list[Any] = []  # each node's array before its cast, to word errors

    def node(
        self,
        op: int,
        t: AvroType,
        arr: Any,
        path: str,
        *,
        data: Any = None,
        offsets: Any = None,
        aux: Any = None,
        params: tuple[int, int, int, int] = (0, 0, 0, 0),
        tag: int = 0,
        kids: list[int] | None = None,
        source: Any = None,
    ) -> int:
        import pyarrow as pa

        all_null = arr is None or arr.type == pa.null()
        validity = None if all_null or arr.null_count == 0 else arr.buffers()[0]
        first = len(self.kids)
        self.kids.extend(kids or ())
        self.nodes.append(
            (
                op,
                int(all_null),
                validity,
                0 if arr is None else arr.offset,
                data,
                offsets,
                aux,
                *params,
                tag,
                first,
                len(kids or ()),
            )
        )
        self.paths.append(path)
        self.types.append(t)
        self.sources.append(arr if source is None else source)
        return len(self.nodes) - 1

    def add(self, t: AvroType, arr: Any, path: str, tag: int = 0) -> int:
        import pyarrow as pa

        if arr is not None:
            arr = _plain(arr)
            if arr.type == pa.null():
                arr = None
        k = t.kind
        if k == "union":
            return self._union(t, arr, path, tag)
        if arr is None:  # a null column, or a field the column does not have: null on every row
            return self.node(OP_NULL if k == "null" else OP_BOOL, t, None, path, tag=tag)
        if k == "null":
            return self.node(OP_NULL, t, arr, path, tag=tag)
        if k == "record":
            if not pa.types.is_struct(arr.type):
                raise KafkaCodecError(f"{path}: a {arr.type} column for record {t.name}")
            names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
            kids = [
                self.add(f.type, arr.field(names[f.name]) if f.name in names else None, f"{path}.{f.name}")
                for f in t.fields
            ]
            return self.node(OP_RECORD, t, arr, path, tag=tag, kids=kids)
        if k == "array":
            assert t.items is not None
            arr = _as_list(arr, path)
            item = self.add(t.items, arr.values, path + "[]")
            return self.node(OP_ARRAY, t, arr, path, offsets=arr.buffers()[1], tag=tag, kids=[item])
        if k == "map":
            assert t.values is not None
            arr = _as_list(arr, path)
            entries = arr.values
            if not pa.types.is_struct(entries.type) or entries.type.num_fields != 2:
                raise KafkaCodecError(f"{path}: a {arr.type} column for a map (key, value pairs wanted)")
            key = self.add(AvroType("string"), entries.field(0), path + "{key}")
            value = self.add(t.values, entries.field(1), path + "{}")
            return self.node(OP_MAP, t, arr, path, offsets=arr.buffers()[1], tag=tag, kids=[key, value])
        return self._leaf(t, arr, path, tag)

    def _union(self, t: AvroType, arr: Any, path: str, tag: int) -> int:
        import pyarrow as pa

        null_at = next((i for i, b in enumerate(t.branches) if b.kind == "null"), -1)
        rest = [(i, b) for i, b in enumerate(t.branches) if b.kind != "null"]
        shape = union_shape(t)
        if shape == "null":
            return self.node(OP_UNION_NULL, t, arr, path, tag=tag)
        if shape == "struct":  # {"member0": ..., "member1": ...}: the one that is set
            if arr is not None and not pa.types.is_struct(arr.type):
                raise KafkaCodecError(
                    f"{path}: a {arr.type} column for a union (member0, member1, ... wanted)"
                )
            names = {} if arr is None else {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
            kids = []
            for j, (i, b) in enumerate(rest):
                name = f"member{j}"
                member = None if arr is None or name not in names else arr.field(names[name])
                kids.append(self.add(b, member, f"{path}.{name}", tag=i))
            return self.node(OP_MEMBERS, t, arr, path, params=(null_at, 0, 0, 0), tag=tag, kids=kids)
        if shape == "single":
            ((i, branch),) = rest
        else:  # {int, long} or {float, double}: the wider one
            i, branch = rest[0] if rest[0][1].kind in ("long", "double") else rest[1]
        kid = self.add(branch, arr, path)
        return self.node(OP_NULLABLE, t, arr, path, params=(null_at, i, 0, 0), tag=tag, kids=[kid])

    def _leaf(self, t: AvroType, arr: Any, path: str, tag: int) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc

        k, source = t.kind, arr
        if k == "boolean":
            arr = _cast(arr, pa.bool_())
            return self.node(OP_BOOL, t, arr, path, data=arr.buffers()[1], tag=tag, source=source)
        if k in ("int", "long"):
            width, divisor = 8, 1
            if pa.types.is_date(arr.type):
                arr, width = _cast(arr, pa.date32()).view(pa.int32()), 4
            elif pa.types.is_timestamp(arr.type):
                if arr.type.unit != "us":
                    arr = pc.cast(arr, pa.timestamp("us", arr.type.tz), safe=arr.type.unit != "ns")
                arr = arr.view(pa.int64())
                if t.logical in ("timestamp-millis", "local-timestamp-millis"):
                    divisor = 1000
            else:
                arr = _cast(arr, pa.int64())
            bits = 32 if k == "int" else 64
            return self.node(
                OP_INT,
                t,
                arr,
                path,
                data=arr.buffers()[1],
                params=(bits, width, divisor, 0),
                tag=tag,
                source=source,
            )
        if k in ("float", "double"):
            arr = _cast(arr, pa.float64())
            op = OP_FLOAT if k == "float" else OP_DOUBLE
            return self.node(op, t, arr, path, data=arr.buffers()[1], tag=tag, source=source)
        if t.logical == "decimal":
            arr = _as_decimal(arr, t, path)
            return self.node(
                OP_DECIMAL,
                t,
                arr,
                path,
                data=arr.buffers()[1],
                params=(t.precision, t.size if k == "fixed" else 0, 0, 0),
                tag=tag,
                source=source,
            )
        if k == "enum":
            arr = _binary(arr, pa.string())
            index = pc.index_in(arr, value_set=pa.array(t.symbols, pa.string()))
            found = index.buffers()[0] if index.null_count else None
            return self.node(
                OP_ENUM,
                t,
                arr,
                path,
                data=index.buffers()[1],
                aux=found,
                params=(index.offset, int(found is not None), 0, 0),
                tag=tag,
                source=source,
            )
        arr = _binary(arr, pa.binary())
        buffers = arr.buffers()
        if k == "fixed":
            return self.node(
                OP_FIXED,
                t,
                arr,
                path,
                offsets=buffers[1],
                aux=buffers[2],
                params=(t.size, 0, 0, 0),
                tag=tag,
                source=source,
            )
        return self.node(OP_BYTES, t, arr, path, offsets=buffers[1], aux=buffers[2], tag=tag, source=source)

    def message(self, code: int, node: int, row: int, element: int, number: int) -> str:
        path, t = self.paths[node], self.types[node]
        if code == E_TOO_BIG:
            return "the encoded values exceed the 2 GiB a binary column holds"
        value = self.sources[node][element].as_py() if self.sources[node] is not None else None
        what = {
            E_NULL: "null for a field its Avro schema does not let be null",
            E_NOT_NULL: f"{value!r} given for null",
            E_RANGE: f"{number} is out of range for Avro {t.kind}",
            E_FLOAT: f"{value!r} is out of range for Avro float",
            E_FIXED: f"{number} bytes for fixed {t.name} of {t.size}",
            E_ENUM: f"{value!r} is not a symbol of enum {t.name}",
            E_DIGITS: f"{value} has more than the {t.precision} digits of its decimal",
            E_UNION_NULL: "null for a union without null",
            E_NO_MEMBER: "no member set and the union has no null",
        }.get(code, f"error {code}")
        return f"row {row}: {path}: {what}"


def _cast(arr: Any, to: Any) -> Any:
    import pyarrow.compute as pc

    return arr if arr.type == to else pc.cast(arr, to)


def _binary(arr: Any, to: Any) -> Any:
    """String and binary columns as they are (large ones narrowed), anything else cast."""
    import pyarrow as pa

    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        return arr
    if pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type):
        return _cast(arr, pa.string())
    if (
        pa.types.is_large_binary(arr.type)
        or pa.types.is_fixed_size_binary(arr.type)
        or pa.types.is_binary_view(arr.type)
    ):
        return _cast(arr, pa.binary())
    return _cast(arr, to)


def _as_list(arr: Any, path: str) -> Any:
    import pyarrow as pa

    if pa.types.is_list(arr.type) or pa.types.is_map(arr.type):
        return arr
    if (
        pa.types.is_large_list(arr.type)
        or pa.types.is_fixed_size_list(arr.type)
        or pa.types.is_list_view(arr.type)
    ):
        return _cast(arr, pa.list_(arr.type.value_field))
    raise KafkaCodecError(f"{path}: a {arr.type} column for an Avro array or map")


def _as_decimal(arr: Any, t: AvroType, path: str) -> Any:
    """decimal128 at the schema's scale; other values rounded half up to it as Python does."""
    import pyarrow as pa

    if pa.types.is_decimal128(arr.type) and arr.type.scale == t.scale:
        return arr
    if t.scale > 38:
        raise AvroSchemaError(f"{path}: decimal scale {t.scale} is beyond Arrow's 38 digits")
    out: list[decimal.Decimal | None] = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
            continue
        d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(v)
        unscaled = int(d.scaleb(t.scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))
        if len(str(abs(unscaled))) > min(t.precision, 38):
            raise KafkaCodecError(f"{path}: {v} has more than the {t.precision} digits of its decimal")
        out.append(decimal.Decimal(unscaled).scaleb(-t.scale))
    return pa.array(out, pa.decimal128(38, t.scale))
