"""Delivery futures that cost almost nothing per record.

One :class:`BatchResult` is shared by every record of a producer batch; a record's future is a
2-tuple ``(batch_result, index)`` (a tuple subclass, so creating one is a C-level allocation),
and its :class:`RecordMetadata` is built only when asked for. Results are set on the I/O loop
thread; ``result()`` may block in any other thread, and ``await future`` works on any loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, NamedTuple

from kafka_core.errors import KafkaTimeoutError
from kafka_core.producer._speedups import accel

__all__ = ["BatchResult", "RecordFuture", "RecordMetadata", "SendBatchFuture", "SendBatchResult"]


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 with acks=0 (the broker does not say)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


_PENDING, _DONE, _FORWARDED = 0, 1, 2


class BatchResult:
    """The outcome of one batch: base offset and timestamps, or an error, for all its records.

    A batch for a topic whose metadata is not known yet is *forwarded* once its records are
    partitioned: each index then points at (result, index) of the real batch it went into.
    """

    __slots__ = (
        "_aio_waiters",
        "_callbacks",
        "_event",
        "_forward",
        "_lock",
        "_state",
        "base_offset",
        "base_timestamp",
        "error",
        "log_append_time",
        "partition",
        "timestamps",
        "topic",
    )

    def __init__(self, topic: str, partition: int, base_timestamp: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_timestamp = base_timestamp
        self.timestamps: list[int | None] | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._state = _PENDING
        # Guards _state, _event, _callbacks and _aio_waiters: the I/O thread settles the result
        # while callers in other threads wait on it or add callbacks.
        self._lock = threading.Lock()
        self._event: threading.Event | None = None
        self._callbacks: list[tuple[int, Callable[[Any], None], bool]] | None = None
        self._aio_waiters: list[asyncio.Future[None]] | None = None
        self._forward: list[tuple[BatchResult, int]] | None = None

    @property
    def done(self) -> bool:
        return self._state != _PENDING

    # -- on the I/O side ----------------------------------------------------------------------

    def set_result(self, base_offset: int, log_append_time: int = -1) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish(_DONE)

    def set_error(self, error: BaseException) -> None:
        self.error = error
        self._finish(_DONE)

    def forward(self, targets: list[tuple[BatchResult, int]]) -> None:
        """Point every index at a record of a real batch; callbacks move along."""
        self._forward = targets
        self._finish(_FORWARDED)

    def _finish(self, state: int) -> None:
        with self._lock:
            if self._state != _PENDING:
                return
            self._state = state
            callbacks, self._callbacks = self._callbacks, None
            waiters, self._aio_waiters = self._aio_waiters, None
            event = self._event
        if event is not None:
            event.set()
        if waiters:
            for w in waiters:
                _wake(w)
        if callbacks:
            for index, fn, with_future in callbacks:
                if state == _FORWARDED:
                    target, tindex = self._forward[index]  # type: ignore[index]
                    target.add_callback(tindex, fn, with_future)
                else:
                    _run_callback(self, index, fn, with_future)

    # -- on the caller side -------------------------------------------------------------------

    def metadata(self, index: int) -> RecordMetadata:
        if self.timestamps is not None and self.timestamps[index] is not None:
            ts = self.timestamps[index]
        else:
            ts = self.base_timestamp
        if self.log_append_time >= 0:
            ts = self.log_append_time
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, ts)  # type: ignore[arg-type]

    def wait(self, timeout: float | None) -> bool:
        if self._state != _PENDING:
            return True
        with self._lock:
            if self._state != _PENDING:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def add_callback(self, index: int, fn: Callable[[Any], None], with_future: bool) -> None:
        with self._lock:
            if self._state == _PENDING:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((index, fn, with_future))
                return
        if self._state == _FORWARDED:
            target, tindex = self._forward[index]  # type: ignore[index]
            target.add_callback(tindex, fn, with_future)
        else:
            _run_callback(self, index, fn, with_future)

    def aio_waiter(self) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._state == _PENDING:
                if self._aio_waiters is None:
                    self._aio_waiters = []
                self._aio_waiters.append(fut)
                return fut
        fut.set_result(None)
        return fut

    def forwarded_to(self) -> list[BatchResult]:
        """The real batches this parked one was partitioned into (empty unless forwarded)."""
        forward = self._forward
        return [r for r, _ in forward] if forward is not None else []

    def resolve(self, index: int) -> tuple[BatchResult, int]:
        """Follow forwarding to the batch that really holds record ``index`` (only once done)."""
        result = self
        while result._state == _FORWARDED:
            result, index = result._forward[index]  # type: ignore[index]
        return result, index


def _wake(fut: asyncio.Future[None]) -> None:
    loop = fut.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        if not fut.done():
            fut.set_result(None)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(_set_if_pending, fut)


def _set_if_pending(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _run_callback(result: BatchResult, index: int, fn: Callable[[Any], None], with_future: bool) -> None:
    try:
        if with_future:
            fn(RecordFuture((result, index)))
        elif result.error is None:
            fn(result.metadata(index))
    except Exception:  # a user callback must not break delivery of the others
        import logging

        logging.getLogger("kafka_core.producer").exception("producer callback raised")


class TupleRecordFuture(tuple):
    """The future ``send`` returns: ``(BatchResult, index)``; see the module docstring."""

    __slots__ = ()

    def done(self) -> bool:
        result, index = self
        return result.resolve(index)[0].done if result.done else False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Block until delivered and return where the record landed, or raise its typed error."""
        result, index = self._wait(timeout)
        if result.error is not None:
            raise result.error
        return result.metadata(index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        result, _ = self._wait(timeout)
        return result.error

    def get(self, timeout: float | None = None) -> RecordMetadata:
        return self.result(timeout)

    def _wait(self, timeout: float | None) -> tuple[BatchResult, int]:
        result, index = self
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not result.wait(left):
                raise KafkaTimeoutError(f"record not delivered within {timeout}s")
            if result._state != _FORWARDED:
                return result, index
            result, index = result._forward[index]

    def add_callback(self, fn: Callable[[RecordMetadata], None]) -> RecordFuture:
        """``fn(metadata)`` on success, on the producer's I/O thread (keep it short)."""
        result, index = self
        result.add_callback(index, fn, False)
        return self

    def add_errback(self, fn: Callable[[BaseException], None]) -> RecordFuture:
        """``fn(exception)`` on failure."""

        def on_done(fut: RecordFuture) -> None:
            exc = fut.exception(0)
            if exc is not None:
                fn(exc)

        return self.add_done_callback(on_done)

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> RecordFuture:
        """``fn(future)`` when done either way (concurrent.futures style)."""
        result, index = self
        result.add_callback(index, fn, True)
        return self

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        result, index = self
        while True:
            if not result.done:
                yield from result.aio_waiter().__await__()
            if result._state == _FORWARDED:
                result, index = result._forward[index]
                continue
            if result.error is not None:
                raise result.error
            return result.metadata(index)

    def __repr__(self) -> str:
        result, index = self
        state = "pending" if not self.done() else ("failed" if self.exception(0) else "delivered")
        return f"<RecordFuture {result.topic}[{result.partition}] #{index} {state}>"


# The C module's GC-untracked future when it is built, else the tuple future itself.
RecordFuture: Any = accel.setup(TupleRecordFuture)


class SendBatchResult(Sequence[RecordMetadata]):
    """What a ``send_batch`` call became: one RecordMetadata per input row, built on demand."""

    def __init__(self, parts: list[tuple[BatchResult, Sequence[int] | range]], count: int) -> None:
        self._rows: list[tuple[BatchResult, int] | None] = [None] * count
        for result, rows in parts:
            if hasattr(rows, "to_pylist"):  # a pyarrow array of row numbers
                rows = rows.to_pylist()
            for i, row in enumerate(rows):
                self._rows[row] = (result, i)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: int) -> RecordMetadata:  # type: ignore[override]
        result, index = self._rows[i]  # type: ignore[misc]
        result, index = result.resolve(index)
        return result.metadata(index)

    def __iter__(self) -> Iterator[RecordMetadata]:
        return (self[i] for i in range(len(self)))

    @property
    def partitions(self) -> dict[int, int]:
        """Records per partition."""
        out: dict[int, int] = {}
        for entry in self._rows:
            if entry is not None:
                p = entry[0].resolve(entry[1])[0].partition
                out[p] = out.get(p, 0) + 1
        return out


class SendBatchFuture:
    """One future for a whole ``send_batch`` call; fails with the first error of any part.

    Parts are real batches (``send_batch`` waits for the topic's metadata before splitting).
    """

    __slots__ = ("_count", "_parts")

    def __init__(self, parts: list[tuple[BatchResult, Sequence[int] | range]], count: int) -> None:
        self._parts = parts
        self._count = count

    def done(self) -> bool:
        return all(r.done for r, _ in self._parts)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for result, _rows in self._parts:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not result.wait(left):
                raise KafkaTimeoutError(f"batch not delivered within {timeout}s")
        for result, _rows in self._parts:
            if result.error is not None:
                return result.error
        return None

    def result(self, timeout: float | None = None) -> SendBatchResult:
        exc = self.exception(timeout)
        if exc is not None:
            raise exc
        return SendBatchResult(self._parts, self._count)

    def add_done_callback(self, fn: Callable[[SendBatchFuture], None]) -> SendBatchFuture:
        remaining = [len(self._parts)]
        lock = threading.Lock()  # guards remaining: parts settle on the I/O thread, added here

        def one_done(_: Any) -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                fn(self)

        if not self._parts:
            fn(self)
        for result, _rows in self._parts:
            result.add_callback(0, one_done, True)
        return self

    def __await__(self) -> Generator[Any, None, SendBatchResult]:
        for result, _rows in self._parts:
            if not result.done:
                yield from result.aio_waiter().__await__()
        return self.result(0)
