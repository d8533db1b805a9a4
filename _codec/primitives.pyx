"""Wire primitives (Cython twin of ``kafka_core.codec._python.primitives``): same API, same results.

The C-level readers and writers, and ``Input``, are declared in
``kafka_core/codec/_cython/primitives.pxd`` so that records.pyx and columnar.pyx can inline them
and share the one pinned-buffer type.
"""

import uuid

cimport cython
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kafka_core.errors import KafkaCodecError

__all__ = [
    "zigzag_encode",
    "zigzag_decode",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "encode_unsigned_varint",
    "decode_unsigned_varint",
    "encode_varint",
    "decode_varint",
    "encode_varlong",
    "decode_varlong",
    "encode_compact_string",
    "decode_compact_string",
    "encode_compact_bytes",
    "decode_compact_bytes",
    "encode_uuid",
    "decode_uuid",
    "new_buffer",
]

cdef object _INT32_MIN = -(1 << 31)
cdef object _INT32_MAX = (1 << 31) - 1
cdef object _INT64_MIN = -(1 << 63)
cdef object _INT64_MAX = (1 << 63) - 1
cdef object _UINT32_MAX = (1 << 32) - 1
cdef object _UINT64_MAX = (1 << 64) - 1
_ZERO_UUID = uuid.UUID(int=0)


@cython.freelist(16)
@cython.final
cdef class Input:
    """The one pinned input of the codec: a varint read here, a whole decode in records and
    columnar (which raise KafkaCodecError for what this raises as TypeError / BufferError)."""

    def __cinit__(self, object obj):
        self.obj = obj
        if PyBytes_CheckExact(obj):
            self.ptr = <const uint8_t*>PyBytes_AS_STRING(obj)
            self.size = PyBytes_GET_SIZE(obj)
        else:
            PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
            self.held = True
            self.ptr = <const uint8_t*>self.view.buf
            self.size = self.view.len

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef object slice(self, Py_ssize_t start, Py_ssize_t end):
        """A memoryview slice that keeps obj alive (for decompression, legacy entries)."""
        if self.mv is None:
            self.mv = memoryview(self.obj).cast("B")
        return self.mv[start:end]

    cdef object raw(self, Py_ssize_t start, Py_ssize_t end):
        """A read-only memoryview of [start, end) straight over the pinned memory, for a call that
        is done with it before the decode returns (the CRC)."""
        return PyMemoryView_FromMemory(<char*>self.ptr + start, end - start, PyBUF_READ)


cdef Py_ssize_t _start(object pos, Py_ssize_t size, str what) except -2:
    """Clamp a Python position into the buffer; out-of-range positions fail like the twin."""
    cdef Py_ssize_t p
    if type(pos) is int and -size <= pos <= size:  # the common case, without big-int maths
        p = pos
        if p >= 0:
            return p
    if pos < 0:
        raise KafkaCodecError(f"{what}: negative position {pos}")
    if pos > size:
        raise KafkaCodecError(f"{what}: truncated at byte {pos} (buffer is {size} bytes)")
    return <Py_ssize_t>pos


cdef uint64_t _read(Input v, Py_ssize_t* pos, int max_bytes, int bits, str what) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_ssize_t start = pos[0]
    cdef uint64_t out = 0
    cdef int rc = read_unsigned(v.ptr, pos, v.size, max_bytes, bits, &out)
    if rc == RD_OK:
        return out
    if rc == RD_TRUNCATED:
        raise KafkaCodecError(f"{what}: truncated at byte {v.size} (buffer is {v.size} bytes)")
    if rc == RD_OVERFLOW:
        raise KafkaCodecError(f"{what}: value overflows {bits} bits at byte {start}")
    raise KafkaCodecError(f"{what}: longer than {max_bytes} bytes at byte {start}")


def zigzag_encode(value):
    """Map a signed 64-bit integer to an unsigned one (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} does not fit in 64 bits")
    return zigzag64(<int64_t>value)


def zigzag_decode(value):
    if not 0 <= value <= _UINT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} is not an unsigned 64-bit value")
    cdef uint64_t raw = value
    return <int64_t>((raw >> 1) ^ (0 - (raw & 1)))


def size_of_unsigned_varint(value):
    if not 0 <= value <= _UINT32_MAX:
        raise KafkaCodecError(f"unsigned varint: {value} does not fit in 32 bits")
    return size_unsigned(<uint64_t>value)


def size_of_varint(value):
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise KafkaCodecError(f"varint: {value} does not fit in 32 bits")
    return size_varint(<int32_t>value)


def size_of_varlong(value):
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} does not fit in 64 bits")
    return size_varlong(<int64_t>value)


cdef bytes _unsigned_bytes(uint64_t value):
    cdef char out[10]
    cdef char* end = write_unsigned(out, value)
    return PyBytes_FromStringAndSize(out, end - out)


def encode_unsigned_varint(value):
    if not 0 <= value <= _UINT32_MAX:
        raise KafkaCodecError(f"unsigned varint: {value} does not fit in 32 bits")
    return _unsigned_bytes(<uint64_t>value)


def decode_unsigned_varint(buf, pos=0):
    """Return ``(value, next_pos)``."""
    cdef Input v = Input(buf)
    cdef Py_ssize_t p = _start(pos, v.size, "unsigned varint")
    cdef uint64_t raw = _read(v, &p, 5, 32, "unsigned varint")
    return raw, p


def encode_varint(value):
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise KafkaCodecError(f"varint: {value} does not fit in 32 bits")
    return _unsigned_bytes(zigzag32(<int32_t>value))


def decode_varint(buf, pos=0):
    cdef Input v = Input(buf)
    cdef Py_ssize_t p = _start(pos, v.size, "varint")
    cdef uint64_t raw = _read(v, &p, 5, 32, "varint")
    return <int32_t>(<uint32_t>((raw >> 1) ^ (0 - (raw & 1)))), p


def encode_varlong(value):
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise KafkaCodecError(f"zigzag: {value} does not fit in 64 bits")
    return _unsigned_bytes(zigzag64(<int64_t>value))


def decode_varlong(buf, pos=0):
    cdef Input v = Input(buf)
    cdef Py_ssize_t p = _start(pos, v.size, "varlong")
    cdef uint64_t raw = _read(v, &p, 10, 64, "varlong")
    return <int64_t>((raw >> 1) ^ (0 - (raw & 1))), p


def encode_compact_bytes(value):
    """Length+1 as an unsigned varint (0 means null), then the bytes."""
    if value is None:
        return b"\x00"
    data = value if PyBytes_CheckExact(value) else bytes(value)
    return _unsigned_bytes(<uint64_t>PyBytes_GET_SIZE(data) + 1) + data


def decode_compact_bytes(buf, pos=0):
    cdef Input v = Input(buf)
    cdef Py_ssize_t p = _start(pos, v.size, "compact bytes length")
    cdef uint64_t length = _read(v, &p, 5, 32, "compact bytes length")
    if length == 0:
        return None, p
    length -= 1
    if length > <uint64_t>(v.size - p):
        raise KafkaCodecError(
            f"compact bytes: length {length} at byte {p} runs past the buffer ({v.size} bytes)"
        )
    return PyBytes_FromStringAndSize(<const char*>v.ptr + p, <Py_ssize_t>length), p + <Py_ssize_t>length


def encode_compact_string(value):
    return encode_compact_bytes(None if value is None else value.encode("utf-8"))


def decode_compact_string(buf, pos=0):
    start = pos
    data, pos = decode_compact_bytes(buf, pos)
    if data is None:
        return None, pos
    try:
        return data.decode("utf-8"), pos
    except UnicodeDecodeError as exc:
        raise KafkaCodecError(f"compact string at byte {start}: invalid UTF-8 ({exc.reason})") from None


def encode_uuid(value):
    """16 big-endian bytes; None is written as the all-zero UUID, as Kafka does."""
    return (value or _ZERO_UUID).bytes


def decode_uuid(buf, pos=0):
    cdef Input v = Input(buf)
    if pos < 0 or pos + 16 > v.size:
        raise KafkaCodecError(f"uuid: needs 16 bytes at byte {pos}, buffer is {v.size} bytes")
    cdef Py_ssize_t p = pos
    return uuid.UUID(bytes=PyBytes_FromStringAndSize(<const char*>v.ptr + p, 16)), p + 16


def new_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes whose contents are not cleared: for a reader that fills it
    entirely before anyone looks (clearing a multi-megabyte frame first costs a pass over it)."""
    if size < 0:
        raise ValueError("size must not be negative")
    return PyByteArray_FromStringAndSize(NULL, size)
