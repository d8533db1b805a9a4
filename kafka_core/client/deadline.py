"""One deadline through a call, however many retry loops it passes through.

A call's retry loop may run others (an admin call's metadata refresh bootstraps the client,
which retries the bootstrap servers); each used to start its own clock with the same
``api_timeout_ms``, so a call failed after twice its time, its error quoting the inner loop's
timeout as its cause. A loop now runs under the earliest deadline of those around it in the same
task, and reports the innermost cause.

The deadline belongs to the task that set it: a task started meanwhile (a shared refresh, a
background watcher) keeps its own time, as it may outlive the call.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from kafka_core.errors import KafkaTimeoutError

_CURRENT: contextvars.ContextVar[tuple[float, asyncio.Task[object] | None] | None] = contextvars.ContextVar(
    "kafka_core_call_deadline", default=None
)


def _task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def effective(deadline: float) -> float:
    """``deadline`` (loop time), or the earlier one a caller in this task set."""
    outer = _CURRENT.get()
    if outer is not None and outer[1] is _task() and outer[0] < deadline:
        return outer[0]
    return deadline


@contextmanager
def scope(deadline: float) -> Iterator[float]:
    """Run the body under ``deadline`` or the earlier one around it; yields the one in force."""
    in_force = effective(deadline)
    token = _CURRENT.set((in_force, _task()))
    try:
        yield in_force
    finally:
        _CURRENT.reset(token)


class DeadlinePassed(KafkaTimeoutError):
    """A retry loop gave up at its deadline. ``cause`` is the last error it swallowed, so a loop
    around it that gives up at the same deadline reports that cause, not this error."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def root_cause(error: BaseException) -> BaseException:
    """The error a loop swallowed last, through any loops nested inside it."""
    while isinstance(error, DeadlinePassed) and error.cause is not None:
        error = error.cause
    return error
