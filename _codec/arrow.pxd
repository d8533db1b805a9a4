# The Arrow C data interface as columnar.pyx produces it: growable C buffers that are handed over
# to exported arrays, and the release callback (cimported; inline only). An exported array owns
# its buffers (freed on release) except a borrowed range, whose memory a Python object keeps alive
# (zero-copy views into the decoded input): that object is released with the array.

from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

from reader cimport fail


cdef extern from "bufpool.h":
    char kc_empty_buf[64]
    void kc_buf_free(void* p) noexcept nogil
    void* kc_buf_take(size_t size, size_t* cap) noexcept nogil


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


cdef struct Private:
    PyObject* keep  # owns the borrowed buffers' memory
    int64_t borrowed_from  # buffers[borrowed_from:borrowed_to] are not ours to free
    int64_t borrowed_to


cdef inline void drop_keep(PyObject* keep) noexcept nogil:
    with gil:
        Py_DECREF(<object>keep)


cdef inline void release_array(ArrowArray* a) noexcept nogil:
    """Frees what an exported array owns: its buffers, its children, its keep-alive reference."""
    cdef int64_t i
    cdef ArrowArray* child
    cdef Private* priv = <Private*>a.private_data
    for i in range(a.n_buffers):
        if priv == NULL or i < priv.borrowed_from or i >= priv.borrowed_to:
            kc_buf_free(<void*>a.buffers[i])
    for i in range(a.n_children):
        child = a.children[i]
        if child != NULL:
            if child.release != NULL:
                child.release(child)
            free(child)
    if <char*>a.buffers != <char*>a + sizeof(ArrowArray):  # a root's: allocated on their own
        free(a.buffers)
    if priv != NULL:
        if priv.keep != NULL:
            drop_keep(priv.keep)
        free(priv)
    a.private_data = NULL
    a.release = NULL


cdef inline ArrowArray* new_node(int64_t length, int64_t null_count, int n_buffers, int n_children,
                                 bint root=False) except NULL:
    """A child node is one allocation: the struct, then its buffer and child pointer arrays.

    A root's arrays are separate: importing moves the root struct into pyarrow's own copy, which
    still points at them after the shell is freed (release_array tells them apart by address)."""
    cdef size_t tail = (n_buffers + n_children + 1) * sizeof(void*)
    cdef ArrowArray* a = <ArrowArray*>calloc(1, sizeof(ArrowArray) + (0 if root else tail))
    if a == NULL:
        raise MemoryError()
    a.length = length
    a.null_count = null_count
    a.n_buffers = n_buffers
    a.n_children = n_children
    a.release = release_array
    if root:
        a.buffers = <const void**>calloc(n_buffers + n_children + 1, sizeof(void*))
        if a.buffers == NULL:
            free(a)
            raise MemoryError()
        a.children = <ArrowArray**>(a.buffers + n_buffers)
    else:
        a.buffers = <const void**>(<char*>a + sizeof(ArrowArray))
        a.children = <ArrowArray**>(a.buffers + n_buffers)
    return a


cdef inline void free_node(ArrowArray* a) noexcept:
    """Release (unless already moved out) and free the struct itself."""
    if a != NULL:
        if a.release != NULL:
            a.release(a)
        free(a)


cdef inline int borrow(ArrowArray* a, object keep, int64_t start, int64_t stop) except -1:
    cdef Private* priv = <Private*>malloc(sizeof(Private))
    if priv == NULL:
        raise MemoryError()
    Py_INCREF(keep)
    priv.keep = <PyObject*>keep
    priv.borrowed_from = start
    priv.borrowed_to = stop
    a.private_data = priv
    return 0


cdef struct CBuf:
    char* ptr
    Py_ssize_t length
    Py_ssize_t cap


cdef inline int grow(CBuf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t size = 2 * b.cap
    cdef char* grown
    if size < b.length + extra:
        size = b.length + extra
    if size < 64:
        size = 64
    cdef size_t pooled_cap = 0
    if b.ptr == NULL:
        grown = <char*>kc_buf_take(<size_t>size, &pooled_cap)
        if grown != NULL:
            b.ptr = grown
            b.cap = size  # the pooled buffer may be larger: use only what was asked for
            return 0
    grown = <char*>realloc(b.ptr, size)
    if grown == NULL:
        raise MemoryError()
    b.ptr = grown
    b.cap = size
    return 0


cdef inline char* reserve(CBuf* b, Py_ssize_t extra) except NULL:
    if b.ptr == NULL or extra > b.cap - b.length:
        grow(b, extra)
    return b.ptr + b.length


cdef inline int put_i32(CBuf* b, Py_ssize_t value) except -1:
    if value > INT32_MAX:
        fail("column data larger than 2 GiB: decode fewer batches at once")
    (<int32_t*>reserve(b, 4))[0] = <int32_t>value
    b.length += 4
    return 0


cdef inline int put_ptr(CBuf* b, const void* ptr, int64_t size) except -1:
    """Append a (pointer, size) pair: a variadic buffer of the binary_view columns."""
    (<const void**>reserve(b, sizeof(void*) + 8))[0] = ptr
    memcpy(b.ptr + b.length + sizeof(void*), &size, 8)
    b.length += sizeof(void*) + 8
    return 0


cdef inline void* take(CBuf* b) noexcept:
    """Hand the buffer's memory over (never NULL: Arrow wants a pointer even when empty)."""
    cdef void* ptr = b.ptr
    if ptr == NULL:
        ptr = kc_empty_buf  # shared, never written, never freed
    b.ptr = NULL
    b.length = b.cap = 0
    return ptr


cdef inline void* bitmap(CBuf* b, Py_ssize_t n) noexcept:
    """Pack one byte per row (0/1) into an Arrow validity bitmap (NULL when out of memory)."""
    cdef uint8_t* bits = <uint8_t*>calloc((n + 7) // 8 + 1, 1)
    cdef Py_ssize_t i
    if bits != NULL:
        for i in range(n):
            if b.ptr[i]:
                bits[i >> 3] |= <uint8_t>(1 << (i & 7))
    return bits


cdef inline void put_view(char* v, const uint8_t* data, int32_t size, int32_t index, Py_ssize_t offset) noexcept nogil:
    """One binary_view entry: up to 12 bytes inline, else a 4-byte prefix and (buffer, offset)."""
    (<int32_t*>v)[0] = size
    if size <= 12:
        memset(v + 4, 0, 12)
        memcpy(v + 4, data, size)
    else:
        memcpy(v + 4, data, 4)
        (<int32_t*>(v + 8))[0] = index
        (<int32_t*>(v + 12))[0] = <int32_t>offset
