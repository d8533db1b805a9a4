"""Pure-Python twin of the Cython columnar Avro decoder (_codec/avro.pyx): the same program
(kafka_core.codec.avro_plan), the same checks, the same output."""

from __future__ import annotations

import struct
from array import array
from typing import Any

from kafka_core.codec.avro_plan import (
    FLOAT_F32,
    INT_F32,
    INT_I32,
    INT_I64,
    K_BIN,
    K_LIST,
    K_MAP,
    K_STRUCT,
    LONG_F32,
    LONG_F64,
    LONG_MILLIS,
    OP_ARRAY,
    OP_BOOL,
    OP_BYTES,
    OP_DEC_BYTES,
    OP_DEC_FIXED,
    OP_DEFAULT,
    OP_DOUBLE,
    OP_ENUM,
    OP_ERROR,
    OP_FIXED,
    OP_FLOAT,
    OP_INT,
    OP_LONG,
    OP_MAP,
    OP_PUTNULL,
    OP_RECORD,
    OP_SKIP_ARRAY,
    OP_SKIP_BYTES,
    OP_SKIP_MAP,
    OP_SKIP_N,
    OP_SKIP_RECORD,
    OP_SKIP_UNION,
    OP_SKIP_VARINT,
    OP_UNION,
    OP_USTRUCT,
    WIDTH,
    Raw,
)
from kafka_core.errors import KafkaCodecError

__all__ = ["decode_avro", "framed_ids"]

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_BE32 = struct.Struct(">I")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_BLOCK_SLACK = 1 << 16  # items a block may claim beyond its remaining bytes (zero-size items)


class _Bad(Exception):
    """A record could not be decoded (caught per record; KafkaCodecError at the surface)."""


class _Col:
    __slots__ = ("count", "data", "nulls", "offs", "valid")

    def __init__(self, kind: int) -> None:
        self.count = 0
        self.nulls = 0
        self.valid = bytearray()
        self.data = bytearray()
        self.offs = array("i", [0]) if kind in (K_BIN, K_LIST, K_MAP) else array("i")


def framed_ids(values: Any) -> set[int]:
    """The schema ids of the Confluent-framed values (unframed and null values left out)."""
    ids: set[int] = set()
    for v in values.to_pylist():
        if v is not None and len(v) >= 5 and v[0] == 0:
            ids.add(_BE32.unpack_from(v, 1)[0])
    return ids


class _Decoder:
    def __init__(self, code: bytes, blob: bytes, kinds: bytes, first: bytes, kids: bytes) -> None:
        self.code = array("i")
        self.code.frombytes(code)
        self.blob = blob
        self.kinds = array("i")
        self.kinds.frombytes(kinds)
        self.first = array("i")
        self.first.frombytes(first)
        self.kids = array("i")
        self.kids.frombytes(kids)
        self.cols = [_Col(k) for k in self.kinds]
        self.buf = b""
        self.pos = 0
        self.end = 0

    # -- input ---------------------------------------------------------------------------

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or n > self.end - pos:
            raise _Bad(f"truncated Avro value: {n} bytes needed at byte {pos}, {self.end - pos} left")
        self.pos = pos + n
        return pos

    def long(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        result = shift = 0
        while True:
            if pos >= end:
                raise _Bad(f"truncated Avro varint at byte {self.pos}")
            byte = buf[pos]
            pos += 1
            if shift == 63 and byte > 1:
                raise _Bad(f"Avro varint longer than 64 bits at byte {self.pos}")
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        self.pos = pos
        return (result >> 1) ^ -(result & 1)

    def int32(self) -> int:
        n = self.long()
        if not _INT32_MIN <= n <= _INT32_MAX:
            raise _Bad(f"Avro int out of range: {n}")
        return n

    def length(self) -> int:
        n = self.long()
        if n < 0:
            raise _Bad(f"negative Avro length {n}")
        return n

    def block(self) -> int:
        """Item count of the next array/map block (0 at the end)."""
        n = self.long()
        if n < 0:
            n = -n
            self.length()  # the block's size in bytes
        if n > self.end - self.pos + _BLOCK_SLACK:
            raise _Bad(f"Avro block of {n} items is larger than the value")
        return n

    # -- output --------------------------------------------------------------------------

    def valid(self, b: int) -> _Col:
        col = self.cols[b]
        col.valid.append(1)
        col.count += 1
        return col

    def put_null(self, b: int) -> None:
        col = self.cols[b]
        col.valid.append(0)
        col.count += 1
        col.nulls += 1
        kind = self.kinds[b]
        if WIDTH[kind]:
            col.data += bytes(WIDTH[kind])
        elif kind in (K_BIN, K_LIST, K_MAP):
            col.offs.append(col.offs[-1])
        elif kind == K_STRUCT:
            for i in range(self.first[b], self.first[b + 1]):
                self.put_null(self.kids[i])

    def put_bytes(self, b: int, data: bytes) -> None:
        col = self.valid(b)
        col.data += data
        if len(col.data) > _INT32_MAX:
            raise KafkaCodecError("column data larger than 2 GiB: decode fewer records at once")
        col.offs.append(len(col.data))

    # -- the program ---------------------------------------------------------------------

    def run(self, pc: int) -> None:
        code = self.code
        op = code[pc]
        if op == OP_RECORD:
            self.valid(code[pc + 2])
            end, pc = pc + code[pc + 1], pc + 3
            while pc < end:
                self.run(pc)
                pc += code[pc + 1]
        elif op == OP_INT:
            b, conv = code[pc + 2], code[pc + 3]
            n = self.int32()
            col = self.valid(b)
            if conv == INT_I32:
                col.data += _I32.pack(n)
            elif conv == INT_I64:
                col.data += _I64.pack(n)
            else:
                col.data += (_F32 if conv == INT_F32 else _F64).pack(float(n))
        elif op == OP_LONG:
            b, conv = code[pc + 2], code[pc + 3]
            n = self.long()
            col = self.valid(b)
            if conv in (LONG_F32, LONG_F64):
                col.data += (_F32 if conv == LONG_F32 else _F64).pack(float(n))
            else:
                if conv == LONG_MILLIS:
                    n *= 1000
                    if not -(1 << 63) <= n < (1 << 63):
                        raise _Bad(f"timestamp in milliseconds out of range: {n // 1000}")
                col.data += _I64.pack(n)
        elif op == OP_BYTES:
            b, utf8 = code[pc + 2], code[pc + 3]
            start = self.need(self.length())
            data = self.buf[start : self.pos]
            if utf8:
                try:
                    data.decode()
                except UnicodeDecodeError:
                    raise _Bad("Avro string is not UTF-8") from None
            self.put_bytes(b, data)
        elif op == OP_UNION:
            n, branch = code[pc + 2], self.long()
            if not 0 <= branch < n:
                raise _Bad(f"Avro union branch {branch} out of range (0..{n - 1})")
            pc += 3
            for _ in range(branch):
                pc += code[pc + 1]
            self.run(pc)
        elif op == OP_PUTNULL:
            self.put_null(code[pc + 2])
        elif op == OP_DOUBLE:
            start = self.need(8)
            self.valid(code[pc + 2]).data += self.buf[start : start + 8]
        elif op == OP_FLOAT:
            start = self.need(4)
            col = self.valid(code[pc + 2])
            if code[pc + 3] == FLOAT_F32:
                col.data += self.buf[start : start + 4]
            else:
                col.data += _F64.pack(_F32.unpack_from(self.buf, start)[0])
        elif op == OP_BOOL:
            start = self.need(1)
            self.valid(code[pc + 2]).data.append(1 if self.buf[start] == 1 else 0)
        elif op == OP_FIXED:
            size = code[pc + 3]
            start = self.need(size)
            self.put_bytes(code[pc + 2], self.buf[start : start + size])
        elif op in (OP_DEC_BYTES, OP_DEC_FIXED):
            size = self.length() if op == OP_DEC_BYTES else code[pc + 3]
            start = self.need(size)
            raw = self.buf[start : start + size]
            unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
            if not -(1 << 127) <= unscaled < (1 << 127):
                raise _Bad("Avro decimal does not fit in 128 bits")
            precision = code[pc + 3] if op == OP_DEC_BYTES else code[pc + 4]
            if abs(unscaled) >= 10**precision:
                raise _Bad(f"Avro decimal has more than its {precision} digits")
            self.valid(code[pc + 2]).data += unscaled.to_bytes(16, "little", signed=True)
        elif op == OP_ENUM:
            b, n, i = code[pc + 2], code[pc + 3], self.long()
            if not 0 <= i < n:
                raise _Bad(f"Avro enum index {i} out of range (0..{n - 1})")
            off, size = code[pc + 4 + 2 * i], code[pc + 5 + 2 * i]
            if off < 0:
                raise _Bad(f"Avro enum symbol {i} is not in the reader's enum, which has no default")
            self.put_bytes(b, self.blob[off : off + size])
        elif op == OP_ARRAY:
            b = code[pc + 2]
            item = pc + 3
            child = self.kids[self.first[b]]
            while n := self.block():
                for _ in range(n):
                    self.run(item)
            col = self.valid(b)
            col.offs.append(self._count(child))
        elif op == OP_MAP:
            b, entries, key = code[pc + 2], code[pc + 3], code[pc + 4]
            value = pc + 5
            while n := self.block():
                for _ in range(n):
                    self.valid(entries)
                    start = self.need(self.length())
                    data = self.buf[start : self.pos]
                    try:
                        data.decode()
                    except UnicodeDecodeError:
                        raise _Bad("Avro map key is not UTF-8") from None
                    self.put_bytes(key, data)
                    self.run(value)
            self.valid(b).offs.append(self._count(entries))
        elif op == OP_USTRUCT:
            b, j = code[pc + 2], code[pc + 3]
            self.valid(b)
            for k, i in enumerate(range(self.first[b], self.first[b + 1])):
                if k != j:
                    self.put_null(self.kids[i])
            self.run(pc + 4)
        elif op == OP_DEFAULT:
            off, size = code[pc + 2], code[pc + 3]
            saved = self.buf, self.pos, self.end
            self.buf, self.pos, self.end = self.blob, off, off + size
            try:
                self.run(pc + 4)
            finally:
                self.buf, self.pos, self.end = saved
        elif op == OP_ERROR:
            off, size = code[pc + 2], code[pc + 3]
            raise _Bad(self.blob[off : off + size].decode())
        else:
            self.skip(pc)

    def _count(self, b: int) -> int:
        count = self.cols[b].count
        if count > _INT32_MAX:
            raise KafkaCodecError("more than 2**31 list items: decode fewer records at once")
        return count

    def skip(self, pc: int) -> None:
        code = self.code
        op = code[pc]
        if op == OP_SKIP_VARINT:
            self.long()
        elif op == OP_SKIP_N:
            self.need(code[pc + 2])
        elif op == OP_SKIP_BYTES:
            self.need(self.length())
        elif op == OP_SKIP_RECORD:
            end, pc = pc + code[pc + 1], pc + 2
            while pc < end:
                self.skip(pc)
                pc += code[pc + 1]
        elif op in (OP_SKIP_ARRAY, OP_SKIP_MAP):
            while n := self.block():
                for _ in range(n):
                    if op == OP_SKIP_MAP:
                        self.need(self.length())
                    self.skip(pc + 2)
        elif op == OP_SKIP_UNION:
            n, branch = code[pc + 2], self.long()
            if not 0 <= branch < n:
                raise _Bad(f"Avro union branch {branch} out of range (0..{n - 1})")
            pc += 3
            for _ in range(branch):
                pc += code[pc + 1]
            self.skip(pc)
        else:
            raise KafkaCodecError(f"corrupt Avro program: opcode {op} at {pc}")

    # -- rows ------------------------------------------------------------------------------

    def mark(self) -> list[tuple[int, int, int, int, int]]:
        return [(c.count, c.nulls, len(c.valid), len(c.data), len(c.offs)) for c in self.cols]

    def restore(self, marks: list[tuple[int, int, int, int, int]]) -> None:
        for col, (count, nulls, nvalid, ndata, noffs) in zip(self.cols, marks, strict=True):
            col.count, col.nulls = count, nulls
            del col.valid[nvalid:]
            del col.data[ndata:]
            del col.offs[noffs:]


def decode_avro(
    code: bytes,
    blob: bytes,
    entry_ids: bytes,
    entry_pcs: bytes,
    kinds: bytes,
    first: bytes,
    kids: bytes,
    values: Any,
    framed: bool,
    permissive: bool,
) -> tuple[list[Raw], list[tuple[int, str]]]:
    """Decode a binary column into the builders; (their buffers, [(row, error)] in PERMISSIVE).

    A null value is a null row; FAILFAST raises KafkaCodecError at the first bad record."""
    d = _Decoder(code, blob, kinds, first, kids)
    ids = array("q")
    ids.frombytes(entry_ids)
    pcs = array("i")
    pcs.frombytes(entry_pcs)
    entries = dict(zip(ids, pcs, strict=True))
    errors: list[tuple[int, str]] = []
    for row, v in enumerate(values.to_pylist()):
        if v is None:
            d.put_null(0)
            continue
        marks = d.mark() if permissive else None
        try:
            if framed:
                if len(v) < 5 or v[0] != 0:
                    raise _Bad("value is not in the Schema Registry framing (magic byte 0, 4-byte schema id)")
                schema_id = _BE32.unpack_from(v, 1)[0]
                pc = entries.get(schema_id, -1)
                if pc < 0:
                    raise _Bad(f"unknown schema id {schema_id}")
                d.buf, d.pos, d.end = v, 5, len(v)
            else:
                pc = entries.get(-1, -1)
                if pc < 0:
                    raise _Bad("no writer schema")
                d.buf, d.pos, d.end = v, 0, len(v)
            d.run(pc)
        except (_Bad, RecursionError) as exc:
            text = str(exc) if isinstance(exc, _Bad) else "Avro value nested too deeply"
            if not permissive:
                raise KafkaCodecError(f"record {row}: {text}") from None
            assert marks is not None
            d.restore(marks)
            d.put_null(0)
            errors.append((row, text))
    raw: list[Raw] = [(c.count, c.nulls, bytes(c.valid), bytes(c.data), c.offs.tobytes()) for c in d.cols]
    return raw, errors
