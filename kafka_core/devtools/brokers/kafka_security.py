"""What the embedded Apache Kafka's secured listeners need, made fresh for each run: test users with
random passwords (SASL PLAIN and SCRAM-SHA-256/512) and a certificate authority with a server
certificate for ``localhost`` and the loopback address. Needs ``cryptography`` (``[broker]`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_core.devtools.brokers.common import BrokerStartError

__all__ = [
    "MECHANISMS",
    "OAUTH_LISTENER",
    "ServerCertificates",
    "TestUser",
    "make_certificates",
    "make_users",
    "oauth_jvm_options",
    "oauth_listener_properties",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ADMIN = "admin"  # a super user on every listener
USER = "alice"  # governed by ACLs on the SASL listeners: refused what no ACL allows
OAUTH_LISTENER = "SASL_OAUTH"  # SASL_PLAINTEXT with OAUTHBEARER only, validated by Kafka itself


@dataclass(frozen=True)
class TestUser:
    """A SASL user of the test cluster. The password stays out of ``repr``."""

    __test__ = False  # not a pytest test class

    mechanism: str
    name: str
    password: str = field(repr=False)
    super_user: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "name": self.name,
            "password": self.password,
            "super_user": self.super_user,
        }


def make_users() -> list[TestUser]:
    """An admin (super user) and an ordinary user for each mechanism, each with its own password."""
    return [
        TestUser(mechanism, name, secrets.token_urlsafe(12), name == ADMIN)
        for mechanism in MECHANISMS
        for name in (ADMIN, USER)
    ]


def jaas_config(mechanism: str, users: list[TestUser]) -> str:
    """The broker side of one mechanism: the login module, and for PLAIN the users themselves."""
    mine = [u for u in users if u.mechanism == mechanism]
    admin = next(u for u in mine if u.name == ADMIN)
    if mechanism == "PLAIN":
        entries = " ".join(f'user_{u.name}="{u.password}"' for u in mine)
        return (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{admin.name}" password="{admin.password}" {entries};'
        )
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{admin.name}" password="{admin.password}";'
    )


def scram_format_arguments(users: list[TestUser]) -> list[str]:
    """``kafka-storage format`` arguments that create the SCRAM users in the bootstrap metadata."""
    arguments: list[str] = []
    for user in users:
        if user.mechanism.startswith("SCRAM-"):
            arguments += ["--add-scram", f"{user.mechanism}=[name={user.name},password={user.password}]"]
    return arguments


@dataclass(frozen=True)
class ServerCertificates:
    """PEM files: the CA clients trust, and the broker's key and chain in one file (Kafka's PEM
    keystore), valid for ``localhost`` and ``127.0.0.1`` only."""

    ca_file: Path
    keystore_file: Path
    names: tuple[str, ...]


def make_certificates(
    directory: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> ServerCertificates:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:
        raise BrokerStartError(
            "the TLS listeners of the embedded Apache Kafka need `cryptography`: "
            "pip install 'kafka-core[broker]'"
        ) from exc

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka_core devbroker CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        # Key identifiers: CPython 3.13's default context verifies strictly (VERIFY_X509_STRICT)
        # and refuses a chain without them ("Missing Authority Key Identifier").
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    alt_names: list[x509.GeneralName] = []
    for name in names:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(name))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keystore = directory / "server.pem"
    keystore.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        + cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM)
    )
    keystore.chmod(0o600)
    return ServerCertificates(ca_file, keystore, names)


def oauth_listener_properties(listener: str, *, jwks_url: str, issuer: str, audience: str) -> dict[str, str]:
    """An OAUTHBEARER listener validated by Kafka's own ``OAuthBearerValidatorCallbackHandler``
    against the provider's JWKS (issuer and audience checked, as Kafka 4.4 insists). Sessions
    last until the token expires (``connections.max.reauth.ms`` on), so clients must
    re-authenticate in band (KIP-368) to keep a connection past their token's lifetime."""
    prefix = f"listener.name.{listener.lower()}"
    return {
        f"{prefix}.sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{prefix}.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        ),
        f"{prefix}.oauthbearer.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        f"{prefix}.oauthbearer.connections.max.reauth.ms": "3600000",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "sasl.oauthbearer.expected.issuer": issuer,
        "sasl.oauthbearer.expected.audience": audience,
    }


def oauth_jvm_options(*urls: str) -> list[str]:
    """Kafka 4.x fetches no OAuth URL that this JVM property does not allow."""
    return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={','.join(urls)}"]
