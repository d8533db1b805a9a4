"""The skeleton of a broker on a loopback port that the real client connects to: the server's
lifecycle, one task per connection reading request frames, and the frame helpers. The unit tests
that need real sockets subclass it with what their broker answers (scripted errors, malformed
frames...), instead of each carrying its own copy of the server.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kafka_core.protocol import decode_request

__all__ = ["LoopbackBroker", "frame_of"]


def frame_of(payload: bytes) -> bytes:
    """``payload`` with its 4-byte size prefix, as it goes on the wire."""
    return struct.pack(">i", len(payload)) + payload


class LoopbackBroker:
    """``async with`` starts it on a free port; subclasses implement :meth:`answer`."""

    def __init__(self) -> None:
        self.port = 0
        self.connections = 0
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Any:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.sleep(0)  # let just-accepted connections reach their handler to be closed
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connected(self) -> None:
        """A connection arrived (before its first request); subclasses may note per-connection state."""

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        """Answer one decoded request (or not); False hangs up the connection."""
        raise NotImplementedError

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        self.connected()
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                req = decode_request(await reader.readexactly(size))
                if not await self.answer(req, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)
