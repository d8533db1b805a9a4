# Included by columnar.pyx: pyarrow inputs of encode_record_batch_columns read in place (the
# array's own buffers, through their addresses; the array object is kept while they are used).

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


@cython.final
cdef class _HdrCol:
    """A pyarrow ``list<struct<key: string, value: binary>>`` headers column read in place: each
    record's headers are pointers into its buffers (no Python object per header)."""

    cdef object arr
    cdef const uint8_t* validity  # the lists'
    cdef const int32_t* off32
    cdef const int64_t* off64
    cdef Py_ssize_t offset
    cdef Py_ssize_t length
    cdef Py_ssize_t nvalues  # headers in the struct child
    cdef const uint8_t* svalidity  # the structs'
    cdef Py_ssize_t soffset
    cdef _BinCol keys
    cdef _BinCol values

    cdef Py_ssize_t add(self, _Writer w, Slot* slot, Py_ssize_t i) except -1:
        """Push record ``i``'s headers to ``w`` for ``slot``; return their encoded size."""
        cdef Py_ssize_t j = self.offset + i
        cdef int64_t start, stop, e, s
        cdef Py_ssize_t size = 0
        cdef const char* k
        cdef const char* v
        cdef Py_ssize_t klen, vlen
        slot.hstart = w.nh
        slot.hcount = 0
        if self.validity != NULL and not (self.validity[j >> 3] >> (j & 7)) & 1:
            return 0  # a null list: no headers
        if self.off32 != NULL:
            start = self.off32[j]
            stop = self.off32[j + 1]
        else:
            start = self.off64[j]
            stop = self.off64[j + 1]
        if start < 0 or stop < start or stop > self.nvalues:
            raise KafkaCodecError(f"headers: corrupt arrow offsets at row {i}")
        for e in range(start, stop):
            s = self.soffset + e
            if self.svalidity != NULL and not (self.svalidity[s >> 3] >> (s & 7)) & 1:
                raise KafkaCodecError(f"record {i}: a header must be a (str, bytes) pair, not None")
            self.keys.get(e, &k, &klen)
            if klen < 0:
                raise KafkaCodecError(f"record {i}: header key may not be None")
            self.values.get(e, &v, &vlen)
            size += w.push_header(k, klen, v, vlen, i, "")
            slot.hcount += 1
        return size


cdef _HdrCol _hdr_col(object arr):
    """``arr`` read in place, or None when its type is not one read so (the caller then takes
    its to_pylist() form, with that form's checks and errors): a list or large list of structs
    with a ``key`` string field and a ``value`` binary field."""
    pa = _pyarrow()
    types = pa.types
    t = arr.type
    if not (types.is_list(t) or types.is_large_list(t)) or not types.is_struct(t.value_type):
        return None
    st = t.value_type
    ki = st.get_field_index("key")
    vi = st.get_field_index("value")
    if ki < 0 or vi < 0:
        return None
    kt = st.field(ki).type
    vt = st.field(vi).type
    if not (types.is_string(kt) or types.is_large_string(kt)):
        return None
    if not (types.is_binary(vt) or types.is_large_binary(vt) or types.is_fixed_size_binary(vt)):
        return None
    cdef _HdrCol col = _HdrCol.__new__(_HdrCol)
    cdef Py_ssize_t n = len(arr)
    cdef Py_ssize_t end
    col.arr = arr
    col.offset = arr.offset
    col.length = n
    structs = arr.values  # every list's elements, indexed by the (absolute) list offsets
    col.nvalues = len(structs)
    col.soffset = structs.offset
    col.keys = _bin_col(structs.field(ki), "header keys")
    col.values = _bin_col(structs.field(vi), "header values")
    if n == 0:
        return col
    end = col.offset + n
    bufs = arr.buffers()
    if types.is_list(t):
        col.off32 = <const int32_t*>_address(bufs[1], (end + 1) * 4, "headers")
    else:
        col.off64 = <const int64_t*>_address(bufs[1], (end + 1) * 8, "headers")
    if bufs[0] is not None and arr.null_count:
        col.validity = <const uint8_t*>_address(bufs[0], (end + 7) // 8, "headers")
    sbuf = structs.buffers()[0]
    if sbuf is not None and structs.null_count:
        col.svalidity = <const uint8_t*>_address(sbuf, (col.soffset + col.nvalues + 7) // 8, "headers")
    return col
