# C-level RecordBatch v2 readers shared by records.pyx and columnar.pyx (cimported; inline only,
# so no runtime import between the two modules). Every read is checked against the end of the
# batch or record: the build turns Cython's own bounds checks off, so these are the only guard.
# Errors are raised through fail(), which imports KafkaCodecError when it is needed (a .pxd has
# no module globals of its own): only the error paths pay for it.

from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t

from kafka_core.codec._cython.primitives cimport RD_OK, RD_OVERFLOW, RD_TRUNCATED, read_be16, read_be32, read_be64, read_varint, read_varlong

cdef enum:
    HEADER_SIZE = 61  # RecordBatch v2 header, baseOffset to recordCount
    CRC_START = 21  # the CRC covers attributes .. end
    MIN_RECORD = 7  # smallest record: seven one-byte fields
    ATTR_LOG_APPEND = 8
    ATTR_TRANSACTIONAL = 16
    ATTR_CONTROL = 32


cdef struct Batch:
    Py_ssize_t pos  # byte position of the batch in the input
    Py_ssize_t end
    int64_t base_offset
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_delta
    int64_t base_ts
    int64_t max_ts
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t count


cdef struct Reader:
    const uint8_t* p
    Py_ssize_t pos
    Py_ssize_t end  # end of the records region
    Py_ssize_t origin  # input position of p[0]; -1 when p is a decompressed payload
    Py_ssize_t batch_pos
    Py_ssize_t index  # record being read
    Py_ssize_t err_at  # what read_rec / read_hdr found wrong, for read_error
    int err_field
    int err_rc
    int64_t err_value


cdef struct Rec:
    Py_ssize_t end
    int64_t ts_delta
    int32_t off_delta
    int32_t klen
    int32_t vlen
    int32_t hcount
    const uint8_t* key
    const uint8_t* value


cdef struct Hdr:
    const uint8_t* key
    const uint8_t* value
    int32_t klen
    int32_t vlen


cdef enum:  # fields, for read_bad
    F_LENGTH, F_TIMESTAMP, F_OFFSET, F_KEY, F_VALUE, F_HEADERS, F_HKEY, F_HVALUE
    BAD_VALUE = 100


cdef inline int fail(str message) except -1:
    from kafka_core.errors import KafkaCodecError

    raise KafkaCodecError(message)


cdef inline int read_fail(Reader* r, Py_ssize_t at, str what) except -1:
    if r.origin >= 0:
        return fail(f"batch at byte {r.batch_pos}, record {r.index}: {what} (byte {r.origin + at})")
    return fail(
        f"batch at byte {r.batch_pos}, record {r.index}: {what} (byte {at} of the decompressed records)"
    )


cdef inline int bad(Reader* r, Py_ssize_t at, int field, int rc, int64_t value) noexcept nogil:
    r.err_at = at
    r.err_field = field
    r.err_rc = rc
    r.err_value = value
    return -1


cdef inline int read_error(Reader* r) except -1:
    """Raise what read_rec or read_hdr reported (they return -1 and never raise, so that they
    stay small enough for the compiler to inline into the record loops)."""
    cdef int64_t value = r.err_value
    name = ("record length", "timestamp delta", "offset delta", "key length", "value length",
            "header count", "header key length", "header value length")[r.err_field]
    if r.err_rc == RD_TRUNCATED:
        return read_fail(r, r.err_at, f"{name} runs past the record")
    if r.err_rc == RD_OVERFLOW:
        return read_fail(r, r.err_at, f"{name} varint overflows")
    if r.err_rc != BAD_VALUE:
        return read_fail(r, r.err_at, f"{name} varint is too long")
    if r.err_field == F_HKEY and value == -1:
        return read_fail(r, r.err_at, "header key is null")
    return read_fail(r, r.err_at, f"{name} {value} is invalid")


cdef inline int read_rec(Reader* r, Rec* rec) noexcept nogil:
    """Read a record up to its header count; every length is checked against the record end.
    -1 on bad input, with the details in r for read_error."""
    cdef const uint8_t* p = r.p
    cdef Py_ssize_t pos = r.pos
    cdef Py_ssize_t at = pos
    cdef Py_ssize_t end
    cdef int32_t length = 0
    cdef int rc = read_varint(p, &pos, r.end, &length)
    if rc != RD_OK:
        return bad(r, at, F_LENGTH, rc, 0)
    if length < 6 or length > r.end - pos:
        return bad(r, at, F_LENGTH, BAD_VALUE, length)
    end = pos + length
    rec.end = end
    pos += 1  # attributes (unused)
    at = pos
    rc = read_varlong(p, &pos, end, &rec.ts_delta)
    if rc != RD_OK:
        return bad(r, at, F_TIMESTAMP, rc, 0)
    at = pos
    rc = read_varint(p, &pos, end, &rec.off_delta)
    if rc != RD_OK:
        return bad(r, at, F_OFFSET, rc, 0)
    at = pos
    rc = read_varint(p, &pos, end, &rec.klen)
    if rc != RD_OK:
        return bad(r, at, F_KEY, rc, 0)
    if rec.klen < -1 or rec.klen > end - pos:
        return bad(r, at, F_KEY, BAD_VALUE, rec.klen)
    rec.key = p + pos
    if rec.klen > 0:
        pos += rec.klen
    at = pos
    rc = read_varint(p, &pos, end, &rec.vlen)
    if rc != RD_OK:
        return bad(r, at, F_VALUE, rc, 0)
    if rec.vlen < -1 or rec.vlen > end - pos:
        return bad(r, at, F_VALUE, BAD_VALUE, rec.vlen)
    rec.value = p + pos
    if rec.vlen > 0:
        pos += rec.vlen
    at = pos
    rc = read_varint(p, &pos, end, &rec.hcount)
    if rc != RD_OK:
        return bad(r, at, F_HEADERS, rc, 0)
    if rec.hcount < 0 or rec.hcount > (end - pos) // 2:
        return bad(r, at, F_HEADERS, BAD_VALUE, rec.hcount)
    r.pos = pos
    return 0


cdef inline int read_hdr(Reader* r, Rec* rec, Hdr* h) noexcept nogil:
    cdef const uint8_t* p = r.p
    cdef Py_ssize_t pos = r.pos
    cdef Py_ssize_t at = pos
    cdef Py_ssize_t end = rec.end
    cdef int rc = read_varint(p, &pos, end, &h.klen)
    if rc != RD_OK:
        return bad(r, at, F_HKEY, rc, 0)
    if h.klen < 0 or h.klen > end - pos:
        return bad(r, at, F_HKEY, BAD_VALUE, h.klen)
    h.key = p + pos
    pos += h.klen
    at = pos
    rc = read_varint(p, &pos, end, &h.vlen)
    if rc != RD_OK:
        return bad(r, at, F_HVALUE, rc, 0)
    if h.vlen < -1 or h.vlen > end - pos:
        return bad(r, at, F_HVALUE, BAD_VALUE, h.vlen)
    h.value = p + pos
    if h.vlen > 0:
        pos += h.vlen
    r.pos = pos
    return 0


cdef inline int check_more(Reader* r, int32_t count, int32_t i) except -1:
    if r.pos >= r.end:
        read_fail(r, r.pos, f"the batch declares {count} records, only {i} are present")
    return 0


cdef inline int end_rec(Reader* r, Rec* rec) except -1:
    if r.pos != rec.end:
        read_fail(r, r.pos, "record length disagrees with its fields")
    r.index += 1
    return 0


cdef inline int close_records(Reader* r, Batch* b) except -1:
    if r.pos != r.end:
        read_fail(r, r.pos, f"{r.end - r.pos} bytes left over after the batch's {b.count} records")
    return 0


cdef inline int64_t add64(Reader* r, int64_t base, int64_t delta, str what) except? -1:
    if (delta > 0 and base > INT64_MAX - delta) or (delta < 0 and base < INT64_MIN - delta):
        read_fail(r, r.pos, f"{what} overflows int64")
    return base + delta


cdef inline int next_batch(const uint8_t* data, Py_ssize_t size, Py_ssize_t pos, Batch* b) except -1:
    """0: clean stop (end or truncated tail), 1: v2 batch, 2: legacy (magic 0/1) entry."""
    cdef const uint8_t* p = data + pos
    cdef Py_ssize_t rem = size - pos
    cdef int32_t length
    cdef int magic
    if rem < 12:
        return 0
    length = <int32_t>read_be32(p + 8)
    if length < 14:  # the smallest legacy message
        fail(f"batch at byte {pos}: batch length {length} is below the minimum (14)")
    if length > rem - 12:
        return 0  # truncated trailing batch: a Fetch response may end mid-batch
    magic = p[16]
    b.pos = pos
    b.end = pos + 12 + length
    b.magic = magic
    b.base_offset = <int64_t>read_be64(p)
    if magic == 0 or magic == 1:
        return 2
    if magic != 2:
        fail(f"batch at byte {pos}: unknown magic {<int8_t>magic}")
    if length < HEADER_SIZE - 12:
        fail(
            f"batch at byte {pos}: batch length {length} is below the v2 minimum ({HEADER_SIZE - 12})"
        )
    b.crc = read_be32(p + 17)
    b.attributes = <int16_t>read_be16(p + 21)
    b.last_delta = <int32_t>read_be32(p + 23)
    b.base_ts = <int64_t>read_be64(p + 27)
    b.max_ts = <int64_t>read_be64(p + 35)
    b.producer_id = <int64_t>read_be64(p + 43)
    b.producer_epoch = <int16_t>read_be16(p + 51)
    b.base_sequence = <int32_t>read_be32(p + 53)
    b.count = <int32_t>read_be32(p + 57)
    return 1
