"""Timing helpers and dead addresses for fail-fast tests: one copy instead of one per test file.

``timed`` / ``atimed`` give (result or the exception raised, seconds taken) so a test can check
both what happened and that it happened within its bound; ``black_hole`` is a listener the
kernel accepts connections for and that never answers a byte; ``closed_port`` refuses at once.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fakes.patience import patience

__all__ = ["aio", "atimed", "black_hole", "closed_port", "outcomes", "timed", "wait_until"]


def wait_until(cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Whether ``cond()`` became true within ``timeout`` seconds (checked every 0.1 s, and once
    more at the end; the timeout as fakes.patience shortens it)."""
    deadline = time.monotonic() + patience(timeout)
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(``fn()`` or the exception it raised, seconds taken)."""
    t0 = time.monotonic()
    try:
        out: Any = fn()
    except Exception as exc:
        out = exc
    return out, time.monotonic() - t0


async def atimed(aw: Awaitable[Any]) -> tuple[Any, float]:
    """(the awaited result or the exception it raised, seconds taken)."""
    t0 = time.monotonic()
    try:
        out: Any = await aw
    except Exception as exc:
        out = exc
    return out, time.monotonic() - t0


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run an async test on a fresh event loop (no pytest-asyncio dependency)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@contextmanager
def black_hole() -> Iterator[int]:
    """The port of a listener that takes connections (the kernel's backlog) and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


def closed_port() -> int:
    """A port nothing listens on (bound then released): connecting is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def outcomes(futures: list[Any], timeout: float) -> list[Any]:
    """Each future's metadata or exception, waiting at most ``timeout`` s for all of them
    together; a future already settled counts as settled however slow this loop runs (one wait
    for all, not a shrinking wait per future, which a loaded machine turned into "pending")."""
    tasks = [asyncio.ensure_future(_await(f)) for f in futures]
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
    out: list[Any] = []
    for task in tasks:
        if not task.done():
            task.cancel()
            out.append("pending")
        elif task.exception() is not None:
            out.append(task.exception())
        else:
            out.append(task.result())
    return out


async def _await(f: Any) -> Any:
    return await f
