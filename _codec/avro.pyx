"""Columnar Avro decoding: Confluent-framed (or bare) Avro values into typed column buffers.

Cython twin of ``kafka_core.codec._python.avro``: it runs the program that
``kafka_core.codec.avro_plan`` compiles (a writer schema resolved to the reader schema) over
every value of a binary column, appending to one growable C buffer per column. Every read is
checked against the end of the value; a bad record sets an error (no Python exception on the
hot path) that fails the call (FAILFAST) or turns the record into a null row (PERMISSIVE).
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memcpy, memset

from kafka_core.codec._cython.primitives cimport valid_utf8

from kafka_core.errors import KafkaCodecError

__all__ = ["decode_avro", "framed_ids"]

# The opcodes and builder kinds of kafka_core.codec.avro_plan (the parity tests hold them equal).
cdef enum:
    OP_PUTNULL = 1
    OP_BOOL
    OP_INT
    OP_LONG
    OP_FLOAT
    OP_DOUBLE
    OP_BYTES
    OP_FIXED
    OP_DEC_BYTES
    OP_DEC_FIXED
    OP_ENUM
    OP_RECORD
    OP_ARRAY
    OP_MAP
    OP_UNION
    OP_USTRUCT
    OP_DEFAULT
    OP_ERROR
    OP_SKIP_VARINT
    OP_SKIP_N
    OP_SKIP_BYTES
    OP_SKIP_RECORD
    OP_SKIP_ARRAY
    OP_SKIP_MAP
    OP_SKIP_UNION

cdef enum:
    K_NULL = 0
    K_BOOL
    K_I32
    K_I64
    K_F32
    K_F64
    K_BIN
    K_DEC
    K_STRUCT
    K_LIST
    K_MAP

cdef enum:
    INT_I32 = 0
    INT_I64
    INT_F32
    INT_F64

cdef enum:
    LONG_I64 = 0
    LONG_F32
    LONG_F64
    LONG_MILLIS

cdef enum:
    FLOAT_F32 = 0
    FLOAT_F64

cdef enum:
    ERR_RECORD = 1  # this record is bad
    ERR_FATAL = 2  # the call fails (a column over 2 GiB, a corrupt program)
    ERR_MEMORY = 3

cdef extern from *:
    ctypedef unsigned long long u128 "unsigned __int128"  # GCC and Clang: the builds are Linux and macOS

cdef u128[39] POW10  # 10**p, the bound of a decimal of precision p
POW10[0] = 1
for _p in range(1, 39):
    POW10[_p] = POW10[_p - 1] * 10

cdef int64_t BLOCK_SLACK = 1 << 16  # items a block may claim beyond its remaining bytes

cdef int[11] WIDTH
WIDTH[:] = [0, 1, 4, 8, 4, 8, 0, 16, 0, 0, 0]


cdef struct Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef struct Col:
    Buf valid
    Buf data
    Buf offs
    int64_t count
    int64_t nulls
    int kind
    int first
    int nkids


cdef struct Mark:
    int64_t count
    int64_t nulls
    Py_ssize_t nv
    Py_ssize_t nd
    Py_ssize_t no


cdef inline char* reserve(Buf* b, Py_ssize_t extra) noexcept:
    """Room for ``extra`` more bytes (NULL when out of memory)."""
    cdef Py_ssize_t size
    cdef char* grown
    if b.p == NULL or extra > b.cap - b.n:
        size = 2 * b.cap
        if size < b.n + extra:
            size = b.n + extra
        if size < 256:
            size = 256
        grown = <char*>realloc(b.p, size)
        if grown == NULL:
            return NULL
        b.p = grown
        b.cap = size
    return b.p + b.n


@cython.final
cdef class _Dec:
    cdef const int32_t* code
    cdef Py_ssize_t ncode
    cdef const uint8_t* blob
    cdef Py_ssize_t nblob
    cdef const int32_t* kids
    cdef Col* cols
    cdef Mark* marks
    cdef int ncols
    # the value being read
    cdef const uint8_t* base
    cdef Py_ssize_t pos
    cdef Py_ssize_t end
    # the first error of the record
    cdef int err
    cdef object msg

    def __dealloc__(self):
        cdef int i
        if self.cols != NULL:
            for i in range(self.ncols):
                free(self.cols[i].valid.p)
                free(self.cols[i].data.p)
                free(self.cols[i].offs.p)
            free(self.cols)
        free(self.marks)

    # -- errors (set once; every caller returns -1 after one) ----------------------------

    cdef int bad(self, str msg) noexcept:
        if not self.err:
            self.err = ERR_RECORD
            self.msg = msg
        return -1

    cdef int fatal(self, int kind, str msg) noexcept:
        self.err = kind
        self.msg = msg
        return -1

    # -- input -----------------------------------------------------------------------------

    cdef inline int need(self, int64_t n, Py_ssize_t* start) noexcept:
        if n < 0 or n > self.end - self.pos:
            return self.bad(f"truncated Avro value: {n} bytes needed at byte {self.pos}, {self.end - self.pos} left")
        start[0] = self.pos
        self.pos += <Py_ssize_t>n
        return 0

    cdef inline int rd_long(self, int64_t* out) noexcept:
        cdef const uint8_t* p = self.base
        cdef Py_ssize_t pos = self.pos
        cdef uint64_t result = 0
        cdef int shift = 0
        cdef uint8_t byte
        while True:
            if pos >= self.end:
                return self.bad(f"truncated Avro varint at byte {self.pos}")
            byte = p[pos]
            pos += 1
            if shift == 63 and byte > 1:
                return self.bad(f"Avro varint longer than 64 bits at byte {self.pos}")
            result |= (<uint64_t>(byte & 0x7F)) << shift
            if byte < 0x80:
                break
            shift += 7
        self.pos = pos
        out[0] = <int64_t>((result >> 1) ^ (0 - (result & 1)))
        return 0

    cdef inline int rd_int(self, int64_t* out) noexcept:
        if self.rd_long(out) < 0:
            return -1
        if out[0] < INT32_MIN or out[0] > INT32_MAX:
            return self.bad(f"Avro int out of range: {out[0]}")
        return 0

    cdef inline int rd_length(self, int64_t* out) noexcept:
        if self.rd_long(out) < 0:
            return -1
        if out[0] < 0:
            return self.bad(f"negative Avro length {out[0]}")
        return 0

    cdef inline int rd_block(self, uint64_t* out) noexcept:
        cdef int64_t n = 0, size
        cdef uint64_t count
        if self.rd_long(&n) < 0:
            return -1
        if n < 0:
            count = (<uint64_t>(-(n + 1))) + 1
            if self.rd_length(&size) < 0:
                return -1
        else:
            count = <uint64_t>n
        if count > <uint64_t>(self.end - self.pos + BLOCK_SLACK):
            return self.bad(f"Avro block of {count} items is larger than the value")
        out[0] = count
        return 0

    # -- output ----------------------------------------------------------------------------

    cdef inline Col* valid(self, int b) noexcept:
        cdef Col* col = &self.cols[b]
        cdef char* v = reserve(&col.valid, 1)
        if v == NULL:
            self.fatal(ERR_MEMORY, "")
            return NULL
        v[0] = 1
        col.valid.n += 1
        col.count += 1
        return col

    cdef inline int put(self, Buf* buf, const void* src, Py_ssize_t n) noexcept:
        cdef char* dst = reserve(buf, n)
        if dst == NULL:
            return self.fatal(ERR_MEMORY, "")
        memcpy(dst, src, n)
        buf.n += n
        return 0

    cdef inline int put_offset(self, Col* col, int64_t value) noexcept:
        cdef int32_t v
        if value > INT32_MAX:
            return self.fatal(ERR_FATAL, "column data larger than 2 GiB: decode fewer records at once")
        v = <int32_t>value
        return self.put(&col.offs, &v, 4)

    cdef int put_null(self, int b) noexcept:
        cdef Col* col = &self.cols[b]
        cdef char* dst
        cdef int i, width = WIDTH[col.kind]
        dst = reserve(&col.valid, 1)
        if dst == NULL:
            return self.fatal(ERR_MEMORY, "")
        dst[0] = 0
        col.valid.n += 1
        col.count += 1
        col.nulls += 1
        if width:
            dst = reserve(&col.data, width)
            if dst == NULL:
                return self.fatal(ERR_MEMORY, "")
            memset(dst, 0, width)
            col.data.n += width
        elif col.kind == K_BIN or col.kind == K_LIST or col.kind == K_MAP:
            return self.put(&col.offs, col.offs.p + col.offs.n - 4, 4)
        elif col.kind == K_STRUCT:
            for i in range(col.first, col.first + col.nkids):
                if self.put_null(self.kids[i]) < 0:
                    return -1
        return 0

    cdef inline int put_bytes(self, int b, const void* src, Py_ssize_t n) noexcept:
        cdef Col* col = self.valid(b)
        if col == NULL or self.put(&col.data, src, n) < 0:
            return -1
        return self.put_offset(col, col.data.n)

    # -- the program ----------------------------------------------------------------------

    cdef int run(self, Py_ssize_t pc) noexcept:
        cdef const int32_t* code = self.code
        cdef int op = code[pc]
        cdef int b, conv, k, j
        cdef Py_ssize_t end, start, size, i, saved_pos, saved_end
        cdef const uint8_t* saved_base
        cdef int64_t n, off
        cdef uint64_t count, u
        cdef int32_t i32
        cdef float f32
        cdef double f64
        cdef uint8_t byte
        cdef uint8_t[16] dec
        cdef u128 mag
        cdef Col* col
        if op == OP_RECORD:
            if self.valid(code[pc + 2]) == NULL:
                return -1
            end = pc + code[pc + 1]
            pc += 3
            while pc < end:
                if self.run(pc) < 0:
                    return -1
                pc += code[pc + 1]
            return 0
        if op == OP_INT:
            if self.rd_int(&n) < 0:
                return -1
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            conv = code[pc + 3]
            if conv == INT_I32:
                i32 = <int32_t>n
                return self.put(&col.data, &i32, 4)
            if conv == INT_I64:
                return self.put(&col.data, &n, 8)
            if conv == INT_F32:
                f32 = <float>n
                return self.put(&col.data, &f32, 4)
            f64 = <double>n
            return self.put(&col.data, &f64, 8)
        if op == OP_LONG:
            if self.rd_long(&n) < 0:
                return -1
            conv = code[pc + 3]
            if conv == LONG_MILLIS:
                if n > INT64_MAX // 1000 or n < -(INT64_MAX // 1000):
                    return self.bad(f"timestamp in milliseconds out of range: {n}")
                n *= 1000
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            if conv == LONG_F32:
                f32 = <float>n
                return self.put(&col.data, &f32, 4)
            if conv == LONG_F64:
                f64 = <double>n
                return self.put(&col.data, &f64, 8)
            return self.put(&col.data, &n, 8)
        if op == OP_BYTES:
            if self.rd_length(&n) < 0 or self.need(n, &start) < 0:
                return -1
            if code[pc + 3] and not valid_utf8(self.base + start, <Py_ssize_t>n):
                return self.bad("Avro string is not UTF-8")
            return self.put_bytes(code[pc + 2], self.base + start, <Py_ssize_t>n)
        if op == OP_UNION:
            if self.rd_long(&n) < 0:
                return -1
            if n < 0 or n >= code[pc + 2]:
                return self.bad(f"Avro union branch {n} out of range (0..{code[pc + 2] - 1})")
            pc += 3
            for i in range(n):
                pc += code[pc + 1]
            return self.run(pc)
        if op == OP_PUTNULL:
            return self.put_null(code[pc + 2])
        if op == OP_DOUBLE:
            if self.need(8, &start) < 0:
                return -1
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            return self.put(&col.data, self.base + start, 8)
        if op == OP_FLOAT:
            if self.need(4, &start) < 0:
                return -1
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            if code[pc + 3] == FLOAT_F32:
                return self.put(&col.data, self.base + start, 4)
            memcpy(&f32, self.base + start, 4)
            f64 = f32
            return self.put(&col.data, &f64, 8)
        if op == OP_BOOL:
            if self.need(1, &start) < 0:
                return -1
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            byte = 1 if self.base[start] == 1 else 0
            return self.put(&col.data, &byte, 1)
        if op == OP_FIXED:
            if self.need(code[pc + 3], &start) < 0:
                return -1
            return self.put_bytes(code[pc + 2], self.base + start, code[pc + 3])
        if op == OP_DEC_BYTES or op == OP_DEC_FIXED:
            if op == OP_DEC_BYTES:
                if self.rd_length(&n) < 0:
                    return -1
            else:
                n = code[pc + 3]
            if self.need(n, &start) < 0:
                return -1
            size = <Py_ssize_t>n
            # big-endian two's complement, sign-extended to 16 bytes little-endian
            byte = 0xFF if size and self.base[start] & 0x80 else 0
            memset(dec, byte, 16)
            for i in range(size - 16 if size > 16 else 0):
                if self.base[start + i] != byte:
                    return self.bad("Avro decimal does not fit in 128 bits")
            if size > 16 and (self.base[start + size - 16] & 0x80) != (byte & 0x80):
                return self.bad("Avro decimal does not fit in 128 bits")
            for i in range(size if size < 16 else 16):
                dec[i] = self.base[start + size - 1 - i]
            memcpy(&mag, dec, 16)
            if dec[15] & 0x80:
                mag = (~mag) + 1
            k = code[pc + 3] if op == OP_DEC_BYTES else code[pc + 4]
            if mag >= POW10[k]:
                return self.bad(f"Avro decimal has more than its {k} digits")
            col = self.valid(code[pc + 2])
            if col == NULL:
                return -1
            return self.put(&col.data, dec, 16)
        if op == OP_ENUM:
            if self.rd_long(&n) < 0:
                return -1
            if n < 0 or n >= code[pc + 3]:
                return self.bad(f"Avro enum index {n} out of range (0..{code[pc + 3] - 1})")
            off = code[pc + 4 + 2 * n]
            if off < 0:
                return self.bad(f"Avro enum symbol {n} is not in the reader's enum, which has no default")
            return self.put_bytes(code[pc + 2], self.blob + off, code[pc + 5 + 2 * n])
        if op == OP_ARRAY:
            b = code[pc + 2]
            j = self.kids[self.cols[b].first]
            while True:
                if self.rd_block(&count) < 0:
                    return -1
                if count == 0:
                    break
                for u in range(count):
                    if self.run(pc + 3) < 0:
                        return -1
            col = self.valid(b)
            if col == NULL:
                return -1
            return self.put_offset(col, self.cols[j].count)
        if op == OP_MAP:
            b = code[pc + 2]
            j = code[pc + 3]
            k = code[pc + 4]
            while True:
                if self.rd_block(&count) < 0:
                    return -1
                if count == 0:
                    break
                for u in range(count):
                    if self.valid(j) == NULL or self.rd_length(&n) < 0 or self.need(n, &start) < 0:
                        return -1
                    if not valid_utf8(self.base + start, <Py_ssize_t>n):
                        return self.bad("Avro map key is not UTF-8")
                    if self.put_bytes(k, self.base + start, <Py_ssize_t>n) < 0 or self.run(pc + 5) < 0:
                        return -1
            col = self.valid(b)
            if col == NULL:
                return -1
            return self.put_offset(col, self.cols[j].count)
        if op == OP_USTRUCT:
            b = code[pc + 2]
            j = code[pc + 3]
            col = self.valid(b)
            if col == NULL:
                return -1
            for k in range(col.nkids):
                if k != j and self.put_null(self.kids[col.first + k]) < 0:
                    return -1
            return self.run(pc + 4)
        if op == OP_DEFAULT:
            saved_base, saved_pos, saved_end = self.base, self.pos, self.end
            self.base = self.blob
            self.pos = code[pc + 2]
            self.end = self.pos + code[pc + 3]
            k = self.run(pc + 4)
            self.base, self.pos, self.end = saved_base, saved_pos, saved_end
            return k
        if op == OP_ERROR:
            return self.bad((<const char*>self.blob)[code[pc + 2]:code[pc + 2] + code[pc + 3]].decode("utf-8", "replace"))
        return self.skip(pc)

    cdef int skip(self, Py_ssize_t pc) noexcept:
        cdef const int32_t* code = self.code
        cdef int op = code[pc]
        cdef Py_ssize_t end, start, i
        cdef int64_t n
        cdef uint64_t count, u
        if op == OP_SKIP_VARINT:
            return self.rd_long(&n)
        if op == OP_SKIP_N:
            return self.need(code[pc + 2], &start)
        if op == OP_SKIP_BYTES:
            if self.rd_length(&n) < 0:
                return -1
            return self.need(n, &start)
        if op == OP_SKIP_RECORD:
            end = pc + code[pc + 1]
            pc += 2
            while pc < end:
                if self.skip(pc) < 0:
                    return -1
                pc += code[pc + 1]
            return 0
        if op == OP_SKIP_ARRAY or op == OP_SKIP_MAP:
            while True:
                if self.rd_block(&count) < 0:
                    return -1
                if count == 0:
                    return 0
                for u in range(count):
                    if op == OP_SKIP_MAP and (self.rd_length(&n) < 0 or self.need(n, &start) < 0):
                        return -1
                    if self.skip(pc + 2) < 0:
                        return -1
        if op == OP_SKIP_UNION:
            if self.rd_long(&n) < 0:
                return -1
            if n < 0 or n >= code[pc + 2]:
                return self.bad(f"Avro union branch {n} out of range (0..{code[pc + 2] - 1})")
            pc += 3
            for i in range(n):
                pc += code[pc + 1]
            return self.skip(pc)
        return self.fatal(ERR_FATAL, f"corrupt Avro program: opcode {op} at {pc}")

    # -- rows -------------------------------------------------------------------------------

    cdef void mark(self) noexcept:
        cdef int i
        for i in range(self.ncols):
            self.marks[i].count = self.cols[i].count
            self.marks[i].nulls = self.cols[i].nulls
            self.marks[i].nv = self.cols[i].valid.n
            self.marks[i].nd = self.cols[i].data.n
            self.marks[i].no = self.cols[i].offs.n

    cdef void restore(self) noexcept:
        cdef int i
        for i in range(self.ncols):
            self.cols[i].count = self.marks[i].count
            self.cols[i].nulls = self.marks[i].nulls
            self.cols[i].valid.n = self.marks[i].nv
            self.cols[i].data.n = self.marks[i].nd
            self.cols[i].offs.n = self.marks[i].no


cdef inline uint32_t be32(const uint8_t* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef class _Values:
    """A pyarrow binary or large_binary array's buffers, read in place."""

    cdef object keep
    cdef const uint8_t* valid
    cdef const int32_t* offs32
    cdef const int64_t* offs64
    cdef const uint8_t* data
    cdef Py_ssize_t n
    cdef Py_ssize_t offset

    cdef int open(self, values) except -1:
        cdef const char[::1] view  # pyarrow exports its buffers as signed chars
        import pyarrow as pa
        large = pa.types.is_large_binary(values.type)
        if not (large or pa.types.is_binary(values.type)):
            raise KafkaCodecError(f"Avro values must be binary or large_binary, not {values.type}")
        bufs = values.buffers()
        self.keep = bufs
        self.n = len(values)
        self.offset = values.offset
        self.valid = NULL
        if bufs[0] is not None and values.null_count:
            view = bufs[0]
            self.valid = <const uint8_t*>&view[0] if view.shape[0] else NULL
        view = bufs[1]
        if view.shape[0] < (self.offset + self.n + 1) * (8 if large else 4):
            raise KafkaCodecError("Avro values: offsets buffer too short")
        self.offs32 = <const int32_t*>&view[0] if not large else NULL
        self.offs64 = <const int64_t*>&view[0] if large else NULL
        self.data = NULL
        if bufs[2] is not None:
            view = bufs[2]
            if view.shape[0]:
                self.data = <const uint8_t*>&view[0]
        return 0

    cdef inline bint is_null(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j = i + self.offset
        return self.valid != NULL and not (self.valid[j >> 3] >> (j & 7)) & 1

    cdef inline const uint8_t* get(self, Py_ssize_t i, Py_ssize_t* size) noexcept:
        cdef Py_ssize_t j = i + self.offset
        cdef int64_t a, z
        if self.offs32 != NULL:
            a = self.offs32[j]
            z = self.offs32[j + 1]
        else:
            a = self.offs64[j]
            z = self.offs64[j + 1]
        size[0] = <Py_ssize_t>(z - a)
        if self.data == NULL:
            size[0] = 0
            return <const uint8_t*>""
        return self.data + a


def framed_ids(values):
    """The schema ids of the Confluent-framed values (unframed and null values left out)."""
    cdef _Values vals = _Values()
    vals.open(values)
    cdef set ids = set()
    cdef Py_ssize_t i, size
    cdef const uint8_t* p
    cdef int64_t last = -1
    cdef uint32_t schema_id
    for i in range(vals.n):
        if vals.is_null(i):
            continue
        p = vals.get(i, &size)
        if size >= 5 and p[0] == 0:
            schema_id = be32(p + 1)
            if schema_id != last:
                ids.add(schema_id)
                last = schema_id
    return ids


def decode_avro(bytes code, bytes blob, bytes entry_ids, bytes entry_pcs, bytes kinds, bytes first,
                bytes kids, values, bint framed, bint permissive):
    """Decode a binary column into the builders; (their buffers, [(row, error)] in PERMISSIVE).

    A null value is a null row; FAILFAST raises KafkaCodecError at the first bad record."""
    cdef _Dec d = _Dec()
    cdef _Values vals = _Values()
    cdef const int32_t* kind_p = <const int32_t*><const char*>kinds
    cdef const int32_t* first_p = <const int32_t*><const char*>first
    cdef const int64_t* ids_p = <const int64_t*><const char*>entry_ids
    cdef const int32_t* pcs_p = <const int32_t*><const char*>entry_pcs
    cdef Py_ssize_t nentries = len(entry_pcs) // 4
    cdef Py_ssize_t i, row, size, e, pc
    cdef int64_t schema_id = -1, last_id = -2
    cdef Py_ssize_t last_pc = -1
    cdef const uint8_t* p
    cdef int rc
    cdef list errors = []
    vals.open(values)
    d.code = <const int32_t*><const char*>code
    d.ncode = len(code) // 4
    d.blob = <const uint8_t*><const char*>blob
    d.nblob = len(blob)
    d.kids = <const int32_t*><const char*>kids
    d.ncols = len(kinds) // 4
    d.cols = <Col*>calloc(d.ncols, sizeof(Col))
    d.marks = <Mark*>calloc(d.ncols, sizeof(Mark))
    if d.cols == NULL or d.marks == NULL:
        raise MemoryError()
    for i in range(d.ncols):
        d.cols[i].kind = kind_p[i]
        d.cols[i].first = first_p[i]
        d.cols[i].nkids = first_p[i + 1] - first_p[i]
        if kind_p[i] == K_BIN or kind_p[i] == K_LIST or kind_p[i] == K_MAP:
            if d.put_offset(&d.cols[i], 0) < 0:
                raise MemoryError()
    for row in range(vals.n):
        if vals.is_null(row):
            rc = d.put_null(0)
        else:
            if permissive:
                d.mark()
            p = vals.get(row, &size)
            d.base = p
            d.end = size
            rc = 0
            if not framed:
                schema_id = -1
                d.pos = 0
            elif size < 5 or p[0] != 0:
                rc = d.bad("value is not in the Schema Registry framing (magic byte 0, 4-byte schema id)")
            else:
                schema_id = be32(p + 1)
                d.pos = 5
            if rc == 0:
                if schema_id != last_id:
                    last_pc = -1
                    for e in range(nentries):
                        if ids_p[e] == schema_id:
                            last_pc = pcs_p[e]
                            break
                    last_id = schema_id
                if last_pc < 0:
                    rc = d.bad(f"unknown schema id {schema_id}" if framed else "no writer schema")
                else:
                    rc = d.run(last_pc)
            if rc < 0 and d.err == ERR_RECORD:
                if not permissive:
                    raise KafkaCodecError(f"record {row}: {d.msg}")
                d.restore()
                errors.append((row, d.msg))
                d.err = 0
                rc = d.put_null(0)
        if rc < 0:
            if d.err == ERR_MEMORY:
                raise MemoryError()
            raise KafkaCodecError(d.msg)
    raw = []
    cdef Col* col
    for i in range(d.ncols):
        col = &d.cols[i]
        raw.append((
            col.count,
            col.nulls,
            PyBytes_FromStringAndSize(col.valid.p, col.valid.n) if col.nulls else b"",
            PyBytes_FromStringAndSize(col.data.p, col.data.n),
            PyBytes_FromStringAndSize(col.offs.p, col.offs.n),
        ))
    return raw, errors
