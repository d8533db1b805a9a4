"""A subscription's handler thread: one daemon thread running calls in order.

Not a ThreadPoolExecutor: its workers are joined at interpreter exit, so one handler blocked
forever would hang the process's exit after ``close()`` had already given up on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerThread"]


class HandlerThread:
    """Runs ``fn(arg)`` calls one after another in a daemon thread; awaitable from the loop."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    async def run(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        """Call ``fn(arg)`` in the thread; cancelling the wait leaves the call to finish there."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._calls.put((loop, fut, fn, arg))
        return await fut

    def stop(self) -> None:
        """The thread ends after the call in hand (if any); it is never waited for."""
        self._calls.put(None)

    def _main(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            loop, fut, fn, arg = item
            if fut.cancelled():
                continue
            try:
                result = fn(arg)
            except BaseException as exc:  # handed to the awaiting loop, raised there
                if not isinstance(exc, Exception):  # SystemExit in a handler: still a failure
                    exc = RuntimeError(f"handler raised {exc!r}")
                _settle(loop, fut, None, exc)
            else:
                _settle(loop, fut, result, None)


def _settle(
    loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], result: Any, exc: BaseException | None
) -> None:
    def done() -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
        loop.call_soon_threadsafe(done)
