# Shared by records.pyx and columnar.pyx (textual include: cdef classes cannot be shared through
# a .pxd here, because _codec/ is not the package directory and a cimport of another module's
# class would import it under the wrong name). The input buffer and a batch's records region.

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from crc32c import crc32c as _crc32c

from kafka_core.codec import compression as _compression
from kafka_core.codec import legacy as _legacy
from kafka_core.errors import KafkaCodecError


@cython.final
cdef class _Input:
    """The input buffer, pinned for the whole decode (bytes read directly, others exported).

    Zero-copy columns keep an _Input alive: its export stops a bytearray from being resized."""

    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef Py_ssize_t size
    cdef object obj
    cdef object mv

    def __cinit__(self, object obj):
        self.obj = obj
        if PyBytes_CheckExact(obj):
            self.ptr = <const uint8_t*>PyBytes_AS_STRING(obj)
            self.size = PyBytes_GET_SIZE(obj)
            return
        if not PyObject_CheckBuffer(obj):
            raise KafkaCodecError(f"cannot decode a {type(obj).__name__}: a bytes-like object is needed")
        try:
            PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
        except BufferError as exc:
            raise KafkaCodecError(f"cannot decode a non-contiguous buffer ({exc})") from None
        self.held = True
        self.ptr = <const uint8_t*>self.view.buf
        self.size = self.view.len

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef object slice(self, Py_ssize_t start, Py_ssize_t end):
        if self.mv is None:
            self.mv = memoryview(self.obj).cast("B")
        return self.mv[start:end]

    cdef object raw(self, Py_ssize_t start, Py_ssize_t end):
        """A read-only memoryview of [start, end) straight over the pinned memory, for a call that
        is done with it before the decode returns (the CRC)."""
        return PyMemoryView_FromMemory(<char*>self.ptr + start, end - start, PyBUF_READ)


cdef int _check_crc(_Input inp, Batch* b) except -1:
    cdef uint32_t computed = _crc32c(inp.raw(b.pos + CRC_START, b.end))
    if computed != b.crc:
        raise KafkaCodecError(
            f"batch at byte {b.pos}: CRC mismatch (expected {b.crc:#010x}, computed {computed:#010x})"
        )
    return 0


cdef object _open_records(_Input inp, Batch* b, bint check_crc, Reader* r):
    """Check CRC, compression and count; point r at the records. Returns what r.p borrows."""
    cdef int codec = b.attributes & 7
    cdef object payload = None
    if check_crc:
        _check_crc(inp, b)
    if codec > 4:
        raise KafkaCodecError(f"batch at byte {b.pos}: unknown compression id {codec}")
    if b.count < 0:
        raise KafkaCodecError(f"batch at byte {b.pos}: negative record count {b.count}")
    r.batch_pos = b.pos
    r.index = 0
    r.pos = 0
    if codec == 0:
        r.p = inp.ptr + b.pos + HEADER_SIZE
        r.end = b.end - b.pos - HEADER_SIZE
        r.origin = b.pos + HEADER_SIZE
    elif b.count == 0 and b.end == b.pos + HEADER_SIZE:
        r.p = inp.ptr
        r.end = 0
        r.origin = -1
    else:
        if b.count > (1 << 30) // MIN_RECORD:
            raise KafkaCodecError(f"batch at byte {b.pos}: record count {b.count} is implausible")
        try:
            payload = _compression.decompress(codec, inp.slice(b.pos + HEADER_SIZE, b.end))
        except KafkaCodecError as exc:
            raise KafkaCodecError(f"batch at byte {b.pos}: {exc}") from None
        if not PyBytes_CheckExact(payload):
            payload = bytes(payload)
        r.p = <const uint8_t*>PyBytes_AS_STRING(payload)
        r.end = PyBytes_GET_SIZE(payload)
        r.origin = -1
    if b.count > r.end // MIN_RECORD:
        raise KafkaCodecError(
            f"batch at byte {b.pos}: record count {b.count} cannot fit in {r.end} bytes of records"
        )
    return payload if payload is not None else inp


cdef list _legacy_rows(_Input inp, Batch* b, bint check_crc):
    """Magic 0/1 entries through the shared legacy.py (rare: old brokers and topics), as
    (offset, timestamp, timestamp_type, key, value) tuples checked to fit int64."""
    inp.slice(0, 0)
    rows, end = _legacy.decode_legacy_entry(inp.mv, b.pos, check_crc=check_crc)
    if end != b.end:
        raise KafkaCodecError(f"legacy message at byte {b.pos}: inconsistent entry size")
    for row in rows:
        if not (-(1 << 63) <= row[0] < (1 << 63) and -(1 << 63) <= row[1] < (1 << 63)):
            raise KafkaCodecError(f"legacy message at byte {b.pos}: offset {row[0]} overflows int64")
    return rows
