"""kafka_core.codec._cython.batch (source: _codec/batch.pyx) has no Python-level API: records
and columnar cimport its functions (batch.pxd)."""

__all__: list[str] = []
