"""The optional C extension (``_accel``), or None: chosen once, like the codec's; and the
pure-Python twins of its data classes.

``KAFKA_CORE_PURE_PYTHON=1`` forces the pure-Python paths (CI runs the unit suite both ways).
"""

from __future__ import annotations

import importlib
from typing import Any

from kafka_core._env import env_flag

accel: Any = None
if not env_flag("KAFKA_CORE_PURE_PYTHON"):
    try:
        accel = importlib.import_module("kafka_core.producer._accel")
    except ImportError as exc:
        if env_flag("KAFKA_CORE_REQUIRE_EXTENSION"):
            raise ImportError(f"kafka_core: the producer's C extension did not load ({exc})") from exc
        accel = None


class _Budget:
    """Bytes of buffer memory in use, and the limit (``buffer_memory``)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.used = 0
        self.limit = limit


class _BatchBase:
    """The fields of a batch that ``send`` touches (a C struct when the extension is built)."""

    __slots__ = ("count", "result", "size", "values")


Budget: Any = _Budget
BatchBase: Any = _BatchBase
if accel is not None:
    Budget, BatchBase = accel.Budget, accel.BatchBase
