"""CRC32C (Castagnoli) through the ``crc32c`` package: SSE4.2/ARMv8 hardware where available.

The package releases the GIL for large buffers; both codec twins call this one function.
"""

from __future__ import annotations

import crc32c as _crc32c

from kafka_core._typing import Buffer


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``value``."""
    return _crc32c.crc32c(data, value)
