"""RecordBatch v2 codec, Cython twin of ``kafka_core.codec._python.records`` (docs/codec.md).

Encoding sizes the batch first and writes it once through a char* (CRC32C by the hardware
``crc32c`` package, once per batch); decoding walks a const pointer where every read is checked
against the end of the batch or record (the build turns Cython's own bounds checks off, so these
checks are the only protection). The columnar paths read pyarrow buffers directly and hand C
buffers to pyarrow through the Arrow C data interface: no Python object per record.
Compression and legacy (magic 0/1) entries go through the shared Python modules.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

from primitives cimport (
    RD_OK, RD_OVERFLOW, RD_TRUNCATED, read_be16, read_be32, read_be64, read_varint, read_varlong,
    size_varint, size_varlong, valid_utf8, write_be16, write_be32, write_be64, write_varint,
    write_varlong,
)

import time
from operator import index as _index

from crc32c import crc32c as _crc32c

from kafka_core.codec import compression as _compression
from kafka_core.codec.columns import BatchInfo, RecordColumns, headers_type
from kafka_core.errors import KafkaCodecError

__all__ = [
    "KafkaRecord",
    "decode_record_batches",
    "decode_record_batches_columns",
    "encode_record_batch",
    "encode_record_batch_columns",
]

cdef enum:
    HEADER_SIZE = 61  # RecordBatch v2 header, baseOffset to recordCount
    CRC_START = 21  # the CRC covers attributes .. end
    MIN_RECORD = 7  # smallest record: seven one-byte fields
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


cdef object _NO_HEADERS = object()


cdef object _headers_list(object headers):
    if type(headers) is list:
        return headers
    try:
        return list(headers)
    except TypeError:
        return headers


@cython.freelist(1024)
@cython.no_gc
cdef class KafkaRecord:
    """One record; decoded records are made through the freelist without running __init__.

    Not tracked by the cyclic GC (a decoded batch would otherwise trigger collections that walk
    every fresh record): a record holds bytes, ints and its headers list, so only a record put
    inside its own headers could form a cycle, and that cycle would leak rather than crash."""

    cdef readonly int64_t offset
    cdef int64_t _timestamp
    cdef bint _has_timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef object _headers
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly bint is_transactional
    cdef readonly bint is_control

    def __init__(self, key=None, value=None, headers=(), timestamp=None, offset=-1,
                 timestamp_type=0, producer_id=-1, producer_epoch=-1,
                 is_transactional=False, is_control=False):
        self.key = key
        self.value = value
        self._headers = headers
        if timestamp is None:
            self._has_timestamp = False
        else:
            self._timestamp = _i64(timestamp, "timestamp")
            self._has_timestamp = True
        self.offset = _i64(offset, "offset")
        self.timestamp_type = <int>_ranged(timestamp_type, -1, 1, "timestamp_type")
        self.producer_id = _i64(producer_id, "producer_id")
        self.producer_epoch = <int>_ranged(producer_epoch, -32768, 32767, "producer_epoch")
        self.is_transactional = bool(is_transactional)
        self.is_control = bool(is_control)

    @property
    def timestamp(self):
        return self._timestamp if self._has_timestamp else None

    @property
    def headers(self):
        if self._headers is _NO_HEADERS:  # decoded without headers: the list is made on first use
            self._headers = []
        return self._headers

    def __eq__(self, other):
        if not isinstance(other, KafkaRecord):
            return NotImplemented
        cdef KafkaRecord o = <KafkaRecord>other
        return (
            self.offset == o.offset
            and self.timestamp == o.timestamp
            and self.timestamp_type == o.timestamp_type
            and self.key == o.key
            and self.value == o.value
            and _headers_list(self.headers) == _headers_list(o.headers)
            and self.producer_id == o.producer_id
            and self.producer_epoch == o.producer_epoch
            and self.is_transactional == o.is_transactional
            and self.is_control == o.is_control
        )

    __hash__ = None

    def __repr__(self):
        return (
            f"KafkaRecord(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )

    def __reduce__(self):
        return (
            KafkaRecord,
            (self.key, self.value, self.headers, self.timestamp, self.offset, self.timestamp_type,
             self.producer_id, self.producer_epoch, self.is_transactional, self.is_control),
        )


# ------------------------------------------------------------------------------------------
# key and value as member descriptors instead of Cython's getset properties: CPython then
# specialises `record.key` into a direct slot load (LOAD_ATTR_SLOT), several times cheaper.
# ------------------------------------------------------------------------------------------
cdef extern from "Python.h":
    """
    #include "structmember.h"
    static PyMemberDef __pyx_kr_members[2];
    static int __pyx_kr_install(PyObject *type, const char *name, int i, Py_ssize_t offset) {
        PyObject *descr;
        int rc;
        __pyx_kr_members[i].name = name;
        __pyx_kr_members[i].type = T_OBJECT_EX;  /* never NULL: Cython sets None at creation */
        __pyx_kr_members[i].offset = offset;
        __pyx_kr_members[i].flags = READONLY;
        __pyx_kr_members[i].doc = NULL;
        descr = PyDescr_NewMember((PyTypeObject *)type, &__pyx_kr_members[i]);
        if (descr == NULL) return -1;
        rc = PyDict_SetItemString(((PyTypeObject *)type)->tp_dict, name, descr);
        Py_DECREF(descr);
        PyType_Modified((PyTypeObject *)type);
        return rc;
    }
    """
    int __pyx_kr_install(object type, const char* name, int i, Py_ssize_t offset) except -1


cdef Py_ssize_t _slot_of(KafkaRecord probe, object marker):
    """Byte offset of the object field of `probe` that holds `marker` (-1 if none)."""
    cdef void** words = <void**><void*>probe
    cdef Py_ssize_t i
    for i in range(<Py_ssize_t>(KafkaRecord.__basicsize__ // sizeof(void*))):
        if words[i] == <void*>marker:
            return i * <Py_ssize_t>sizeof(void*)
    return -1


cdef _use_member_descriptors():
    cdef KafkaRecord probe = KafkaRecord.__new__(KafkaRecord)
    key_marker, value_marker = object(), object()
    probe.key = key_marker
    probe.value = value_marker
    key_at = _slot_of(probe, key_marker)
    value_at = _slot_of(probe, value_marker)
    if key_at > 0 and value_at > 0:  # otherwise Cython's properties stay: slower, still right
        __pyx_kr_install(KafkaRecord, "key", 0, key_at)
        __pyx_kr_install(KafkaRecord, "value", 1, value_at)


_use_member_descriptors()


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
    Py_ssize_t hstart  # first header in _Writer.hdr (flat key, value pairs)
    Py_ssize_t hcount


@cython.final
cdef class _Writer:
    """Per-batch scratch: sized records, and the buffer exports that keep their bytes pinned."""

    cdef Slot* slots
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef Py_buffer* views
    cdef Py_ssize_t nviews
    cdef Py_ssize_t vcap
    cdef list hdr
    cdef list keep
    cdef int64_t base_ts
    cdef int64_t max_ts
    cdef Py_ssize_t total

    def __cinit__(self, Py_ssize_t cap, int64_t base_ts):
        self.cap = cap if cap > 16 else 16
        self.slots = <Slot*>PyMem_Malloc(self.cap * sizeof(Slot))
        if self.slots == NULL:
            raise MemoryError()
        self.hdr = []
        self.keep = []
        self.base_ts = base_ts
        self.max_ts = INT64_MIN

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.nviews):
            PyBuffer_Release(&self.views[i])
        PyMem_Free(self.views)
        PyMem_Free(self.slots)

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

    cdef Py_ssize_t add_headers(self, object headers, Py_ssize_t idx, Slot* slot) except -1:
        """Validate and flatten one record's headers; return their encoded size."""
        cdef Py_ssize_t size = 0
        cdef Py_ssize_t klen, vlen
        slot.hstart = len(self.hdr)
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
            if klen > INT32_MAX or vlen > INT32_MAX:
                raise KafkaCodecError(f"record {idx}: header {hkey!r} is too large")
            size += size_varint(<int32_t>klen) + klen + size_varint(<int32_t>vlen) + (vlen if vlen > 0 else 0)
            self.hdr.append(kb)
            self.hdr.append(vb)
            slot.hcount += 1
        return size

    cdef int add(self, Slot* slot, bint has_ts, int64_t ts, object headers, Py_ssize_t idx) except -1:
        """Finish a slot whose key and value are set: timestamp delta, headers, sizes."""
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
        if headers is None:
            slot.hcount = 0
            slot.hstart = 0
        else:
            body += self.add_headers(headers, idx, slot)
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
        cdef object kb, vb
        cdef Py_ssize_t hl
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
            for j in range(s.hstart, s.hstart + 2 * s.hcount, 2):
                kb = self.hdr[j]
                vb = self.hdr[j + 1]
                hl = PyBytes_GET_SIZE(kb)
                p = write_varint(p, <int32_t>hl)
                memcpy(p, PyBytes_AS_STRING(kb), hl)
                p += hl
                if vb is None:
                    p[0] = 1
                    p += 1
                else:
                    hl = PyBytes_GET_SIZE(vb)
                    p = write_varint(p, <int32_t>hl)
                    memcpy(p, PyBytes_AS_STRING(vb), hl)
                    p += hl
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
    cdef uint32_t crc = 0
    with memoryview(out) as view:
        crc = _crc32c(view[CRC_START:])
    write_be32(buf + 17, crc)
    return out


def encode_record_batch(records, *, base_offset=0, base_timestamp=None, compression="none",
                        compression_level=None, producer_id=-1, producer_epoch=-1,
                        base_sequence=-1, transactional=False, control=False,
                        partition_leader_epoch=-1, log_append_time=False):
    """Encode records (KafkaRecord or (key, value[, headers]) tuples) as one RecordBatch v2."""
    cdef _Options o = _options(base_offset, base_timestamp, compression, compression_level,
                               producer_id, producer_epoch, base_sequence, transactional,
                               control, partition_leader_epoch, log_append_time)
    cdef _Writer w
    cdef Py_ssize_t i
    cdef Py_ssize_t size
    cdef Slot* slot
    cdef KafkaRecord rec
    cdef list items
    cdef object item, key, value, headers
    cdef bint has_ts
    cdef int64_t ts
    # Our own list: the tuples and records it holds keep every key and value alive.
    try:
        items = list(records)
    except TypeError:
        raise KafkaCodecError(f"records must be an iterable, not {type(records).__name__}") from None
    w = _Writer(len(items), o.base_ts)
    for i in range(len(items)):
        item = items[i]
        slot = w.next_slot()
        if PyTuple_CheckExact(item) and PyTuple_GET_SIZE(item) == 2:
            w.pin(<object>PyTuple_GET_ITEM(item, 0), &slot.kptr, &slot.klen, i, "key")
            w.pin(<object>PyTuple_GET_ITEM(item, 1), &slot.vptr, &slot.vlen, i, "value")
            w.add(slot, False, 0, None, i)
        elif isinstance(item, KafkaRecord):
            rec = <KafkaRecord>item
            w.pin(rec.key, &slot.kptr, &slot.klen, i, "key")
            w.pin(rec.value, &slot.vptr, &slot.vlen, i, "value")
            headers = rec._headers
            w.add(slot, rec._has_timestamp, rec._timestamp, None if headers is _NO_HEADERS else headers, i)
        elif isinstance(item, (tuple, list)):
            size = len(item)
            if size != 2 and size != 3:
                raise KafkaCodecError(
                    f"record {i}: a tuple record is (key, value) or (key, value, headers), got {size} items"
                )
            key = item[0]
            value = item[1]
            w.keep.append(key)  # a list item could be replaced while we work
            w.keep.append(value)
            w.pin(key, &slot.kptr, &slot.klen, i, "key")
            w.pin(value, &slot.vptr, &slot.vlen, i, "value")
            w.add(slot, False, 0, item[2] if size == 3 else None, i)
        elif hasattr(item, "key") and hasattr(item, "value") and hasattr(item, "headers"):
            # Any record-like object, such as the pure-Python twin's KafkaRecord.
            key = item.key
            value = item.value
            w.keep.append(key)
            w.keep.append(value)
            w.pin(key, &slot.kptr, &slot.klen, i, "key")
            w.pin(value, &slot.vptr, &slot.vlen, i, "value")
            ts_obj = getattr(item, "timestamp", None)
            has_ts = ts_obj is not None
            ts = _i64(ts_obj, f"record {i}: timestamp") if has_ts else 0
            w.add(slot, has_ts, ts, item.headers, i)
        else:
            raise KafkaCodecError(
                f"record {i}: expected a KafkaRecord or a (key, value[, headers]) tuple, not {type(item).__name__}"
            )
    return _finish(w, o)


# ------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------
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


@cython.final
cdef class _Input:
    """The input buffer, pinned for the whole decode (bytes read directly, others exported)."""

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


cdef int _fail(Reader* r, Py_ssize_t at, str what) except -1:
    if r.origin >= 0:
        raise KafkaCodecError(
            f"batch at byte {r.batch_pos}, record {r.index}: {what} (byte {r.origin + at})"
        )
    raise KafkaCodecError(
        f"batch at byte {r.batch_pos}, record {r.index}: {what} (byte {at} of the decompressed records)"
    )


cdef enum:  # fields, for _bad
    F_LENGTH, F_TIMESTAMP, F_OFFSET, F_KEY, F_VALUE, F_HEADERS, F_HKEY, F_HVALUE
    BAD_VALUE = 100

cdef tuple _FIELDS = ("record length", "timestamp delta", "offset delta", "key length",
                      "value length", "header count", "header key length", "header value length")


cdef int _bad(Reader* r, Py_ssize_t at, int field, int rc, int64_t value) except -1:
    """Out of line, so that the readers stay small enough to inline."""
    name = _FIELDS[field]
    if rc == RD_TRUNCATED:
        return _fail(r, at, f"{name} runs past the record")
    if rc == RD_OVERFLOW:
        return _fail(r, at, f"{name} varint overflows")
    if rc != BAD_VALUE:
        return _fail(r, at, f"{name} varint is too long")
    if field == F_HKEY and value == -1:
        return _fail(r, at, "header key is null")
    return _fail(r, at, f"{name} {value} is invalid")


cdef inline int _read_rec(Reader* r, Rec* rec) except -1:
    """Read a record up to its header count; every length is checked against the record end."""
    cdef const uint8_t* p = r.p
    cdef Py_ssize_t pos = r.pos
    cdef Py_ssize_t at = pos
    cdef Py_ssize_t end
    cdef int32_t length = 0
    cdef int rc = read_varint(p, &pos, r.end, &length)
    if rc != RD_OK:
        return _bad(r, at, F_LENGTH, rc, 0)
    if length < 6 or length > r.end - pos:
        return _bad(r, at, F_LENGTH, BAD_VALUE, length)
    end = pos + length
    rec.end = end
    pos += 1  # attributes (unused)
    at = pos
    rc = read_varlong(p, &pos, end, &rec.ts_delta)
    if rc != RD_OK:
        return _bad(r, at, F_TIMESTAMP, rc, 0)
    at = pos
    rc = read_varint(p, &pos, end, &rec.off_delta)
    if rc != RD_OK:
        return _bad(r, at, F_OFFSET, rc, 0)
    at = pos
    rc = read_varint(p, &pos, end, &rec.klen)
    if rc != RD_OK:
        return _bad(r, at, F_KEY, rc, 0)
    if rec.klen < -1 or rec.klen > end - pos:
        return _bad(r, at, F_KEY, BAD_VALUE, rec.klen)
    rec.key = p + pos
    if rec.klen > 0:
        pos += rec.klen
    at = pos
    rc = read_varint(p, &pos, end, &rec.vlen)
    if rc != RD_OK:
        return _bad(r, at, F_VALUE, rc, 0)
    if rec.vlen < -1 or rec.vlen > end - pos:
        return _bad(r, at, F_VALUE, BAD_VALUE, rec.vlen)
    rec.value = p + pos
    if rec.vlen > 0:
        pos += rec.vlen
    at = pos
    rc = read_varint(p, &pos, end, &rec.hcount)
    if rc != RD_OK:
        return _bad(r, at, F_HEADERS, rc, 0)
    if rec.hcount < 0 or rec.hcount > (end - pos) // 2:
        return _bad(r, at, F_HEADERS, BAD_VALUE, rec.hcount)
    r.pos = pos
    return 0


cdef inline int _read_hdr(Reader* r, Rec* rec, Hdr* h) except -1:
    cdef const uint8_t* p = r.p
    cdef Py_ssize_t pos = r.pos
    cdef Py_ssize_t at = pos
    cdef Py_ssize_t end = rec.end
    cdef int rc = read_varint(p, &pos, end, &h.klen)
    if rc != RD_OK:
        return _bad(r, at, F_HKEY, rc, 0)
    if h.klen < 0 or h.klen > end - pos:
        return _bad(r, at, F_HKEY, BAD_VALUE, h.klen)
    h.key = p + pos
    pos += h.klen
    at = pos
    rc = read_varint(p, &pos, end, &h.vlen)
    if rc != RD_OK:
        return _bad(r, at, F_HVALUE, rc, 0)
    if h.vlen < -1 or h.vlen > end - pos:
        return _bad(r, at, F_HVALUE, BAD_VALUE, h.vlen)
    h.value = p + pos
    if h.vlen > 0:
        pos += h.vlen
    r.pos = pos
    return 0


cdef inline int _end_rec(Reader* r, Rec* rec) except -1:
    if r.pos != rec.end:
        _fail(r, r.pos, "record length disagrees with its fields")
    r.index += 1
    return 0


cdef int64_t _overflow(Reader* r, str what) except? -1:
    _fail(r, r.pos, f"{what} overflows int64")
    return -1


cdef inline int64_t _add(Reader* r, int64_t base, int64_t delta, str what) except? -1:
    if (delta > 0 and base > INT64_MAX - delta) or (delta < 0 and base < INT64_MIN - delta):
        return _overflow(r, what)
    return base + delta


cdef int _next_batch(_Input inp, Py_ssize_t pos, Batch* b) except -1:
    """0: clean stop (end or truncated tail), 1: v2 batch, 2: legacy (magic 0/1) entry."""
    cdef const uint8_t* p = inp.ptr + pos
    cdef Py_ssize_t rem = inp.size - pos
    cdef int32_t length
    cdef int magic
    if rem < 12:
        return 0
    length = <int32_t>read_be32(p + 8)
    if length < 14:  # the smallest legacy message
        raise KafkaCodecError(f"batch at byte {pos}: batch length {length} is below the minimum (14)")
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
        raise KafkaCodecError(f"batch at byte {pos}: unknown magic {<int8_t>magic}")
    if length < HEADER_SIZE - 12:
        raise KafkaCodecError(
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


cdef object _open_records(_Input inp, Batch* b, bint check_crc, Reader* r):
    """Check CRC, compression and count; point r at the records. Returns what r.p borrows."""
    cdef uint32_t computed
    cdef int codec = b.attributes & 7
    cdef object payload = None
    if check_crc:
        computed = _crc32c(inp.slice(b.pos + CRC_START, b.end))
        if computed != b.crc:
            raise KafkaCodecError(
                f"batch at byte {b.pos}: CRC mismatch (expected {b.crc:#010x}, computed {computed:#010x})"
            )
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


cdef int _close_records(Reader* r, Batch* b) except -1:
    if r.pos != r.end:
        _fail(r, r.pos, f"{r.end - r.pos} bytes left over after the batch's {b.count} records")
    return 0


cdef list _decode_rows(_Input inp, Batch* b, bint check_crc):
    cdef Reader r
    cdef Rec rec
    cdef Hdr h = Hdr(NULL, NULL, 0, 0)
    cdef KafkaRecord o
    cdef int32_t i, j
    cdef list headers
    cdef list out
    cdef object keep = _open_records(inp, b, check_crc, &r)  # validates count first
    cdef bint log_append = (b.attributes & 8) != 0
    cdef bint transactional = (b.attributes & 16) != 0
    cdef bint control = (b.attributes & 32) != 0
    out = PyList_New(b.count)  # filled in order; a NULL slot left by an error is safe to free
    for i in range(b.count):
        if r.pos >= r.end:
            _fail(&r, r.pos, f"the batch declares {b.count} records, only {i} are present")
        _read_rec(&r, &rec)
        o = KafkaRecord.__new__(KafkaRecord)
        o.offset = _add(&r, b.base_offset, rec.off_delta, "offset")
        if log_append:
            o._timestamp = b.max_ts
            o.timestamp_type = 1
        else:
            o._timestamp = _add(&r, b.base_ts, rec.ts_delta, "timestamp")
            o.timestamp_type = 0
        o._has_timestamp = True
        o._headers = _NO_HEADERS
        o.producer_id = b.producer_id
        o.producer_epoch = b.producer_epoch
        o.is_transactional = transactional
        o.is_control = control
        if rec.klen >= 0:
            o.key = PyBytes_FromStringAndSize(<const char*>rec.key, rec.klen)
        if rec.vlen >= 0:
            o.value = PyBytes_FromStringAndSize(<const char*>rec.value, rec.vlen)
        if rec.hcount > 0:
            headers = []
            for j in range(rec.hcount):
                _read_hdr(&r, &rec, &h)
                try:
                    hkey = PyUnicode_DecodeUTF8(<const char*>h.key, h.klen, NULL)
                except UnicodeDecodeError:
                    _fail(&r, r.pos, "header key is not valid UTF-8")
                headers.append((
                    hkey,
                    None if h.vlen < 0 else PyBytes_FromStringAndSize(<const char*>h.value, h.vlen),
                ))
            o._headers = headers
        _end_rec(&r, &rec)
        Py_INCREF(o)
        PyList_SET_ITEM(out, i, o)  # steals the reference
    _close_records(&r, b)
    return out


cdef list _legacy_records(_Input inp, Batch* b, bint check_crc):
    """Magic 0/1 entries go through the shared legacy.py (rare, old brokers and topics)."""
    from kafka_core.codec import legacy

    inp.slice(0, 0)
    rows, end = legacy.decode_legacy_entry(inp.mv, b.pos, check_crc=check_crc)
    if end != b.end:
        raise KafkaCodecError(f"legacy message at byte {b.pos}: inconsistent entry size")
    cdef list out = []
    cdef KafkaRecord o
    for offset, timestamp, timestamp_type, key, value in rows:
        o = KafkaRecord.__new__(KafkaRecord)
        if not (_I64_MIN <= offset <= _I64_MAX and _I64_MIN <= timestamp <= _I64_MAX):
            raise KafkaCodecError(f"legacy message at byte {b.pos}: offset {offset} overflows int64")
        o.offset = offset
        o._timestamp = timestamp
        o._has_timestamp = True
        o.timestamp_type = timestamp_type
        o.key = key
        o.value = value
        o._headers = _NO_HEADERS
        o.producer_id = -1
        o.producer_epoch = -1
        out.append(o)
    return out


def decode_record_batches(buf, *, check_crc=True):
    """Decode every complete batch in buf (a truncated trailing batch ends the walk)."""
    cdef _Input inp = _Input(buf)
    cdef list out = []
    cdef Batch b
    cdef Py_ssize_t pos = 0
    cdef int kind
    cdef bint crc = bool(check_crc)
    while True:
        kind = _next_batch(inp, pos, &b)
        if kind == 0:
            break
        if kind == 2:
            out.extend(_legacy_records(inp, &b, crc))
        else:
            rows = _decode_rows(inp, &b, crc)
            if out:
                out += rows
            else:
                out = rows
        pos = b.end
    return out


# ------------------------------------------------------------------------------------------
# Columnar encoding: pyarrow columns are read straight from their buffers
# ------------------------------------------------------------------------------------------
cdef object _pa = None
cdef object _import_from_c = None
cdef tuple _types = None  # int64, int8, binary, headers type


cdef object _pyarrow():
    global _pa, _import_from_c, _types
    if _pa is None:
        import pyarrow

        _import_from_c = pyarrow.Array._import_from_c
        _types = (pyarrow.int64(), pyarrow.int8(), pyarrow.binary(), headers_type())
        _pa = pyarrow
    return _pa


cdef bint _is_arrow(object obj):
    return type(obj).__module__.startswith("pyarrow")


cdef const char* _address(object buf, Py_ssize_t need, str what) except NULL:
    """Address of a pyarrow buffer that must hold at least `need` bytes."""
    if buf.size < need:
        raise KafkaCodecError(f"{what}: arrow buffer of {buf.size} bytes, {need} needed")
    if need == 0:
        return ""
    return <const char*><size_t>buf.address


@cython.final
cdef class _BinCol:
    """A binary-like pyarrow array: validity bitmap, offsets (32/64-bit) or fixed width, data."""

    cdef object arr
    cdef str what
    cdef const uint8_t* validity
    cdef const int32_t* off32
    cdef const int64_t* off64
    cdef const char* data
    cdef Py_ssize_t width
    cdef Py_ssize_t offset
    cdef Py_ssize_t length
    cdef Py_ssize_t data_size

    cdef int get(self, Py_ssize_t i, const char** ptr, Py_ssize_t* size) except -1:
        cdef Py_ssize_t j = self.offset + i
        cdef int64_t start, end
        if self.validity != NULL and not (self.validity[j >> 3] >> (j & 7)) & 1:
            ptr[0] = NULL
            size[0] = -1
            return 0
        if self.width >= 0:
            start = j * self.width
            end = start + self.width
        elif self.off32 != NULL:
            start = self.off32[j]
            end = self.off32[j + 1]
        else:
            start = self.off64[j]
            end = self.off64[j + 1]
        if start < 0 or end < start or end > self.data_size:
            raise KafkaCodecError(f"{self.what}: corrupt arrow offsets at row {i}")
        if end - start > INT32_MAX:
            raise KafkaCodecError(f"{self.what}: row {i} of {end - start} bytes is too large")
        ptr[0] = self.data + start
        size[0] = <Py_ssize_t>(end - start)
        return 0


cdef _BinCol _bin_col(object arr, str what):
    pa = _pyarrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not isinstance(arr, pa.Array):
        raise KafkaCodecError(f"{what}: expected a pyarrow Array, not {type(arr).__name__}")
    t = arr.type
    types = pa.types
    if types.is_string_view(t) or types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
        t = arr.type
    cdef _BinCol col = _BinCol.__new__(_BinCol)
    cdef Py_ssize_t n = len(arr)
    cdef Py_ssize_t end
    col.arr = arr
    col.what = what
    col.offset = arr.offset
    col.length = n
    col.width = -1
    end = col.offset + n
    bufs = arr.buffers()
    if types.is_binary(t) or types.is_string(t):
        col.off32 = <const int32_t*>_address(bufs[1], (end + 1) * 4 if n else 0, what)
    elif types.is_large_binary(t) or types.is_large_string(t):
        col.off64 = <const int64_t*>_address(bufs[1], (end + 1) * 8 if n else 0, what)
    elif types.is_fixed_size_binary(t):
        col.width = t.byte_width
    else:
        raise KafkaCodecError(f"{what}: expected a binary or string array, not {t}")
    data = bufs[len(bufs) - 1] if col.width >= 0 or len(bufs) > 2 else None
    if n == 0:
        return col
    if bufs[0] is not None and arr.null_count:
        col.validity = <const uint8_t*>_address(bufs[0], (end + 7) // 8, what)
    if data is None:
        col.data = ""
        col.data_size = 0
    else:
        col.data_size = data.size
        col.data = _address(data, 0, what) if data.size == 0 else <const char*><size_t>data.address
    return col


cdef object _seq_col(object col, str what):
    if isinstance(col, (str, bytes, bytearray, memoryview)):
        raise KafkaCodecError(f"{what}: expected a sequence of bytes-like objects, not {type(col).__name__}")
    try:
        return list(col)
    except TypeError:
        raise KafkaCodecError(f"{what}: expected a sequence, not {type(col).__name__}") from None


@cython.final
cdef class _TsCol:
    cdef object arr
    cdef const int64_t* values
    cdef const uint8_t* validity
    cdef Py_ssize_t offset


cdef _TsCol _ts_col(object arr):
    pa = _pyarrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.unit != "ms":
            raise KafkaCodecError(f"timestamps: expected milliseconds, got timestamp[{t.unit}]")
        arr = arr.view(pa.int64())
    elif not pa.types.is_integer(t):
        raise KafkaCodecError(f"timestamps: expected an int64 or timestamp[ms] array, not {t}")
    elif not pa.types.is_int64(t):
        try:
            arr = arr.cast(pa.int64())
        except (pa.ArrowInvalid, OverflowError) as exc:
            raise KafkaCodecError(f"timestamps: {exc}") from None
    cdef _TsCol col = _TsCol.__new__(_TsCol)
    cdef Py_ssize_t end = arr.offset + len(arr)
    col.arr = arr
    col.offset = arr.offset
    if len(arr):
        bufs = arr.buffers()
        col.values = <const int64_t*>_address(bufs[1], end * 8, "timestamps")
        if bufs[0] is not None and arr.null_count:
            col.validity = <const uint8_t*>_address(bufs[0], (end + 7) // 8, "timestamps")
    return col


def encode_record_batch_columns(keys, values, *, headers=None, timestamps=None, base_offset=0,
                                base_timestamp=None, compression="none", compression_level=None,
                                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                transactional=False, control=False, partition_leader_epoch=-1,
                                log_append_time=False):
    """Encode columns (sequences or pyarrow arrays) as one v2 batch, the same bytes as
    encode_record_batch with the equivalent records."""
    cdef _Options o = _options(base_offset, base_timestamp, compression, compression_level,
                               producer_id, producer_epoch, base_sequence, transactional,
                               control, partition_leader_epoch, log_append_time)
    cdef _BinCol kcol = None, vcol = None
    cdef _TsCol tcol = None
    cdef list klist = None, vlist = None, hlist = None, tlist = None
    cdef Py_ssize_t n, i, j
    cdef _Writer w
    cdef Slot* slot
    cdef bint has_ts
    cdef int64_t ts
    if values is None:
        raise KafkaCodecError("values may not be None (individual values may be null)")
    if _is_arrow(values):
        vcol = _bin_col(values, "values")
        n = vcol.length
    else:
        vlist = _seq_col(values, "values")
        n = len(vlist)
    if keys is not None:
        if _is_arrow(keys):
            kcol = _bin_col(keys, "keys")
            i = kcol.length
        else:
            klist = _seq_col(keys, "keys")
            i = len(klist)
        if i != n:
            raise KafkaCodecError(f"keys has {i} entries, values has {n}")
    if headers is not None:
        if _is_arrow(headers):
            if isinstance(headers, _pyarrow().ChunkedArray):
                headers = headers.combine_chunks()
            hlist = headers.to_pylist()
        else:
            try:
                hlist = list(headers)
            except TypeError:
                raise KafkaCodecError(f"headers: expected a sequence, not {type(headers).__name__}") from None
        if len(hlist) != n:
            raise KafkaCodecError(f"headers has {len(hlist)} entries, values has {n}")
    if timestamps is not None:
        if _is_arrow(timestamps):
            tcol = _ts_col(timestamps)
            i = len(tcol.arr)
        else:
            if isinstance(timestamps, (str, bytes, bytearray)):
                raise KafkaCodecError(f"timestamps: expected a sequence of ints, not {type(timestamps).__name__}")
            try:
                tlist = list(timestamps)
            except TypeError:
                raise KafkaCodecError(f"timestamps: expected a sequence, not {type(timestamps).__name__}") from None
            i = len(tlist)
        if i != n:
            raise KafkaCodecError(f"timestamps has {i} entries, values has {n}")
    w = _Writer(n, o.base_ts)
    for i in range(n):
        slot = w.next_slot()
        if kcol is not None:
            kcol.get(i, &slot.kptr, &slot.klen)
        elif klist is not None:
            w.pin(klist[i], &slot.kptr, &slot.klen, i, "key")
        else:
            slot.kptr = NULL
            slot.klen = -1
        if vcol is not None:
            vcol.get(i, &slot.vptr, &slot.vlen)
        else:
            w.pin(vlist[i], &slot.vptr, &slot.vlen, i, "value")
        has_ts = False
        ts = 0
        if tcol is not None:
            j = tcol.offset + i
            if tcol.validity == NULL or (tcol.validity[j >> 3] >> (j & 7)) & 1:
                has_ts = True
                ts = tcol.values[j]
        elif tlist is not None and tlist[i] is not None:
            has_ts = True
            ts = _i64(tlist[i], f"record {i}: timestamp")
        w.add(slot, has_ts, ts, hlist[i] if hlist is not None else None, i)
    return _finish(w, o)


# ------------------------------------------------------------------------------------------
# Columnar decoding: C buffers handed to pyarrow through the Arrow C data interface, so no
# Python object is made per record and the arrays are imported with one call each.
# ------------------------------------------------------------------------------------------
cdef struct ArrowArray:  # the Arrow C data interface's struct ArrowArray, field for field
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void** buffers
    ArrowArray** children
    ArrowArray* dictionary
    void (*release)(ArrowArray*) noexcept nogil
    void* private_data


cdef void _release(ArrowArray* a) noexcept nogil:
    """Frees what an exported array owns: its malloc'd buffers and its children."""
    cdef int64_t i
    cdef ArrowArray* child
    for i in range(a.n_buffers):
        free(<void*>a.buffers[i])
    free(a.buffers)
    for i in range(a.n_children):
        child = a.children[i]
        if child != NULL:
            if child.release != NULL:
                child.release(child)
            free(child)
    free(a.children)
    a.release = NULL


cdef struct CBuf:
    char* ptr
    Py_ssize_t length
    Py_ssize_t cap


cdef int _grow(CBuf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t size = 2 * b.cap
    cdef char* grown
    if size < b.length + extra:
        size = b.length + extra
    if size < 64:
        size = 64
    grown = <char*>realloc(b.ptr, size)
    if grown == NULL:
        raise MemoryError()
    b.ptr = grown
    b.cap = size
    return 0


cdef inline char* _reserve(CBuf* b, Py_ssize_t extra) except NULL:
    if b.ptr == NULL or extra > b.cap - b.length:
        _grow(b, extra)
    return b.ptr + b.length


cdef inline int _put_i32(CBuf* b, Py_ssize_t value) except -1:
    if value > INT32_MAX:
        raise KafkaCodecError("column data larger than 2 GiB: decode fewer batches at once")
    (<int32_t*>_reserve(b, 4))[0] = <int32_t>value
    b.length += 4
    return 0


cdef void* _take(CBuf* b) noexcept:
    """Hand the buffer's memory over (never NULL: Arrow wants a pointer even when empty)."""
    cdef void* ptr = b.ptr
    if ptr == NULL:
        ptr = malloc(8)
    b.ptr = NULL
    b.length = b.cap = 0
    return ptr


cdef void* _bitmap(CBuf* b, Py_ssize_t n) noexcept:
    """Pack one byte per row (0/1) into an Arrow validity bitmap (NULL when out of memory)."""
    cdef uint8_t* bits = <uint8_t*>calloc((n + 7) // 8 + 1, 1)
    cdef Py_ssize_t i
    if bits != NULL:
        for i in range(n):
            if b.ptr[i]:
                bits[i >> 3] |= <uint8_t>(1 << (i & 7))
    return bits


cdef ArrowArray* _node(int64_t length, int64_t null_count, int n_buffers, int n_children) except NULL:
    cdef ArrowArray* a = <ArrowArray*>calloc(1, sizeof(ArrowArray))
    if a == NULL:
        raise MemoryError()
    a.length = length
    a.null_count = null_count
    a.n_buffers = n_buffers
    a.n_children = n_children
    a.release = _release
    a.buffers = <const void**>calloc(n_buffers, sizeof(void*))
    a.children = <ArrowArray**>calloc(n_children + 1, sizeof(ArrowArray*))
    if a.buffers == NULL or a.children == NULL:
        _release(a)
        free(a)
        raise MemoryError()
    return a


cdef object _import(ArrowArray* a, object arrow_type):
    """Import one exported array into pyarrow; the struct shell is ours to free either way."""
    try:
        return _import_from_c(<size_t>a, arrow_type)
    finally:
        if a.release != NULL:  # the import failed before taking ownership
            a.release(a)
        free(a)


cdef object _batch_info(tuple fields):
    """BatchInfo without the Python-level namedtuple __new__."""
    return tuple.__new__(BatchInfo, fields)


cdef enum:  # the column buffers of _Columns
    B_OFFSETS, B_TIMESTAMPS, B_TYPES, B_KOFFS, B_KDATA, B_KVALID, B_VOFFS, B_VDATA, B_VVALID,
    B_HOFFS, B_HKOFFS, B_HKDATA, B_HVOFFS, B_HVDATA, B_HVVALID, N_BUFS


@cython.final
cdef class _Columns:
    """Column buffers being filled: one row per data record, headers as list<struct>."""

    cdef CBuf bufs[N_BUFS]
    cdef Py_ssize_t n, nh, knulls, vnulls, hvnulls
    cdef list batches

    def __cinit__(self):
        cdef int i
        for i in range(N_BUFS):
            self.bufs[i].ptr = NULL
            self.bufs[i].length = self.bufs[i].cap = 0
        for i in (B_KOFFS, B_VOFFS, B_HOFFS, B_HKOFFS, B_HVOFFS):
            _put_i32(&self.bufs[i], 0)
        self.batches = []

    def __dealloc__(self):
        cdef int i
        for i in range(N_BUFS):
            free(self.bufs[i].ptr)

    cdef int headers(self, Reader* r, Rec* rec) except -1:
        cdef Hdr h = Hdr(NULL, NULL, 0, 0)
        cdef int32_t j
        cdef CBuf* hk = &self.bufs[B_HKDATA]
        cdef CBuf* hv = &self.bufs[B_HVDATA]
        cdef CBuf* valid = &self.bufs[B_HVVALID]
        cdef Py_ssize_t room = rec.end - r.pos  # bounds the header bytes of this record
        _reserve(hk, room)
        _reserve(hv, room)
        _reserve(valid, rec.hcount)
        for j in range(rec.hcount):
            _read_hdr(r, rec, &h)
            if not valid_utf8(h.key, h.klen):
                _fail(r, r.pos, "header key is not valid UTF-8")
            memcpy(hk.ptr + hk.length, h.key, h.klen)
            hk.length += h.klen
            _put_i32(&self.bufs[B_HKOFFS], hk.length)
            if h.vlen >= 0:
                memcpy(hv.ptr + hv.length, h.value, h.vlen)
                hv.length += h.vlen
                valid.ptr[valid.length] = 1
            else:
                valid.ptr[valid.length] = 0
                self.hvnulls += 1
            valid.length += 1
            _put_i32(&self.bufs[B_HVOFFS], hv.length)
            self.nh += 1
        return 0

    cdef int control(self, Reader* r, Batch* b) except -1:
        """A control batch: validated, no rows; its marker type goes to BatchInfo."""
        cdef Rec rec
        cdef Hdr h = Hdr(NULL, NULL, 0, 0)
        cdef int32_t j, k
        cdef int control_type = -1
        for j in range(b.count):
            if r.pos >= r.end:
                _fail(r, r.pos, f"the batch declares {b.count} records, only {j} are present")
            _read_rec(r, &rec)
            for k in range(rec.hcount):
                _read_hdr(r, &rec, &h)
                if not valid_utf8(h.key, h.klen):
                    _fail(r, r.pos, "header key is not valid UTF-8")
            if j == 0:
                if rec.klen < 4:
                    _fail(r, r.pos, f"control record key is {'null' if rec.klen < 0 else f'{rec.klen} bytes'}, needs 4")
                control_type = <int16_t>read_be16(rec.key + 2)
            _end_rec(r, &rec)
        _close_records(r, b)
        self.batches.append(_batch_info((
            b.base_offset, <object>b.base_offset + b.last_delta, b.producer_id, b.producer_epoch,
            b.base_sequence, (b.attributes & 16) != 0, True, control_type, 0,
        )))
        return 0

    cdef int v2(self, _Input inp, Batch* b, bint check_crc) except -1:
        cdef Reader r
        cdef Rec rec
        cdef int32_t j
        cdef object keep = _open_records(inp, b, check_crc, &r)
        cdef bint log_append = (b.attributes & 8) != 0
        cdef Py_ssize_t count = b.count
        cdef CBuf* kd = &self.bufs[B_KDATA]
        cdef CBuf* vd = &self.bufs[B_VDATA]
        if (b.attributes & 32) != 0:
            return self.control(&r, b)
        # Reserve once for the whole batch: keys and values cannot outgrow the records region.
        cdef int64_t* offs = <int64_t*>_reserve(&self.bufs[B_OFFSETS], count * 8)
        cdef int64_t* tss = <int64_t*>_reserve(&self.bufs[B_TIMESTAMPS], count * 8)
        cdef int8_t* tys = <int8_t*>_reserve(&self.bufs[B_TYPES], count)
        cdef int32_t* kos = <int32_t*>_reserve(&self.bufs[B_KOFFS], count * 4)
        cdef int32_t* vos = <int32_t*>_reserve(&self.bufs[B_VOFFS], count * 4)
        cdef int32_t* hos = <int32_t*>_reserve(&self.bufs[B_HOFFS], count * 4)
        cdef char* kval = _reserve(&self.bufs[B_KVALID], count)
        cdef char* vval = _reserve(&self.bufs[B_VVALID], count)
        _reserve(kd, r.end)
        _reserve(vd, r.end)
        cdef char* kp = kd.ptr
        cdef char* vp = vd.ptr
        cdef Py_ssize_t kl = kd.length
        cdef Py_ssize_t vl = vd.length
        cdef Py_ssize_t knulls = 0, vnulls = 0
        for j in range(count):
            if r.pos >= r.end:
                _fail(&r, r.pos, f"the batch declares {count} records, only {j} are present")
            _read_rec(&r, &rec)
            offs[j] = _add(&r, b.base_offset, rec.off_delta, "offset")
            if log_append:
                tss[j] = b.max_ts
                tys[j] = 1
            else:
                tss[j] = _add(&r, b.base_ts, rec.ts_delta, "timestamp")
                tys[j] = 0
            if rec.klen >= 0:
                memcpy(kp + kl, rec.key, rec.klen)
                kl += rec.klen
                kval[j] = 1
            else:
                kval[j] = 0
                knulls += 1
            if rec.vlen >= 0:
                memcpy(vp + vl, rec.value, rec.vlen)
                vl += rec.vlen
                vval[j] = 1
            else:
                vval[j] = 0
                vnulls += 1
            if kl > INT32_MAX or vl > INT32_MAX:
                raise KafkaCodecError("column data larger than 2 GiB: decode fewer batches at once")
            kos[j] = <int32_t>kl
            vos[j] = <int32_t>vl
            if rec.hcount > 0:
                if self.nh + rec.hcount > INT32_MAX:
                    raise KafkaCodecError("more than 2**31 headers: decode fewer batches at once")
                self.headers(&r, &rec)
            hos[j] = <int32_t>self.nh
            _end_rec(&r, &rec)
        _close_records(&r, b)
        kd.length = kl
        vd.length = vl
        self.knulls += knulls
        self.vnulls += vnulls
        self.bufs[B_OFFSETS].length += 8 * count
        self.bufs[B_TIMESTAMPS].length += 8 * count
        self.bufs[B_TYPES].length += count
        self.bufs[B_KOFFS].length += 4 * count
        self.bufs[B_VOFFS].length += 4 * count
        self.bufs[B_HOFFS].length += 4 * count
        self.bufs[B_KVALID].length += count
        self.bufs[B_VVALID].length += count
        self.n += count
        self.batches.append(_batch_info((
            b.base_offset, <object>b.base_offset + b.last_delta, b.producer_id, b.producer_epoch,
            b.base_sequence, (b.attributes & 16) != 0, False, -1, count,
        )))
        return 0

    cdef int push(self, object value, int data, int offs, int valid) except -1:
        cdef Py_ssize_t size
        cdef CBuf* d = &self.bufs[data]
        if value is None:
            _reserve(&self.bufs[valid], 1)[0] = 0
            if data == B_KDATA:
                self.knulls += 1
            else:
                self.vnulls += 1
        else:
            size = PyBytes_GET_SIZE(value)
            memcpy(_reserve(d, size), PyBytes_AS_STRING(value), size)
            d.length += size
            _reserve(&self.bufs[valid], 1)[0] = 1
        self.bufs[valid].length += 1
        return _put_i32(&self.bufs[offs], d.length)

    cdef int legacy(self, _Input inp, Batch* b, bint check_crc) except -1:
        cdef list rows = _legacy_records(inp, b, check_crc)
        cdef KafkaRecord o
        for o in rows:
            (<int64_t*>_reserve(&self.bufs[B_OFFSETS], 8))[0] = o.offset
            self.bufs[B_OFFSETS].length += 8
            (<int64_t*>_reserve(&self.bufs[B_TIMESTAMPS], 8))[0] = o._timestamp
            self.bufs[B_TIMESTAMPS].length += 8
            _reserve(&self.bufs[B_TYPES], 1)[0] = <char>o.timestamp_type
            self.bufs[B_TYPES].length += 1
            self.push(o.key, B_KDATA, B_KOFFS, B_KVALID)
            self.push(o.value, B_VDATA, B_VOFFS, B_VVALID)
            _put_i32(&self.bufs[B_HOFFS], self.nh)
            self.n += 1
        first = rows[0].offset if rows else b.base_offset
        self.batches.append(_batch_info((first, b.base_offset, -1, -1, -1, False, False, -1, len(rows))))
        return 0

    cdef ArrowArray* binary(self, Py_ssize_t n, Py_ssize_t nulls, int offs, int data, int valid) except NULL:
        cdef ArrowArray* a = _node(n, nulls, 3, 0)
        if nulls:
            a.buffers[0] = _bitmap(&self.bufs[valid], n)
            if a.buffers[0] == NULL:
                _release(a)
                free(a)
                raise MemoryError()
        a.buffers[1] = _take(&self.bufs[offs])
        a.buffers[2] = _take(&self.bufs[data])
        return a

    cdef ArrowArray* fixed(self, Py_ssize_t n, int buf) except NULL:
        cdef ArrowArray* a = _node(n, 0, 2, 0)
        a.buffers[1] = _take(&self.bufs[buf])
        return a

    cdef object finish(self):
        _pyarrow()
        cdef Py_ssize_t n = self.n
        cdef ArrowArray* headers = _node(n, 0, 2, 1)
        cdef ArrowArray* entries
        try:
            headers.buffers[1] = _take(&self.bufs[B_HOFFS])
            entries = headers.children[0] = _node(self.nh, 0, 1, 2)
            entries.children[0] = self.binary(self.nh, 0, B_HKOFFS, B_HKDATA, B_HVVALID)
            entries.children[1] = self.binary(self.nh, self.hvnulls, B_HVOFFS, B_HVDATA, B_HVVALID)
        except BaseException:
            _release(headers)
            free(headers)
            raise
        int64, int8, binary, htype = _types
        headers_arr = _import(headers, htype)
        return RecordColumns(
            _import(self.fixed(n, B_OFFSETS), int64),
            _import(self.fixed(n, B_TIMESTAMPS), int64),
            _import(self.fixed(n, B_TYPES), int8),
            _import(self.binary(n, self.knulls, B_KOFFS, B_KDATA, B_KVALID), binary),
            _import(self.binary(n, self.vnulls, B_VOFFS, B_VDATA, B_VVALID), binary),
            headers_arr,
            self.batches,
        )


def decode_record_batches_columns(buf, *, check_crc=True):
    """Decode every complete batch in buf into pyarrow columns (control records left out)."""
    cdef _Input inp = _Input(buf)
    cdef _Columns cols = _Columns()
    cdef Batch b
    cdef Py_ssize_t pos = 0
    cdef int kind
    cdef bint crc = bool(check_crc)
    while True:
        kind = _next_batch(inp, pos, &b)
        if kind == 0:
            break
        if kind == 2:
            cols.legacy(inp, &b, crc)
        else:
            cols.v2(inp, &b, crc)
        pos = b.end
    return cols.finish()
