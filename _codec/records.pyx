"""Records as objects: KafkaRecord, and RecordBatch v2 encode/decode of record lists.

Cython twin of ``kafka_core.codec._python.records`` (docs/codec.md). Encoding sizes the batch
first and writes it once through a char* (CRC32C by the hardware ``crc32c`` package, once per
batch); decoding walks a const pointer with the checked readers of reader.pxd. The columnar
paths live in columnar.pyx; both open batches through batch.pyx and include writer.pxi.
"""

cimport cython
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kafka_core.codec._cython.batch cimport legacy_rows, open_input, open_records
from kafka_core.codec._cython.primitives cimport Input, size_varint, size_varlong, write_be16, write_be32, write_be64, write_varint, write_varlong
from reader cimport (
    ATTR_CONTROL, ATTR_LOG_APPEND, ATTR_TRANSACTIONAL, CRC_START, HEADER_SIZE, MIN_RECORD, Batch,
    Hdr, Reader, Rec, add64, check_more, close_records, end_rec, next_batch, read_error, read_fail,
    read_hdr, read_rec,
)

include "writer.pxi"

__all__ = ["KafkaRecord", "KafkaShareRecord", "decode_record_batches", "decode_share_records", "encode_record_batch"]

cdef object _NO_HEADERS = object()
cdef tuple _NO_ARGS = ()

cdef extern from *:
    """
    /* An instance of the extension type or Python subclass t, made by its tp_new directly
       (t.__new__(t) goes through a method lookup and tp_new_wrapper: half the cost of a
       decoded share record). */
    static CYTHON_INLINE PyObject* kc_new_of(PyObject* t, PyObject* args) {
        return ((PyTypeObject*)t)->tp_new((PyTypeObject*)t, args, NULL);
    }
    """
    object kc_new_of(object t, object args)


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


@cython.no_gc
cdef class KafkaShareRecord(KafkaRecord):
    """A record of a share group: a KafkaRecord with the topic, partition and delivery count
    (how many times the broker has delivered it), built by decode_share_records in one object
    (kafka_core.share.ShareRecord subclasses it). Compared and hashed by identity: two
    deliveries of one record are two records to acknowledge."""

    cdef readonly object topic
    cdef readonly int32_t partition
    cdef readonly int32_t delivery_count

    def __init__(self, topic, partition, offset, key=None, value=None, headers=None, timestamp=-1,
                 timestamp_type=0, delivery_count=1):
        KafkaRecord.__init__(self, key, value, list(headers or ()), timestamp, offset, timestamp_type)
        self.topic = topic
        self.partition = <int32_t>_ranged(partition, -2147483648, 2147483647, "partition")
        self.delivery_count = <int32_t>_ranged(delivery_count, -2147483648, 2147483647, "delivery_count")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return object.__hash__(self)

    def __reduce__(self):
        return (
            type(self),
            (self.topic, self.partition, self.offset, self.key, self.value, self.headers,
             self.timestamp, self.timestamp_type, self.delivery_count),
        )

    def _copy_as(self, type cls):
        """A copy of this record as ``cls`` (a subclass, e.g. one whose key and value are
        deserialized: the caller sets them)."""
        if not issubclass(cls, KafkaShareRecord):
            raise TypeError(f"cls must be KafkaShareRecord or a subclass, not {cls!r}")
        cdef KafkaShareRecord o = <KafkaShareRecord>kc_new_of(cls, _NO_ARGS)
        _copy_share(self, o)
        return o


cdef inline void _copy_share(KafkaShareRecord a, KafkaShareRecord o):
    _copy_record(a, o)
    o.topic = a.topic
    o.partition = a.partition
    o.delivery_count = a.delivery_count


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

cdef class _Share:
    """Where decode_share_records puts records: its type, topic and partition, and the acquired
    ranges (first, last, delivery count), in offset order, walked once alongside the records."""
    cdef type cls
    cdef object topic
    cdef int32_t partition
    cdef list ranges
    cdef Py_ssize_t at  # the range of the last record taken
    cdef int64_t first, last
    cdef int32_t count

    cdef bint take(self, int64_t offset) except -1:
        """Whether ``offset`` was acquired; then ``count`` is its delivery count."""
        cdef tuple rng
        cdef Py_ssize_t i
        if self.first <= offset <= self.last:
            return True
        # the first range that ends at or after it: from the current one on (records come in
        # offset order), or from the start for one before the current range
        i = 0 if offset < self.first else self.at + 1
        while i < len(self.ranges):
            rng = self.ranges[i]
            if rng[1] >= offset:
                if rng[0] > offset:
                    return False
                self.at = i
                self.first, self.last, self.count = rng[0], rng[1], rng[2]
                return True
            i += 1
        return False


cdef list _decode_rows(Input inp, Batch* b, bint check_crc, _Share share=None):
    cdef Reader r
    cdef Rec rec = Rec(0, 0, 0, 0, 0, 0, NULL, NULL)
    cdef Hdr h = Hdr(NULL, NULL, 0, 0)
    cdef KafkaRecord o
    cdef int32_t i, j
    cdef list headers
    cdef list out
    cdef KafkaShareRecord so
    cdef int64_t offset
    cdef Py_ssize_t n = 0
    cdef object keep = open_records(inp, b, check_crc, &r)  # validates count first
    cdef bint log_append = (b.attributes & ATTR_LOG_APPEND) != 0
    cdef bint transactional = (b.attributes & ATTR_TRANSACTIONAL) != 0
    cdef bint control = (b.attributes & ATTR_CONTROL) != 0
    out = PyList_New(b.count)  # filled in order; a NULL slot left by an error is safe to free
    for i in range(b.count):
        check_more(&r, b.count, i)
        if read_rec(&r, &rec):
            read_error(&r)
        if control and rec.klen < 4:  # a marker's key holds version and type (as the columns)
            read_fail(&r, r.pos, f"control record key is {'null' if rec.klen < 0 else f'{rec.klen} bytes'}, needs 4")
        offset = add64(&r, b.base_offset, rec.off_delta, "offset")
        if share is None:
            o = KafkaRecord.__new__(KafkaRecord)
        else:
            if not share.take(offset):  # not acquired by this member: skipped
                for j in range(rec.hcount):
                    if read_hdr(&r, &rec, &h):
                        read_error(&r)
                end_rec(&r, &rec)
                continue
            so = <KafkaShareRecord>kc_new_of(share.cls, _NO_ARGS)
            so.topic = share.topic
            so.partition = share.partition
            so.delivery_count = share.count
            o = so
        o.offset = offset
        if log_append:
            o._timestamp = b.max_ts
            o.timestamp_type = 1
        else:
            o._timestamp = add64(&r, b.base_ts, rec.ts_delta, "timestamp")
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
                if read_hdr(&r, &rec, &h):
                    read_error(&r)
                try:
                    hkey = PyUnicode_DecodeUTF8(<const char*>h.key, h.klen, NULL)
                except UnicodeDecodeError:
                    read_fail(&r, r.pos, "header key is not valid UTF-8")
                headers.append((
                    hkey,
                    None if h.vlen < 0 else PyBytes_FromStringAndSize(<const char*>h.value, h.vlen),
                ))
            o._headers = headers
        end_rec(&r, &rec)
        Py_INCREF(o)
        PyList_SET_ITEM(out, n, o)  # steals the reference
        n += 1
    close_records(&r, b)
    if n < b.count:
        del out[n:]  # the slots past n are NULL: never read, and freed as such
    return out


cdef list _legacy_records(Input inp, Batch* b, bint check_crc):
    cdef list out = []
    cdef KafkaRecord o
    for offset, timestamp, timestamp_type, key, value in legacy_rows(inp, b, check_crc):
        o = KafkaRecord.__new__(KafkaRecord)
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


def decode_share_records(buf, topic, partition, acquired, *, record_type=KafkaShareRecord, check_crc=True):
    """Decode the records of ``buf`` whose offsets a share group acquired: ``acquired`` is
    (first, last, delivery_count) ranges in offset order; each record becomes one
    ``record_type`` (KafkaShareRecord or a subclass of it) with topic, partition and its
    delivery count. Records outside the ranges are left out."""
    cdef Input inp = open_input(buf)
    cdef list out = []
    cdef Batch b
    cdef Py_ssize_t pos = 0
    cdef int kind
    cdef bint crc = bool(check_crc)
    cdef _Share share = _Share()
    cdef KafkaShareRecord so
    if not (isinstance(record_type, type) and issubclass(record_type, KafkaShareRecord)):
        raise TypeError(f"record_type must be KafkaShareRecord or a subclass, not {record_type!r}")
    share.cls = record_type
    share.topic = topic
    share.partition = <int32_t>_ranged(partition, -2147483648, 2147483647, "partition")
    share.ranges = [(int(a), int(z), int(c)) for a, z, c in acquired]
    share.at = -1
    share.first, share.last, share.count = 1, 0, 0
    while True:
        kind = next_batch(inp.ptr, inp.size, pos, &b)
        if kind == 0:
            break
        if kind == 2:
            for rec in _legacy_records(inp, &b, crc):
                if share.take((<KafkaRecord>rec).offset):
                    so = <KafkaShareRecord>kc_new_of(share.cls, _NO_ARGS)
                    _copy_record(<KafkaRecord>rec, so)
                    so.topic = share.topic
                    so.partition = share.partition
                    so.delivery_count = share.count
                    out.append(so)
        else:
            rows = _decode_rows(inp, &b, crc, share)
            if out:
                out += rows
            else:
                out = rows
        pos = b.end
    return out


cdef inline void _copy_record(KafkaRecord a, KafkaRecord o):
    o.offset = a.offset
    o._timestamp = a._timestamp
    o._has_timestamp = a._has_timestamp
    o.timestamp_type = a.timestamp_type
    o.key = a.key
    o.value = a.value
    o._headers = a._headers
    o.producer_id = a.producer_id
    o.producer_epoch = a.producer_epoch
    o.is_transactional = a.is_transactional
    o.is_control = a.is_control


def decode_record_batches(buf, *, check_crc=True):
    """Decode every complete batch in buf (a truncated trailing batch ends the walk)."""
    cdef Input inp = open_input(buf)
    cdef list out = []
    cdef Batch b
    cdef Py_ssize_t pos = 0
    cdef int kind
    cdef bint crc = bool(check_crc)
    while True:
        kind = next_batch(inp.ptr, inp.size, pos, &b)
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
