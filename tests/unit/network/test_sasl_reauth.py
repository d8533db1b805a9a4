"""KIP-368: a connection re-authenticates in band before the broker's SASL session ends, busy or
not, with no request lost or failed and nothing sent that Kafka would refuse mid-exchange."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakes.sasl_broker import SaslBroker
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaAuthenticationError, KafkaConnectionError
from kafka_core.network.sasl import OAuthBearerToken
from kafka_core.protocol.messages import MetadataRequest

pytestmark = pytest.mark.timeout(60)

PASSWORD = "reauth-pa55"


def plain_ok(mechanism: str, message: bytes) -> str | None:
    return None if message == b"\x00alice\x00" + PASSWORD.encode() else "bad password"


def options(broker: SaslBroker, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": "alice",
        "sasl_password": PASSWORD,
        **extra,
    }


async def keep_busy(client: KafkaClient, node: int, until: float, topics: list[str]) -> int:
    """Requests back to back (some slow, so that others are in flight meanwhile) until ``until``;
    every one must succeed."""
    done = 0
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        meta = await client.metadata(topics)
        assert meta.brokers
        done += 1
    return done


@aio
async def test_a_busy_connection_re_authenticates_in_band_and_loses_nothing() -> None:
    async with SaslBroker(plain_ok) as broker:
        broker.session_lifetime_ms = 1500
        async with KafkaClient(**options(broker)) as client:
            node = (await client.metadata([])).brokers[0].node_id
            conn = await client.connection(node)
            until = asyncio.get_running_loop().time() + 4.0
            # Four callers at once, one of them with answers that take 100 ms: at any moment
            # requests are in flight when the re-authentication starts.
            counts = await asyncio.gather(
                keep_busy(client, node, until, ["slow-100"]),
                keep_busy(client, node, until, []),
                keep_busy(client, node, until, []),
                keep_busy(client, node, until, []),
            )
            assert broker.violations == []
            assert await client.connection(node) is conn and conn.connected
            assert conn.reauthentications >= 2
        assert all(n > 0 for n in counts)
        assert broker.violations == []
        reauths = [login for login in broker.logins if login.reauthentication]
        assert len(reauths) >= 2 and all(login.refused is None for login in broker.logins)
        assert {login.connection for login in broker.logins} == {1}  # never reconnected


@aio
async def test_an_idle_connection_re_authenticates_too() -> None:
    async with SaslBroker(plain_ok) as broker:
        broker.session_lifetime_ms = 1500
        async with KafkaClient(**options(broker)) as client:
            node = (await client.metadata([])).brokers[0].node_id
            conn = await client.connection(node)
            await asyncio.sleep(3.2)  # two sessions' worth of doing nothing
            assert conn.reauthentications >= 2 and conn.connected
            assert (await client.metadata([])).brokers
            assert await client.connection(node) is conn
        assert broker.violations == []


@aio
async def test_a_refused_re_authentication_drops_the_connection_and_reconnecting_says_why() -> None:
    refuse_after = 1

    def verify(mechanism: str, message: bytes) -> str | None:
        nonlocal refuse_after
        refuse_after -= 1
        return None if refuse_after >= 0 else "password rotated"

    async with SaslBroker(verify) as broker:
        broker.session_lifetime_ms = 1500
        client = KafkaClient(**options(broker, api_timeout_ms=3000))
        try:
            node = (await client.metadata([])).brokers[0].node_id
            conn = await client.connection(node)
            await conn.wait_closed()
            with pytest.raises(
                KafkaConnectionError, match=r"re-authentication .* failed: .*password rotated"
            ):
                await conn.send(MetadataRequest(topics=[]))  # what requests in flight were told
            with pytest.raises(KafkaAuthenticationError, match="password rotated"):
                await client.connection(node)
        finally:
            await client.close()
        assert broker.violations == []


@aio
async def test_oauthbearer_re_authenticates_with_the_refreshed_token() -> None:
    """A token living 2 s bounds the session as Kafka bounds it; the cache refreshes it at about
    80% and the re-authentication carries the new token, so the session never runs out."""
    issued: list[OAuthBearerToken] = []

    async def provider() -> OAuthBearerToken:
        import time

        now = time.time()
        token = OAuthBearerToken(f"tok{len(issued)}", now + 2.0, principal="svc", issued_at=now)
        issued.append(token)
        return token

    def token_of(message: bytes) -> OAuthBearerToken | None:
        value = message.split(b"auth=Bearer ", 1)[1].split(b"\x01", 1)[0].decode()
        return next((t for t in issued if t.value == value), None)

    def verify(mechanism: str, message: bytes) -> str | None:
        token = token_of(message)
        if token is None or token.remaining() <= 0:
            return "invalid_token"
        return None

    async with SaslBroker(verify, mechanisms=("OAUTHBEARER",)) as broker:
        broker.session_lifetime_ms = 60_000
        broker.session_bound = lambda mechanism, message: token_of(message).expires_at  # type: ignore[union-attr]
        async with KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        ) as client:
            node = (await client.metadata([])).brokers[0].node_id
            conn = await client.connection(node)
            until = asyncio.get_running_loop().time() + 4.5
            await asyncio.gather(
                keep_busy(client, node, until, ["slow-100"]), keep_busy(client, node, until, [])
            )
            assert await client.connection(node) is conn
        assert broker.violations == []
        sent = [token_of(login.message) for login in broker.logins]
        assert all(login.refused is None for login in broker.logins)
        assert len({t.value for t in sent if t is not None}) >= 2  # renewed, not the first token again
        assert len(issued) <= len(broker.logins) + 1  # fetched on schedule, not per exchange
