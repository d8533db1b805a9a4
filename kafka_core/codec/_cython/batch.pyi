"""kafka_core.codec._cython.batch (source: _codec/batch.pyx): records and columnar cimport its
functions (batch.pxd); the Python-level names are test and benchmark hooks of the batch CRC."""

from typing import Any

__all__: list[str] = []

def _crc32c_folding(enabled: bool | None = None) -> bool: ...
def _crc32c_fold(data: Any, value: int = 0) -> int | None: ...
