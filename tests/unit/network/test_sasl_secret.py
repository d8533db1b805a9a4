"""The SASL password is kept as a Secret: itself for the mechanisms, masked wherever it is shown."""

from __future__ import annotations

from kafka_core.aio import KafkaClient
from kafka_core.network.sasl import PlainMechanism, SaslSettings, ScramMechanism, Secret

PASSWORD = "pa55-w0rd-xyz"


def test_a_secret_is_masked_wherever_it_is_shown() -> None:
    s = Secret(PASSWORD)
    assert PASSWORD not in repr(s) and PASSWORD not in str(s) and PASSWORD not in f"{s} {s!r} {s:>20}"
    assert PASSWORD not in "%s %r" % (s, s)  # noqa: UP031 (as logging formats it)
    assert s == PASSWORD and s.encode() == PASSWORD.encode()  # the mechanisms still see it


def test_the_mechanisms_work_the_same_with_a_secret() -> None:
    assert PlainMechanism("alice", Secret(PASSWORD)).step(None) == PlainMechanism("alice", PASSWORD).step(
        None
    )
    nonce = "fyko+d2lbbFgONRv9qkxdawL"
    server_first = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    answers = []
    for password in (PASSWORD, Secret(PASSWORD)):
        mech = ScramMechanism("SCRAM-SHA-256", "alice", password, nonce=nonce)
        mech.step(None)
        answers.append(mech.step(server_first.encode()))
    assert answers[0] == answers[1]


def test_a_client_keeps_no_readable_password() -> None:
    """Before: vars(client) (a debugger, an error reporter dumping locals) showed it as it is."""
    client = KafkaClient(
        "127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="alice",
        sasl_password=PASSWORD,
    )
    assert PASSWORD not in repr(vars(client)) and PASSWORD not in repr(client)


def test_a_password_given_as_a_secret_is_kept() -> None:
    """Before: a Secret handed in (what from_config makes of ``sasl.password``) became None, and
    the client refused to start for want of a password."""
    settings = SaslSettings("PLAIN", username="alice", password=Secret(PASSWORD))
    assert settings.password == PASSWORD and isinstance(settings.password, Secret)
    client = KafkaClient(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
        }
    )
    assert PASSWORD not in repr(client)
