"""SASL/OAUTHBEARER (RFC 7628 as Kafka uses it, KIP-255, KIP-342 extensions): one client message
carrying a bearer token, got from the settings' token provider.

The provider is whatever the user gave (a callable, sync or async, or an object with an async
``token()`` such as :class:`kafka_core.auth.TokenCache`); a sync callable runs in a worker thread so
that an HTTP round trip never blocks the event loop. On refusal Kafka first answers with a JSON
error challenge and waits for a lone ``0x01`` before it sends the error: that JSON is the broker's
reason, kept for the KafkaAuthenticationError.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaError
from kafka_core.network.sasl.mechanism import MechanismContext, SaslMechanism, register_mechanism
from kafka_core.network.sasl.settings import SaslSettings

__all__ = [
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "TokenProvider",
    "TokenSource",
    "as_token",
    "is_async_provider",
    "obtain_token",
    "token_from_jwt",
]

_SEP = b"\x01"
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A bearer token and what Kafka needs beside it: when it expires (seconds since the epoch),
    the principal it names (informational), and SASL extensions (KIP-342, e.g. Confluent Cloud's
    ``logicalCluster`` and ``identityPoolId``). The token itself stays out of ``repr``."""

    value: str = field(repr=False)
    expires_at: float
    principal: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)
    issued_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if not self.value or any(c in self.value for c in "\x00\x01 "):
            raise KafkaConfigError("an OAUTHBEARER token must be non-empty, without spaces or control bytes")
        for key, val in self.extensions.items():
            if key == "auth" or not _EXTENSION_KEY.fullmatch(key):
                raise KafkaConfigError(f"bad SASL extension name {key!r} (letters only, not 'auth')")
            if not _EXTENSION_VALUE.fullmatch(val):
                raise KafkaConfigError(f"SASL extension {key!r} has characters RFC 7628 does not allow")
        object.__setattr__(self, "extensions", MappingProxyType(dict(self.extensions)))

    @property
    def lifetime(self) -> float:
        """Seconds from issue to expiry, as the refresh schedule counts them."""
        return max(0.0, self.expires_at - self.issued_at)

    def remaining(self, now: float | None = None) -> float:
        return self.expires_at - (time.time() if now is None else now)


@runtime_checkable
class TokenSource(Protocol):
    """A provider with its own cache (:class:`kafka_core.auth.TokenCache`)."""

    async def token(self) -> OAuthBearerToken: ...


TokenProvider = (
    Callable[[], OAuthBearerToken | str] | Callable[[], Awaitable[OAuthBearerToken | str]] | TokenSource
)


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token_from_jwt(jwt: str, *, principal_claim: str = "sub", now: float | None = None) -> OAuthBearerToken:
    """An :class:`OAuthBearerToken` for a JWT, with expiry and principal read from its claims (not
    verified: the broker does that). Raises KafkaAuthenticationError when it is not a JWT with ``exp``."""
    parts = jwt.split(".")
    try:
        claims = json.loads(_b64url(parts[1])) if len(parts) == 3 else None
    except (ValueError, binascii.Error):
        claims = None
    if not isinstance(claims, dict) or not isinstance(claims.get("exp"), int | float):
        raise KafkaAuthenticationError(
            "the OAuth access token is not a JWT with an 'exp' claim; return an OAuthBearerToken "
            "with its expiry instead"
        )
    issued = claims.get("iat")
    principal = claims.get(principal_claim)
    return OAuthBearerToken(
        jwt,
        float(claims["exp"]),
        principal=str(principal) if principal is not None else None,
        issued_at=float(issued) if isinstance(issued, int | float) else (time.time() if now is None else now),
    )


def _is_async(provider: Any) -> bool:
    return inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(
        getattr(provider, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    )


async def obtain_token(provider: Any) -> OAuthBearerToken:
    """Ask ``provider`` for a token without blocking the loop; its failure becomes a
    KafkaAuthenticationError naming the provider's error (KafkaErrors pass through as they are)."""
    try:
        if isinstance(provider, TokenSource):
            result: Any = await provider.token()
        elif _is_async(provider):
            result = await provider()
        else:
            result = await asyncio.to_thread(provider)
            if inspect.isawaitable(result):
                result = await result
    except KafkaError:
        raise
    except Exception as exc:
        raise KafkaAuthenticationError(
            f"the OAUTHBEARER token provider failed: {type(exc).__name__}: {exc}"
        ) from exc
    return as_token(result)


def is_async_provider(provider: Any) -> bool:
    """Whether ``provider`` must be awaited (an async callable or a TokenSource)."""
    return isinstance(provider, TokenSource) or _is_async(provider)


def as_token(result: Any) -> OAuthBearerToken:
    """A provider's answer as a token: an OAuthBearerToken as it is, a str as a JWT."""
    if isinstance(result, str):
        return token_from_jwt(result)
    if not isinstance(result, OAuthBearerToken):
        raise KafkaAuthenticationError(
            f"the OAUTHBEARER token provider returned {type(result).__name__}, not an OAuthBearerToken or str"
        )
    return result


def initial_response(token: OAuthBearerToken, authzid: str = "") -> bytes:
    """RFC 7628's client message, byte for byte as Kafka's OAuthBearerClientInitialResponse."""
    extensions = b"".join(f"{k}={v}".encode() + _SEP for k, v in sorted(token.extensions.items()))
    gs2 = f"n,{'a=' + authzid if authzid else ''},".encode()
    return gs2 + _SEP + b"auth=Bearer " + token.value.encode() + _SEP + extensions + _SEP


class OAuthBearerMechanism(SaslMechanism):
    name = "OAUTHBEARER"

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self._state = 0  # 0 nothing sent, 1 token sent, 2 error acknowledged, 3 done
        self._server_error: str | None = None
        self.token: OAuthBearerToken | None = None  # the token this exchange sent

    def __repr__(self) -> str:
        return f"<OAuthBearerMechanism state={self._state}>"

    async def evaluate(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            # Sent even when it looks expired: the broker's clock and its verdict are what count,
            # and failure_detail() adds what our clock says.
            self.token = await obtain_token(self._provider)
            self._state = 1
            return initial_response(self.token)
        if self._state == 1 and challenge:
            # The broker's JSON error ({"status": "invalid_token", ...}): acknowledge it so that it
            # answers with its error code, and keep it as the reason.
            self._server_error = challenge.decode("utf-8", "replace")
            self._state = 2
            return _SEP
        if self._state == 2:
            raise KafkaAuthenticationError(f"OAUTHBEARER refused: {self._server_error}")
        self._state = 3
        return None

    def step(self, challenge: bytes | None) -> bytes | None:
        raise TypeError("OAUTHBEARER may wait for its token provider: use `await evaluate()`")

    @property
    def complete(self) -> bool:
        return self._state == 3

    def failure_detail(self) -> str | None:
        detail = self._server_error
        if self.token is not None and self.token.remaining() <= 0:
            expired = f"the token expired {-self.token.remaining():.0f} s ago by this host's clock"
            detail = f"{detail}; {expired}" if detail else expired
        return detail


def _validate(settings: SaslSettings) -> None:
    if settings.token_provider is None:
        raise KafkaConfigError(
            "SASL OAUTHBEARER needs a token: sasl_oauth_token_provider (a callable returning a "
            "kafka_core.auth.OAuthBearerToken) or sasl_oauth_token_endpoint_url with "
            "sasl_oauth_client_id and sasl_oauth_client_secret"
        )


def _create(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    return OAuthBearerMechanism(settings.token_provider)


register_mechanism("OAUTHBEARER", _create, _validate)
