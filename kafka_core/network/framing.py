"""Kafka's size-prefixed frames read straight off the socket, and write flow control.

A StreamReader copies every byte three times on the way to a response (recv into bytes, bytes
into its buffer, the buffer into the frame), which made reading a multi-megabyte Fetch response
cost more than decoding it. Here small frames are cut from one scratch buffer, and a large frame
gets a buffer of its own that the socket (or the TLS layer) fills directly.

That buffer is sized from the frame's length only up to ``PREALLOC``; past it, it doubles as bytes
arrive, so a forged length (up to ``max_frame``) costs what the peer sends, not what it claims.

A peer that is not a Kafka broker (an HTTP server, a TLS listener reached in plaintext) answers
with bytes whose first four read as an absurd frame size; :func:`foreign_protocol` names what
they are, so the error can say so instead of quoting a size such as 1213486160 ("HTTP").
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

from kafka_core.codec import new_buffer

SCRATCH = 64 * 1024  # what one read asks for between frames
PREALLOC = 16 << 20  # a large frame's buffer starts at most this big and grows with what arrives
_HEAD = 4
# CPython 3.11's transports inherit writelines from WriteTransport, which joins the parts into
# one bytes: a copy of every Produce payload (each a fresh allocation of up to batch_size, page-
# faulted in). 3.12+ send the parts with sendmsg. On 3.11 a part this large is written on its own.
_JOINS_PARTS = sys.version_info < (3, 12)
_OWN_WRITE = 16 * 1024
_TLS_RECORDS = {0x15: "alert", 0x16: "handshake"}


def foreign_protocol(head: bytes) -> str | None:
    """What a peer speaks, judged from the first bytes it sent where a Kafka frame size belongs,
    when that is recognisably not Kafka; None when nothing is recognised."""
    if head[:4] == b"HTTP":
        return "HTTP"
    if len(head) >= 2 and head[0] in _TLS_RECORDS and head[1] == 0x03:
        return f"TLS (a TLS {_TLS_RECORDS[head[0]]} record)"
    return None


def _foreign_size(size: int) -> bool:
    # Checked on the first frame only (a large max_frame could let "HTTP" or a TLS record pass
    # as a size, and the connection would wait for that many bytes); later frames pay nothing.
    return foreign_protocol(size.to_bytes(4, "big", signed=True)) is not None


class FrameSink:
    """What the protocol reports to: frames, an oversized frame, the end of the stream."""

    def frame_received(self, frame: bytearray | bytes) -> bool:  # False: stop reading
        raise NotImplementedError

    def bad_frame_size(self, size: int) -> None:
        raise NotImplementedError

    def stream_ended(self, exc: BaseException | None, mid_frame: bool) -> None:
        raise NotImplementedError


class FrameProtocol(asyncio.BufferedProtocol):
    """Reads frames for a FrameSink; the transport writes, ``drain`` honours flow control."""

    def __init__(self, sink: FrameSink, max_frame: int) -> None:
        self._sink = sink
        self._max_frame = max_frame
        self._scratch = bytearray(SCRATCH)
        self._filled = 0  # bytes of _scratch holding unparsed input
        self._frame: bytearray | None = None  # a large frame being read in place
        self._frame_size = 0  # its length; _frame may still be shorter (it grows as bytes arrive)
        self._got = 0
        self._stopped = False
        self._first = True  # no frame seen yet: the one place another protocol's greeting shows
        self.transport: asyncio.Transport | None = None
        self._paused = False
        self._drain_waiters: deque[asyncio.Future[None]] = deque()
        self._lost = False
        self._lost_exc: BaseException | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- reading ---------------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            if self._got == len(self._frame):  # full, the frame is not: double it (a new buffer,
                # as a view handed out before may still pin the old one against resizing)
                grown = new_buffer(min(self._frame_size, 2 * len(self._frame)))
                memoryview(grown)[: self._got] = self._frame
                self._frame = grown
            return memoryview(self._frame)[self._got :]
        # Never full: what _cut_frames leaves is a partial head (< 4 bytes) or a partial frame
        # that fits the buffer (larger ones are read in place).
        return memoryview(self._scratch)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._stopped:
            return
        if self._frame is not None:
            self._got += nbytes
            if self._got == self._frame_size:
                frame, self._frame = self._frame, None
                self._deliver(frame)
            return
        self._filled += nbytes
        self._cut_frames()

    def _cut_frames(self) -> None:
        buf = self._scratch
        pos = 0
        end = self._filled
        while not self._stopped and end - pos >= _HEAD:
            size = int.from_bytes(memoryview(buf)[pos : pos + _HEAD], "big", signed=True)
            if size < _HEAD or size > self._max_frame or (self._first and _foreign_size(size)):
                self._stopped = True
                self._sink.bad_frame_size(size)
                return
            self._first = False
            start = pos + _HEAD
            if end - start >= size:
                self._deliver(bytes(memoryview(buf)[start : start + size]))
                pos = start + size
                continue
            if size > len(buf) - start:
                # Larger than what is left of the scratch buffer: read the rest in place.
                have = end - start
                frame = new_buffer(min(size, max(PREALLOC, have)))  # filled before it is delivered
                frame[:have] = memoryview(buf)[start:end]
                self._frame, self._frame_size, self._got = frame, size, have
                pos = end
            break
        if pos:
            rest = end - pos
            if rest:
                buf[:rest] = buf[pos:end]
            self._filled = rest

    def _deliver(self, frame: bytearray | bytes) -> None:
        if not self._sink.frame_received(frame):
            self._stopped = True

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost reports the end

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lost = True
        self._lost_exc = exc
        mid_frame = self._frame is not None or self._filled > 0
        if not self._stopped:
            self._stopped = True
            self._sink.stream_ended(exc, mid_frame)
        self._wake_writers(exc)
        if not self.closed.done():
            self.closed.set_result(None)

    # -- writing ---------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers(None)

    def _wake_writers(self, exc: BaseException | None) -> None:
        while self._drain_waiters:
            fut = self._drain_waiters.popleft()
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)

    def write(self, parts: list[bytes | bytearray | memoryview]) -> None:
        assert self.transport is not None
        # Once the transport closes the bytes go nowhere (drain() raises once it is lost, the
        # in-flight requests fail). CPython 3.12+'s selector transport raises TypeError from
        # writelines then (gh-136234; 3.13 from close() on), where 3.11 dropped or buffered them.
        if self._lost or self.transport.is_closing():
            return
        if _JOINS_PARTS:
            _write_unjoined(self.transport, parts)
        else:
            self.transport.writelines(parts)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError(
                f"connection lost: {self._lost_exc}" if self._lost_exc else "connection lost"
            )
        if not self._paused:
            return
        fut = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(fut)
        await fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _write_unjoined(transport: asyncio.WriteTransport, parts: list[bytes | bytearray | memoryview]) -> None:
    """``parts`` in order, small ones joined, each large one written as it is: an empty
    transport sends it straight from our buffer, a busy one copies only what it must queue."""
    small: list[bytes | bytearray | memoryview] = []
    for part in parts:
        if len(part) < _OWN_WRITE:
            small.append(part)
            continue
        if small:
            transport.write(b"".join(small))
            small.clear()
        transport.write(part)
    if small:
        transport.write(b"".join(small))


async def open_frames(
    host: str,
    port: int,
    sink_factory: Callable[[], FrameSink],
    *,
    max_frame: int,
    ssl: Any = None,
    server_hostname: str | None = None,
) -> FrameProtocol:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(
        lambda: FrameProtocol(sink_factory(), max_frame), host, port, ssl=ssl, server_hostname=server_hostname
    )
    return protocol
