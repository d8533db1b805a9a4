"""Avro schemas for the columnar Avro codec: parsing, and the Arrow type of each as spark-avro
maps Avro to Spark types (so Spark gets the schema ``from_avro`` gives).

Parsing is our own (no Avro library): the codec sits below everything else and needs only the
shape of a schema, its named types and field defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kafka_core.errors import KafkaCodecError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class AvroSchemaError(KafkaCodecError):
    """An Avro schema is malformed, or a writer schema cannot be read as the reader schema."""


@dataclass(eq=False)
class AvroType:
    """One node of a parsed schema; named types are one shared object wherever referenced."""

    kind: str  # a primitive, or record, enum, fixed, array, map, union
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    name: str | None = None  # full name of a named type
    aliases: tuple[str, ...] = ()
    size: int = 0  # fixed
    symbols: tuple[str, ...] = ()  # enum
    enum_default: str | None = None
    fields: list[AvroField] = field(default_factory=list)  # record
    items: AvroType | None = None  # array
    values: AvroType | None = None  # map
    branches: list[AvroType] = field(default_factory=list)  # union

    @property
    def short_name(self) -> str:
        return (self.name or self.kind).rsplit(".", 1)[-1]


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroType
    aliases: tuple[str, ...] = ()
    has_default: bool = False
    default: Any = None


def parse_schema(
    schema: str | dict[str, Any] | list[Any], named: dict[str, AvroType] | None = None
) -> AvroType:
    """Parse an Avro schema (JSON text or its decoded form). ``named`` holds the named types of
    schemas it references (Confluent schema references), and receives this schema's own."""
    if isinstance(schema, str):
        stripped = schema.strip()
        if stripped.startswith(("{", "[", '"')):
            try:
                schema = json.loads(stripped)
            except ValueError as exc:
                raise AvroSchemaError(f"Avro schema is not valid JSON: {exc}") from None
    return _Parser({} if named is None else named).parse(schema, None)


class _Parser:
    def __init__(self, named: dict[str, AvroType]) -> None:
        self.named = named

    def parse(self, s: Any, namespace: str | None) -> AvroType:
        if isinstance(s, str):
            if s in PRIMITIVES:
                return AvroType(s)
            full = s if "." in s or namespace is None else f"{namespace}.{s}"
            found = self.named.get(full) or self.named.get(s)
            if found is None:
                raise AvroSchemaError(f"Avro schema names an unknown type {s!r}")
            return found
        if isinstance(s, list):
            branches = [self.parse(b, namespace) for b in s]
            if any(b.kind == "union" for b in branches):
                raise AvroSchemaError("Avro unions cannot contain unions")
            return AvroType("union", branches=branches)
        if not isinstance(s, dict) or "type" not in s:
            raise AvroSchemaError(f"not an Avro schema: {s!r:.100}")
        kind = s["type"]
        if isinstance(kind, (dict, list)):
            return self.parse(kind, namespace)
        if not isinstance(kind, str):
            raise AvroSchemaError(f"not an Avro type: {kind!r:.100}")
        logical = s.get("logicalType")
        if kind in PRIMITIVES:
            return self._logical(AvroType(kind), logical, s)
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(kind, s, namespace, logical)
        if kind == "array":
            return AvroType("array", items=self.parse(s.get("items"), namespace))
        if kind == "map":
            return AvroType("map", values=self.parse(s.get("values"), namespace))
        return self.parse(kind, namespace)  # {"type": "SomeNamedType"}

    def _logical(self, t: AvroType, logical: Any, s: dict[str, Any]) -> AvroType:
        if not isinstance(logical, str):
            return t
        if logical == "decimal" and t.kind in ("bytes", "fixed"):
            precision, scale = s.get("precision"), s.get("scale", 0)
            size_ok = t.kind != "fixed" or (
                isinstance(precision, int) and precision <= _max_precision(t.size)
            )
            if isinstance(precision, int) and isinstance(scale, int) and 0 <= scale <= precision and size_ok:
                t.logical, t.precision, t.scale = logical, precision, scale
            return t  # an invalid decimal is its underlying type, as the Avro spec says
        if (t.kind, logical) in _LOGICALS:
            t.logical = logical
        return t

    def _named(self, kind: str, s: dict[str, Any], namespace: str | None, logical: Any) -> AvroType:
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"Avro {kind} without a name")
        ns = s.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        space = full.rsplit(".", 1)[0] if "." in full else None
        aliases = tuple(a if "." in a or not space else f"{space}.{a}" for a in s.get("aliases") or ())
        if kind == "fixed":
            size = s.get("size")
            if not isinstance(size, int) or size < 0:
                raise AvroSchemaError(f"Avro fixed {full} has no valid size")
            t = self._logical(AvroType("fixed", name=full, aliases=aliases, size=size), logical, s)
        elif kind == "enum":
            symbols = s.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(x, str) for x in symbols):
                raise AvroSchemaError(f"Avro enum {full} has no valid symbols")
            t = AvroType(
                "enum", name=full, aliases=aliases, symbols=tuple(symbols), enum_default=s.get("default")
            )
        else:
            t = AvroType("record", name=full, aliases=aliases)
        self.named[full] = t
        if kind in ("record", "error"):
            raw_fields = s.get("fields")
            if not isinstance(raw_fields, list):
                raise AvroSchemaError(f"Avro record {full} has no fields list")
            for f in raw_fields:
                if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                    raise AvroSchemaError(f"Avro record {full} has a field without a name")
                t.fields.append(
                    AvroField(
                        f["name"],
                        self.parse(f.get("type"), space),
                        tuple(f.get("aliases") or ()),
                        "default" in f,
                        f.get("default"),
                    )
                )
        return t


_LOGICALS = frozenset(
    {
        ("int", "date"),
        ("int", "time-millis"),
        ("long", "time-micros"),
        ("long", "timestamp-millis"),
        ("long", "timestamp-micros"),
        ("long", "local-timestamp-millis"),
        ("long", "local-timestamp-micros"),
        ("string", "uuid"),
    }
)


def _max_precision(size: int) -> int:
    """Largest decimal precision a fixed of ``size`` bytes holds."""
    if size <= 0:
        return 0
    return len(str(2 ** (8 * size - 1) - 1))


def non_null(t: AvroType) -> list[AvroType]:
    return [b for b in t.branches if b.kind != "null"]


def is_nullable(t: AvroType) -> bool:
    return t.kind == "null" or (t.kind == "union" and any(b.kind == "null" for b in t.branches))


def union_shape(t: AvroType) -> str:
    """How spark-avro types a union: ``null`` (only nulls), ``single`` (one type besides null),
    ``long`` ({int, long}), ``double`` ({float, double}) or ``struct`` (member0, member1, ...)."""
    rest = non_null(t)
    if not rest:
        return "null"
    if len(rest) == 1:
        return "single"
    kinds = {b.kind for b in rest if b.logical is None}
    if len(rest) == 2 and kinds == {"int", "long"}:
        return "long"
    if len(rest) == 2 and kinds == {"float", "double"}:
        return "double"
    return "struct"


def arrow_type(t: AvroType) -> Any:
    """The Arrow type of values read with reader schema ``t`` (Spark's type for it, in Arrow)."""
    return _arrow_type(t, ())


def arrow_field(name: str, t: AvroType) -> Any:
    import pyarrow as pa

    return pa.field(name, arrow_type(t), nullable=is_nullable(t))


def _arrow_type(t: AvroType, seen: tuple[AvroType, ...]) -> Any:
    import pyarrow as pa

    kind = t.kind
    if kind == "null":
        return pa.null()
    if kind == "boolean":
        return pa.bool_()
    if kind == "int":
        return pa.date32() if t.logical == "date" else pa.int32()
    if kind == "long":
        if t.logical in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("us", tz="UTC")
        if t.logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return pa.timestamp("us")
        return pa.int64()
    if kind == "float":
        return pa.float32()
    if kind == "double":
        return pa.float64()
    if kind in ("string", "enum"):
        return pa.string()
    if kind in ("bytes", "fixed"):
        if t.logical == "decimal":
            if t.precision > 38:
                raise AvroSchemaError(f"decimal precision {t.precision} is beyond the 38 digits Spark holds")
            return pa.decimal128(t.precision, t.scale)
        return pa.binary()
    if t in seen:
        raise AvroSchemaError(f"recursive Avro type {t.name} has no Spark/Arrow type")
    inner = (*seen, t)
    if kind == "record":
        return pa.struct(
            [pa.field(f.name, _arrow_type(f.type, inner), nullable=is_nullable(f.type)) for f in t.fields]
        )
    if kind == "array":
        assert t.items is not None
        return pa.list_(pa.field("element", _arrow_type(t.items, inner), nullable=is_nullable(t.items)))
    if kind == "map":
        assert t.values is not None
        item = pa.field("value", _arrow_type(t.values, inner), nullable=is_nullable(t.values))
        return pa.map_(pa.field("key", pa.string(), nullable=False), item)
    shape = union_shape(t)
    if shape == "null":
        return pa.null()
    if shape == "single":
        return _arrow_type(non_null(t)[0], inner)
    if shape == "long":
        return pa.int64()
    if shape == "double":
        return pa.float64()
    return pa.struct([pa.field(f"member{i}", _arrow_type(b, inner)) for i, b in enumerate(non_null(t))])
