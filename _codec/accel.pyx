# cython: language_level=3, boundscheck=False, wraparound=False
"""The producer's hot path in C: ``send`` of a null-key record into the sticky batch.

Builds into ``kafka_core.producer._cython.accel``. Optional: its pure-Python twin,
``kafka_core/producer/_python/accel.py``, has the same names and API, and
``kafka_core.producer._speedups`` chooses one of the two once, at import. The logic is the
accumulator's; this only removes the interpreter overhead of the common case (and, with
``no_gc`` futures, the garbage collector's cost of millions of live futures).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

cdef unsigned int _murmur2(const unsigned char* data, Py_ssize_t length) noexcept nogil:
    """Kafka's murmur2 (seed 0x9747b28c), the Java client's byte-for-byte."""
    cdef unsigned int m = 0x5BD1E995
    cdef unsigned int seed = 0x9747B28C
    cdef unsigned int h = seed ^ <unsigned int>length
    cdef unsigned int k
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t end4 = length & ~3
    cdef Py_ssize_t tail = length & 3
    while i < end4:
        k = (<unsigned int>data[i] | (<unsigned int>data[i + 1] << 8)
             | (<unsigned int>data[i + 2] << 16) | (<unsigned int>data[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    if tail == 3:
        h ^= <unsigned int>data[end4 + 2] << 16
    if tail >= 2:
        h ^= <unsigned int>data[end4 + 1] << 8
    if tail >= 1:
        h ^= <unsigned int>data[end4]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def murmur2(data):
    """Kafka's murmur2 of a bytes-like key, as a signed 32-bit int (like Java)."""
    if type(data) is not bytes:
        data = bytes(data)
    cdef unsigned int h = _murmur2(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    return <int>h


def murmur2_partitions(const unsigned char[::1] offsets, const unsigned char[::1] data,
                       Py_ssize_t first, Py_ssize_t length, bint large, int num_partitions,
                       const unsigned char[::1] validity=None):
    """Partition of every key of an Arrow (large_)binary array, from its buffers: int32s, -1
    where the key is null. ``first`` is the array's offset into its buffers. Every offset is
    checked against the data buffer before it is read."""
    if num_partitions < 1:
        raise ValueError("num_partitions must be positive")
    cdef Py_ssize_t width = 8 if large else 4
    if first < 0 or length < 0 or offsets.shape[0] < (first + length + 1) * width:
        raise ValueError("offsets buffer too short for the array")
    if validity is not None and validity.shape[0] * 8 < first + length:
        raise ValueError("validity buffer too short for the array")
    out = bytearray(4 * length)
    cdef int[::1] parts = memoryview(out).cast("i")
    cdef const int* off32 = <const int*>&offsets[0]
    cdef const long long* off64 = <const long long*>&offsets[0]
    cdef Py_ssize_t i, j, start, stop, size = data.shape[0]
    cdef const unsigned char* base = &data[0] if size else NULL
    for i in range(length):
        j = first + i
        if validity is not None and not (validity[j >> 3] >> (j & 7)) & 1:
            parts[i] = -1
            continue
        if large:
            start = off64[j]
            stop = off64[j + 1]
        else:
            start = off32[j]
            stop = off32[j + 1]
        if start < 0 or stop < start or stop > size:
            raise ValueError(f"key {i}: offsets {start}..{stop} outside the data buffer ({size} bytes)")
        parts[i] = <int>((_murmur2(base + start, stop - start) & 0x7FFFFFFF) % <unsigned int>num_partitions)
    return out


cdef object _TupleFuture = None  # futures.TupleRecordFuture, whose methods do the real work


def setup(tuple_future):
    """Returns the record future type ``send`` makes; ``tuple_future`` does its work."""
    global _TupleFuture
    _TupleFuture = tuple_future
    return RecordFuture


cdef class Budget:
    """Bytes of buffer memory in use, and the limit (``buffer_memory``)."""

    cdef public Py_ssize_t used
    cdef public Py_ssize_t limit

    def __init__(self, Py_ssize_t limit):
        self.used = 0
        self.limit = limit


cdef class BatchBase:
    """The fields of ``ProducerBatch`` that ``send`` touches (the rest live in the subclass)."""

    cdef public Py_ssize_t count
    cdef public Py_ssize_t size
    cdef public list values
    cdef public object result


@cython.no_gc
@cython.final
@cython.freelist(256)
cdef class RecordFuture:
    """A record's future: (batch result, index). Not tracked by the GC: it can only point at a
    BatchResult, which never points back at futures once it is done."""

    cdef readonly object batch
    cdef readonly Py_ssize_t index

    def __init__(self, pair):
        self.batch, self.index = pair

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return (self.batch, self.index)[i]

    def __iter__(self):
        return iter((self.batch, self.index))

    cdef object _twin(self):
        return _TupleFuture((self.batch, self.index))

    def done(self):
        return self._twin().done()

    def result(self, timeout=None):
        """Block until delivered and return where the record landed, or raise its typed error."""
        return self._twin().result(timeout)

    def get(self, timeout=None):
        return self._twin().result(timeout)

    def exception(self, timeout=None):
        return self._twin().exception(timeout)

    def add_callback(self, fn):
        """``fn(metadata)`` on success, on the producer's I/O thread (keep it short)."""
        self._twin().add_callback(fn)
        return self

    def add_errback(self, fn):
        """``fn(exception)`` on failure."""
        self._twin().add_errback(fn)
        return self

    def add_done_callback(self, fn):
        """``fn(future)`` when done either way."""
        self._twin().add_done_callback(fn)
        return self

    def __await__(self):
        return self._twin().__await__()

    def __repr__(self):
        return repr(self._twin())


@cython.final
cdef class FastAppend:
    """``send`` for the common cases; anything else goes to ``slow`` (the accumulator's
    general path). Takes the accumulator's lock, the one that guards what it touches."""

    cdef dict fast
    cdef dict topics
    cdef bint murmur2_keys
    cdef object acquire
    cdef object release
    cdef object slow
    cdef Budget mem
    cdef Py_ssize_t batch_size
    cdef Py_ssize_t overhead
    # Set (under the accumulator's lock) while a transactional producer may not take records:
    # every send goes to the Python path, which raises why.
    cdef public bint gated

    def __init__(self, acc, slow, Py_ssize_t overhead, bint murmur2_keys):
        self.topics = acc.topics
        self.murmur2_keys = murmur2_keys
        self.fast = acc.fast
        self.acquire = acc.lock.acquire
        self.release = acc.lock.release
        self.slow = slow
        self.mem = acc.mem
        self.batch_size = acc.batch_size
        self.overhead = overhead

    def __call__(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None):
        cdef PyObject* bp
        cdef BatchBase b
        cdef Py_ssize_t size, index
        cdef RecordFuture f
        if key is None and partition is None and headers is None and timestamp_ms is None and type(value) is bytes:
            size = PyBytes_GET_SIZE(value) + self.overhead
            self.acquire()
            try:
                bp = PyDict_GetItem(self.fast, topic) if not self.gated else NULL
                if bp != NULL:
                    b = <BatchBase>bp
                    if b.size + size <= self.batch_size and self.mem.used + size <= self.mem.limit:
                        index = b.count
                        b.values.append(value)
                        b.count = index + 1
                        b.size += size
                        self.mem.used += size
                        f = RecordFuture.__new__(RecordFuture)
                        f.batch = b.result
                        f.index = index
                        return f
            finally:
                self.release()
        if (self.murmur2_keys and type(key) is bytes and partition is None and headers is None
                and timestamp_ms is None and type(value) is bytes):
            f = self._keyed(topic, value, key)
            if f is not None:
                return f
        return self.slow(topic, value, key, partition, headers, timestamp_ms)

    cdef RecordFuture _keyed(self, topic, value, bytes key):
        """A keyed record into its murmur2 partition's open batch (keys, values only so far)."""
        cdef PyObject* tp
        cdef BatchBase b
        cdef Py_ssize_t size, index, n
        cdef unsigned int h
        cdef RecordFuture f
        size = PyBytes_GET_SIZE(value) + PyBytes_GET_SIZE(key) + self.overhead
        self.acquire()
        try:
            if self.gated:
                return None
            tp = PyDict_GetItem(self.topics, topic)
            if tp == NULL:
                return None
            t = <object>tp
            queues = t.queues
            if queues is None:
                return None
            n = t.num_partitions
            if n <= 0:
                return None
            h = _murmur2(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
            ob = queues[<Py_ssize_t>((h & 0x7FFFFFFF) % <unsigned int>n)].open
            if ob is None or not isinstance(ob, BatchBase):
                return None
            b = <BatchBase>ob
            if b.size + size > self.batch_size or self.mem.used + size > self.mem.limit:
                return None
            if ob.headers is not None or ob.timestamps is not None:
                return None
            index = b.count
            keys = ob.keys
            if keys is None:
                keys = [None] * index
                ob.keys = keys
            keys.append(key)
            b.values.append(value)
            b.count = index + 1
            b.size += size
            self.mem.used += size
            if PyDict_GetItem(self.fast, topic) == <PyObject*>ob:
                del self.fast[topic]  # the values-only fast path must not touch it now
            f = RecordFuture.__new__(RecordFuture)
            f.batch = b.result
            f.index = index
            return f
        finally:
            self.release()
