# The declarations of kafka_core.codec._cython.primitives (source: _codec/primitives.pyx), kept in
# the module's package so that every cimport names the module as Python imports it. The C-level
# wire helpers are inline, so records.pyx and columnar.pyx inline them with no call into this
# module; Input is the one pinned-buffer type of the codec.
# Readers never raise: they return a status code and the caller raises KafkaCodecError with its
# own context (record, byte position).

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef class Input:
    """A read-only byte view of any buffer, pinned while the object lives (bytes are read
    directly, other objects exported); zero-copy columns keep one alive."""

    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef Py_ssize_t size
    cdef object obj
    cdef object mv  # memoryview of obj, made on first slice()

    cdef object slice(self, Py_ssize_t start, Py_ssize_t end)
    cdef object raw(self, Py_ssize_t start, Py_ssize_t end)


cdef enum:
    RD_OK = 0
    RD_TRUNCATED = 1
    RD_TOO_LONG = 2
    RD_OVERFLOW = 3


cdef inline int read_unsigned(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end, int max_bytes,
                              int bits, uint64_t* out) noexcept nogil:
    """LEB128 read of at most max_bytes bytes; rejects values wider than `bits`."""
    cdef uint64_t result = 0
    cdef uint64_t byte
    cdef int shift = 0
    cdef int i
    cdef Py_ssize_t p = pos[0]
    for i in range(max_bytes):
        if p >= end:
            return RD_TRUNCATED
        byte = buf[p]
        p += 1
        if shift == 63:
            if (byte & 0x7F) > 1:
                return RD_OVERFLOW
        result |= (byte & 0x7F) << shift
        if not (byte & 0x80):
            if bits < 64 and (result >> bits) != 0:
                return RD_OVERFLOW
            out[0] = result
            pos[0] = p
            return RD_OK
        shift += 7
    return RD_TOO_LONG


cdef inline int read_varint(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end,
                            int32_t* out) noexcept nogil:
    """Zigzag 32-bit varint (at most 5 bytes), one- and two-byte fast paths."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t raw
    cdef int rc
    if p < end and buf[p] < 0x80:
        raw = buf[p]
        pos[0] = p + 1
    elif p + 1 < end and buf[p + 1] < 0x80:
        raw = (buf[p] & 0x7F) | (<uint64_t>buf[p + 1] << 7)
        pos[0] = p + 2
    else:
        rc = read_unsigned(buf, pos, end, 5, 32, &raw)
        if rc != RD_OK:
            return rc
    out[0] = <int32_t>(<uint32_t>((raw >> 1) ^ (0 - (raw & 1))))
    return RD_OK


cdef inline int read_varlong(const uint8_t* buf, Py_ssize_t* pos, Py_ssize_t end,
                             int64_t* out) noexcept nogil:
    """Zigzag 64-bit varlong (at most 10 bytes), one-byte fast path."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t raw
    cdef int rc
    if p < end and buf[p] < 0x80:
        raw = buf[p]
        pos[0] = p + 1
    else:
        rc = read_unsigned(buf, pos, end, 10, 64, &raw)
        if rc != RD_OK:
            return rc
    out[0] = <int64_t>((raw >> 1) ^ (0 - (raw & 1)))
    return RD_OK


cdef inline uint64_t zigzag64(int64_t value) noexcept nogil:
    return (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)


cdef inline uint32_t zigzag32(int32_t value) noexcept nogil:
    return (<uint32_t>value << 1) ^ <uint32_t>(value >> 31)


cdef inline Py_ssize_t size_unsigned(uint64_t value) noexcept nogil:
    cdef Py_ssize_t size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


cdef inline Py_ssize_t size_varint(int32_t value) noexcept nogil:
    return size_unsigned(zigzag32(value))


cdef inline Py_ssize_t size_varlong(int64_t value) noexcept nogil:
    return size_unsigned(zigzag64(value))


cdef inline char* write_unsigned(char* out, uint64_t value) noexcept nogil:
    while value >= 0x80:
        out[0] = <char>((value & 0x7F) | 0x80)
        out += 1
        value >>= 7
    out[0] = <char>value
    return out + 1


cdef inline char* write_varint(char* out, int32_t value) noexcept nogil:
    return write_unsigned(out, zigzag32(value))


cdef inline char* write_varlong(char* out, int64_t value) noexcept nogil:
    return write_unsigned(out, zigzag64(value))


cdef inline void write_be16(char* out, uint16_t value) noexcept nogil:
    out[0] = <char>(value >> 8)
    out[1] = <char>value


cdef inline void write_be32(char* out, uint32_t value) noexcept nogil:
    out[0] = <char>(value >> 24)
    out[1] = <char>(value >> 16)
    out[2] = <char>(value >> 8)
    out[3] = <char>value


cdef inline void write_be64(char* out, uint64_t value) noexcept nogil:
    write_be32(out, <uint32_t>(value >> 32))
    write_be32(out + 4, <uint32_t>value)


cdef inline uint16_t read_be16(const uint8_t* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint32_t read_be32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline uint64_t read_be64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>read_be32(p) << 32) | read_be32(p + 4)


cdef inline bint valid_utf8(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Strict UTF-8 as Python decodes it: no overlongs, no surrogates, nothing above U+10FFFF."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
        elif c < 0xC2:
            return False
        elif c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return False
            i += 3
        elif c < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if ((c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80
                    or (s[i + 3] & 0xC0) != 0x80):
                return False
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
                return False
            i += 4
        else:
            return False
    return True
