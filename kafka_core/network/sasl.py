"""SASL client mechanisms (PLAIN, SCRAM-SHA-256/512), sans-IO: each step maps server bytes to client bytes.

The connection drives them through SaslHandshake/SaslAuthenticate; keeping the mechanisms free of
I/O lets the RFC 5802/7677 test vectors exercise them directly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import stringprep
import unicodedata

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError

SCRAM_HASHES = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# A hostile server could ask for an absurd PBKDF2 cost and pin a CPU; Kafka itself caps it at 16384.
MAX_SCRAM_ITERATIONS = 1_000_000


class Secret(str):
    """A password that stays itself for the code that uses it (``encode``, SASLprep) but shows as
    ``'******'`` in ``repr``, ``str`` and f-strings: a ``vars(client)`` dump, a log line or an
    error message that names the options does not carry it (as the Java client's ``Password``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'******'"

    def __str__(self) -> str:
        return "******"

    def __format__(self, spec: str) -> str:
        return format("******", spec)


def secret(value: str | None) -> str | None:
    """``value`` as a :class:`Secret` (None stays None)."""
    return None if value is None else Secret(value)


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


class SaslMechanism:
    """One authentication exchange. ``step(None)`` gives the first client message."""

    name: str = ""

    def step(self, challenge: bytes | None) -> bytes | None:
        """Next client message for ``challenge``; None when the exchange is complete."""
        raise NotImplementedError

    @property
    def complete(self) -> bool:
        raise NotImplementedError


class PlainMechanism(SaslMechanism):
    """RFC 4616: one message, ``authzid NUL authcid NUL passwd``. Only safe over TLS."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()
        self._sent = False

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._sent:
            return None
        self._sent = True
        return self._message

    @property
    def complete(self) -> bool:
        return self._sent


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

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_HASHES:
            raise KafkaConfigError(f"unknown SCRAM mechanism {mechanism!r}")
        self.name = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._password = saslprep(password).encode()
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._client_first_bare = f"n={_escape_username(saslprep(username))},r={self._nonce}"
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
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
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


def make_mechanism(mechanism: str, username: str | None, password: str | None) -> SaslMechanism:
    """A fresh mechanism object for one connection attempt."""
    if username is None or password is None:
        raise KafkaConfigError("SASL needs sasl_username and sasl_password")
    mech = mechanism.upper()
    if mech == "PLAIN":
        return PlainMechanism(username, password)
    if mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramMechanism(mech, username, password)
    raise KafkaConfigError(f"unsupported sasl_mechanism {mechanism!r}; use one of {SUPPORTED_MECHANISMS}")
