# Part of columnar.pyx (textual include: one module, so the decoder's column buffers are handed
# over with no call across modules): the Arrow export of a finished _Columns, as one struct array
# imported by pyarrow with a single call (the Arrow C data interface).


def _use_capsule_import(bint capsule=True):
    """Tests: force (or undo) the public capsule fallback of the decode import."""
    global _import_ptr
    _pyarrow()
    _import_ptr = None if capsule else getattr(_pa.RecordBatch, "_import_from_c", None)


cdef void _free_capsule(object capsule) noexcept:
    free_node(<ArrowArray*>PyCapsule_GetPointer(capsule, "arrow_array"))


@cython.final
cdef class _Exported:
    """What pyarrow.record_batch imports: the Arrow PyCapsule protocol, for one use."""

    cdef object schema
    cdef object capsule

    def __arrow_c_array__(self, requested_schema=None):
        if self.capsule is None:
            raise ValueError("this exported array was already imported")
        capsule, self.capsule = self.capsule, None
        return self.schema.__arrow_c_schema__(), capsule


cdef int _validity(_Columns cols, ArrowArray* a, Py_ssize_t nulls, int valid) except -1:
    if nulls:
        a.buffers[0] = bitmap(&cols.bufs[valid], a.length)
        if a.buffers[0] == NULL:
            raise MemoryError()
    return 0


cdef ArrowArray* _binary(_Columns cols, Py_ssize_t n, Py_ssize_t nulls, int offs, int data, int valid) except NULL:
    cdef ArrowArray* a = new_node(n, nulls, 3, 0)
    try:
        _validity(cols, a, nulls, valid)
    except BaseException:
        free_node(a)
        raise
    a.buffers[1] = take(&cols.bufs[offs])
    a.buffers[2] = take(&cols.bufs[data])
    return a


cdef ArrowArray* _views(_Columns cols, Py_ssize_t n, Py_ssize_t nulls, int data, int valid) except NULL:
    """binary_view: validity, views, the borrowed regions, then their int64 sizes."""
    cdef Py_ssize_t k = cols.nvars, i
    cdef ArrowArray* a = new_node(n, nulls, <int>(3 + k), 0)
    cdef int64_t* sizes
    cdef const char* pairs = cols.bufs[B_VARS].ptr
    try:
        _validity(cols, a, nulls, valid)
        sizes = <int64_t*>malloc(8 * k + 8)
        if sizes == NULL:
            raise MemoryError()
        a.buffers[2 + k] = sizes
        for i in range(k):
            a.buffers[2 + i] = (<const void**>(pairs + i * (sizeof(void*) + 8)))[0]
            memcpy(&sizes[i], pairs + i * (sizeof(void*) + 8) + sizeof(void*), 8)
        borrow(a, cols.keep, 2, 2 + k)
    except BaseException:
        for i in range(k):
            a.buffers[2 + i] = NULL
        free_node(a)
        raise
    a.buffers[1] = take(&cols.bufs[data])
    return a


cdef ArrowArray* _fixed(_Columns cols, Py_ssize_t n, int buf) except NULL:
    cdef ArrowArray* a = new_node(n, 0, 2, 0)
    a.buffers[1] = take(&cols.bufs[buf])
    return a


cdef object _export(_Columns cols):
    """The columns as a RecordColumns over one pyarrow RecordBatch; the buffers move to it."""
    _pyarrow()
    cdef Py_ssize_t n = cols.n
    cdef bint has_headers = cols.nh > 0  # else the column is made on demand (columns.py)
    cdef ArrowArray* root = new_node(n, 0, 1, 6 if has_headers else 5, True)
    cdef ArrowArray* headers
    cdef ArrowArray* entries
    cdef _Exported exported
    try:
        root.children[0] = _fixed(cols, n, B_OFFSETS)
        root.children[1] = _fixed(cols, n, B_TIMESTAMPS)
        root.children[2] = _fixed(cols, n, B_TYPES)
        if cols.zero_copy:
            root.children[3] = _views(cols, n, cols.knulls, B_KDATA, B_KVALID)
            root.children[4] = _views(cols, n, cols.vnulls, B_VDATA, B_VVALID)
        else:
            root.children[3] = _binary(cols, n, cols.knulls, B_KOFFS, B_KDATA, B_KVALID)
            root.children[4] = _binary(cols, n, cols.vnulls, B_VOFFS, B_VDATA, B_VVALID)
        if has_headers:
            headers = root.children[5] = new_node(n, 0, 2, 1)
            headers.buffers[1] = take(&cols.bufs[B_HOFFS])
            entries = headers.children[0] = new_node(cols.nh, 0, 1, 2)
            entries.children[0] = _binary(cols, cols.nh, 0, B_HKOFFS, B_HKDATA, B_HVVALID)
            entries.children[1] = _binary(cols, cols.nh, cols.hvnulls, B_HVOFFS, B_HVDATA, B_HVVALID)
    except BaseException:
        free_node(root)
        raise
    schema = (_schemas if has_headers else _schemas_nh)[1 if cols.zero_copy else 0]
    if _import_ptr is not None:
        try:
            batch = _import_ptr(<size_t>root, schema)  # moves the struct out of root
        finally:
            free_node(root)  # the shell (released too, if the import failed before the move)
    else:
        exported = _Exported.__new__(_Exported)
        exported.schema = schema
        try:
            exported.capsule = PyCapsule_New(root, "arrow_array", _free_capsule)
        except BaseException:
            free_node(root)
            raise
        batch = _import_capsule(*exported.__arrow_c_array__())
    result = _new_columns(RecordColumns)
    result._arrays = [None, None, None, None, None, None]
    result._batch = batch
    result.batches = cols.batches
    return result
