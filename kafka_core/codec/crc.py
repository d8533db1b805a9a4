"""CRC32C (Castagnoli) through the ``crc32c`` package: SSE4.2/ARMv8 hardware where available.

The package releases the GIL for large buffers; both codec twins call this one function. It is
imported at the first checksum, not with the codec: its ``__init__`` asks ``importlib.metadata``
for its own version, which scans every path entry for distributions (40 ms in a plain process,
about 160 ms in a Spark worker, whose path starts with ``pyspark.zip``), and the Cython codec
never needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kafka_core._typing import Buffer


@functools.cache
def _implementation() -> Callable[[Buffer, int], int]:
    import crc32c as package

    return package.crc32c


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``value``."""
    return _implementation()(data, value)
