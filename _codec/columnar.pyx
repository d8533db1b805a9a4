"""Columns: pyarrow arrays in, pyarrow arrays out, no Python object per record.

Cython twin of ``kafka_core.codec._python.columnar`` (docs/codec.md). Encoding reads pyarrow
buffers directly (or sequences; arrow_in.pxi) and goes through the shared record writer
(writer.pxi); decoding fills C buffers in one pass (_Columns, here) and hands them to pyarrow as
one struct array (arrow_out.pxi, the Arrow C data interface), so the whole result is imported with
a single call. With ``zero_copy=True`` keys and values become ``binary_view`` arrays that point
into the input (or a batch's decompressed payload), which the arrays keep alive.
"""

cimport cython
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from arrow cimport (
    kc_buf_free,
    ArrowArray, CBuf, bitmap, borrow, free_node, new_node, put_i32, put_ptr, put_view, reserve, take,
)
from kafka_core.codec._cython.batch cimport check_crc as _check_crc, legacy_rows, open_input, open_records
from kafka_core.codec._cython.primitives cimport (
    Input,
    read_be32, size_varint, size_varlong, valid_utf8, write_be16, write_be32, write_be64, write_varint,
    write_varlong,
)
from reader cimport (
    ATTR_CONTROL, ATTR_LOG_APPEND, ATTR_TRANSACTIONAL, CRC_START, HEADER_SIZE, MIN_RECORD, Batch,
    Hdr, Reader, Rec, add64, check_more, close_records, end_rec, next_batch, read_be16, read_error,
    read_fail, read_hdr, read_rec,
)

cdef extern from "fastscan.h":
    ctypedef struct kc_scan:
        const uint8_t* p
        Py_ssize_t pos, end
        int64_t base_offset, base_ts, max_ts
        int log_append
        int64_t* offs
        int64_t* tss
        int8_t* tys
        char* kval
        char* vval
        int32_t* kos
        int32_t* vos
        int32_t* hos
        int32_t nh
        char* kp
        char* vp
        Py_ssize_t kl, vl, knulls, vnulls
    Py_ssize_t kc_scan_records(kc_scan* s, Py_ssize_t j, Py_ssize_t count) noexcept nogil

cdef extern from "overlap.h":
    struct _kc_helper_t:
        int enabled
        int wait_claim
        Py_ssize_t min_region
        long long jobs
    _kc_helper_t kc_helper
    int kc_overlap_begin(kc_scan* s, Py_ssize_t j, Py_ssize_t count) noexcept nogil
    Py_ssize_t kc_overlap_end(kc_scan* s, Py_ssize_t j, Py_ssize_t count) noexcept nogil

include "writer.pxi"

from kafka_core._env import env_flag
from kafka_core.codec.columns import BatchInfo, RecordColumns, arrow_schema

__all__ = ["decode_record_batches_columns", "encode_record_batch_columns", "set_decode_helper"]

kc_helper.enabled = env_flag("KAFKA_CORE_DECODE_HELPER")


def set_decode_helper(enabled):
    """Let a helper thread scan the records of a batch of 256 KiB or more while the CRC is
    checked (off unless KAFKA_CORE_DECODE_HELPER=1); returns the previous setting. For a process
    with a core to spare: the decode is faster, its CPU higher (docs/codec.md)."""
    previous = kc_helper.enabled != 0
    kc_helper.enabled = 1 if enabled else 0
    return previous


def _decode_helper_jobs():
    """Tests: how many scans the helper thread has run in this process."""
    return kc_helper.jobs


def _decode_helper_testing(bint wait_claim, Py_ssize_t min_region):
    """Tests: make a decode wait for the helper to take its job instead of taking it back, and
    hand over smaller batches, so that the helper's scan is what gets checked. Returns the
    previous (wait_claim, min_region)."""
    previous = (kc_helper.wait_claim != 0, kc_helper.min_region)
    kc_helper.wait_claim = wait_claim
    kc_helper.min_region = min_region
    return previous

cdef object _pa = None
cdef object _import_ptr = None  # pyarrow.RecordBatch._import_from_c(address, schema), if present
cdef object _import_capsule = None  # pyarrow.RecordBatch._import_from_c_capsule (PyCapsule protocol)
cdef tuple _schemas = None  # arrow_schema(): binary keys/values, binary_view keys/values
cdef tuple _schemas_nh = None  # the same without the headers column (no record has headers)
cdef object _new_columns = RecordColumns.__new__  # filled as columns.py describes


cdef object _pyarrow():
    """pyarrow, imported on first use (an optional dependency); what we call is looked up once."""
    global _pa, _import_ptr, _import_capsule, _schemas, _schemas_nh
    if _pa is None:
        import pyarrow

        _schemas = (arrow_schema(False), arrow_schema(True))
        _schemas_nh = (arrow_schema(False, headers=False), arrow_schema(True, headers=False))
        # The address import takes the schema as a pyarrow object: no schema export and parse per
        # call, a large part of the fixed cost of a small decode (bench/RESULTS.md, "Codec design
        # measurements"). It is not public API, so the public capsule protocol stays the fallback.
        _import_ptr = getattr(pyarrow.RecordBatch, "_import_from_c", None)
        _import_capsule = pyarrow.RecordBatch._import_from_c_capsule
        _pa = pyarrow
    return _pa


include "arrow_in.pxi"


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
    cdef _HdrCol hcol = None
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
            hcol = _hdr_col(headers)
            if hcol is None:
                hlist = headers.to_pylist()
        else:
            try:
                hlist = list(headers)
            except TypeError:
                raise KafkaCodecError(f"headers: expected a sequence, not {type(headers).__name__}") from None
        i = hcol.length if hcol is not None else len(hlist)
        if i != n:
            raise KafkaCodecError(f"headers has {i} entries, values has {n}")
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
        if hcol is not None:
            w.add_sized(slot, has_ts, ts, hcol.add(w, slot, i), i)
        else:
            w.add(slot, has_ts, ts, hlist[i] if hlist is not None else None, i)
    return _finish(w, o)




# ------------------------------------------------------------------------------------------
# Decoding: one pass into C buffers, one import of a struct array (offset, timestamp,
# timestamp_type, key, value, headers) whose children become the RecordColumns arrays.
# ------------------------------------------------------------------------------------------
cdef object _batch_info(tuple fields):
    """BatchInfo without the Python-level namedtuple __new__."""
    return tuple.__new__(BatchInfo, fields)


cdef Py_ssize_t _scan_checking_crc(kc_scan* s, Input inp, Batch* b, Py_ssize_t count) except -1:
    """A batch's first fast-path scan, with its CRC checked meanwhile by this thread if the
    helper thread takes the scan (overlap.h), else before it; a bad CRC fails either way."""
    cdef Py_ssize_t j
    if not kc_overlap_begin(s, 0, count):
        _check_crc(inp, b)
        return kc_scan_records(s, 0, count)
    try:
        _check_crc(inp, b)
    finally:
        j = kc_overlap_end(s, 0, count)  # never left running: it writes into our buffers
    return j


cdef enum:  # the column buffers of _Columns
    B_OFFSETS, B_TIMESTAMPS, B_TYPES, B_KOFFS, B_KDATA, B_KVALID, B_VOFFS, B_VDATA, B_VVALID,
    B_HOFFS, B_HKOFFS, B_HKDATA, B_HVOFFS, B_HVDATA, B_HVVALID, B_VARS, N_BUFS


@cython.final
cdef class _Columns:
    """Column buffers being filled: one row per data record, headers as list<struct>.

    Copying: keys and values as binary (offsets + data). Zero-copy: B_KDATA/B_VDATA hold
    16-byte binary_view entries and B_VARS the (pointer, size) of every referenced region,
    whose owners are held by `keep` (the pinned input, decompressed payloads, legacy bytes)."""

    cdef CBuf bufs[N_BUFS]
    cdef Py_ssize_t n, nh, knulls, vnulls, hvnulls, nvars
    cdef bint zero_copy
    cdef list batches
    cdef list keep

    def __cinit__(self, bint zero_copy):
        cdef int i
        for i in range(N_BUFS):
            self.bufs[i].ptr = NULL
            self.bufs[i].length = self.bufs[i].cap = 0
        self.zero_copy = zero_copy
        self.batches = []
        self.keep = []

    def __dealloc__(self):
        cdef int i
        for i in range(N_BUFS):
            kc_buf_free(self.bufs[i].ptr)

    cdef int presize(self, const uint8_t* data, Py_ssize_t size) except -1:
        """Reserve the columns once for every uncompressed v2 batch of the input, then start
        the offsets buffers (called once, before the first batch).

        Growing them batch by batch doubled them through fresh memory, which is page-faulted in
        again on every decode; one reservation of the final size can be served by the buffer
        pool. Only headers are read, and a count is believed only if it fits the batch's bytes."""
        cdef Py_ssize_t pos = 0, rows = 0, region = 0, length, records
        cdef int32_t count
        cdef int i
        while size - pos >= HEADER_SIZE:
            length = <int32_t>read_be32(data + pos + 8)
            if length < HEADER_SIZE - 12 or length > size - pos - 12 or data[pos + 16] != 2:
                break  # truncated, malformed or legacy: the decode loop deals with it
            count = <int32_t>read_be32(data + pos + 57)
            records = length + 12 - HEADER_SIZE
            if (read_be16(data + pos + 21) & 7) == 0 and 0 <= count <= records // MIN_RECORD:
                rows += count
                region += records
            pos += 12 + length
        if rows:
            reserve(&self.bufs[B_HOFFS], rows * 4 + 4)
            if not self.zero_copy:
                reserve(&self.bufs[B_KOFFS], rows * 4 + 4)
                reserve(&self.bufs[B_VOFFS], rows * 4 + 4)
            reserve(&self.bufs[B_OFFSETS], rows * 8)
            reserve(&self.bufs[B_TIMESTAMPS], rows * 8)
            reserve(&self.bufs[B_TYPES], rows)
            reserve(&self.bufs[B_KVALID], rows)
            reserve(&self.bufs[B_VVALID], rows)
            if self.zero_copy:
                reserve(&self.bufs[B_KDATA], rows * 16)
                reserve(&self.bufs[B_VDATA], rows * 16)
            else:
                reserve(&self.bufs[B_KDATA], region)
                reserve(&self.bufs[B_VDATA], region)
        # every offsets buffer starts with a zero (reserved first, so the pool can serve it)
        for i in (B_HOFFS, B_HKOFFS, B_HVOFFS):
            put_i32(&self.bufs[i], 0)
        if not self.zero_copy:
            put_i32(&self.bufs[B_KOFFS], 0)
            put_i32(&self.bufs[B_VOFFS], 0)
        return 0

    cdef int headers(self, Reader* r, Rec* rec) except -1:
        cdef Hdr h = Hdr(NULL, NULL, 0, 0)
        cdef int32_t j
        cdef CBuf* hk = &self.bufs[B_HKDATA]
        cdef CBuf* hv = &self.bufs[B_HVDATA]
        cdef CBuf* valid = &self.bufs[B_HVVALID]
        cdef Py_ssize_t room = rec.end - r.pos  # bounds the header bytes of this record
        if self.nh + rec.hcount > INT32_MAX:
            raise KafkaCodecError("more than 2**31 headers: decode fewer batches at once")
        reserve(hk, room)
        reserve(hv, room)
        reserve(valid, rec.hcount)
        for j in range(rec.hcount):
            if read_hdr(r, rec, &h):
                read_error(r)
            if not valid_utf8(h.key, h.klen):
                read_fail(r, r.pos, "header key is not valid UTF-8")
            memcpy(hk.ptr + hk.length, h.key, h.klen)
            hk.length += h.klen
            put_i32(&self.bufs[B_HKOFFS], hk.length)
            if h.vlen >= 0:
                memcpy(hv.ptr + hv.length, h.value, h.vlen)
                hv.length += h.vlen
                valid.ptr[valid.length] = 1
            else:
                valid.ptr[valid.length] = 0
                self.hvnulls += 1
            valid.length += 1
            put_i32(&self.bufs[B_HVOFFS], hv.length)
            self.nh += 1
        return 0

    cdef int control(self, Reader* r, Batch* b) except -1:
        """A control batch: validated, no rows; its marker type goes to BatchInfo."""
        cdef Rec rec
        cdef Hdr h = Hdr(NULL, NULL, 0, 0)
        cdef int32_t j, k
        cdef int control_type = -1
        for j in range(b.count):
            check_more(r, b.count, j)
            if read_rec(r, &rec):
                read_error(r)
            for k in range(rec.hcount):
                if read_hdr(r, &rec, &h):
                    read_error(r)
                if not valid_utf8(h.key, h.klen):
                    read_fail(r, r.pos, "header key is not valid UTF-8")
            if rec.klen < 4:  # every record of a control batch is a marker (as the row decoder)
                read_fail(r, r.pos, f"control record key is {'null' if rec.klen < 0 else f'{rec.klen} bytes'}, needs 4")
            add64(r, b.base_offset, rec.off_delta, "offset")  # overflows as the row decoder's do
            if (b.attributes & ATTR_LOG_APPEND) == 0:
                add64(r, b.base_ts, rec.ts_delta, "timestamp")
            if j == 0:
                control_type = <int16_t>read_be16(rec.key + 2)
            end_rec(r, &rec)
        close_records(r, b)
        self.batches.append(_batch_info((
            b.base_offset, <object>b.base_offset + b.last_delta, b.producer_id, b.producer_epoch,
            b.base_sequence, (b.attributes & ATTR_TRANSACTIONAL) != 0, True, control_type, 0,
        )))
        return 0

    cdef int v2(self, Input inp, Batch* b, bint check_crc) except -1:
        cdef Reader r
        cdef Rec rec = Rec(0, 0, 0, 0, 0, 0, NULL, NULL)
        cdef int32_t j
        # Uncompressed and copied: the CRC can be checked while a helper thread scans (overlap.h).
        cdef bint overlap = (check_crc and (b.attributes & 7) == 0 and not self.zero_copy
                             and (b.attributes & ATTR_CONTROL) == 0)
        cdef object keep
        try:
            keep = open_records(inp, b, check_crc and not overlap, &r)
        except KafkaCodecError:
            if overlap:
                _check_crc(inp, b)  # a corrupt batch says so first, as it does serially
            raise
        cdef bint log_append = (b.attributes & ATTR_LOG_APPEND) != 0
        cdef bint zero_copy = self.zero_copy
        cdef Py_ssize_t count = b.count
        cdef CBuf* kd = &self.bufs[B_KDATA]
        cdef CBuf* vd = &self.bufs[B_VDATA]
        cdef int32_t region = <int32_t>self.nvars
        if (b.attributes & ATTR_CONTROL) != 0:
            return self.control(&r, b)
        # Reserve once for the whole batch: keys and values cannot outgrow the records region.
        cdef int64_t* offs = <int64_t*>reserve(&self.bufs[B_OFFSETS], count * 8)
        cdef int64_t* tss = <int64_t*>reserve(&self.bufs[B_TIMESTAMPS], count * 8)
        cdef int8_t* tys = <int8_t*>reserve(&self.bufs[B_TYPES], count)
        cdef int32_t* hos = <int32_t*>reserve(&self.bufs[B_HOFFS], count * 4)
        cdef char* kval = reserve(&self.bufs[B_KVALID], count)
        cdef char* vval = reserve(&self.bufs[B_VVALID], count)
        cdef int32_t* kos = NULL
        cdef int32_t* vos = NULL
        if zero_copy:
            reserve(kd, count * 16)
            reserve(vd, count * 16)
            if count:
                put_ptr(&self.bufs[B_VARS], r.p, r.end)
                self.nvars += 1
                if keep is not inp:
                    self.keep.append(keep)
        else:
            kos = <int32_t*>reserve(&self.bufs[B_KOFFS], count * 4)
            vos = <int32_t*>reserve(&self.bufs[B_VOFFS], count * 4)
            reserve(kd, r.end)
            reserve(vd, r.end)
        cdef char* kp = kd.ptr
        cdef char* vp = vd.ptr
        cdef Py_ssize_t kl = kd.length
        cdef Py_ssize_t vl = vd.length
        cdef Py_ssize_t knulls = 0, vnulls = 0
        cdef const uint8_t* base = r.p
        cdef kc_scan s
        memset(&s, 0, sizeof(s))
        if not zero_copy:
            s.p = r.p
            s.end = r.end
            s.base_offset = b.base_offset
            s.base_ts = b.base_ts
            s.max_ts = b.max_ts
            s.log_append = log_append
            s.offs = offs
            s.tss = tss
            s.tys = tys
            s.kval = kval
            s.vval = vval
            s.kos = kos
            s.vos = vos
            s.hos = hos
        j = 0
        while j < count:
            if not zero_copy:  # the common shape in C; what it leaves goes through read_rec
                s.pos = r.pos
                s.nh = <int32_t>self.nh
                s.kp = kp
                s.vp = vp
                s.kl = kl
                s.vl = vl
                s.knulls = knulls
                s.vnulls = vnulls
                if overlap:  # the batch's first scan, and its CRC still unchecked
                    overlap = False
                    j = <int32_t>_scan_checking_crc(&s, inp, b, count)
                else:
                    j = <int32_t>kc_scan_records(&s, j, count)
                r.pos = s.pos
                r.index = j
                kl = s.kl
                vl = s.vl
                knulls = s.knulls
                vnulls = s.vnulls
                if j >= count:
                    break
            check_more(&r, count, j)
            if read_rec(&r, &rec):
                read_error(&r)
            offs[j] = add64(&r, b.base_offset, rec.off_delta, "offset")
            if log_append:
                tss[j] = b.max_ts
                tys[j] = 1
            else:
                tss[j] = add64(&r, b.base_ts, rec.ts_delta, "timestamp")
                tys[j] = 0
            kval[j] = rec.klen >= 0
            vval[j] = rec.vlen >= 0
            if rec.klen < 0:
                knulls += 1
            if rec.vlen < 0:
                vnulls += 1
            if zero_copy:
                put_view(kp + kl, rec.key, rec.klen if rec.klen > 0 else 0, region, rec.key - base)
                put_view(vp + vl, rec.value, rec.vlen if rec.vlen > 0 else 0, region, rec.value - base)
                kl += 16
                vl += 16
            else:
                if rec.klen > 0:
                    memcpy(kp + kl, rec.key, rec.klen)
                    kl += rec.klen
                if rec.vlen > 0:
                    memcpy(vp + vl, rec.value, rec.vlen)
                    vl += rec.vlen
                if kl > INT32_MAX or vl > INT32_MAX:
                    raise KafkaCodecError("column data larger than 2 GiB: decode fewer batches at once")
                kos[j] = <int32_t>kl
                vos[j] = <int32_t>vl
            if rec.hcount > 0:
                self.headers(&r, &rec)
            hos[j] = <int32_t>self.nh
            end_rec(&r, &rec)
            j += 1
        if overlap:  # no record, so no scan
            _check_crc(inp, b)
        close_records(&r, b)
        kd.length = kl
        vd.length = vl
        self.knulls += knulls
        self.vnulls += vnulls
        self.bufs[B_OFFSETS].length += 8 * count
        self.bufs[B_TIMESTAMPS].length += 8 * count
        self.bufs[B_TYPES].length += count
        if not zero_copy:
            self.bufs[B_KOFFS].length += 4 * count
            self.bufs[B_VOFFS].length += 4 * count
        self.bufs[B_HOFFS].length += 4 * count
        self.bufs[B_KVALID].length += count
        self.bufs[B_VVALID].length += count
        self.n += count
        self.batches.append(_batch_info((
            b.base_offset, <object>b.base_offset + b.last_delta, b.producer_id, b.producer_epoch,
            b.base_sequence, (b.attributes & ATTR_TRANSACTIONAL) != 0, False, -1, count,
        )))
        return 0

    cdef int push(self, object value, int data, int offs, int valid) except -1:
        """One legacy key or value (bytes or None)."""
        cdef Py_ssize_t size = -1 if value is None else PyBytes_GET_SIZE(value)
        cdef CBuf* d = &self.bufs[data]
        reserve(&self.bufs[valid], 1)[0] = size >= 0
        self.bufs[valid].length += 1
        if size < 0:
            if data == B_KDATA:
                self.knulls += 1
            else:
                self.vnulls += 1
        if self.zero_copy:
            if size > INT32_MAX:
                raise KafkaCodecError("a legacy key or value is larger than 2 GiB")
            if size > 12:  # its own region, kept alive with the columns
                put_ptr(&self.bufs[B_VARS], PyBytes_AS_STRING(value), size)
                self.keep.append(value)
                self.nvars += 1
            put_view(reserve(d, 16), <const uint8_t*>PyBytes_AS_STRING(value) if size > 0 else NULL,
                     size if size > 0 else 0, <int32_t>(self.nvars - 1), 0)
            d.length += 16
            return 0
        if size > 0:
            memcpy(reserve(d, size), PyBytes_AS_STRING(value), size)
            d.length += size
        return put_i32(&self.bufs[offs], d.length)

    cdef int legacy(self, Input inp, Batch* b, bint check_crc) except -1:
        cdef list rows = legacy_rows(inp, b, check_crc)
        for offset, timestamp, timestamp_type, key, value in rows:
            (<int64_t*>reserve(&self.bufs[B_OFFSETS], 8))[0] = offset
            self.bufs[B_OFFSETS].length += 8
            (<int64_t*>reserve(&self.bufs[B_TIMESTAMPS], 8))[0] = timestamp
            self.bufs[B_TIMESTAMPS].length += 8
            reserve(&self.bufs[B_TYPES], 1)[0] = <char>timestamp_type
            self.bufs[B_TYPES].length += 1
            self.push(key, B_KDATA, B_KOFFS, B_KVALID)
            self.push(value, B_VDATA, B_VOFFS, B_VVALID)
            put_i32(&self.bufs[B_HOFFS], self.nh)
            self.n += 1
        first = rows[0][0] if rows else b.base_offset
        self.batches.append(_batch_info((first, b.base_offset, -1, -1, -1, False, False, -1, len(rows))))
        return 0

include "arrow_out.pxi"


def decode_record_batches_columns(buf, *, check_crc=True, zero_copy=False):
    """Decode every complete batch in buf into pyarrow columns (control records left out).

    zero_copy=True: keys and values as binary_view arrays over buf (and decompressed payloads),
    which they keep alive (a bytearray cannot be resized meanwhile; do not mutate it)."""
    cdef Input inp = open_input(buf)
    cdef bint zc = zero_copy
    cdef _Columns cols = _Columns(zc)
    cdef Batch b
    cdef Py_ssize_t pos = 0
    cdef int kind
    cdef bint crc = check_crc
    if cols.zero_copy:
        cols.keep.append(inp)
    cols.presize(inp.ptr, inp.size)
    while True:
        kind = next_batch(inp.ptr, inp.size, pos, &b)
        if kind == 0:
            break
        if kind == 2:
            cols.legacy(inp, &b, crc)
        else:
            cols.v2(inp, &b, crc)
        pos = b.end
    return _export(cols)
