"""Delegation-token sign-in over SCRAM (KIP-48): the ``tokenauth=true`` extension in the client's
first message, signed by the proof as Kafka's server checks it; the options that turn it on
(``sasl_options``, Java's ``ScramLoginModule`` ``tokenauth="true"``); the HMAC kept out of every
repr and error."""

from __future__ import annotations

import base64
import hashlib
import hmac as hmac_lib

import pytest

from kafka_core.client import KafkaClient
from kafka_core.config import translate
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import (
    MechanismContext,
    SaslSettings,
    ScramMechanism,
    create_mechanism,
    delegation_token_options,
)

TOKEN_ID = "Tk1-4rA_bQ6mYtZPl0tZ1A"
RAW_HMAC = bytes(range(200, 232))
HMAC_B64 = base64.b64encode(RAW_HMAC).decode()
SALT = b"token-salt-16byt"
ITERATIONS = 4096


class _ScramServer:
    """The broker's side of one exchange, as Kafka's ScramSaslServer computes it: the auth message
    is the client's first message as sent (less its GS2 header), the server's first, and the
    client's final without the proof."""

    def __init__(self, algorithm: str, password: str) -> None:
        self.algorithm = algorithm
        salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), SALT, ITERATIONS)
        self.client_key = hmac_lib.new(salted, b"Client Key", algorithm).digest()
        self.server_key = hmac_lib.new(salted, b"Server Key", algorithm).digest()
        self.first_bare = ""
        self.server_first = ""

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,")
        self.first_bare = text[3:]
        nonce = dict(part.split("=", 1) for part in self.first_bare.split(","))["r"]
        self.server_first = f"r={nonce}server,s={base64.b64encode(SALT).decode()},i={ITERATIONS}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes | None:
        """The server-final message, or None where the proof does not verify."""
        without_proof, _, proof_b64 = client_final.decode().rpartition(",p=")
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        stored = hashlib.new(self.algorithm, self.client_key).digest()
        signature = hmac_lib.new(stored, auth, self.algorithm).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True))
        if hashlib.new(self.algorithm, client_key).digest() != stored:
            return None
        return b"v=" + base64.b64encode(hmac_lib.new(self.server_key, auth, self.algorithm).digest())


def test_the_client_first_message_carries_tokenauth_after_the_nonce() -> None:
    m = ScramMechanism("SCRAM-SHA-256", TOKEN_ID, HMAC_B64, nonce="N0nce", token_auth=True)
    assert m.step(None) == f"n,,n={TOKEN_ID},r=N0nce,tokenauth=true".encode()
    plain = ScramMechanism("SCRAM-SHA-256", TOKEN_ID, HMAC_B64, nonce="N0nce")
    assert plain.step(None) == f"n,,n={TOKEN_ID},r=N0nce".encode()


@pytest.mark.parametrize(
    ("mechanism", "algorithm"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")]
)
def test_the_proof_signs_the_extension_as_the_server_checks_it(mechanism: str, algorithm: str) -> None:
    server = _ScramServer(algorithm, HMAC_B64)
    m = ScramMechanism(mechanism, TOKEN_ID, HMAC_B64, nonce="N0nce", token_auth=True)
    client_final = m.step(server.first(m.step(None) or b""))
    assert client_final is not None
    server_final = server.final(client_final)
    assert server_final is not None, "the server did not verify the proof"
    assert m.step(server_final) is None and m.complete

    # The same exchange with the extension left out of what the proof signs fails the check:
    # the server signs the message as the client sent it, extension included.
    unsigned = ScramMechanism(mechanism, TOKEN_ID, HMAC_B64, nonce="N0nce")
    server.first(f"n,,n={TOKEN_ID},r=N0nce,tokenauth=true".encode())
    unsigned.step(None)
    forged = unsigned.step(server.server_first.encode())
    assert forged is not None and server.final(forged) is None


def test_a_wrong_hmac_is_refused_by_the_server_check() -> None:
    server = _ScramServer("sha512", HMAC_B64)
    wrong = base64.b64encode(bytes(32)).decode()
    m = ScramMechanism("SCRAM-SHA-512", TOKEN_ID, wrong, nonce="N0nce", token_auth=True)
    final = m.step(server.first(m.step(None) or b""))
    assert final is not None and server.final(final) is None


def test_sasl_options_turn_it_on_and_are_checked() -> None:
    def first(extra: tuple[tuple[str, object], ...]) -> bytes:
        settings = SaslSettings("scram-sha-512", username=TOKEN_ID, password=HMAC_B64, extra=extra)
        return create_mechanism(settings, MechanismContext("h", 1)).step(None) or b""

    assert first((("tokenauth", True),)).endswith(b",tokenauth=true")
    assert first((("tokenauth", "TRUE"),)).endswith(b",tokenauth=true")  # Java's text
    assert not first((("tokenauth", False),)).endswith(b",tokenauth=true")
    assert not first(()).endswith(b",tokenauth=true")
    with pytest.raises(KafkaConfigError, match="tokenauth is True or False"):
        first((("tokenauth", "yes please"),))
    with pytest.raises(KafkaConfigError, match=r"unknown SCRAM-SHA-512 sasl_options \['region'\]"):
        first((("region", "eu-west-1"),))
    with pytest.raises(KafkaConfigError, match="token id as sasl_username"):
        create_mechanism(
            SaslSettings("SCRAM-SHA-256", username=TOKEN_ID, extra=(("tokenauth", True),)),
            MechanismContext("h", 1),
        )


def test_a_client_refuses_bad_token_options_when_built() -> None:
    with pytest.raises(KafkaConfigError, match="tokenauth"):
        KafkaClient(
            "127.0.0.1:9",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username=TOKEN_ID,
            sasl_password=HMAC_B64,
            sasl_options={"tokenauth": "maybe"},
        )


def test_delegation_token_options_encode_the_hmac_and_hide_it() -> None:
    options = delegation_token_options(TOKEN_ID, RAW_HMAC)
    assert options["sasl_username"] == TOKEN_ID
    assert options["sasl_password"] == HMAC_B64  # base64, as Java's hmacAsBase64String
    assert options["sasl_options"] == {"tokenauth": True}
    assert HMAC_B64 not in repr(options) and HMAC_B64 not in str(options)
    assert delegation_token_options(TOKEN_ID, HMAC_B64)["sasl_password"] == HMAC_B64  # already text
    client = KafkaClient(
        "127.0.0.1:9", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", **options
    )
    assert HMAC_B64 not in repr(client) and HMAC_B64 not in str(vars(client))
    for bad in ("", None):
        with pytest.raises(KafkaConfigError):
            delegation_token_options(bad, RAW_HMAC)  # type: ignore[arg-type]
    with pytest.raises(KafkaConfigError, match="empty"):
        delegation_token_options(TOKEN_ID, b"")
    with pytest.raises(KafkaConfigError, match="not int"):
        delegation_token_options(TOKEN_ID, 5)  # type: ignore[arg-type]


def test_a_refused_token_names_the_token_never_the_hmac() -> None:
    m = ScramMechanism("SCRAM-SHA-256", TOKEN_ID, HMAC_B64, nonce="N0nce", token_auth=True)
    detail = m.failure_detail() or ""
    assert TOKEN_ID in detail and "expired" in detail
    assert ScramMechanism("SCRAM-SHA-256", "alice", "pw").failure_detail() is None
    m.step(None)
    with pytest.raises(KafkaAuthenticationError) as refused:
        m.step(b"r=N0nceX,s=!!,i=4096")
    texts = [repr(m), str(vars(m) if hasattr(m, "__dict__") else ""), str(refused.value), detail]
    assert not any(HMAC_B64 in text for text in texts)


def test_java_scram_login_module_tokenauth_maps_to_sasl_options() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{TOKEN_ID}" password="{HMAC_B64}" tokenauth="true";'
    )
    kwargs = translate({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas}, "producer")
    assert kwargs["sasl_username"] == TOKEN_ID and kwargs["sasl_password"] == HMAC_B64
    assert kwargs["sasl_options"] == {"tokenauth": True}
    unquoted = jaas.replace('tokenauth="true"', "tokenauth=true")
    assert translate({"sasl.jaas.config": unquoted}, "client")["sasl_options"] == {"tokenauth": True}
    assert "sasl_options" not in translate(
        {"sasl.jaas.config": jaas.replace(' tokenauth="true"', "")}, "client"
    )
    with pytest.raises(KafkaConfigError) as bad:
        translate({"sasl.jaas.config": jaas.replace('"true"', '"often"')}, "client")
    assert HMAC_B64 not in str(bad.value)
