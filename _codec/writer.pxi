# Shared by records.pyx and columnar.pyx as a textual include, on purpose: the encoders call
# _Writer's methods once per record, and compiled into each module they are direct (inlinable)
# C calls, where a class cimported from another module would be called through its vtable.
# Batch-level encode options, the per-batch record writer (sizes every record first, then writes
# once through a char*) and the header + CRC32C.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_Check

from kafka_core.codec._cython.batch cimport crc_of

import time
from operator import index as _index

from kafka_core.codec import compression as _compression
from kafka_core.errors import KafkaCodecError

cdef object _I64_MIN = -(1 << 63)
cdef object _I64_MAX = (1 << 63) - 1



cdef int64_t _i64(object value, str what) except? -1:
    """An integer (operator.index) that fits int64, or KafkaCodecError."""
    if type(value) is not int:
        try:
            value = _index(value)
        except TypeError:
            raise KafkaCodecError(f"{what} must be an integer, not {type(value).__name__}") from None
    if not _I64_MIN <= value <= _I64_MAX:
        raise KafkaCodecError(f"{what} {value} does not fit in int64")
    return <int64_t>value


cdef int64_t _ranged(object value, int64_t lo, int64_t hi, str what) except? -1:
    cdef int64_t v = _i64(value, what)
    if v < lo or v > hi:
        raise KafkaCodecError(f"{what} {value} is out of range {lo}..{hi}")
    return v


# ------------------------------------------------------------------------------------------
# Encoding
# ------------------------------------------------------------------------------------------
cdef struct Slot:
    const char* kptr
    const char* vptr
    Py_ssize_t klen  # -1: null
    Py_ssize_t vlen
    int64_t ts_delta
    Py_ssize_t body  # bytes after the record's length varint
    Py_ssize_t hstart  # first header in _Writer.hrefs
    Py_ssize_t hcount


cdef struct HdrRef:  # one header's bytes: kept alive by _Writer.keep, or by the caller's arrays
    const char* k
    const char* v
    Py_ssize_t klen
    Py_ssize_t vlen  # -1: null


@cython.final
cdef class _Writer:
    """Per-batch scratch: sized records, and the buffer exports that keep their bytes pinned."""

    cdef Slot* slots
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef Py_buffer* views
    cdef Py_ssize_t nviews
    cdef Py_ssize_t vcap
    cdef HdrRef* hrefs
    cdef Py_ssize_t nh
    cdef Py_ssize_t hcap
    cdef list keep
    cdef int64_t base_ts
    cdef int64_t max_ts
    cdef Py_ssize_t total

    def __cinit__(self, Py_ssize_t cap, int64_t base_ts):
        self.cap = cap if cap > 16 else 16
        self.slots = <Slot*>PyMem_Malloc(self.cap * sizeof(Slot))
        if self.slots == NULL:
            raise MemoryError()
        self.keep = []
        self.base_ts = base_ts
        self.max_ts = INT64_MIN

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.nviews):
            PyBuffer_Release(&self.views[i])
        PyMem_Free(self.views)
        PyMem_Free(self.slots)
        PyMem_Free(self.hrefs)

    cdef Slot* next_slot(self) except NULL:
        cdef Slot* grown
        if self.n == self.cap:
            grown = <Slot*>PyMem_Realloc(self.slots, 2 * self.cap * sizeof(Slot))
            if grown == NULL:
                raise MemoryError()
            self.slots = grown
            self.cap *= 2
        return &self.slots[self.n]

    cdef int pin(self, object obj, const char** ptr, Py_ssize_t* size, Py_ssize_t idx,
                 str what) except -1:
        """Point at the bytes of a bytes-like object (None -> length -1)."""
        cdef Py_buffer* grown
        if obj is None:
            ptr[0] = NULL
            size[0] = -1
            return 0
        if PyBytes_CheckExact(obj):
            ptr[0] = PyBytes_AS_STRING(obj)
            size[0] = PyBytes_GET_SIZE(obj)
        else:
            if not PyObject_CheckBuffer(obj):
                raise KafkaCodecError(
                    f"record {idx}: {what} must be bytes-like or None, not {type(obj).__name__}"
                )
            if self.nviews == self.vcap:
                self.vcap = 2 * self.vcap if self.vcap else 16
                grown = <Py_buffer*>PyMem_Realloc(self.views, self.vcap * sizeof(Py_buffer))
                if grown == NULL:
                    raise MemoryError()
                self.views = grown
            try:
                PyObject_GetBuffer(obj, &self.views[self.nviews], PyBUF_SIMPLE)
            except (BufferError, TypeError, ValueError) as exc:
                raise KafkaCodecError(f"record {idx}: {what} is not a usable contiguous buffer ({exc})") from None
            ptr[0] = <const char*>self.views[self.nviews].buf
            size[0] = self.views[self.nviews].len
            self.nviews += 1
        if size[0] > INT32_MAX:
            raise KafkaCodecError(f"record {idx}: {what} of {size[0]} bytes is too large")
        return 0

    cdef Py_ssize_t push_header(self, const char* k, Py_ssize_t klen, const char* v, Py_ssize_t vlen,
                                Py_ssize_t idx, object hkey) except -1:
        """Append one header of the record being added (its bytes must outlive the batch's
        write); return its encoded size. ``hkey`` names it in an error."""
        cdef HdrRef* grown
        if klen > INT32_MAX or vlen > INT32_MAX:
            raise KafkaCodecError(f"record {idx}: header {hkey!r} is too large")
        if self.nh == self.hcap:
            self.hcap = 2 * self.hcap if self.hcap else 64
            grown = <HdrRef*>PyMem_Realloc(self.hrefs, self.hcap * sizeof(HdrRef))
            if grown == NULL:
                raise MemoryError()
            self.hrefs = grown
        self.hrefs[self.nh].k = k
        self.hrefs[self.nh].klen = klen
        self.hrefs[self.nh].v = v
        self.hrefs[self.nh].vlen = vlen
        self.nh += 1
        return size_varint(<int32_t>klen) + klen + size_varint(<int32_t>vlen) + (vlen if vlen > 0 else 0)

    cdef Py_ssize_t add_headers(self, object headers, Py_ssize_t idx, Slot* slot) except -1:
        """Validate and flatten one record's headers; return their encoded size."""
        cdef Py_ssize_t size = 0
        cdef Py_ssize_t klen, vlen
        slot.hstart = self.nh
        slot.hcount = 0
        if headers is None:
            return 0
        try:
            it = iter(headers)
        except TypeError:
            raise KafkaCodecError(
                f"record {idx}: headers must be an iterable of (str, bytes) pairs, not {type(headers).__name__}"
            ) from None
        for header in it:
            if PyTuple_CheckExact(header) and PyTuple_GET_SIZE(header) == 2:
                hkey = <object>PyTuple_GET_ITEM(header, 0)
                hval = <object>PyTuple_GET_ITEM(header, 1)
            elif isinstance(header, dict):  # pyarrow's to_pylist() form
                try:
                    hkey = header["key"]
                    hval = header["value"]
                except KeyError:
                    raise KafkaCodecError(f"record {idx}: header mapping needs 'key' and 'value'") from None
            else:
                try:
                    hkey, hval = header
                except (TypeError, ValueError):
                    raise KafkaCodecError(
                        f"record {idx}: a header must be a (str, bytes) pair, not {header!r}"
                    ) from None
            if hkey is None:
                raise KafkaCodecError(f"record {idx}: header key may not be None")
            if not PyUnicode_Check(hkey):
                raise KafkaCodecError(
                    f"record {idx}: header key must be a str, not {type(hkey).__name__}"
                )
            try:
                kb = PyUnicode_AsUTF8String(hkey)
            except UnicodeEncodeError as exc:
                raise KafkaCodecError(f"record {idx}: header key {hkey!r} is not UTF-8 encodable ({exc.reason})") from None
            klen = PyBytes_GET_SIZE(kb)
            if hval is None:
                vb = None
                vlen = -1
            elif PyBytes_CheckExact(hval):
                vb = hval
                vlen = PyBytes_GET_SIZE(vb)
            elif PyObject_CheckBuffer(hval):
                try:
                    vb = bytes(memoryview(hval).cast("B"))
                except (BufferError, TypeError, ValueError) as exc:
                    raise KafkaCodecError(f"record {idx}: header {hkey!r} value is not a usable buffer ({exc})") from None
                vlen = PyBytes_GET_SIZE(vb)
            else:
                raise KafkaCodecError(
                    f"record {idx}: header {hkey!r} value must be bytes-like or None, not {type(hval).__name__}"
                )
            self.keep.append(kb)
            if vb is not None:
                self.keep.append(vb)
            size += self.push_header(PyBytes_AS_STRING(kb), klen,
                                     NULL if vb is None else PyBytes_AS_STRING(vb), vlen, idx, hkey)
            slot.hcount += 1
        return size

    cdef int add(self, Slot* slot, bint has_ts, int64_t ts, object headers, Py_ssize_t idx) except -1:
        """Finish a slot whose key and value are set: timestamp delta, headers, sizes."""
        cdef Py_ssize_t hsize = 0
        if headers is None:
            slot.hcount = 0
            slot.hstart = 0
        else:
            hsize = self.add_headers(headers, idx, slot)
        return self.add_sized(slot, has_ts, ts, hsize, idx)

    cdef int add_sized(self, Slot* slot, bint has_ts, int64_t ts, Py_ssize_t hsize, Py_ssize_t idx) except -1:
        """Finish a slot whose key, value and headers (``hsize`` encoded bytes, pushed with
        push_header) are set: timestamp delta, sizes."""
        cdef int64_t base = self.base_ts
        cdef Py_ssize_t body
        if not has_ts:
            ts = base
        if (base > 0 and ts < INT64_MIN + base) or (base < 0 and ts > INT64_MAX + base):
            raise KafkaCodecError(
                f"record {idx}: timestamp {ts} is too far from the base timestamp {base}"
            )
        if ts > self.max_ts:
            self.max_ts = ts
        slot.ts_delta = ts - base
        if idx > INT32_MAX - 1:
            raise KafkaCodecError("too many records for one batch")
        body = (1 + size_varlong(slot.ts_delta) + size_varint(<int32_t>idx)
                + size_varint(<int32_t>slot.klen) + (slot.klen if slot.klen > 0 else 0)
                + size_varint(<int32_t>slot.vlen) + (slot.vlen if slot.vlen > 0 else 0))
        body += hsize
        if slot.hcount > INT32_MAX:
            raise KafkaCodecError(f"record {idx}: too many headers")
        body += size_varint(<int32_t>slot.hcount)
        if body > INT32_MAX:
            raise KafkaCodecError(f"record {idx}: {body} bytes is too large for one record")
        slot.body = body
        self.total += size_varint(<int32_t>body) + body
        if self.total > INT32_MAX:
            raise KafkaCodecError("the batch is larger than 2 GiB")
        self.n += 1
        return 0

    cdef char* write(self, char* p) except NULL:
        cdef Py_ssize_t i, j
        cdef Slot* s
        cdef HdrRef* h
        for i in range(self.n):
            s = &self.slots[i]
            p = write_varint(p, <int32_t>s.body)
            p[0] = 0
            p = write_varlong(p + 1, s.ts_delta)
            p = write_varint(p, <int32_t>i)
            if s.klen < 0:
                p[0] = 1
                p += 1
            else:
                p = write_varint(p, <int32_t>s.klen)
                memcpy(p, s.kptr, s.klen)
                p += s.klen
            if s.vlen < 0:
                p[0] = 1
                p += 1
            else:
                p = write_varint(p, <int32_t>s.vlen)
                memcpy(p, s.vptr, s.vlen)
                p += s.vlen
            p = write_varint(p, <int32_t>s.hcount)
            for j in range(s.hstart, s.hstart + s.hcount):
                h = &self.hrefs[j]
                p = write_varint(p, <int32_t>h.klen)
                memcpy(p, h.k, h.klen)
                p += h.klen
                if h.vlen < 0:
                    p[0] = 1
                    p += 1
                else:
                    p = write_varint(p, <int32_t>h.vlen)
                    memcpy(p, h.v, h.vlen)
                    p += h.vlen
        return p


cdef class _Options:
    """Validated batch-level encode options."""

    cdef int64_t base_offset
    cdef int64_t base_ts
    cdef int codec
    cdef object level
    cdef int64_t producer_id
    cdef int16_t producer_epoch
    cdef int32_t base_sequence
    cdef int32_t leader_epoch
    cdef int16_t attributes


cdef _Options _options(base_offset, base_timestamp, compression, compression_level, producer_id,
                       producer_epoch, base_sequence, transactional, control,
                       partition_leader_epoch, log_append_time):
    cdef _Options o = _Options.__new__(_Options)
    o.base_offset = _i64(base_offset, "base_offset")
    if base_timestamp is None:
        base_timestamp = time.time_ns() // 1_000_000
    o.base_ts = _i64(base_timestamp, "base_timestamp")
    o.codec = _compression.codec_id(compression)
    o.level = compression_level
    o.producer_id = _i64(producer_id, "producer_id")
    o.producer_epoch = <int16_t>_ranged(producer_epoch, -32768, 32767, "producer_epoch")
    o.base_sequence = <int32_t>_ranged(base_sequence, -2147483648, 2147483647, "base_sequence")
    o.leader_epoch = <int32_t>_ranged(partition_leader_epoch, -2147483648, 2147483647,
                                      "partition_leader_epoch")
    o.attributes = <int16_t>(o.codec | (8 if log_append_time else 0)
                             | (16 if transactional else 0) | (32 if control else 0))
    return o


cdef bytearray _finish(_Writer w, _Options o):
    """Write the sized records (compressed if asked) behind the 61-byte header, then the CRC."""
    cdef bytearray out, raw
    cdef char* buf
    cdef char* end
    cdef Py_ssize_t size
    if w.n == 0:
        raise KafkaCodecError("cannot encode an empty record batch")
    if o.codec == 0:
        size = HEADER_SIZE + w.total
        out = PyByteArray_FromStringAndSize(NULL, size)
        buf = PyByteArray_AS_STRING(out)
        end = w.write(buf + HEADER_SIZE)
    else:
        raw = PyByteArray_FromStringAndSize(NULL, w.total)
        end = w.write(PyByteArray_AS_STRING(raw))
        if end - PyByteArray_AS_STRING(raw) != w.total:
            raise KafkaCodecError("internal error: record sizes disagree")
        packed = _compression.compress(o.codec, raw, o.level)
        if not PyBytes_CheckExact(packed):
            packed = bytes(packed)
        size = HEADER_SIZE + len(packed)
        if size - 12 > INT32_MAX:
            raise KafkaCodecError("the compressed batch is larger than 2 GiB")
        out = PyByteArray_FromStringAndSize(NULL, size)
        buf = PyByteArray_AS_STRING(out)
        memcpy(buf + HEADER_SIZE, PyBytes_AS_STRING(packed), len(packed))
        end = buf + size
    if end - buf != size:
        raise KafkaCodecError("internal error: record sizes disagree")
    write_be64(buf, <uint64_t>o.base_offset)
    write_be32(buf + 8, <uint32_t>(size - 12))
    write_be32(buf + 12, <uint32_t>o.leader_epoch)
    buf[16] = 2
    write_be16(buf + 21, <uint16_t>o.attributes)
    write_be32(buf + 23, <uint32_t>(w.n - 1))
    write_be64(buf + 27, <uint64_t>o.base_ts)
    write_be64(buf + 35, <uint64_t>w.max_ts)
    write_be64(buf + 43, <uint64_t>o.producer_id)
    write_be16(buf + 51, <uint16_t>o.producer_epoch)
    write_be32(buf + 53, <uint32_t>o.base_sequence)
    write_be32(buf + 57, <uint32_t>w.n)
    write_be32(buf + 17, crc_of(out, CRC_START, <const uint8_t*>buf + CRC_START, size - CRC_START))
    return out

