"""Environment switches (KAFKA_CORE_PURE_PYTHON, KAFKA_CORE_REQUIRE_EXTENSION, CI), read one way."""

from __future__ import annotations

import os

_OFF = ("", "0", "false", "no")


def env_flag(name: str) -> bool:
    """True unless the variable is unset, empty, or 0/false/no (any case)."""
    return os.environ.get(name, "").strip().lower() not in _OFF
