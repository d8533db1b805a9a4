"""The extensions chosen after import (the Avro ones), as the codec's own are chosen in
``kafka_core.codec``: Cython when the codec is and it loads, else the twin."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from kafka_core.codec.fallback import fall_back

__all__ = ["extension_module"]


@functools.cache
def extension_module(name: str, what: str) -> ModuleType:
    """``kafka_core.codec._cython.<name>`` when the codec is Cython and it loads, else its twin
    ``kafka_core.codec._python.<name>``; ``what`` names it ("Avro codec", "Avro encoder")."""
    from kafka_core import codec

    if codec.IMPLEMENTATION == "cython":
        try:
            return importlib.import_module(f"kafka_core.codec._cython.{name}")
        except ImportError as exc:
            fall_back(what, exc, stacklevel=3)
    return importlib.import_module(f"kafka_core.codec._python.{name}")
