"""Hypothesis strategies for the columnar Avro tests: random Avro schemas with values of them, and
what each value is as an Arrow row (the decoder's reader-schema types)."""

from __future__ import annotations

import datetime
import decimal
import io
import itertools
from typing import Any

from hypothesis import strategies as st

UTC = datetime.UTC
_names = itertools.count()


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


_LEAVES = [
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "date",
    "ts-millis",
    "ts-micros",
    "local-ts-micros",
    "decimal",
    "fixed-decimal",
    "enum",
    "fixed",
]


def _leaf(kind: str, draw: Any) -> Any:
    if kind == "date":
        return {"type": "int", "logicalType": "date"}
    if kind == "ts-millis":
        return {"type": "long", "logicalType": "timestamp-millis"}
    if kind == "ts-micros":
        return {"type": "long", "logicalType": "timestamp-micros"}
    if kind == "local-ts-micros":
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if kind == "decimal":
        p = draw(st.integers(1, 38))
        return {"type": "bytes", "logicalType": "decimal", "precision": p, "scale": draw(st.integers(0, p))}
    if kind == "fixed-decimal":
        p = draw(st.integers(1, 20))
        return {
            "type": "fixed",
            "name": _name("FD"),
            "size": 9,
            "logicalType": "decimal",
            "precision": p,
            "scale": draw(st.integers(0, p)),
        }
    if kind == "enum":
        n = draw(st.integers(1, 4))
        return {"type": "enum", "name": _name("E"), "symbols": [f"S{i}" for i in range(n)]}
    if kind == "fixed":
        return {"type": "fixed", "name": _name("F"), "size": draw(st.integers(0, 6))}
    return kind


@st.composite
def avro_schemas(draw: Any, depth: int = 3) -> Any:
    """A JSON Avro schema: leaves, records, arrays, maps and unions, nested ``depth`` deep."""
    choices = ["leaf", "leaf"] + (["record", "array", "map", "nullable", "union"] if depth > 0 else [])
    what = draw(st.sampled_from(choices))
    if what == "leaf":
        return _leaf(draw(st.sampled_from(_LEAVES)), draw)
    if what == "record":
        n = draw(st.integers(0, 4))
        return {
            "type": "record",
            "name": _name("R"),
            "fields": [{"name": f"f{i}", "type": draw(avro_schemas(depth - 1))} for i in range(n)],
        }
    if what == "array":
        return {"type": "array", "items": draw(avro_schemas(depth - 1))}
    if what == "map":
        return {"type": "map", "values": draw(avro_schemas(depth - 1))}
    inner = draw(avro_schemas(depth - 1))
    if what == "nullable" or isinstance(inner, list):
        return ["null", inner] if not isinstance(inner, list) and inner != "null" else ["null", "int"]
    # a union of distinct kinds (so a value's branch is unambiguous)
    picks = draw(
        st.lists(
            st.sampled_from(["int", "string", "double", "boolean", "bytes"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    return (["null"] if draw(st.booleans()) else []) + picks


def values_of(schema: Any) -> st.SearchStrategy[Any]:
    """Values of ``schema`` as fastavro writes them."""
    if isinstance(schema, list):
        return st.one_of(*[values_of(b) for b in schema])
    if isinstance(schema, str):
        schema = {"type": schema}
    t, logical = schema["type"], schema.get("logicalType")
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "int":
        if logical == "date":
            return st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31))
        return st.integers(-(1 << 31), (1 << 31) - 1)
    if t == "long":
        if logical in ("timestamp-millis", "timestamp-micros"):
            return st.datetimes(
                datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1), timezones=st.just(UTC)
            ).map(
                lambda d: (
                    d.replace(microsecond=d.microsecond // 1000 * 1000)
                    if logical == "timestamp-millis"
                    else d
                )
            )
        if logical == "local-timestamp-micros":
            return st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1))
        return st.integers(-(1 << 63), (1 << 63) - 1)
    if t == "float":
        return st.floats(width=32, allow_nan=False)
    if t == "double":
        return st.floats(allow_nan=False)
    if (t == "bytes" and logical == "decimal") or (t == "fixed" and logical == "decimal"):
        p, s = schema["precision"], schema.get("scale", 0)
        # scaleb in a context wide enough for 38 digits (the default rounds to 28)
        wide = decimal.Context(prec=80)
        return st.integers(-(10**p) + 1, 10**p - 1).map(lambda n: decimal.Decimal(n).scaleb(-s, wide))
    if t == "bytes":
        return st.binary(max_size=20)
    if t == "string":
        return st.text(max_size=12)
    if t == "enum":
        return st.sampled_from(schema["symbols"])
    if t == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if t == "array":
        return st.lists(values_of(schema["items"]), max_size=4)
    if t == "map":
        return st.dictionaries(st.text(max_size=5), values_of(schema["values"]), max_size=3)
    fields = schema["fields"]
    return st.fixed_dictionaries({f["name"]: values_of(f["type"]) for f in fields})


def expected(schema: Any, value: Any) -> Any:
    """``value`` (as fastavro reads it) as the decoder's Arrow row, in pyarrow's Python form."""
    if isinstance(schema, list):
        rest = [b for b in schema if b != "null"]
        if value is None:
            return None
        if len(rest) == 1:
            return expected(rest[0], value)
        kinds = {b if isinstance(b, str) else b["type"] for b in rest}
        if kinds == {"int", "long"} or kinds == {"float", "double"}:
            return value
        branch = _branch_of(rest, value)
        if rest[branch] == "double":
            value = float(value)
        return {f"member{i}": (expected(b, value) if i == branch else None) for i, b in enumerate(rest)}
    if isinstance(schema, str):
        schema = {"type": schema}
    t, logical = schema["type"], schema.get("logicalType")
    if t == "array":
        return [expected(schema["items"], v) for v in value]
    if t == "map":
        return [(k, expected(schema["values"], v)) for k, v in value.items()]
    if t == "record":
        return {f["name"]: expected(f["type"], value[f["name"]]) for f in schema["fields"]}
    if t == "fixed" and logical == "decimal" and not isinstance(value, decimal.Decimal):
        return value
    return value


def _branch_of(branches: list[Any], value: Any) -> int:
    """The branch fastavro writes ``value`` with: the first whose type accepts it."""
    accepts = {
        "int": lambda v: type(v) is int and -(1 << 31) <= v < (1 << 31),
        "double": lambda v: type(v) in (int, float),
        "string": lambda v: type(v) is str,
        "boolean": lambda v: type(v) is bool,
        "bytes": lambda v: type(v) is bytes,
    }
    for i, b in enumerate(branches):
        if isinstance(b, str) and b in accepts and accepts[b](value):
            return i
    raise AssertionError(f"no branch for {value!r}")


def fastavro_bytes(schema: Any, value: Any) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, _write_hint=False, _force=True), value)
    return out.getvalue()


def framed(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body
