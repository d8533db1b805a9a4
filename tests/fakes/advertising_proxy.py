"""A Kafka-aware TCP proxy that changes the addresses a broker advertises: every Metadata and
FindCoordinator answer passing through names ``advertise`` (host, port) for each broker instead
of the broker's own, while ``advertise`` is set (a dict ``{node id: (host, port)}`` names each
node of a cluster at its own address); None passes the answers on as they are. With
``rebootstrap_required`` set, Metadata answers (v13+) carry REBOOTSTRAP_REQUIRED instead (KIP-1102:
what a gateway in front of a cluster says when its clients must start again from the bootstrap
servers).

With it a client bootstraps through the proxy and comes to know the brokers at an address the
test controls (a FaultProxy it can black-hole), while the proxy's own address keeps reaching the
live cluster: what a cluster that moved looks like from a client that still knows its old
brokers (rebootstrap, KIP-899 / KIP-1102). Runs on a thread of its own, for the blocking clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Mapping
from typing import Any

from kafka_core.protocol import ApiKey, Response, decode_response, encode_response
from kafka_core.protocol.errors import ErrorCode

__all__ = ["AdvertisingProxy"]


class AdvertisingProxy:
    """See the module docstring. ``with AdvertisingProxy(host, port) as proxy:``."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.advertise: tuple[str, int] | Mapping[int, tuple[str, int]] | None = None
        self.rebootstrap_required = False
        self.rewritten = 0  # answers whose addresses were changed
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="advertising-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> AdvertisingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return

        async def requests() -> None:
            while True:
                head = await reader.readexactly(4)
                frame = await reader.readexactly(struct.unpack(">i", head)[0])
                api_key, version, corr = struct.unpack_from(">hhi", frame)
                pending[corr] = (api_key, version)
                up_writer.write(head + frame)
                await up_writer.drain()

        async def answers() -> None:
            while True:
                head = await up_reader.readexactly(4)
                frame = await up_reader.readexactly(struct.unpack(">i", head)[0])
                (corr,) = struct.unpack_from(">i", frame)
                api_key, version = pending.pop(corr, (-1, -1))
                rebootstrap = self.rebootstrap_required and api_key == ApiKey.METADATA and version >= 13
                if rebootstrap or (
                    self.advertise is not None and api_key in (ApiKey.METADATA, ApiKey.FIND_COORDINATOR)
                ):
                    frame = self._rewrite(decode_response(api_key, version, frame), rebootstrap)
                    head = struct.pack(">i", len(frame))
                writer.write(head + frame)
                await writer.drain()

        try:
            await asyncio.gather(requests(), answers())
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            up_writer.close()
            self._tasks.discard(task)

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if isinstance(self.advertise, Mapping):
            return self.advertise.get(node_id)
        return self.advertise

    def _rewrite(self, resp: Response, rebootstrap: bool) -> bytes:
        body: Any = resp.body
        if rebootstrap:
            body.error_code, body.brokers, body.topics = ErrorCode.REBOOTSTRAP_REQUIRED, [], []
        elif resp.api_key == ApiKey.METADATA:
            for b in body.brokers:
                b.host, b.port = self._address(b.node_id) or (b.host, b.port)
        else:
            if body.host:
                body.host, body.port = self._address(body.node_id) or (body.host, body.port)
            for c in body.coordinators:
                if c.host:
                    c.host, c.port = self._address(c.node_id) or (c.host, c.port)
        self.rewritten += 1
        return encode_response(resp)
