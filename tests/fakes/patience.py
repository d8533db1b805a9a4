"""How long the waiting helpers (``wait_until``, ``drain``, ``wait_for``) wait before they give up.

A wait returns as soon as what it waits for comes, so its length only matters when it never
comes: then the test fails after the whole wait. A test expected to fail on the session's broker
(a strict xfail for what the SeaweedFS gateway lacks) would sit out every such wait; the test
set-up (conftest.py) shortens them for that test alone, so it fails in seconds while still
asserting the same thing (a feature the gateway gains still passes well within the shorter wait,
and the strict xfail then fails the run). Every other test waits as long as ever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["patience", "shortened"]

_scale = 1.0


def patience(seconds: float) -> float:
    """``seconds`` of waiting, shortened while :func:`shortened` is in effect."""
    return seconds * _scale


@contextlib.contextmanager
def shortened(scale: float) -> Iterator[None]:
    """Within the block, every wait of the helpers is ``scale`` times as long."""
    global _scale
    before, _scale = _scale, scale
    try:
        yield
    finally:
        _scale = before
