"""A fault-injecting TCP proxy for Kafka traffic, controlled at run time.

It sits between clients and one broker (the broker advertises the proxy's port, so every
connection a client opens comes through it) and can reset every connection with an RST, refuse
new ones, stall all bytes both ways, delay every response, or flip a byte inside a record batch
of a Fetch response. It runs its own event loop in a thread, so blocking code (the chaos
harness, tests with plain sockets) drives it with ordinary method calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from kafka_core.devtools.chaos.capture import ProduceCapture, RequestLog

__all__ = ["FaultProxy", "find_record_batch"]

_FETCH = 1
_MAX_FRAME = 1 << 30
_REQUEST_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST, not FIN
_CHUNK = 65_536


def find_record_batch(buf: bytes | bytearray, start: int = 8) -> tuple[int, int] | None:
    """Where the first v2 record batch in ``buf`` is: (start, end), proven by its CRC-32C.

    Found by its layout (magic 2 at byte 16, a record count that matches lastOffsetDelta) and
    confirmed by its checksum, so no Fetch response version has to be parsed.
    """
    n = len(buf)
    p = buf.find(b"\x02", start + 16)
    while p != -1:
        i = p - 16
        length = int.from_bytes(buf[i + 8 : i + 12], "big", signed=True)
        end = i + 12 + length
        if length >= 49 and end <= n:
            delta = int.from_bytes(buf[i + 23 : i + 27], "big", signed=True)
            count = int.from_bytes(buf[i + 57 : i + 61], "big", signed=True)
            if (
                count > 0
                and delta == count - 1
                and crc32c(bytes(buf[i + 21 : end])) == int.from_bytes(buf[i + 17 : i + 21], "big")
            ):
                return i, end
        p = buf.find(b"\x02", p + 1)
    return None


class _RequestScanner:
    """Follows request frame boundaries in a client->broker byte stream to read each header."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.skip = 0

    def feed(self, data: bytes) -> list[tuple[int, int, int]]:
        """Return (correlation id, api key, version) of every request header completed by ``data``."""
        out: list[tuple[int, int, int]] = []
        i, n = 0, len(data)
        while i < n:
            if self.skip:
                take = min(self.skip, n - i)
                self.skip -= take
                i += take
                continue
            chunk = data[i : i + 12 - len(self.head)]
            self.head += chunk
            i += len(chunk)
            if len(self.head) == 12:
                size, api_key, version, corr = _REQUEST_HEAD.unpack(self.head)
                out.append((corr, api_key, version))
                self.skip = max(size - 8, 0)
                self.head.clear()
        return out


@dataclass
class _Faults:
    """The fault state every connection reads: one object, changed only on the proxy's loop."""

    delay: float = 0.0
    corrupt_probability: float = 0.0
    corrupt_limit: int | None = None
    flowing: asyncio.Event = field(default_factory=asyncio.Event)


class _Conn:
    """One client connection and its upstream twin, pumped by two tasks."""

    def __init__(self, proxy: FaultProxy, client: tuple[Any, Any], upstream: tuple[Any, Any]) -> None:
        self.proxy = proxy
        self.c_reader, self.c_writer = client
        self.u_reader, self.u_writer = upstream
        self.pending: dict[int, int] = {}  # correlation id -> api key, for requests in flight
        self.scanner = _RequestScanner()
        self.out: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        proxy.connections += 1
        self.id = proxy.connections

    async def run(self) -> None:
        self.tasks = [
            asyncio.ensure_future(self._upstream()),
            asyncio.ensure_future(self._downstream()),
            asyncio.ensure_future(self._writer()),
        ]
        try:
            await asyncio.gather(*self.tasks)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the connection is over either way
        finally:
            self.close(reset=False)

    async def _upstream(self) -> None:
        flowing = self.proxy._faults.flowing
        while data := await self.c_reader.read(_CHUNK):
            await flowing.wait()
            for corr, api_key, version in self.scanner.feed(data):
                self.pending[corr] = api_key
                if self.proxy.requests is not None:
                    self.proxy.requests.sent(self.id, api_key, version, corr)
            if self.proxy.capture is not None:
                self.proxy.capture.from_client(self.id, data)
            self.u_writer.write(data)
            await self.u_writer.drain()
        with contextlib.suppress(OSError):
            self.u_writer.write_eof()

    async def _downstream(self) -> None:
        faults = self.proxy._faults
        buf = bytearray()
        raw = False  # set if the stream stops looking like Kafka frames: forward as it comes
        while data := await self.u_reader.read(_CHUNK):
            await faults.flowing.wait()
            if raw:
                self.out.put_nowait((time.monotonic() + faults.delay, data))
                continue
            buf += data
            while len(buf) >= 4:
                size = int.from_bytes(buf[:4], "big", signed=True)
                if size < 4 or size > _MAX_FRAME:
                    raw = True
                    self.out.put_nowait((time.monotonic() + faults.delay, bytes(buf)))
                    buf.clear()
                    break
                if len(buf) < 4 + size:
                    break
                frame = bytearray(buf[: 4 + size])
                del buf[: 4 + size]
                if self.proxy.capture is not None:
                    self.proxy.capture.from_broker(self.id, frame)
                if self.proxy.requests is not None:
                    corr = int.from_bytes(frame[4:8], "big", signed=True)
                    self.proxy.requests.answered(self.id, corr, frame)
                self._maybe_corrupt(frame)
                self.out.put_nowait((time.monotonic() + faults.delay, bytes(frame)))
        self.out.put_nowait(None)

    def _maybe_corrupt(self, frame: bytearray) -> None:
        corr = int.from_bytes(frame[4:8], "big", signed=True)
        api_key = self.pending.pop(corr, None)
        faults, proxy = self.proxy._faults, self.proxy
        if api_key != _FETCH or faults.corrupt_probability <= 0:
            return
        if faults.corrupt_limit is not None and len(proxy.flips) >= faults.corrupt_limit:
            return
        where = find_record_batch(frame)
        if where is None or proxy._rng.random() >= faults.corrupt_probability:
            return
        start, end = where
        pos = proxy._rng.randrange(start + 61, end)  # a byte of the records, past the header
        frame[pos] ^= proxy._rng.randrange(1, 256)
        proxy.flips.append(
            {
                "correlation_id": corr,
                "batch_base_offset": int.from_bytes(frame[start : start + 8], "big", signed=True),
                "byte_in_frame": pos,
                "at": time.time(),
            }
        )

    async def _writer(self) -> None:
        flowing = self.proxy._faults.flowing
        while (item := await self.out.get()) is not None:
            release, data = item
            wait = release - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await flowing.wait()
            self.c_writer.write(data)
            await self.c_writer.drain()
        with contextlib.suppress(OSError):
            self.c_writer.write_eof()

    def close(self, *, reset: bool) -> None:
        """Close both sides; ``reset`` sends an RST (SO_LINGER 0) instead of a FIN."""
        for task in self.tasks:
            task.cancel()
        for writer in (self.c_writer, self.u_writer):
            if reset:
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                writer.transport.abort()
            else:
                writer.close()
        self.proxy._conns.discard(self)
        if self.proxy.capture is not None:
            self.proxy.capture.closed(self.id)
        if self.proxy.requests is not None:
            self.proxy.requests.closed(self.id)


class FaultProxy:
    """Forwards ``host:port`` to ``upstream``; faults are switched on and off while it runs.

    ``seed`` makes the corrupt-byte choice reproducible; ``capture`` records every Produce
    request and answer in :attr:`capture`; ``timing`` records when every request (any API) was
    sent and answered in :attr:`requests`. Every fault method is thread-safe and
    returns once the fault is in force.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        capture: bool = False,
        timing: bool = False,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = port
        self._rng = random.Random(seed)
        self.flips: list[dict[str, Any]] = []  # one entry per corrupted Fetch response
        self.connections = 0  # accepted in all
        self.resets = 0  # connections cut with an RST
        # Every Produce request and its answer, per partition (see kafka_core.devtools.chaos.capture).
        self.capture: ProduceCapture | None = ProduceCapture() if capture else None
        # Every request's sent and answered time, by connection (see RequestLog).
        self.requests: RequestLog | None = RequestLog() if timing else None
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._listen_lock = asyncio.Lock()
        self._faults = _Faults()
        self._faults.flowing.set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        if port == 0:  # choose the port now, so the broker can be told to advertise it
            with socket.socket() as sock:
                sock.bind((host, 0))
                self.port = sock.getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # --- life cycle ---

    def start(self) -> FaultProxy:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._call(self._start)
        return self

    async def _start(self) -> None:
        await self._listen()

    async def _listen(self) -> None:
        """Listen unless already listening (the refuse timer and heal() may both ask)."""
        async with self._listen_lock:
            if self._server is None:
                self._server = await asyncio.start_server(
                    self._accept, self.host, self.port, reuse_address=True
                )

    def close(self) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None
        self._loop.close()

    async def _shutdown(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.close(reset=False)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        async def run() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 10)
        except (OSError, TimeoutError):
            # The broker is away: the client sees its connection reset, as if it were.
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            writer.transport.abort()
            self.connections += 1
            return
        conn = _Conn(self, (reader, writer), upstream)
        self._conns.add(conn)
        await conn.run()

    def _later(self, name: str, seconds: float, fn: Callable[[], Any]) -> None:
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        self._timers[name] = self._loop.call_later(seconds, fn)

    # --- faults ---

    def reset_all(self) -> int:
        """Cut every open connection with an RST, both sides; return how many were cut."""

        def cut() -> int:
            conns = list(self._conns)
            for conn in conns:
                conn.close(reset=True)
            self.resets += len(conns)
            return len(conns)

        return int(self._call(cut))

    def refuse(self, seconds: float) -> None:
        """Stop listening for ``seconds``: new connections are refused (open ones are left alone)."""

        def stop() -> None:
            if self._server is not None:
                self._server.close()
                self._server = None
            self._later("refuse", seconds, lambda: self._loop.create_task(self._listen()))

        self._call(stop)

    def stall(self, seconds: float) -> None:
        """No byte moves either way for ``seconds``; nothing is closed (a black-holed network)."""

        def stop() -> None:
            self._faults.flowing.clear()
            self._later("stall", seconds, self._faults.flowing.set)

        self._call(stop)

    def delay_responses(self, seconds: float) -> None:
        """Hold every broker->client frame ``seconds`` before passing it on (0 stops it)."""

        def set_delay() -> None:
            self._faults.delay = max(seconds, 0.0)

        self._call(set_delay)

    def corrupt_fetches(self, probability: float = 1.0, limit: int | None = None) -> None:
        """Flip one byte in a record batch of that share of Fetch responses (0 stops it).

        ``limit`` caps the corruptions counted in :attr:`flips` since the proxy started.
        """

        def arm() -> None:
            self._faults.corrupt_probability = probability
            self._faults.corrupt_limit = limit

        self._call(arm)

    def heal(self) -> None:
        """End every fault now: listen again, bytes flow, no delay, no corruption."""

        async def clear() -> None:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            self._faults.delay = 0.0
            self._faults.corrupt_probability = 0.0
            self._faults.flowing.set()
            if self._server is None:
                await self._listen()

        self._call(clear)

    @property
    def open_connections(self) -> int:
        return len(self._conns)
