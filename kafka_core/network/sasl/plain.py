"""SASL/PLAIN (RFC 4616): one message, ``authzid NUL authcid NUL passwd``. Only safe over TLS."""

from __future__ import annotations

from kafka_core.errors import KafkaConfigError
from kafka_core.network.sasl.mechanism import MechanismContext, SaslMechanism, register_mechanism
from kafka_core.network.sasl.settings import SaslSettings

__all__ = ["PlainMechanism"]


class PlainMechanism(SaslMechanism):
    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()
        self._sent = False

    def __repr__(self) -> str:
        return "<PlainMechanism>"

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._sent:
            return None
        self._sent = True
        return self._message

    @property
    def complete(self) -> bool:
        return self._sent


def _validate(settings: SaslSettings) -> None:
    if settings.username is None or settings.password is None:
        raise KafkaConfigError("SASL PLAIN needs sasl_username and sasl_password")


def _create(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    assert settings.username is not None and settings.password is not None
    return PlainMechanism(settings.username, settings.password)


register_mechanism("PLAIN", _create, _validate)
