"""The SASL plumbing: one settings value from the client to each connection, mechanisms found by
name in a registry, and an exchange step that may await (a token from an async provider)."""

from __future__ import annotations

import asyncio

import pytest
from fakes.sasl_broker import SaslBroker
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import (
    MechanismContext,
    SaslMechanism,
    SaslSettings,
    create_mechanism,
    mechanism_names,
    register_mechanism,
)

pytestmark = pytest.mark.timeout(60)

PASSWORD = "s3cr3t-plumbing"


class _Waiting(SaslMechanism):
    """A one-message mechanism whose message is ready only after an await, as a token from an
    async provider is: it proves the connection awaits ``evaluate``."""

    name = "X-WAITING"

    def __init__(self, settings: SaslSettings, context: MechanismContext) -> None:
        self.settings = settings
        self.context = context
        self._done = False

    async def evaluate(self, challenge: bytes | None) -> bytes | None:
        if self._done:
            return None
        await asyncio.sleep(0.01)
        self._done = True
        return f"{self.settings.option('who')}@{self.context.host}".encode()

    @property
    def complete(self) -> bool:
        return self._done


def _needs_who(settings: SaslSettings) -> None:
    if settings.option("who") is None:
        raise KafkaConfigError("X-WAITING needs sasl_options={'who': ...}")


register_mechanism("X-WAITING", _Waiting, _needs_who)


def test_built_in_mechanisms_are_registered() -> None:
    assert {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} <= set(mechanism_names())


def test_settings_hide_the_password_and_normalise_the_mechanism() -> None:
    settings = SaslSettings(" scram-sha-256 ", username="alice", password=PASSWORD)
    assert settings.mechanism == "SCRAM-SHA-256"
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings.password)
    assert settings.password == PASSWORD
    mech = create_mechanism(settings, MechanismContext("h", 1))
    assert PASSWORD not in repr(mech) and PASSWORD not in repr(vars(mech))


def test_an_unknown_mechanism_or_a_missing_option_is_a_config_error() -> None:
    with pytest.raises(KafkaConfigError, match="X-NOPE"):
        KafkaClient("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="X-NOPE")
    with pytest.raises(KafkaConfigError, match="who"):
        KafkaClient("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="X-WAITING")


@aio
async def test_a_registered_mechanism_logs_in_with_an_awaited_step() -> None:
    def verify(mechanism: str, message: bytes) -> str | None:
        return None if message == b"carol@127.0.0.1" else f"who is {message!r}?"

    async with SaslBroker(verify, mechanisms=("X-WAITING",)) as broker:
        async with KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="x-waiting",
            sasl_options={"who": "carol"},
        ) as client:
            assert (await client.metadata([])).brokers
        assert [login.refused for login in broker.logins] == [None]
        client = KafkaClient(
            broker.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="X-WAITING",
            sasl_options={"who": "mallory"},
        )
        with pytest.raises(KafkaAuthenticationError, match=r"SASL X-WAITING .* failed: .*mallory"):
            await client.start()
        await client.close()
        assert not broker.violations
