"""SASL/OAUTHBEARER's client message and error exchange, and the token provider forms it takes."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
from fakes.sasl_broker import SaslBroker
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import MechanismContext, OAuthBearerToken, SaslSettings, create_mechanism
from kafka_core.network.sasl.oauthbearer import initial_response, token_from_jwt

pytestmark = pytest.mark.timeout(60)

TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzdmMifQ.sig-value"


def jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def test_the_initial_response_is_kafkas_byte_for_byte() -> None:
    # As org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerClientInitialResponse
    # formats it: "n,%s,%sauth=Bearer %s%s%s%s" with the extensions sorted and 0x01-separated.
    token = OAuthBearerToken(TOKEN, time.time() + 60, extensions={"logicalCluster": "lkc-1", "a": "b c"})
    assert initial_response(token) == (
        b"n,,\x01auth=Bearer " + TOKEN.encode() + b"\x01a=b c\x01logicalCluster=lkc-1\x01\x01"
    )
    assert initial_response(OAuthBearerToken(TOKEN, time.time() + 60)) == (
        b"n,,\x01auth=Bearer " + TOKEN.encode() + b"\x01\x01"
    )


@pytest.mark.parametrize(
    ("value", "extensions"),
    [("", {}), ("has space", {}), (TOKEN, {"auth": "x"}), (TOKEN, {"bad-key": "x"}), (TOKEN, {"k": "\x00"})],
)
def test_malformed_tokens_and_extensions_are_refused(value: str, extensions: dict[str, str]) -> None:
    with pytest.raises(KafkaConfigError):
        OAuthBearerToken(value, time.time() + 60, extensions=extensions)


def test_a_token_stays_out_of_repr() -> None:
    token = OAuthBearerToken(TOKEN, time.time() + 60, principal="svc")
    assert TOKEN not in repr(token) and "svc" in repr(token)


def test_a_jwt_gives_its_expiry_and_principal() -> None:
    token = token_from_jwt(jwt({"exp": 2_000_000_000, "iat": 1_999_999_000, "sub": "svc", "cid": "c"}))
    assert (token.expires_at, token.principal, token.lifetime) == (2_000_000_000, "svc", 1000)
    assert token_from_jwt(jwt({"exp": 2_000_000_000, "cid": "c"}), principal_claim="cid").principal == "c"
    with pytest.raises(KafkaAuthenticationError, match="exp"):
        token_from_jwt("opaque-token")


@pytest.mark.parametrize("kind", ["sync", "async", "jwt-string"])
@aio
async def test_every_provider_form_logs_in(kind: str) -> None:
    expiry = time.time() + 300
    value = jwt({"exp": int(expiry), "sub": "svc"})

    def sync_provider() -> OAuthBearerToken:
        return OAuthBearerToken(value, expiry)

    async def async_provider() -> OAuthBearerToken:
        await asyncio.sleep(0)
        return OAuthBearerToken(value, expiry)

    provider = {"sync": sync_provider, "async": async_provider, "jwt-string": lambda: value}[kind]

    def verify(mechanism: str, message: bytes) -> str | None:
        return None if message == b"n,,\x01auth=Bearer " + value.encode() + b"\x01\x01" else "invalid_token"

    async with SaslBroker(verify, mechanisms=("OAUTHBEARER",)) as broker:
        async with KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
        ) as client:
            assert (await client.metadata([])).brokers
        assert [login.refused for login in broker.logins] == [None]


@aio
async def test_a_refusal_carries_the_brokers_json_reason_and_no_token() -> None:
    value = jwt({"exp": int(time.time()) + 300, "sub": "svc"})
    async with SaslBroker(lambda mechanism, message: "token expired", mechanisms=("OAUTHBEARER",)) as broker:
        client = KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=lambda: value,
        )
        with pytest.raises(KafkaAuthenticationError) as info:
            await client.start()
        await client.close()
    text = str(info.value)
    assert "SASL OAUTHBEARER authentication" in text and "token expired" in text
    assert "invalid_token" in text  # the JSON challenge the broker sent first
    assert value not in text


@aio
async def test_a_provider_failure_is_an_authentication_error_naming_it() -> None:
    def broken() -> OAuthBearerToken:
        raise RuntimeError("identity provider unreachable")

    mech = create_mechanism(
        SaslSettings("OAUTHBEARER", token_provider=broken), MechanismContext("127.0.0.1", 9092)
    )
    with pytest.raises(KafkaAuthenticationError, match="token provider failed: RuntimeError: identity"):
        await mech.evaluate(None)


@aio
async def test_an_expired_token_is_left_to_the_broker_and_the_refusal_says_it_expired() -> None:
    async with SaslBroker(lambda mechanism, message: "expired", mechanisms=("OAUTHBEARER",)) as broker:
        client = KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=lambda: OAuthBearerToken(TOKEN, time.time() - 50),
        )
        with pytest.raises(KafkaAuthenticationError, match=r"invalid_token.*expired 5\d s ago"):
            await client.start()
        await client.close()


def test_oauthbearer_without_a_token_source_is_a_config_error() -> None:
    with pytest.raises(KafkaConfigError, match="sasl_oauth_token_provider"):
        KafkaClient("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER")
