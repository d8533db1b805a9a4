"""SASL mechanisms against the RFC test vectors, plus the ways a server can misbehave."""

from __future__ import annotations

import base64

import pytest

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import PlainMechanism, ScramMechanism, make_mechanism, saslprep

# RFC 5802 section 5 (SCRAM-SHA-1): Kafka does not offer SHA-1, but the exchange is identical.
RFC5802 = {
    "nonce": "fyko+d2lbbFgONRv9qkxdawL",
    "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "server_first": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "client_final": b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    "server_final": b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
}
# RFC 7677 section 3 (SCRAM-SHA-256).
RFC7677 = {
    "nonce": "rOprNGfwEbeRWgbNEkqO",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    ),
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


@pytest.mark.parametrize(("mechanism", "vector"), [("SCRAM-SHA-1", RFC5802), ("SCRAM-SHA-256", RFC7677)])
def test_rfc_vectors(mechanism: str, vector: dict[str, object]) -> None:
    m = ScramMechanism(mechanism, "user", "pencil", nonce=str(vector["nonce"]))
    assert m.step(None) == vector["client_first"]
    assert m.step(vector["server_first"]) == vector["client_final"]  # type: ignore[arg-type]
    assert not m.complete
    assert m.step(vector["server_final"]) is None  # type: ignore[arg-type]
    assert m.complete


def test_wrong_server_signature_is_rejected() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])  # type: ignore[arg-type]
    m.step(None)
    m.step(RFC7677["server_first"])  # type: ignore[arg-type]
    bad = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(KafkaAuthenticationError, match="signature"):
        m.step(bad)
    assert not m.complete


def test_wrong_password_changes_the_proof() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pen", nonce=RFC7677["nonce"])  # type: ignore[arg-type]
    m.step(None)
    assert m.step(RFC7677["server_first"]) != RFC7677["client_final"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=someoneelse,s=QSXCR+Q6sek8bf92,i=4096",  # nonce not ours
        b"r=abc,s=QSXCR+Q6sek8bf92,i=4096",
        b"r=fyko+d2lbbFgONRv9qkxdawLX,s=QSXCR+Q6sek8bf92",  # no iteration count
        b"r=fyko+d2lbbFgONRv9qkxdawLX,s=!!!,i=4096",  # bad base64
        b"r=fyko+d2lbbFgONRv9qkxdawLX,s=QSXCR+Q6sek8bf92,i=0",
        b"r=fyko+d2lbbFgONRv9qkxdawLX,s=QSXCR+Q6sek8bf92,i=999999999",  # a CPU-pinning cost
        b"m=ext,r=fyko+d2lbbFgONRv9qkxdawLX,s=QSXCR+Q6sek8bf92,i=4096",
        b"garbage",
    ],
)
def test_bad_server_first_is_a_clear_error(server_first: bytes) -> None:
    m = ScramMechanism("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    m.step(None)
    with pytest.raises(KafkaAuthenticationError, match="SCRAM"):
        m.step(server_first)


def test_server_error_attribute_is_reported() -> None:
    m = ScramMechanism("SCRAM-SHA-1", "user", "pencil", nonce=RFC5802["nonce"])  # type: ignore[arg-type]
    m.step(None)
    m.step(RFC5802["server_first"])  # type: ignore[arg-type]
    with pytest.raises(KafkaAuthenticationError, match="invalid-proof"):
        m.step(b"e=invalid-proof")


def test_username_is_escaped() -> None:
    m = ScramMechanism("SCRAM-SHA-512", "a=b,c", "pw", nonce="N")
    assert m.step(None) == b"n,,n=a=3Db=2Cc,r=N"


def test_random_nonces_differ() -> None:
    a = ScramMechanism("SCRAM-SHA-512", "u", "p").step(None)
    b = ScramMechanism("SCRAM-SHA-512", "u", "p").step(None)
    assert a != b


def test_saslprep() -> None:
    assert saslprep("I\u00adX") == "IX"  # soft hyphen mapped to nothing
    assert saslprep("user") == "user"
    assert saslprep("\u00aa") == "a"  # NFKC
    assert saslprep("\u2168") == "IX"
    assert saslprep("a\u00a0b") == "a b"  # non-ASCII space to space
    with pytest.raises(KafkaConfigError):
        saslprep("\u0007")  # control character
    with pytest.raises(KafkaConfigError):
        saslprep("\u0627\u0031")  # RTL text must end with RTL


def test_plain_sends_one_message() -> None:
    m = PlainMechanism("alice", "secret")
    assert m.step(None) == b"\x00alice\x00secret"
    assert m.complete
    assert m.step(b"") is None


def test_make_mechanism() -> None:
    assert make_mechanism("plain", "u", "p").name == "PLAIN"
    assert make_mechanism("SCRAM-SHA-512", "u", "p").name == "SCRAM-SHA-512"
    with pytest.raises(KafkaConfigError):
        make_mechanism("NTLM", "u", "p")
    with pytest.raises(KafkaConfigError):
        make_mechanism("PLAIN", None, "p")
