"""The columnar Avro decoder's program: a writer schema resolved against a reader schema, compiled
to a flat list of ints that the Cython decoder and its pure-Python twin both interpret.

Columns ("builders") follow the reader schema, so records of every writer schema land in the
same ones; each writer schema has its own entry point. Every node is ``[op, length, args...,
children...]`` so a reader can step over one it does not run. Avro's resolution rules: fields
matched by name or alias, writer-only fields skipped, reader-only fields filled from their
default (decoded from its Avro encoding by the reader's own program), int -> long -> float ->
double and string <-> bytes promoted, enum symbols mapped by name, union branches picked per
record.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

from kafka_core.codec.avro_schema import (
    AvroSchemaError,
    AvroType,
    arrow_type,
    non_null,
    union_shape,
)

# builder kinds, and the width of one fixed-size value (a null's placeholder)
K_NULL, K_BOOL, K_I32, K_I64, K_F32, K_F64, K_BIN, K_DEC, K_STRUCT, K_LIST, K_MAP = range(11)
WIDTH = (0, 1, 4, 8, 4, 8, 0, 16, 0, 0, 0)

# opcodes (the Cython decoder has the same numbers)
(
    OP_PUTNULL,
    OP_BOOL,
    OP_INT,
    OP_LONG,
    OP_FLOAT,
    OP_DOUBLE,
    OP_BYTES,
    OP_FIXED,
    OP_DEC_BYTES,
    OP_DEC_FIXED,
    OP_ENUM,
    OP_RECORD,
    OP_ARRAY,
    OP_MAP,
    OP_UNION,
    OP_USTRUCT,
    OP_DEFAULT,
    OP_ERROR,
    OP_SKIP_VARINT,
    OP_SKIP_N,
    OP_SKIP_BYTES,
    OP_SKIP_RECORD,
    OP_SKIP_ARRAY,
    OP_SKIP_MAP,
    OP_SKIP_UNION,
) = range(1, 26)

# conversions of OP_INT / OP_LONG / OP_FLOAT
INT_I32, INT_I64, INT_F32, INT_F64 = range(4)
LONG_I64, LONG_F32, LONG_F64, LONG_MILLIS = range(4)
FLOAT_F32, FLOAT_F64 = range(2)

_NUMERIC_RANK = {"int": 0, "long": 1, "float": 2, "double": 3}


class Builders:
    """The reader schema's columns: kind, children and Arrow type of each (0 is the root)."""

    def __init__(self, reader: AvroType) -> None:
        self.kinds: list[int] = []
        self.children: list[list[int]] = []
        self.types: list[Any] = []
        self.reader = reader
        self.root_type = arrow_type(reader)
        self.add(reader, self.root_type)

    def add(self, t: AvroType, atype: Any) -> int:
        import pyarrow as pa

        b = len(self.kinds)
        self.kinds.append(-1)
        self.children.append([])
        self.types.append(atype)
        if t.kind == "union" and union_shape(t) == "single":
            t = non_null(t)[0]
        kids: list[int] = []
        if pa.types.is_null(atype):
            kind = K_NULL
        elif pa.types.is_boolean(atype):
            kind = K_BOOL
        elif pa.types.is_int32(atype) or pa.types.is_date32(atype):
            kind = K_I32
        elif pa.types.is_int64(atype) or pa.types.is_timestamp(atype):
            kind = K_I64
        elif pa.types.is_float32(atype):
            kind = K_F32
        elif pa.types.is_float64(atype):
            kind = K_F64
        elif pa.types.is_string(atype) or pa.types.is_binary(atype):
            kind = K_BIN
        elif pa.types.is_decimal(atype):
            kind = K_DEC
        elif pa.types.is_list(atype):
            kind = K_LIST
            assert t.items is not None
            kids = [self.add(t.items, atype.value_type)]
        elif pa.types.is_map(atype):
            kind = K_MAP
            assert t.values is not None
            entries = len(self.kinds)
            self.kinds.append(K_STRUCT)
            self.children.append([])
            self.types.append(pa.struct([atype.key_field, atype.item_field]))
            key = len(self.kinds)
            self.kinds.append(K_BIN)
            self.children.append([])
            self.types.append(pa.string())
            self.children[entries] = [key, self.add(t.values, atype.item_type)]
            kids = [entries]
        else:  # a struct: a record or a union of several types
            kind = K_STRUCT
            members = [f.type for f in t.fields] if t.kind == "record" else non_null(t)
            kids = [self.add(m, atype.field(i).type) for i, m in enumerate(members)]
        self.kinds[b] = kind
        self.children[b] = kids
        return b


class Program:
    """Entry points by schema id into one growing program; constants (defaults, enum symbols,
    error texts) in one blob."""

    def __init__(self, builders: Builders) -> None:
        self.builders = builders
        self.code: list[int] = []
        self.blob = bytearray()
        self.entries: dict[int, int] = {}
        self._packed: tuple[bytes, bytes, bytes, bytes] | None = None

    def add_writer(self, schema_id: int, writer: AvroType | None, error: str | None = None) -> None:
        """Compile the entry of ``schema_id``; one that cannot be read (``error``, or a writer
        schema the reader cannot resolve) becomes a node that fails each of its records."""
        pc = len(self.code)
        if writer is not None and error is None:
            try:
                self._resolve(writer, self.builders.reader, 0)
            except AvroSchemaError as exc:
                del self.code[pc:]
                error = f"schema id {schema_id} cannot be read as the reader schema: {exc}"
        if error is not None:
            self._error(error)
        self.entries[schema_id] = pc
        self._packed = None

    def packed(self) -> tuple[bytes, bytes, bytes, bytes]:
        """(code, blob, entry ids, entry pcs) as the decoders take them: int32 arrays."""
        if self._packed is None:
            ids = array("q", self.entries.keys())
            pcs = array("i", self.entries.values())
            self._packed = (array("i", self.code).tobytes(), bytes(self.blob), ids.tobytes(), pcs.tobytes())
        return self._packed

    def builder_tables(self) -> tuple[bytes, bytes, bytes]:
        """(kinds, first child, child list) as int32 arrays: what a null needs to fill in."""
        first: list[int] = []
        flat: list[int] = []
        for kids in self.builders.children:
            first.append(len(flat))
            flat.extend(kids)
        first.append(len(flat))
        return (
            array("i", self.builders.kinds).tobytes(),
            array("i", first).tobytes(),
            array("i", flat).tobytes(),
        )

    # -- compiling -----------------------------------------------------------------------

    def _open(self, op: int, *args: int) -> int:
        at = len(self.code)
        self.code.extend((op, 0, *args))
        return at

    def _close(self, at: int) -> None:
        self.code[at + 1] = len(self.code) - at

    def _leaf(self, op: int, *args: int) -> None:
        self._close(self._open(op, *args))

    def _const(self, data: bytes) -> tuple[int, int]:
        off = len(self.blob)
        self.blob += data
        return off, len(data)

    def _error(self, message: str) -> None:
        self._leaf(OP_ERROR, *self._const(message.encode()))

    def _resolve(self, w: AvroType, r: AvroType, b: int) -> None:
        """Code reading a value written as ``w`` into builder ``b``, whose reader type is ``r``."""
        kinds = self.builders.kinds
        if w.kind == "union":
            at = self._open(OP_UNION, len(w.branches))
            for branch in w.branches:
                mark = len(self.code)
                try:
                    self._resolve(branch, r, b)
                except AvroSchemaError as exc:  # fails only the records written with this branch
                    del self.code[mark:]
                    self._error(str(exc))
            self._close(at)
            return
        if r.kind == "union":
            if w.kind == "null":
                if not any(x.kind == "null" for x in r.branches):
                    raise AvroSchemaError("null written where the reader has no null")
                self._leaf(OP_PUTNULL, b)
                return
            j, branch = _pick_branch(w, r)
            if kinds[b] == K_STRUCT and union_shape(r) == "struct":
                at = self._open(OP_USTRUCT, b, j)
                self._resolve(w, branch, self.builders.children[b][j])
                self._close(at)
            else:
                self._resolve(w, branch, b)
            return
        self._resolve_plain(w, r, b)

    def _resolve_plain(self, w: AvroType, r: AvroType, b: int) -> None:
        wk, rk = w.kind, r.kind
        if wk == "null" and rk == "null":
            self._leaf(OP_PUTNULL, b)
        elif wk == "boolean" and rk == "boolean":
            self._leaf(OP_BOOL, b)
        elif wk in _NUMERIC_RANK and rk in _NUMERIC_RANK and _NUMERIC_RANK[wk] <= _NUMERIC_RANK[rk]:
            self._numeric(wk, r, b)
        elif wk in ("string", "bytes") and rk in ("string", "bytes") and r.logical != "decimal":
            self._leaf(OP_BYTES, b, 1 if rk == "string" else 0)
        elif rk in ("bytes", "fixed") and r.logical == "decimal" and wk in ("bytes", "fixed"):
            if w.logical == "decimal" and (w.precision, w.scale) != (r.precision, r.scale):
                raise AvroSchemaError(
                    f"decimal({w.precision},{w.scale}) written, decimal({r.precision},{r.scale}) read"
                )
            if wk == "fixed" and rk == "fixed" and w.size != r.size:
                raise AvroSchemaError(f"fixed {w.name} of {w.size} bytes read as {r.size} bytes")
            if wk == "fixed":
                self._leaf(OP_DEC_FIXED, b, w.size, r.precision)
            else:
                self._leaf(OP_DEC_BYTES, b, r.precision)
        elif wk == "fixed" and rk == "fixed":
            if w.size != r.size:
                raise AvroSchemaError(f"fixed {w.name} of {w.size} bytes read as {r.size} bytes")
            self._leaf(OP_FIXED, b, w.size)
        elif wk == "enum" and rk == "enum":
            self._enum(w, r, b)
        elif wk == "record" and rk == "record":
            self._record(w, r, b)
        elif wk == "array" and rk == "array":
            assert w.items is not None and r.items is not None
            at = self._open(OP_ARRAY, b)
            self._resolve(w.items, r.items, self.builders.children[b][0])
            self._close(at)
        elif wk == "map" and rk == "map":
            assert w.values is not None and r.values is not None
            entries = self.builders.children[b][0]
            key, value = self.builders.children[entries]
            at = self._open(OP_MAP, b, entries, key)
            self._resolve(w.values, r.values, value)
            self._close(at)
        else:
            raise AvroSchemaError(f"{_describe(w)} written, {_describe(r)} read")

    def _numeric(self, wk: str, r: AvroType, b: int) -> None:
        """By the builder's kind: a union of int and long is one long column."""
        kind = self.builders.kinds[b]
        if kind == K_I32 and wk == "int":
            self._leaf(OP_INT, b, INT_I32)
        elif kind == K_I64 and wk == "int":
            self._leaf(OP_INT, b, INT_I64)
        elif kind == K_I64 and wk == "long":
            millis = r.logical in ("timestamp-millis", "local-timestamp-millis")
            self._leaf(OP_LONG, b, LONG_MILLIS if millis else LONG_I64)
        elif kind == K_F32 and wk in ("int", "long", "float"):
            self._leaf(
                {"int": OP_INT, "long": OP_LONG, "float": OP_FLOAT}[wk],
                b,
                INT_F32 if wk == "int" else LONG_F32 if wk == "long" else FLOAT_F32,
            )
        elif kind == K_F64 and wk in ("int", "long", "float", "double"):
            op = {"int": OP_INT, "long": OP_LONG, "float": OP_FLOAT, "double": OP_DOUBLE}[wk]
            conv = {"int": INT_F64, "long": LONG_F64, "float": FLOAT_F64, "double": 0}[wk]
            if op == OP_DOUBLE:
                self._leaf(op, b)
            else:
                self._leaf(op, b, conv)
        else:
            raise AvroSchemaError(f"{wk} written, {_describe(r)} read")

    def _enum(self, w: AvroType, r: AvroType, b: int) -> None:
        args: list[int] = [b, len(w.symbols)]
        for symbol in w.symbols:
            if symbol not in r.symbols:
                symbol = r.enum_default if r.enum_default in r.symbols else ""
            if symbol:
                args.extend(self._const(symbol.encode()))
            else:
                args.extend((-1, 0))
        self._leaf(OP_ENUM, *args)

    def _record(self, w: AvroType, r: AvroType, b: int) -> None:
        children = self.builders.children[b]
        by_name: dict[str, int] = {}
        for i, f in enumerate(r.fields):
            by_name.setdefault(f.name, i)
        for i, f in enumerate(r.fields):
            for alias in f.aliases:
                by_name.setdefault(alias, i)
        at = self._open(OP_RECORD, b)
        filled: set[int] = set()
        for wf in w.fields:
            i = by_name.get(wf.name, -1)
            if i < 0 or i in filled:
                self._skip(wf.type)
                continue
            filled.add(i)
            try:
                self._resolve(wf.type, r.fields[i].type, children[i])
            except AvroSchemaError as exc:
                raise AvroSchemaError(f"field {r.name}.{wf.name}: {exc}") from None
        for i, f in enumerate(r.fields):
            if i in filled:
                continue
            if not f.has_default:
                raise AvroSchemaError(f"field {r.name}.{f.name} is not written and has no default")
            try:
                data = encode_default(f.type, f.default)
            except (AvroSchemaError, ValueError, TypeError, OverflowError) as exc:
                raise AvroSchemaError(f"field {r.name}.{f.name} has an invalid default: {exc}") from None
            inner = self._open(OP_DEFAULT, *self._const(data))
            self._resolve(f.type, f.type, children[i])
            self._close(inner)
        self._close(at)

    def _skip(self, w: AvroType) -> None:
        k = w.kind
        if k == "null":
            self._leaf(OP_SKIP_N, 0)
        elif k == "boolean":
            self._leaf(OP_SKIP_N, 1)
        elif k in ("int", "long", "enum"):
            self._leaf(OP_SKIP_VARINT)
        elif k == "float":
            self._leaf(OP_SKIP_N, 4)
        elif k == "double":
            self._leaf(OP_SKIP_N, 8)
        elif k == "fixed":
            self._leaf(OP_SKIP_N, w.size)
        elif k in ("bytes", "string"):
            self._leaf(OP_SKIP_BYTES)
        elif k == "record":
            at = self._open(OP_SKIP_RECORD)
            for f in w.fields:
                self._skip(f.type)
            self._close(at)
        elif k == "array":
            assert w.items is not None
            at = self._open(OP_SKIP_ARRAY)
            self._skip(w.items)
            self._close(at)
        elif k == "map":
            assert w.values is not None
            at = self._open(OP_SKIP_MAP)
            self._skip(w.values)
            self._close(at)
        else:
            at = self._open(OP_SKIP_UNION, len(w.branches))
            for branch in w.branches:
                self._skip(branch)
            self._close(at)


def _describe(t: AvroType) -> str:
    return t.name or (f"{t.kind} ({t.logical})" if t.logical else t.kind)


def _pick_branch(w: AvroType, r: AvroType) -> tuple[int, AvroType]:
    """The reader union's branch for writer type ``w``: the same type (by name for named types)
    first, then one ``w`` promotes to; its index among the non-null branches."""
    branches = non_null(r)
    for j, branch in enumerate(branches):
        if branch.kind == w.kind and (w.name is None or branch.short_name == w.short_name):
            return j, branch
    for j, branch in enumerate(branches):
        if branch.kind == w.kind and branch.kind in ("record", "enum", "fixed", "array", "map"):
            return j, branch
    for j, branch in enumerate(branches):
        promotes = _NUMERIC_RANK.get(w.kind, 9) < _NUMERIC_RANK.get(branch.kind, -1)
        if promotes:
            return j, branch
        if {w.kind, branch.kind} == {"string", "bytes"} and branch.logical is None:
            return j, branch
    raise AvroSchemaError(f"{_describe(w)} written, no branch of the reader's union reads it")


# -- Avro binary encoding of field defaults (JSON values, as the schema gives them) ----------


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_default(t: AvroType, value: Any) -> bytes:
    """A field default in Avro binary (a union's default is of its first branch)."""
    k = t.kind
    if k == "union":
        return zigzag(0) + encode_default(t.branches[0], value)
    if k == "null":
        if value is not None:
            raise AvroSchemaError("a null default must be null")
        return b""
    if k == "boolean":
        if not isinstance(value, bool):
            raise AvroSchemaError("a boolean default must be true or false")
        return b"\x01" if value else b"\x00"
    if k in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise AvroSchemaError(f"an {k} default must be an integer")
        if not -(1 << 63) <= value < (1 << 63) or (k == "int" and not -(1 << 31) <= value < (1 << 31)):
            raise AvroSchemaError(f"default {value} is out of range for {k}")
        return zigzag(value)
    if k == "float":
        return struct.pack("<f", float(value))
    if k == "double":
        return struct.pack("<d", float(value))
    if k in ("bytes", "string"):
        if not isinstance(value, str):
            raise AvroSchemaError(f"a {k} default must be a string")
        data = value.encode() if k == "string" else value.encode("latin-1")
        return zigzag(len(data)) + data
    if k == "fixed":
        if not isinstance(value, str) or len(value) != t.size:
            raise AvroSchemaError(f"a fixed default must be a string of {t.size} characters")
        return value.encode("latin-1")
    if k == "enum":
        if value not in t.symbols:
            raise AvroSchemaError(f"enum default {value!r} is not a symbol")
        return zigzag(t.symbols.index(value))
    if k == "array":
        assert t.items is not None
        if not isinstance(value, list):
            raise AvroSchemaError("an array default must be a list")
        body = b"".join(encode_default(t.items, v) for v in value)
        return (zigzag(len(value)) + body if value else b"") + b"\x00"
    if k == "map":
        assert t.values is not None
        if not isinstance(value, dict):
            raise AvroSchemaError("a map default must be an object")
        body = b"".join(
            encode_default(AvroType("string"), key) + encode_default(t.values, v) for key, v in value.items()
        )
        return (zigzag(len(value)) + body if value else b"") + b"\x00"
    if not isinstance(value, dict):
        raise AvroSchemaError("a record default must be an object")
    out = bytearray()
    for f in t.fields:
        if f.name in value:
            out += encode_default(f.type, value[f.name])
        elif f.has_default:
            out += encode_default(f.type, f.default)
        else:
            raise AvroSchemaError(f"record default lacks field {f.name}")
    return bytes(out)


# -- the decoders' output, as Arrow arrays ----------------------------------------------------

Raw = tuple[int, int, bytes, bytes, bytes]  # per builder: rows, nulls, validity (a byte a row), data, offsets


def assemble(builders: Builders, raw: list[Raw]) -> Any:
    """The root column as one Arrow array, from what a decoder filled."""
    return _assemble(builders, raw, 0)


def _bitmap(bytes_per_row: bytes, n: int) -> Any:
    import pyarrow as pa

    return (
        pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(bytes_per_row)])
        .cast(pa.bool_())
        .buffers()[1]
    )


def _assemble(builders: Builders, raw: list[Raw], b: int) -> Any:
    import pyarrow as pa

    n, nulls, valid, data, offs = raw[b]
    atype = builders.types[b]
    kind = builders.kinds[b]
    if kind == K_NULL:
        return pa.nulls(n)
    validity = _bitmap(valid, n) if nulls else None
    if kind == K_BOOL:
        return pa.Array.from_buffers(atype, n, [validity, _bitmap(data, n)], null_count=nulls)
    if kind in (K_I32, K_I64, K_F32, K_F64, K_DEC):
        return pa.Array.from_buffers(atype, n, [validity, pa.py_buffer(data)], null_count=nulls)
    if kind == K_BIN:
        return pa.Array.from_buffers(
            atype, n, [validity, pa.py_buffer(offs), pa.py_buffer(data)], null_count=nulls
        )
    children = [_assemble(builders, raw, c) for c in builders.children[b]]
    if kind == K_STRUCT:
        return pa.Array.from_buffers(atype, n, [validity], null_count=nulls, children=children)
    return pa.Array.from_buffers(
        atype, n, [validity, pa.py_buffer(offs)], null_count=nulls, children=children
    )
