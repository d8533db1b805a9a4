"""Pure-Python twin of ``_codec/avro_enc.pyx``: runs the plan ``kafka_core.codec.avro_encode``
builds (one node per schema node, over its Arrow array's buffers) for every row, with the same
bytes and the same first error."""

from __future__ import annotations

import math
import struct
from typing import Any

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

__all__ = ["encode_avro"]

INT32_MAX = (1 << 31) - 1
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


class _Failed(Exception):
    def __init__(self, code: int, node: int, element: int, number: int = 0) -> None:
        super().__init__(code)
        self.args = (code, node, element, number)


class _Node:
    __slots__ = (
        "op",
        "all_null",
        "valid",
        "offset",
        "data",
        "offs",
        "aux",
        "p0",
        "p1",
        "p2",
        "p3",
        "tag",
        "kids",
        "index",
    )

    def __init__(self, index: int, spec: tuple[Any, ...], kids: list[int]) -> None:
        (op, all_null, valid, offset, data, offs, aux, p0, p1, p2, p3, tag, first, n) = spec
        self.index = index
        self.op, self.all_null, self.offset = op, bool(all_null), offset
        self.valid = None if valid is None else bytes(valid)
        self.data = None if data is None else bytes(data)
        self.offs = None if offs is None else bytes(offs)
        self.aux = None if aux is None else bytes(aux)
        self.p0, self.p1, self.p2, self.p3, self.tag = p0, p1, p2, p3, tag
        self.kids = kids[first : first + n]

    def null(self, i: int) -> bool:
        if self.all_null:
            return True
        if self.valid is None:
            return False
        i += self.offset
        return not (self.valid[i >> 3] >> (i & 7)) & 1


def _varint(out: bytearray, n: int) -> None:
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _span(n: _Node, j: int) -> tuple[int, int]:
    assert n.offs is not None
    return _I32.unpack_from(n.offs, 4 * j)[0], _I32.unpack_from(n.offs, 4 * j + 4)[0]


def _put(nodes: list[_Node], k: int, i: int, out: bytearray) -> None:
    n = nodes[k]
    op = n.op
    if op == OP_UNION_NULL:
        out.append(0)
        return
    if op == OP_NULLABLE:
        if n.null(i):
            if n.p0 < 0:
                raise _Failed(E_UNION_NULL, k, i)
            _varint(out, n.p0)
            return
        _varint(out, n.p1)
        _put(nodes, n.kids[0], i, out)
        return
    if op == OP_MEMBERS:
        if not n.null(i):
            for m in n.kids:
                if not nodes[m].null(i):
                    _varint(out, nodes[m].tag)
                    _put(nodes, m, i, out)
                    return
        if n.p0 < 0:
            raise _Failed(E_NO_MEMBER, k, i)
        _varint(out, n.p0)
        return
    if op == OP_NULL:
        if not n.null(i):
            raise _Failed(E_NOT_NULL, k, i)
        return
    if n.null(i):
        raise _Failed(E_NULL, k, i)
    j = i + n.offset
    data = n.data
    if op == OP_RECORD:
        for f in n.kids:
            _put(nodes, f, i, out)
    elif op == OP_BOOL:
        assert data is not None
        out.append((data[j >> 3] >> (j & 7)) & 1)
    elif op == OP_INT:
        assert data is not None
        v = (_I32 if n.p1 == 4 else _I64).unpack_from(data, n.p1 * j)[0]
        if n.p2 > 1:
            v //= n.p2
        if n.p0 == 32 and not -(1 << 31) <= v < (1 << 31):
            raise _Failed(E_RANGE, k, i, v)
        _varint(out, v)
    elif op == OP_FLOAT:
        assert data is not None
        x = _F64.unpack_from(data, 8 * j)[0]
        try:
            out += _F32.pack(x)
        except OverflowError:
            raise _Failed(E_FLOAT, k, i) from None
        if math.isinf(_F32.unpack(out[-4:])[0]) and not math.isinf(x):
            raise _Failed(E_FLOAT, k, i)
    elif op == OP_DOUBLE:
        assert data is not None
        out += data[8 * j : 8 * j + 8]
    elif op in (OP_BYTES, OP_FIXED):
        assert n.aux is not None
        start, end = _span(n, j)
        if op == OP_FIXED:
            if end - start != n.p0:
                raise _Failed(E_FIXED, k, i, end - start)
        else:
            _varint(out, end - start)
        out += n.aux[start:end]
    elif op == OP_ENUM:
        assert data is not None
        e = i + n.p0
        if n.p1 and not (n.aux is not None and (n.aux[e >> 3] >> (e & 7)) & 1):
            raise _Failed(E_ENUM, k, i)
        _varint(out, _I32.unpack_from(data, 4 * e)[0])
    elif op == OP_DECIMAL:
        assert data is not None
        unscaled = int.from_bytes(data[16 * j : 16 * j + 16], "little", signed=True)
        if abs(unscaled) >= 10**n.p0:
            raise _Failed(E_DIGITS, k, i)
        size = n.p1 or max(1, (unscaled.bit_length() + 8) // 8)
        if not n.p1:
            _varint(out, size)
        out += unscaled.to_bytes(size, "big", signed=True)
    elif op == OP_ARRAY:
        start, end = _span(n, j)
        if end > start:
            _varint(out, end - start)
            for e in range(start, end):
                _put(nodes, n.kids[0], e, out)
        out.append(0)
    elif op == OP_MAP:
        start, end = _span(n, j)
        if end > start:
            _varint(out, end - start)
            for e in range(start, end):
                _put(nodes, n.kids[0], e, out)
                _put(nodes, n.kids[1], e, out)
        out.append(0)
    else:
        raise ValueError(f"corrupt Avro encoder plan: op {op}")


def encode_avro(
    nodes: list[tuple[Any, ...]],
    kids: list[int],
    root: int,
    header: bytes,
    length: int,
    nullable_root: bool,
) -> tuple[tuple[int, int, int, int, int] | None, bytes | None, bytes, bytes]:
    """Every row of the plan's root: (error, validity, int32 offsets, data); the error is
    (code, node, row, element, number) of the first bad value, the rest empty then."""
    plan = [_Node(i, spec, kids) for i, spec in enumerate(nodes)]
    top = plan[root]
    out = bytearray()
    offsets = bytearray(_I32.pack(0))
    valid = bytearray((length + 7) // 8)
    nulls = 0
    for row in range(length):
        if not nullable_root and top.null(row):
            nulls += 1
        else:
            valid[row >> 3] |= 1 << (row & 7)
            out += header
            try:
                _put(plan, root, row, out)
            except _Failed as failed:
                code, node, element, number = failed.args
                return (code, node, row, element, number), None, b"", b""
            if len(out) > INT32_MAX:
                return (E_TOO_BIG, root, row, row, 0), None, b"", b""
        offsets += _I32.pack(len(out))
    return None, bytes(valid) if nulls else None, bytes(offsets), bytes(out)
