"""A listener that is not a Kafka broker: the error names what it speaks instead of quoting the
first four bytes of its answer as a frame size ("HTTP" reads as 1213486160 bytes).

Each peer is a tiny loopback server that reads what the client sends and answers as the real
thing would: an HTTP server's 400, a TLS server's alert or ServerHello to bytes that are no
ClientHello.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fakes.timing import aio

from kafka_core.errors import KafkaConnectionError
from kafka_core.network.connection import BrokerConnection
from kafka_core.network.framing import foreign_protocol

pytestmark = pytest.mark.timeout(60)

HTTP_400 = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
    b"Connection: close\r\n\r\nBad Request"
)
TLS_ALERT = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46])  # fatal protocol_version
TLS_HANDSHAKE = bytes([0x16, 0x03, 0x03, 0x00, 0x04, 0x0E, 0x00, 0x00, 0x00])  # ServerHelloDone-like


@asynccontextmanager
async def peer(answer: bytes) -> AsyncIterator[int]:
    """A server that reads the client's first bytes, writes ``answer`` and closes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def connect_error(port: int, **kw: int) -> KafkaConnectionError:
    conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=10_000, **kw)
    with pytest.raises(KafkaConnectionError) as info:
        await conn.connect()
    assert conn.failed
    return info.value


@aio
async def test_an_http_server_is_named_as_http() -> None:
    async with peer(HTTP_400) as port:
        err = await connect_error(port)
    text = str(err)
    assert "speaks HTTP, not Kafka" in text, text
    assert "1213486160" not in text


@aio
@pytest.mark.parametrize("answer", [TLS_ALERT, TLS_HANDSHAKE], ids=["alert", "handshake"])
async def test_a_tls_server_reached_in_plaintext_is_named_as_tls(answer: bytes) -> None:
    async with peer(answer) as port:
        err = await connect_error(port)
    text = str(err)
    assert "speaks TLS" in text and "not Kafka" in text, text
    assert "security_protocol='SSL'" in text, text


@aio
async def test_http_is_recognised_even_when_the_size_limit_would_allow_it() -> None:
    """With max_response_size above 0x48545450 the head would pass as a size and the client
    would wait for 1.2 GB that never come; the first frame is checked for other protocols."""
    async with peer(HTTP_400) as port:
        err = await connect_error(port, max_response_size=2**31 - 1)
    assert "speaks HTTP, not Kafka" in str(err), str(err)


@aio
async def test_other_oversized_frames_keep_the_size_in_the_message() -> None:
    async with peer(b"SSH-2.0-OpenSSH_9.6\r\n") as port:
        err = await connect_error(port)
    text = str(err)
    assert f"response frame of {int.from_bytes(b'SSH-', 'big')} bytes" in text, text
    assert "'SSH-'" in text


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"HTTP", "HTTP"),
        (b"\x15\x03\x01\x00", "TLS (a TLS alert record)"),
        (b"\x16\x03\x03\x00", "TLS (a TLS handshake record)"),
        (b"\x00\x00\x00\x10", None),  # a Kafka frame of 16 bytes
        (b"\x15\x02\x00\x00", None),  # not a TLS version
        (b"HTTX", None),
    ],
)
def test_foreign_protocol(head: bytes, expected: str | None) -> None:
    assert foreign_protocol(head) == expected
