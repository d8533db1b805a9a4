"""Opening a RecordBatch for the two decoders (records.pyx rows, columnar.pyx columns): the input,
the CRC, decompression and the legacy (magic 0/1) entries, written once and cimported
(declarations in kafka_core.codec._cython.batch.pxd)."""

from cpython.buffer cimport PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t

from kafka_core.codec._cython.primitives cimport Input
from reader cimport CRC_START, HEADER_SIZE, MIN_RECORD, Batch, Reader

from crc32c import crc32c as _crc32c

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


cdef int check_crc(Input inp, Batch* b) except -1:
    cdef uint32_t computed = _crc32c(inp.raw(b.pos + CRC_START, b.end))
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
