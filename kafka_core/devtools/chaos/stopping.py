"""Stopping a chaos run part-way without losing it.

A full-mode run is hours of cycles on a shared machine; before this, a SIGINT or SIGTERM lost
every cycle already run. The first signal asks the run to stop: the cycle under way ends, the
books of the cycles run are settled as usual and the artifact is written, its verdict
INCOMPLETE (or FAIL, if those books do not balance). A second signal stops at once (the artifact
then says no books were made).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["graceful_stop", "request_stop", "reset", "stop_requested"]

_requested = threading.Event()
_why: list[str] = []


def request_stop(why: str) -> None:
    """Ask the run to stop after the cycle under way (``why`` goes into the artifact)."""
    if not _requested.is_set():
        _why.append(why)
        _requested.set()


def stop_requested() -> str | None:
    """Why the run was asked to stop, or None while it should go on."""
    return _why[0] if _requested.is_set() else None


def reset() -> None:
    _requested.clear()
    _why.clear()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    if _requested.is_set():
        raise KeyboardInterrupt(f"{name} again: stopping at once")
    request_stop(name)
    print(
        f"{name}: stopping after the cycle under way; the books and the artifact follow "
        "(send it again to stop at once, without books)",
        file=sys.stderr,
        flush=True,
    )


@contextlib.contextmanager
def graceful_stop() -> Iterator[None]:
    """SIGINT and SIGTERM ask for a stop while inside; the previous handlers come back after."""
    reset()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
