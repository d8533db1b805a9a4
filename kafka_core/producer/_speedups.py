"""The producer's C extension or its pure-Python twin, chosen once, here, at import (as the
codec's): ``accel`` is ``kafka_core.producer._cython.accel`` (built from ``_codec/accel.pyx``) or
``kafka_core.producer._python.accel``, the same names and API.

``KAFKA_CORE_PURE_PYTHON=1`` forces the twin (CI runs the unit suite both ways);
``KAFKA_CORE_REQUIRE_EXTENSION=1`` turns a missing extension into an ImportError.
"""

from __future__ import annotations

import importlib
from typing import Any

from kafka_core._env import env_flag

__all__ = ["IMPLEMENTATION", "accel"]

accel: Any
IMPLEMENTATION: str
if env_flag("KAFKA_CORE_PURE_PYTHON"):
    accel, IMPLEMENTATION = importlib.import_module("kafka_core.producer._python.accel"), "python"
else:
    try:
        accel, IMPLEMENTATION = importlib.import_module("kafka_core.producer._cython.accel"), "cython"
    except ImportError as exc:
        if env_flag("KAFKA_CORE_REQUIRE_EXTENSION"):
            raise ImportError(f"kafka_core: the producer's C extension did not load ({exc})") from exc
        accel, IMPLEMENTATION = importlib.import_module("kafka_core.producer._python.accel"), "python"
