"""Helpers that the generated message code (kafka_core/protocol/messages/) calls.

The generated readers and writers inline fixed-width fields as precompiled ``struct.Struct`` calls
and call into this module only for variable-length values (strings, bytes, records, arrays of
primitives, tagged-field sections), so that this file holds the wire rules once.

Readers take ``(buf, pos)`` and return ``(value, next_pos)``; ``buf`` is a ``memoryview`` of the
whole frame so that record payloads can be sliced out without a copy. Writers append to a
``bytearray``; record payloads are not appended but registered in ``ins`` as
``(offset, buffer)`` pairs, to be spliced in by :func:`join_parts` or handed to ``writev`` as
separate buffers.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, Literal, overload

from kafka_core.codec import decode_unsigned_varint, encode_unsigned_varint
from kafka_core.errors import KafkaCodecError, KafkaProtocolError
from kafka_core.protocol.error_codes import ErrorCode

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)
new = object.__new__
MISSING: Any = object()  # default of mutable constructor arguments: a fresh list or struct each time

# Error codes used for malformed input.
CORRUPT_MESSAGE = ErrorCode.CORRUPT_MESSAGE
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION
INVALID_REQUEST = ErrorCode.INVALID_REQUEST

# Exceptions that a malformed buffer or a mistyped value can raise inside generated code.
DECODE_ERRORS = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    OverflowError,
    UnicodeDecodeError,
    KafkaCodecError,
    RecursionError,
)
ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError, KafkaCodecError)

Writer = Callable[[Any, bytearray, list], None]
Reader = Callable[[memoryview, int], tuple[Any, int]]


class ProtocolValueError(ValueError):
    """Raised inside generated code; converted to :class:`KafkaProtocolError` at the API edge."""


class UnsupportedFieldError(ProtocolValueError):
    """A field that the requested version lacks holds a non-default value (Java's
    UnsupportedVersionException)."""


def protocol_error(code: int, message: str) -> KafkaProtocolError:
    # Imported lazily: errors.py imports nothing from here, but keep the table out of the hot path.
    from kafka_core.protocol.errors import error_for

    return error_for(code, message)


def unsupported(cls_name: str, field: str, versions: str) -> ProtocolValueError:
    return UnsupportedFieldError(
        f"{cls_name}: field {field} has a non-default value but exists only in versions {versions}"
    )


def not_nullable(field: str) -> ProtocolValueError:
    return ProtocolValueError(f"field {field} is null but not nullable in this version")


def too_many(field: str, n: int, left: int) -> ProtocolValueError:
    return ProtocolValueError(f"field {field}: {n} elements declared but only {left} bytes remain")


# --------------------------------------------------------------------------------------------
# varints: the codec's (Cython) helpers, behind a one-byte fast path. Counts and lengths under 128
# (most of them) cost no call; longer ones go to the codec, 2.5-10x faster than a Python loop here
# (docs/protocol.md). Its KafkaCodecError is one of DECODE_ERRORS/ENCODE_ERRORS.


def ruv(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return decode_unsigned_varint(buf, pos)


def wuv(b: bytearray, n: int) -> None:
    if 0 <= n < 0x80:
        b.append(n)
    else:
        b += encode_unsigned_varint(n)


# --------------------------------------------------------------------------------------------
# strings


def _take(buf: memoryview, pos: int, n: int, field: str) -> int:
    end = pos + n
    if end > len(buf):
        raise ProtocolValueError(f"field {field}: {n} bytes declared but only {len(buf) - pos} remain")
    return end


def rstr(buf: memoryview, pos: int, field: str) -> tuple[str, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise not_nullable(field)
    end = _take(buf, pos, n, field)
    return str(buf[pos:end], "utf-8"), end


def rstr_n(buf: memoryview, pos: int, field: str) -> tuple[str | None, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n != -1:
            raise ProtocolValueError(f"field {field}: bad string length {n}")
        return None, pos
    end = _take(buf, pos, n, field)
    return str(buf[pos:end], "utf-8"), end


def rcstr(buf: memoryview, pos: int, field: str) -> tuple[str, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = decode_unsigned_varint(buf, pos)
    if n == 0:
        raise not_nullable(field)
    end = _take(buf, pos, n - 1, field)
    return str(buf[pos:end], "utf-8"), end


def rcstr_n(buf: memoryview, pos: int, field: str) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = decode_unsigned_varint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1, field)
    return str(buf[pos:end], "utf-8"), end


def wstr(b: bytearray, v: str | None, field: str) -> None:
    if v is None:
        raise not_nullable(field)
    data = v.encode()
    if len(data) > 0x7FFF:
        raise ProtocolValueError(f"field {field}: string of {len(data)} bytes is longer than 32767")
    b += I16.pack(len(data))
    b += data


def wstr_n(b: bytearray, v: str | None, field: str) -> None:
    if v is None:
        b += b"\xff\xff"
    else:
        wstr(b, v, field)


def wcstr(b: bytearray, v: str | None, field: str) -> None:
    if v is None:
        raise not_nullable(field)
    data = v.encode()
    if len(data) > 0x7FFF:
        raise ProtocolValueError(f"field {field}: string of {len(data)} bytes is longer than 32767")
    n = len(data) + 1
    if n < 0x80:
        b.append(n)
    else:
        b += encode_unsigned_varint(n)
    b += data


def wcstr_n(b: bytearray, v: str | None, field: str) -> None:
    if v is None:
        b.append(0)
    else:
        wcstr(b, v, field)


# --------------------------------------------------------------------------------------------
# bytes and records


@overload
def rbytes(
    buf: memoryview, pos: int, field: str, flex: bool, nullable: Literal[False]
) -> tuple[bytes, int]: ...
@overload
def rbytes(buf: memoryview, pos: int, field: str, flex: bool, nullable: bool) -> tuple[bytes | None, int]: ...
def rbytes(buf: memoryview, pos: int, field: str, flex: bool, nullable: bool) -> tuple[bytes | None, int]:
    view, pos = rrec(buf, pos, field, flex, nullable)
    return (None if view is None else bytes(view)), pos


def rrec(buf: memoryview, pos: int, field: str, flex: bool, nullable: bool) -> tuple[memoryview | None, int]:
    """Read a length-prefixed blob as a zero-copy slice of the frame."""
    if flex:
        n, pos = ruv(buf, pos)
        n -= 1
    else:
        (n,) = I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        if n != -1:
            raise ProtocolValueError(f"field {field}: bad length {n}")
        if not nullable:
            raise not_nullable(field)
        return None, pos
    end = _take(buf, pos, n, field)
    return buf[pos:end], end


def _nbytes(v: Any) -> int:
    return v.nbytes if type(v) is memoryview else len(v)


def wbytes(b: bytearray, v: Any, field: str, flex: bool, nullable: bool) -> None:
    if v is None:
        if not nullable:
            raise not_nullable(field)
        if flex:
            b.append(0)
        else:
            b += b"\xff\xff\xff\xff"
        return
    n = _nbytes(v)
    if flex:
        wuv(b, n + 1)
    else:
        b += I32.pack(n)
    b += v


def wrec(b: bytearray, ins: list, v: Any, field: str, flex: bool, nullable: bool) -> None:
    """Write a records field: the length here, the payload (never copied) spliced in later.

    ``v`` may be one buffer or a list/tuple of buffers (several record batches back to back).
    """
    t = type(v)
    if t is bytes or t is bytearray:
        n = len(v)
    elif t is memoryview:
        n = v.nbytes
    elif v is None:
        wbytes(b, None, field, flex, nullable)
        return
    elif t is list or t is tuple:
        n = sum(_nbytes(x) for x in v)
        if flex:
            wuv(b, n + 1)
        else:
            b += I32.pack(n)
        at = len(b)
        ins.extend((at, x) for x in v if _nbytes(x))
        return
    else:
        n = _nbytes(memoryview(v))
    if flex:
        wuv(b, n + 1)
    else:
        b += I32.pack(n)
    if n:
        ins.append((len(b), v))


def join_parts(b: bytearray, ins: list) -> list:
    """Split the written buffer at the record insertion points: a list ready for writev."""
    if not ins:
        return [b]
    parts: list = []
    view = memoryview(b)
    last = 0
    for at, data in ins:
        if at > last:
            parts.append(view[last:at])
            last = at
        parts.append(data)
    if last < len(b):
        parts.append(view[last:])
    return parts


def flatten(b: bytearray, ins: list) -> bytes:
    if not ins:
        return bytes(b)
    return b"".join(join_parts(b, ins))


# --------------------------------------------------------------------------------------------
# arrays of primitives

_PRIM_STRUCT = {"b": I8, "h": I16, "H": U16, "i": I32, "I": U32, "q": I64, "d": F64}


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _array_struct(code: str, n: int) -> struct.Struct:
    st = _ARRAY_STRUCTS.get((code, n))
    if st is None:
        st = struct.Struct(f">{n}{code}")
        if n <= 256:  # bounded cache: the common small arrays only
            _ARRAY_STRUCTS[(code, n)] = st
    return st


@overload
def rarr(
    buf: memoryview, pos: int, field: str, code: str, flex: bool, nullable: Literal[False]
) -> tuple[list, int]: ...
@overload
def rarr(
    buf: memoryview, pos: int, field: str, code: str, flex: bool, nullable: bool
) -> tuple[list | None, int]: ...
def rarr(
    buf: memoryview, pos: int, field: str, code: str, flex: bool, nullable: bool
) -> tuple[list | None, int]:
    if flex:
        n, pos = ruv(buf, pos)
        n -= 1
    else:
        (n,) = I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        if not nullable:
            raise not_nullable(field)
        return None, pos
    if n > len(buf) - pos:
        raise too_many(field, n, len(buf) - pos)
    if code in _PRIM_STRUCT:
        st = _array_struct(code, n)
        return list(st.unpack_from(buf, pos)), pos + st.size
    out: list[Any] = []
    if code == "?":
        for _ in range(n):
            out.append(buf[pos] != 0)
            pos += 1
    elif code == "u":
        for _ in range(n):
            out.append(uuid.UUID(bytes=bytes(buf[pos : pos + 16])))
            pos += 16
        if pos > len(buf):
            raise ProtocolValueError(f"field {field}: truncated uuid array")
    elif code == "s":
        read = rcstr if flex else rstr
        for _ in range(n):
            s, pos = read(buf, pos, field)
            out.append(s)
    elif code == "y":
        for _ in range(n):
            data, pos = rbytes(buf, pos, field, flex, False)
            out.append(data)
    else:  # pragma: no cover - the generator only emits the codes above
        raise ProtocolValueError(f"field {field}: unknown element code {code}")
    return out, pos


# Structs for arrays of 0..32 fixed-width elements, by element code (generated code inlines them)
SMALL_ARRAYS = {code: [struct.Struct(f">{n}{code}") for n in range(33)] for code in _PRIM_STRUCT}


def _fixed_array_reader(code: str, flex: bool, nullable: bool) -> Callable[..., tuple[list | None, int]]:
    """A reader specialised for one element type and encoding: arrays of ints are on hot paths
    (replica lists in Metadata, partition lists in requests)."""
    size = _PRIM_STRUCT[code].size
    small = SMALL_ARRAYS[code]

    def read(buf: memoryview, pos: int, field: str) -> tuple[list | None, int]:
        if flex:
            n = buf[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = decode_unsigned_varint(buf, pos)
            n -= 1
        else:
            (n,) = I32.unpack_from(buf, pos)
            pos += 4
        if n < 0:
            if nullable:
                return None, pos
            raise not_nullable(field)
        if n * size > len(buf) - pos:
            raise too_many(field, n, len(buf) - pos)
        st = small[n] if n < 33 else _array_struct(code, n)
        return list(st.unpack_from(buf, pos)), pos + n * size

    read.__name__ = f"ra_{code}{'c' if flex else ''}{'n' if nullable else ''}"
    return read


def _fixed_array_writer(code: str, flex: bool, nullable: bool) -> Callable[..., None]:
    small = SMALL_ARRAYS[code]

    def write(b: bytearray, v: list | None, field: str) -> None:
        if v is None:
            if not nullable:
                raise not_nullable(field)
            if flex:
                b.append(0)
            else:
                b += b"\xff\xff\xff\xff"
            return
        n = len(v)
        if flex:
            if n < 0x7F:
                b.append(n + 1)
            else:
                b += encode_unsigned_varint(n + 1)
        else:
            b += I32.pack(n)
        b += (small[n] if n < 33 else _array_struct(code, n)).pack(*v)

    write.__name__ = f"wa_{code}{'c' if flex else ''}{'n' if nullable else ''}"
    return write


# ra_ic (compact int32 array), ra_qn (classic nullable int64 array), ... as the generator names them;
# only the names ending in "n" can return None, which a dict's value type cannot say: Any
FIXED_ARRAY_READERS: dict[str, Callable[..., tuple[Any, int]]] = {
    f"ra_{c}{'c' if fl else ''}{'n' if nu else ''}": _fixed_array_reader(c, fl, nu)
    for c in _PRIM_STRUCT
    for fl in (False, True)
    for nu in (False, True)
}
FIXED_ARRAY_WRITERS = {
    f"wa_{c}{'c' if fl else ''}{'n' if nu else ''}": _fixed_array_writer(c, fl, nu)
    for c in _PRIM_STRUCT
    for fl in (False, True)
    for nu in (False, True)
}


def warr(b: bytearray, v: list | None, field: str, code: str, flex: bool, nullable: bool) -> None:
    if v is None:
        if not nullable:
            raise not_nullable(field)
        if flex:
            b.append(0)
        else:
            b += b"\xff\xff\xff\xff"
        return
    n = len(v)
    if flex:
        wuv(b, n + 1)
    else:
        b += I32.pack(n)
    if code in _PRIM_STRUCT:
        b += _array_struct(code, n).pack(*v)
    elif code == "?":
        b += bytes(1 if x else 0 for x in v)
    elif code == "u":
        for x in v:
            b += x.bytes
    elif code == "s":
        write = wcstr if flex else wstr
        for x in v:
            write(b, x, field)
    elif code == "y":
        for x in v:
            wbytes(b, x, field, flex, False)
    else:  # pragma: no cover
        raise ProtocolValueError(f"field {field}: unknown element code {code}")


def ruuid(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


# --------------------------------------------------------------------------------------------
# tagged fields


def rtags0(buf: memoryview, pos: int) -> tuple[list, int]:
    """Read a tagged-field section where no tag is known: keep every field raw."""
    n = buf[pos]
    if n == 0:
        return [], pos + 1
    n, pos = ruv(buf, pos)
    out: list = []
    for _ in range(n):
        tag, pos = ruv(buf, pos)
        size, pos = ruv(buf, pos)
        end = _take(buf, pos, size, f"tag {tag}")
        out.append((tag, bytes(buf[pos:end])))
        pos = end
    return out, pos


def tag_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """Read one tag's number and size; return ``(tag, start, end)``."""
    tag, pos = ruv(buf, pos)
    size, pos = ruv(buf, pos)
    return tag, pos, _take(buf, pos, size, f"tag {tag}")


def tag_count(buf: memoryview, pos: int) -> tuple[int, int]:
    n, pos = ruv(buf, pos)
    if n > len(buf) - pos:
        raise too_many("tagged fields", n, len(buf) - pos)
    return n, pos


def tag_end(p: int, end: int, tag: int) -> None:
    if p != end:
        raise ProtocolValueError(f"tag {tag}: the value ends at byte {p} but its size says {end}")


def wtags0(b: bytearray, unknown: list | None) -> None:
    if not unknown:
        b.append(0)
        return
    wtags(b, [], unknown)


def _tag_key(t: tuple[int, bytes]) -> int:
    return t[0]


def wtags(b: bytearray, known: list, unknown: list | None) -> None:
    """Write known (tag, bytes) pairs merged with the raw ones, in ascending tag order.

    A raw entry for a tag that is also known and set is dropped: the current value wins. (Raw
    entries for known tags come from senders that wrote a default value explicitly.)
    """
    if unknown:
        if known:
            seen = {t for t, _ in known}
            tags = sorted(known + [x for x in unknown if x[0] not in seen], key=_tag_key)
        else:
            tags = unknown  # as received: no reordering without a reason
    else:
        tags = known
    wuv(b, len(tags))
    for tag, data in tags:
        wuv(b, tag)
        wuv(b, len(data))
        b += data


def as_view(buf: Any) -> memoryview:
    view = buf if type(buf) is memoryview else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
