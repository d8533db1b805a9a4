"""Environment switches (KAFKA_CORE_PURE_PYTHON, KAFKA_CORE_REQUIRE_EXTENSION, CI), read one way."""

from __future__ import annotations

import os

_OFF = ("", "0", "false", "no")


def env_flag(name: str, default: bool = False) -> bool:
    """Unset or empty: default; otherwise true unless 0/false/no (any case)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    return value not in _OFF
