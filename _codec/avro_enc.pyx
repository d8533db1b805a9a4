"""Columnar Avro encoding: Arrow buffers into Confluent-framed (or bare) Avro values.

Cython twin of ``kafka_core.codec._python.avro_enc``: it runs the plan that
``kafka_core.codec.avro_encode`` builds (one node per schema node, each over its Arrow array's
buffers, cast beforehand to the one type the node reads) for every row, appending to one growable
C buffer. No Python object is made per row; the first bad value stops the call with an error
tuple that the caller words.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.math cimport isinf
from libc.stdint cimport INT32_MAX, INT32_MIN, int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

__all__ = ["encode_avro"]

# The opcodes and error codes of kafka_core.codec.avro_encode (the parity tests hold them equal).
cdef enum:
    OP_NULL = 1
    OP_BOOL
    OP_INT
    OP_FLOAT
    OP_DOUBLE
    OP_BYTES
    OP_FIXED
    OP_ENUM
    OP_DECIMAL
    OP_ARRAY
    OP_MAP
    OP_RECORD
    OP_UNION_NULL
    OP_NULLABLE
    OP_MEMBERS

cdef enum:
    E_NULL = 1
    E_NOT_NULL
    E_RANGE
    E_FLOAT
    E_FIXED
    E_ENUM
    E_DIGITS
    E_UNION_NULL
    E_NO_MEMBER
    E_TOO_BIG
    E_MEMORY = 100
    E_PLAN = 101

cdef extern from *:
    ctypedef unsigned long long u128 "unsigned __int128"  # GCC and Clang: the builds are Linux and macOS
    ctypedef long long i128 "__int128"

cdef u128[39] POW10  # 10**p, the bound of a decimal of precision p
POW10[0] = 1
for _p in range(1, 39):
    POW10[_p] = POW10[_p - 1] * 10


cdef struct Node:
    int op
    bint all_null
    const uint8_t* valid
    int64_t offset
    const uint8_t* data
    const int32_t* offs
    const uint8_t* aux
    int64_t p0
    int64_t p1
    int64_t p2
    int64_t p3
    int64_t tag
    int32_t first
    int32_t nkids


cdef struct Out:
    uint8_t* p
    int64_t n
    int64_t cap


cdef struct Err:
    int code
    int node
    int64_t element
    int64_t number


cdef inline bint grow(Out* out, int64_t extra) noexcept nogil:
    cdef int64_t size
    cdef uint8_t* bigger
    if out.n + extra <= out.cap:
        return True
    size = out.cap * 2
    while size < out.n + extra:
        size *= 2
    bigger = <uint8_t*>realloc(out.p, size)
    if bigger == NULL:
        return False
    out.p = bigger
    out.cap = size
    return True


cdef inline bint put_varint(Out* out, int64_t v) noexcept nogil:
    cdef uint64_t z = ((<uint64_t>v) << 1) ^ (<uint64_t>(v >> 63))
    if not grow(out, 10):
        return False
    while z > 0x7F:
        out.p[out.n] = <uint8_t>((z & 0x7F) | 0x80)
        out.n += 1
        z >>= 7
    out.p[out.n] = <uint8_t>z
    out.n += 1
    return True


cdef inline bint put(Out* out, const uint8_t* src, int64_t n) noexcept nogil:
    if not grow(out, n):
        return False
    if n:
        memcpy(out.p + out.n, src, n)
        out.n += n
    return True


cdef inline bint is_null(const Node* n, int64_t i) noexcept nogil:
    if n.all_null:
        return True
    if n.valid == NULL:
        return False
    i += n.offset
    return not ((n.valid[i >> 3] >> (i & 7)) & 1)


cdef inline int fail(Err* err, int code, int k, int64_t i, int64_t number) noexcept nogil:
    err.code = code
    err.node = k
    err.element = i
    err.number = number
    return -1


cdef int put_decimal(Out* out, const Node* n, int64_t j, Err* err, int k, int64_t i) noexcept nogil:
    """The unscaled value as big-endian two's complement: the fewest bytes Python's
    ``(bit_length + 8) // 8`` gives (bytes), or sign-extended to the fixed's size."""
    cdef i128 v
    cdef u128 mag
    cdef int bits = 0, size, b
    cdef uint8_t fill
    memcpy(&v, n.data + 16 * j, 16)
    mag = <u128>(-v) if v < 0 else <u128>v
    if mag >= POW10[n.p0]:
        return fail(err, E_DIGITS, k, i, 0)
    while bits < 128 and (mag >> bits) != 0:
        bits += 1
    size = (bits + 8) // 8
    if n.p1:
        size = <int>n.p1
    elif not put_varint(out, size):
        return fail(err, E_MEMORY, k, i, 0)
    if not grow(out, size):
        return fail(err, E_MEMORY, k, i, 0)
    fill = 0xFF if v < 0 else 0
    for b in range(size - 1, -1, -1):  # byte b counted from the least significant
        out.p[out.n] = <uint8_t>(v >> (8 * b)) if b < 16 else fill
        out.n += 1
    return 0


@cython.cdivision(True)
cdef int put_value(const Node* nodes, const int32_t* kids, int k, int64_t i, Out* out, Err* err) noexcept nogil:
    cdef const Node* n = &nodes[k]
    cdef const Node* m
    cdef int op = n.op, c
    cdef int64_t j, e, v, start, end
    cdef double x
    cdef float f
    if op == OP_UNION_NULL:
        return 0 if put_varint(out, 0) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_NULLABLE:
        if is_null(n, i):
            if n.p0 < 0:
                return fail(err, E_UNION_NULL, k, i, 0)
            return 0 if put_varint(out, n.p0) else fail(err, E_MEMORY, k, i, 0)
        if not put_varint(out, n.p1):
            return fail(err, E_MEMORY, k, i, 0)
        return put_value(nodes, kids, kids[n.first], i, out, err)
    if op == OP_MEMBERS:
        if not is_null(n, i):
            for c in range(n.nkids):
                m = &nodes[kids[n.first + c]]
                if not is_null(m, i):
                    if not put_varint(out, m.tag):
                        return fail(err, E_MEMORY, k, i, 0)
                    return put_value(nodes, kids, kids[n.first + c], i, out, err)
        if n.p0 < 0:
            return fail(err, E_NO_MEMBER, k, i, 0)
        return 0 if put_varint(out, n.p0) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_NULL:
        return fail(err, E_NOT_NULL, k, i, 0) if not is_null(n, i) else 0
    if is_null(n, i):
        return fail(err, E_NULL, k, i, 0)
    j = i + n.offset
    if op == OP_RECORD:
        for c in range(n.nkids):
            if put_value(nodes, kids, kids[n.first + c], i, out, err) < 0:
                return -1
        return 0
    if op == OP_INT:
        if n.p1 == 4:
            v = (<const int32_t*>n.data)[j]
        else:
            v = (<const int64_t*>n.data)[j]
        if n.p2 > 1:  # floor division, as Python's //
            e = v / n.p2
            if e * n.p2 != v and v < 0:
                e -= 1
            v = e
        if n.p0 == 32 and (v < INT32_MIN or v > INT32_MAX):
            return fail(err, E_RANGE, k, i, v)
        return 0 if put_varint(out, v) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_BOOL:
        if not grow(out, 1):
            return fail(err, E_MEMORY, k, i, 0)
        out.p[out.n] = (n.data[j >> 3] >> (j & 7)) & 1
        out.n += 1
        return 0
    if op == OP_DOUBLE:
        return 0 if put(out, n.data + 8 * j, 8) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_FLOAT:
        x = (<const double*>n.data)[j]
        f = <float>x
        if isinf(f) and not isinf(x):
            return fail(err, E_FLOAT, k, i, 0)
        return 0 if put(out, <const uint8_t*>&f, 4) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_BYTES or op == OP_FIXED:
        start = n.offs[j]
        end = n.offs[j + 1]
        if op == OP_FIXED:
            if end - start != n.p0:
                return fail(err, E_FIXED, k, i, end - start)
        elif not put_varint(out, end - start):
            return fail(err, E_MEMORY, k, i, 0)
        return 0 if put(out, n.aux + start, end - start) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_ENUM:
        e = i + n.p0
        if n.p1 and not ((n.aux[e >> 3] >> (e & 7)) & 1):
            return fail(err, E_ENUM, k, i, 0)
        return 0 if put_varint(out, (<const int32_t*>n.data)[e]) else fail(err, E_MEMORY, k, i, 0)
    if op == OP_DECIMAL:
        return put_decimal(out, n, j, err, k, i)
    if op == OP_ARRAY or op == OP_MAP:
        start = n.offs[j]
        end = n.offs[j + 1]
        if end > start:
            if not put_varint(out, end - start):
                return fail(err, E_MEMORY, k, i, 0)
            for e in range(start, end):
                if put_value(nodes, kids, kids[n.first], e, out, err) < 0:
                    return -1
                if op == OP_MAP and put_value(nodes, kids, kids[n.first + 1], e, out, err) < 0:
                    return -1
        return 0 if put_varint(out, 0) else fail(err, E_MEMORY, k, i, 0)
    return fail(err, E_PLAN, k, i, op)


cdef const uint8_t* address(object buf):
    # Two returns, not a conditional expression: Cython types that expression's temporary without
    # the const, and the C compiler warns that the assignment discards it.
    if buf is None:
        return NULL
    return <const uint8_t*><size_t>buf.address


def encode_avro(list nodes, list kids, int root, bytes header, Py_ssize_t length, bint nullable_root):
    """Every row of the plan's root: (error, validity, int32 offsets, data); the error is
    (code, node, row, element, number) of the first bad value, the rest empty then."""
    cdef Py_ssize_t count = len(nodes), i, row
    cdef Node* plan = <Node*>calloc(max(count, 1), sizeof(Node))
    cdef int32_t* kid = <int32_t*>calloc(max(len(kids), 1), sizeof(int32_t))
    cdef int32_t* offsets = <int32_t*>malloc((length + 1) * sizeof(int32_t))
    cdef uint8_t* valid = <uint8_t*>calloc((length + 7) // 8 + 1, 1)
    cdef Out out
    cdef Err err
    cdef Py_ssize_t nulls = 0
    cdef const uint8_t* head = <const uint8_t*><const char*>header
    cdef Py_ssize_t head_n = len(header)
    cdef int rc = 0
    out.n = 0
    out.cap = max(64, length * 16)
    out.p = <uint8_t*>malloc(out.cap)
    err.code = 0
    try:
        if plan == NULL or kid == NULL or offsets == NULL or valid == NULL or out.p == NULL:
            raise MemoryError()
        for i in range(count):
            spec = nodes[i]
            plan[i].op = spec[0]
            plan[i].all_null = spec[1]
            plan[i].valid = address(spec[2])
            plan[i].offset = spec[3]
            plan[i].data = address(spec[4])
            plan[i].offs = <const int32_t*>address(spec[5])
            plan[i].aux = address(spec[6])
            plan[i].p0 = spec[7]
            plan[i].p1 = spec[8]
            plan[i].p2 = spec[9]
            plan[i].p3 = spec[10]
            plan[i].tag = spec[11]
            plan[i].first = spec[12]
            plan[i].nkids = spec[13]
        for i in range(len(kids)):
            kid[i] = kids[i]
        offsets[0] = 0
        with nogil:
            for row in range(length):
                if not nullable_root and is_null(&plan[root], row):
                    nulls += 1
                else:
                    valid[row >> 3] |= <uint8_t>(1 << (row & 7))
                    if not put(&out, head, head_n):
                        rc = fail(&err, E_MEMORY, root, row, 0)
                    else:
                        rc = put_value(plan, kid, root, row, &out, &err)
                    if rc < 0:
                        break
                    if out.n > INT32_MAX:
                        rc = fail(&err, E_TOO_BIG, root, row, 0)
                        break
                offsets[row + 1] = <int32_t>out.n
        if rc < 0:
            if err.code == E_MEMORY:
                raise MemoryError()
            if err.code == E_PLAN:
                raise ValueError(f"corrupt Avro encoder plan: op {err.number}")
            return (err.code, err.node, row, err.element, err.number), None, b"", b""
        return (
            None,
            PyBytes_FromStringAndSize(<char*>valid, (length + 7) // 8) if nulls else None,
            PyBytes_FromStringAndSize(<char*>offsets, (length + 1) * sizeof(int32_t)),
            PyBytes_FromStringAndSize(<char*>out.p, out.n),
        )
    finally:
        free(plan)
        free(kid)
        free(offsets)
        free(valid)
        free(out.p)
