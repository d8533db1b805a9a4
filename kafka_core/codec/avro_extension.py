"""The choice between an Avro extension and its pure-Python twin, made once per module: Cython
when the codec is, else (or if it will not load, loudly) the twin."""

from __future__ import annotations

import functools
import importlib
import warnings
from types import ModuleType

from kafka_core._env import env_flag

__all__ = ["avro_module"]


@functools.cache
def avro_module(name: str, what: str) -> ModuleType:
    """``kafka_core.codec._cython.<name>`` or its twin ``kafka_core.codec._python.<name>``;
    ``what`` names it in the warning or error ("Avro codec", "Avro encoder")."""
    from kafka_core import codec

    module = importlib.import_module(f"kafka_core.codec._python.{name}")
    if codec.IMPLEMENTATION == "cython":
        try:
            module = importlib.import_module(f"kafka_core.codec._cython.{name}")
        except ImportError as exc:
            if env_flag("KAFKA_CORE_REQUIRE_EXTENSION"):
                raise ImportError(f"kafka_core: the Cython {what} did not load ({exc})") from exc
            warnings.warn(
                f"kafka_core: Cython {what} unavailable ({exc}); using the slower pure-Python one",
                RuntimeWarning,
                stacklevel=3,
            )
    return module
