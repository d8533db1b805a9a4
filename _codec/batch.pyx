"""Opening a RecordBatch for the two decoders (records.pyx rows, columnar.pyx columns): the input,
the CRC, decompression and the legacy (magic 0/1) entries, written once and cimported
(declarations in kafka_core.codec._cython.batch.pxd)."""

from cpython.buffer cimport PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t

from kafka_core.codec._cython.primitives cimport Input
from reader cimport CRC_START, HEADER_SIZE, MIN_RECORD, Batch, Reader

cdef extern from "crc32c.h":
    int kc_crc32c_usable() noexcept nogil
    uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil

from kafka_core.codec.crc import crc32c as _crc32c  # the crc32c package, imported at its first use

from kafka_core.codec import compression as _compression
from kafka_core.codec import legacy as _legacy
from kafka_core.errors import KafkaCodecError

__all__ = []


cdef Input open_input(object obj):
    """The decoders' input: what cannot be pinned is a KafkaCodecError, as in the pure twin."""
    if not PyBytes_CheckExact(obj) and not PyObject_CheckBuffer(obj):
        raise KafkaCodecError(f"cannot decode a {type(obj).__name__}: a bytes-like object is needed")
    try:
        return Input(obj)
    except BufferError as exc:
        raise KafkaCodecError(f"cannot decode a non-contiguous buffer ({exc})") from None


# The folded CRC (crc32c.h) where the CPU has it, else the crc32c package: the same values.
cdef bint _fold = kc_crc32c_usable() != 0


def _crc32c_folding(enabled=None):
    """Tests and benchmarks: whether the batch CRC is folded (crc32c.h) rather than the crc32c
    package's; ``enabled`` switches it (on only where the CPU can). Returns the previous setting."""
    global _fold
    previous = _fold
    if enabled is not None:
        _fold = bool(enabled) and kc_crc32c_usable() != 0
    return previous


def _crc32c_fold(data, unsigned int value=0):
    """Tests: the folded CRC32C of a bytes-like object, continued from ``value`` as
    crc32c.crc32c(data, value); None where the CPU cannot fold."""
    if not kc_crc32c_usable():
        return None
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    return kc_crc32c(value, &view[0] if view.shape[0] else NULL, view.shape[0])


cdef uint32_t crc_of(object owner, Py_ssize_t start, const uint8_t* p, Py_ssize_t n) except? 0:
    """CRC32C of the n bytes at p, which are owner[start:start + n]."""
    if _fold:
        return kc_crc32c(0, p, n)
    with memoryview(owner) as view:
        return _crc32c(view[start:start + n])


cdef int check_crc(Input inp, Batch* b) except -1:
    cdef uint32_t computed
    if _fold:
        computed = kc_crc32c(0, inp.ptr + b.pos + CRC_START, b.end - b.pos - CRC_START)
    else:
        computed = _crc32c(inp.raw(b.pos + CRC_START, b.end))
    if computed != b.crc:
        raise KafkaCodecError(
            f"batch at byte {b.pos}: CRC mismatch (expected {b.crc:#010x}, computed {computed:#010x})"
        )
    return 0


cdef object open_records(Input inp, Batch* b, bint verify, Reader* r):
    """Check CRC, compression and count; point r at the records. Returns what r.p borrows."""
    cdef int codec = b.attributes & 7
    cdef object payload = None
    if verify:
        check_crc(inp, b)
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


cdef list legacy_rows(Input inp, Batch* b, bint verify):
    """Magic 0/1 entries through the shared legacy.py (rare: old brokers and topics), as
    (offset, timestamp, timestamp_type, key, value) tuples checked to fit int64."""
    inp.slice(0, 0)
    rows, end = _legacy.decode_legacy_entry(inp.mv, b.pos, check_crc=verify)
    if end != b.end:
        raise KafkaCodecError(f"legacy message at byte {b.pos}: inconsistent entry size")
    for row in rows:
        if not (-(1 << 63) <= row[0] < (1 << 63) and -(1 << 63) <= row[1] < (1 << 63)):
            raise KafkaCodecError(f"legacy message at byte {b.pos}: offset {row[0]} overflows int64")
    return rows
