"""Typing aliases that need a fallback on Python 3.11."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:  # pragma: no cover - 3.11 has no collections.abc.Buffer
    from typing import Union

    Buffer = Union[bytes, bytearray, memoryview]  # noqa: UP007

__all__ = ["Buffer"]
