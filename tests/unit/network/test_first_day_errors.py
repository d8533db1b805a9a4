"""First-day mistakes refused at construction or told at once, with no broker (issue 39): a URL
scheme in bootstrap_servers, SASL options without a SASL protocol, TLS to a listener that closes
the handshake, and one deadline through nested retry loops. The same against Apache Kafka's own
listeners: tests/integration/test_first_day_errors.py."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest

import kafka_core
from kafka_core import aio
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaTimeoutError

pytestmark = pytest.mark.timeout(60)

CLASSES: list[Callable[..., Any]] = [
    kafka_core.KafkaProducer,
    lambda **kw: kafka_core.KafkaConsumer(topics=["t"], **kw),
    kafka_core.KafkaAdmin,
    kafka_core.KafkaClient,
    aio.KafkaProducer,
    lambda **kw: aio.KafkaConsumer(topics=["t"], **kw),
    aio.KafkaClient,
]


@pytest.mark.parametrize("make", CLASSES)
@pytest.mark.parametrize("servers", ["http://127.0.0.1:9092", "kafka://broker:9092", "h1:9092,SSL://h2:9093"])
def test_a_url_scheme_in_bootstrap_servers_is_refused_at_construction(
    make: Callable[..., Any], servers: str
) -> None:
    with pytest.raises(KafkaConfigError, match="has a URL scheme") as info:
        make(bootstrap_servers=servers)
    assert "host:port" in str(info.value)


@pytest.mark.parametrize("make", CLASSES)
def test_sasl_options_without_a_sasl_protocol_are_refused_naming_them(make: Callable[..., Any]) -> None:
    with pytest.raises(KafkaConfigError) as info:
        make(bootstrap_servers="127.0.0.1:9092", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
    text = str(info.value)
    assert "sasl_mechanism, sasl_username, sasl_password" in text and "'PLAINTEXT'" in text
    assert "security_protocol='SASL_PLAINTEXT'" in text and "p" not in text.split("'PLAINTEXT'")[0][-3:]


def test_sasl_options_on_ssl_point_to_sasl_ssl() -> None:
    with pytest.raises(KafkaConfigError, match="security_protocol='SASL_SSL'"):
        aio.KafkaClient("127.0.0.1:9092", security_protocol="SSL", sasl_oauth_token_endpoint_url="http://x/t")


def test_unset_sasl_options_are_fine() -> None:
    aio.KafkaClient("127.0.0.1:9092", sasl_mechanism=None, sasl_oauth_token_provider=None)


async def _closing_server() -> tuple[asyncio.Server, int]:
    """A listener that closes a connection at its first bytes, as a plaintext Kafka listener does
    with a TLS ClientHello (read as a frame size above socket.request.max.bytes)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_tls_to_a_listener_that_closes_the_handshake_fails_at_once_with_the_cause() -> None:
    async def run() -> None:
        server, port = await _closing_server()
        try:
            # a long api_timeout_ms: only a final error returns before the test's timeout
            async with aio.KafkaClient(
                f"127.0.0.1:{port}", security_protocol="SSL", api_timeout_ms=600_000
            ) as client:
                await client.metadata()
        finally:
            server.close()

    with pytest.raises(KafkaAuthenticationError, match="does not speak TLS") as info:
        asyncio.run(run())
    assert "security_protocol='PLAINTEXT'" in str(info.value)


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: nothing listens there


def test_an_admin_call_gives_up_once_at_its_own_deadline_with_the_inner_cause() -> None:
    """list_topics retries metadata, which bootstraps the client, which retries the bootstrap
    servers: one deadline for all, one verdict, the cause the innermost error."""
    port = _refused_port()
    with (
        kafka_core.KafkaAdmin(bootstrap_servers=f"127.0.0.1:{port}", api_timeout_ms=1_500) as admin,
        pytest.raises(KafkaTimeoutError) as info,
    ):
        admin.list_topics()
    text = str(info.value)
    assert text.startswith("list_topics did not succeed within 1.5s; last error: "), text
    assert text.count("did not succeed") == 1 and f"127.0.0.1:{port}" in text, text


def test_a_retry_inside_a_shorter_call_keeps_the_outer_deadline() -> None:
    """An inner loop asked for more time than its caller has left gets only what is left."""

    async def run() -> None:
        port = _refused_port()
        client = aio.KafkaClient(f"127.0.0.1:{port}", api_timeout_ms=600_000)  # started by metadata
        try:
            await client.retry("outer", lambda: client.retry("inner", client.metadata, 600_000), 1_000)
        finally:
            await client.close()

    with pytest.raises(KafkaTimeoutError) as info:
        asyncio.run(run())
    assert str(info.value).startswith("outer did not succeed within 1.0s; last error: no bootstrap"), (
        info.value
    )
