"""The mechanism interface and the registry the mechanism modules add themselves to.

A mechanism is sans-IO: the connection feeds it the server's bytes and sends what it returns.
``evaluate`` is a coroutine so that a mechanism can wait for something (an OAuth token from an
async provider) without blocking the event loop; mechanisms with nothing to wait for implement the
synchronous ``step`` and inherit ``evaluate``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafka_core.errors import KafkaConfigError
from kafka_core.network.sasl.settings import SaslSettings

__all__ = [
    "MechanismContext",
    "SaslMechanism",
    "create_mechanism",
    "mechanism_names",
    "register_mechanism",
    "validate_settings",
]


@dataclass(frozen=True, slots=True)
class MechanismContext:
    """Where the exchange happens: GSSAPI names the broker's host in its service principal,
    AWS_MSK_IAM signs it."""

    host: str
    port: int


class SaslMechanism:
    """One authentication exchange. ``await evaluate(None)`` gives the first client message."""

    name: str = ""

    def step(self, challenge: bytes | None) -> bytes | None:
        """Next client message for ``challenge``; None when the exchange is complete."""
        raise NotImplementedError

    async def evaluate(self, challenge: bytes | None) -> bytes | None:
        """``step``, for mechanisms that may need to wait (the connection only calls this)."""
        return self.step(challenge)

    @property
    def complete(self) -> bool:
        raise NotImplementedError

    def failure_detail(self) -> str | None:
        """What the server said when it refused (e.g. OAUTHBEARER's JSON error), if it said more
        than its error code; the connection adds it to the KafkaAuthenticationError."""
        return None


Factory = Callable[[SaslSettings, MechanismContext], SaslMechanism]
Validator = Callable[[SaslSettings], None]


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: Factory
    validate: Validator


_REGISTRY: dict[str, _Entry] = {}


def register_mechanism(name: str, factory: Factory, validate: Validator) -> None:
    """Make ``name`` usable as ``sasl_mechanism``. ``validate`` runs when a client is built (a
    missing credential is a config error then, not at the first connection); ``factory`` makes a
    fresh mechanism for each exchange (a connection's first, and each re-authentication)."""
    _REGISTRY[name.upper()] = _Entry(factory, validate)


def mechanism_names() -> tuple[str, ...]:
    """The mechanisms registered in this process, sorted."""
    return tuple(sorted(_REGISTRY))


def _entry(mechanism: str) -> _Entry:
    entry = _REGISTRY.get(mechanism.upper())
    if entry is None:
        raise KafkaConfigError(f"unsupported sasl_mechanism {mechanism!r}; use one of {mechanism_names()}")
    return entry


def validate_settings(settings: SaslSettings) -> None:
    """Raise :class:`KafkaConfigError` when ``settings`` cannot work for its mechanism."""
    _entry(settings.mechanism).validate(settings)


def create_mechanism(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    """A fresh mechanism object for one exchange."""
    entry = _entry(settings.mechanism)
    entry.validate(settings)
    return entry.factory(settings, context)
