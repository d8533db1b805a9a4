"""SASL/SCRAM-SHA-256 and -512 (RFC 5802, 7677), sans-IO, so the RFC test vectors exercise it directly.

Also Kafka's delegation-token sign-in (KIP-48): the same exchange with the token id as user name,
the token's HMAC (base64) as password and the ``tokenauth=true`` extension in the client's first
message, which tells the broker to look the name up among its tokens rather than its users;
``sasl_options={"tokenauth": True}`` turns it on, as Java's ``ScramLoginModule`` option
``tokenauth="true"`` does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from collections.abc import Mapping
from typing import Any

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl.mechanism import MechanismContext, SaslMechanism, register_mechanism
from kafka_core.network.sasl.secret import Secret
from kafka_core.network.sasl.settings import SaslSettings

__all__ = [
    "MAX_SCRAM_ITERATIONS",
    "SCRAM_HASHES",
    "SCRAM_OPTIONS",
    "ScramMechanism",
    "delegation_token_options",
    "saslprep",
]

SCRAM_HASHES = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# A hostile server could ask for an absurd PBKDF2 cost and pin a CPU; Kafka itself caps it at 16384.
MAX_SCRAM_ITERATIONS = 1_000_000
# The ``sasl_options`` SCRAM takes: Kafka's brokers read one extension, ``tokenauth`` (KIP-48).
SCRAM_OPTIONS = frozenset({"tokenauth"})


def saslprep(text: str) -> str:
    """RFC 4013 SASLprep (stored strings): map, normalise NFKC, reject prohibited and bidi-broken input."""
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    norm = unicodedata.normalize("NFKC", mapped)
    if not norm:
        return norm
    prohibited = (
        stringprep.in_table_c12,
        stringprep.in_table_c21_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
        stringprep.in_table_a1,
    )
    for ch in norm:
        for table in prohibited:
            if table(ch):
                raise KafkaConfigError(f"SASLprep: prohibited character U+{ord(ch):04X} in credential")
    if any(stringprep.in_table_d1(ch) for ch in norm):
        if any(stringprep.in_table_d2(ch) for ch in norm):
            raise KafkaConfigError("SASLprep: credential mixes right-to-left and left-to-right text")
        if not (stringprep.in_table_d1(norm[0]) and stringprep.in_table_d1(norm[-1])):
            raise KafkaConfigError("SASLprep: right-to-left credential must start and end with RTL text")
    return norm


def _escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _parse_attrs(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise KafkaAuthenticationError(f"SCRAM: malformed server message {message!r}")
        attrs.setdefault(part[0], part[2:])
    return attrs


class ScramMechanism(SaslMechanism):
    """RFC 5802 SCRAM client (no channel binding), verifying the server's signature at the end."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        token_auth: bool = False,
    ) -> None:
        if mechanism not in SCRAM_HASHES:
            raise KafkaConfigError(f"unknown SCRAM mechanism {mechanism!r}")
        self.name = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._password = Secret(saslprep(password))  # kept out of vars() dumps
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._username = saslprep(username)
        self._token_auth = token_auth
        # RFC 5802's extensions follow the nonce in client-first-message-bare, which the proof
        # signs too (Kafka's server signs the message as the client sent it).
        extensions = ",tokenauth=true" if token_auth else ""
        self._client_first_bare = f"n={_escape_username(self._username)},r={self._nonce}{extensions}"
        self._state = 0
        self._server_signature = b""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            self._state = 1
            return ("n,," + self._client_first_bare).encode()
        if self._state == 1:
            if challenge is None:
                raise KafkaAuthenticationError("SCRAM: server sent no first message")
            self._state = 2
            return self._client_final(challenge.decode("utf-8", "replace"))
        if self._state == 2:
            if challenge is None:
                raise KafkaAuthenticationError("SCRAM: server sent no final message")
            self._verify_server_final(challenge.decode("utf-8", "replace"))
            self._state = 3
            return None
        return None

    @property
    def complete(self) -> bool:
        return self._state == 3

    def failure_detail(self) -> str | None:
        """A refused token sign-in says which token and the likely causes: Kafka's own message
        is the same for an unknown user, an expired token and a wrong HMAC."""
        if not self._token_auth:
            return None
        return (
            f"delegation token {self._username!r} (tokenauth): the cluster refuses a token that has "
            "expired or was never issued, and an HMAC that is not the token's"
        )

    def _client_final(self, server_first: str) -> bytes:
        if server_first.startswith("m="):
            raise KafkaAuthenticationError("SCRAM: server requires an unsupported mandatory extension")
        attrs = _parse_attrs(server_first)
        try:
            nonce, salt_b64, iterations_s = attrs["r"], attrs["s"], attrs["i"]
        except KeyError as exc:
            raise KafkaAuthenticationError(f"SCRAM: server first message lacks {exc.args[0]!r}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise KafkaAuthenticationError("SCRAM: server nonce does not extend the client nonce")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_s)
        except ValueError:
            raise KafkaAuthenticationError(
                f"SCRAM: bad salt or iteration count in {server_first!r}"
            ) from None
        if not 1 <= iterations <= MAX_SCRAM_ITERATIONS:
            raise KafkaAuthenticationError(f"SCRAM: iteration count {iterations} out of range")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        attrs = _parse_attrs(server_final)
        if "e" in attrs:
            raise KafkaAuthenticationError(f"SCRAM: server rejected authentication: {attrs['e']}")
        try:
            verifier = base64.b64decode(attrs["v"], validate=True)
        except (KeyError, ValueError):
            raise KafkaAuthenticationError(f"SCRAM: bad server final message {server_final!r}") from None
        if not hmac.compare_digest(verifier, self._server_signature):
            raise KafkaAuthenticationError(
                "SCRAM: server signature mismatch (server does not know the password)"
            )


def delegation_token_options(token_id: str, hmac: bytes | str) -> dict[str, Any]:
    """The client options that sign in with a delegation token (pass them beside
    ``sasl_mechanism="SCRAM-SHA-256"`` or ``-512``): ``token_id`` as the user name, the HMAC as
    the password (raw bytes as ``KafkaAdmin.create_delegation_token`` gives them are base64-encoded,
    as Java's ``hmacAsBase64String``; a string is taken as that base64 already, as
    ``kafka-delegation-tokens.sh`` prints it) and ``sasl_options={"tokenauth": True}``."""
    if not isinstance(token_id, str) or not token_id:
        raise KafkaConfigError("a delegation token id is a non-empty string")
    if isinstance(hmac, bytes | bytearray | memoryview):
        password = base64.b64encode(bytes(hmac)).decode()
    elif isinstance(hmac, str):
        password = hmac
    else:
        raise KafkaConfigError(
            f"a delegation token's HMAC is bytes or its base64 text, not {type(hmac).__name__}"
        )
    if not password:
        raise KafkaConfigError("the delegation token's HMAC is empty")
    return {"sasl_username": token_id, "sasl_password": Secret(password), "sasl_options": {"tokenauth": True}}


def _token_auth(options: Mapping[str, Any]) -> bool:
    """``tokenauth`` from ``sasl_options``: True/False, or Java's ``"true"``/``"false"`` text."""
    value = options.get("tokenauth", False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise KafkaConfigError(f"sasl_options tokenauth is True or False, not {value!r}")


def _options(settings: SaslSettings) -> dict[str, Any]:
    options = dict(settings.extra)
    unknown = sorted(set(options) - SCRAM_OPTIONS)
    if unknown:
        raise KafkaConfigError(
            f"unknown {settings.mechanism} sasl_options {unknown}; known: {sorted(SCRAM_OPTIONS)}"
        )
    return options


def _validate(settings: SaslSettings) -> None:
    token = _token_auth(_options(settings))
    if settings.username is None or settings.password is None:
        if token:
            raise KafkaConfigError(
                f"SASL {settings.mechanism} with tokenauth needs the token id as sasl_username and its "
                "HMAC (base64) as sasl_password"
            )
        raise KafkaConfigError(f"SASL {settings.mechanism} needs sasl_username and sasl_password")


def _create(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    assert settings.username is not None and settings.password is not None
    return ScramMechanism(
        settings.mechanism,
        settings.username,
        settings.password,
        token_auth=_token_auth(_options(settings)),
    )


for _name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
    register_mechanism(_name, _create, _validate)
