# The declarations of kafka_core.codec._cython.batch (source: _codec/batch.pyx): what records.pyx
# and columnar.pyx share to open a RecordBatch. Called once per batch, never per record, so the
# call across modules costs nothing measurable.

from libc.stdint cimport uint8_t, uint32_t

from kafka_core.codec._cython.primitives cimport Input
from reader cimport Batch, Reader

cdef Input open_input(object obj)
cdef int check_crc(Input inp, Batch* b) except -1
cdef uint32_t crc_of(object owner, Py_ssize_t start, const uint8_t* p, Py_ssize_t n) except? 0
cdef object open_records(Input inp, Batch* b, bint verify, Reader* r)
cdef list legacy_rows(Input inp, Batch* b, bint verify)
