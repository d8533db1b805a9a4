"""TLS to the test broker through an in-test TLS terminator (Tansu's own TLS flags are broken).

The terminator is a small asyncio proxy on its own loop thread: it accepts TLS on a loopback port
and forwards plaintext to a Tansu that advertises the TLS port. Certificates (a CA, a server
certificate for localhost/127.0.0.1, one for the wrong host, a client certificate) are made with
the ``cryptography`` package.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes.timing import aio
from prerequisites import need_module

from kafka_core._sync import LoopThread
from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaConnectionError
from kafka_core.network.connection import BrokerConnection
from kafka_core.network.tls import build_ssl_context
from kafka_core.protocol import ApiKey

x509 = need_module("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


# -- certificates ----------------------------------------------------------------------------


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    wrong_host_cert: Path
    wrong_host_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(cn: str) -> Any:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, cert: Any, key: Any | None = None) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def _ca(cn: str) -> tuple[Any, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca_cert: Any, ca_key: Any, cn: str, *, dns: list[str], ips: list[str], client: bool = False
) -> tuple[Any, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[Any] = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_certs(directory: Path) -> Certs:
    """A CA with server, wrong-host and client certificates, plus an unrelated CA."""
    ca_cert, ca_key = _ca("kafka-core test CA")
    _write(directory / "ca.pem", ca_cert)
    server, server_key = _leaf(ca_cert, ca_key, "localhost", dns=["localhost"], ips=["127.0.0.1"])
    _write(directory / "server.pem", server, server_key)
    wrong, wrong_key = _leaf(ca_cert, ca_key, "wrong.example", dns=["wrong.example"], ips=[])
    _write(directory / "wrong.pem", wrong, wrong_key)
    client, client_key = _leaf(ca_cert, ca_key, "client", dns=[], ips=[], client=True)
    _write(directory / "client.pem", client, client_key)
    other_cert, _ = _ca("unrelated CA")
    _write(directory / "other-ca.pem", other_cert)
    return Certs(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        wrong_host_cert=directory / "wrong.pem",
        wrong_host_key=directory / "wrong.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
    )


def server_context(cert: Path, key: Path, *, client_ca: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.load_verify_locations(cafile=client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# -- the terminator --------------------------------------------------------------------------


class TlsTerminator:
    """Accept TLS on a loopback port, forward the plaintext bytes to ``upstream_port``."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.ctx = ctx
        self.upstream_port = 0
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> TlsTerminator:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ctx)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self._tasks.discard(task)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


@dataclass
class TlsSetup:
    certs: Certs
    bootstrap: str
    wrong_host_bootstrap: str
    mtls_port: int


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsSetup]:
    from kafka_core.devbroker import TansuBroker

    certs = make_certs(tmp_path_factory.mktemp("certs"))
    loop = LoopThread("tls-terminator")
    proxies = [
        TlsTerminator(server_context(certs.server_cert, certs.server_key)),
        TlsTerminator(server_context(certs.wrong_host_cert, certs.wrong_host_key)),
        TlsTerminator(server_context(certs.server_cert, certs.server_key, client_ca=certs.ca)),
    ]
    for p in proxies:
        loop.run(p.start())
    broker = TansuBroker(advertised_port=proxies[0].port)
    for p in proxies:
        p.upstream_port = broker.port
    try:
        broker.start()
        yield TlsSetup(
            certs=certs,
            bootstrap=f"127.0.0.1:{proxies[0].port}",
            wrong_host_bootstrap=f"127.0.0.1:{proxies[1].port}",
            mtls_port=proxies[2].port,
        )
    finally:
        broker.close()
        for p in proxies:
            loop.run(p.stop())
        loop.stop()


@aio
async def test_tls_metadata_and_versions(tls: TlsSetup) -> None:
    async with KafkaClient(tls.bootstrap, security_protocol="SSL", ssl_cafile=str(tls.certs.ca)) as client:
        cluster = await client.metadata(["tls-topic"])
        assert cluster.brokers[0].port == int(tls.bootstrap.rsplit(":", 1)[1])
        versions = await client.negotiated_versions()
        assert all(v[ApiKey.METADATA] >= 1 for v in versions.values())
        meta = await client.await_topic_ready("tls-topic", 1, timeout_ms=30_000)
        assert meta.ready
        assert (await client.init_producer_id()).producer_id >= 0


@aio
async def test_tls_with_a_caller_supplied_context(tls: TlsSetup) -> None:
    ctx = ssl.create_default_context(cafile=str(tls.certs.ca))
    async with KafkaClient(tls.bootstrap, security_protocol="SSL", ssl_context=ctx) as client:
        assert (await client.metadata([])).brokers


@aio
async def test_tls_hostname_mismatch_is_rejected(tls: TlsSetup) -> None:
    client = KafkaClient(
        tls.wrong_host_bootstrap, security_protocol="SSL", ssl_cafile=str(tls.certs.ca), api_timeout_ms=20_000
    )
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"):
        await client.start()
    await client.close()


@aio
async def test_tls_hostname_check_can_be_disabled_but_chain_is_still_verified(tls: TlsSetup) -> None:
    conn = BrokerConnection(
        "127.0.0.1",
        int(tls.wrong_host_bootstrap.rsplit(":", 1)[1]),
        ssl_context=build_ssl_context(cafile=str(tls.certs.ca), check_hostname=False),
    )
    await conn.connect()
    assert conn.connected
    await conn.close()
    untrusted = BrokerConnection(
        "127.0.0.1",
        int(tls.wrong_host_bootstrap.rsplit(":", 1)[1]),
        ssl_context=build_ssl_context(cafile=str(tls.certs.other_ca), check_hostname=False),
    )
    with pytest.raises(KafkaAuthenticationError, match="certificate verify failed"):
        await untrusted.connect()


@aio
async def test_tls_unknown_ca_is_rejected(tls: TlsSetup) -> None:
    client = KafkaClient(tls.bootstrap, security_protocol="SSL", ssl_cafile=str(tls.certs.other_ca))
    with pytest.raises(KafkaAuthenticationError, match="certificate verify failed"):
        await client.start()
    await client.close()


@aio
async def test_mutual_tls(tls: TlsSetup) -> None:
    ctx = build_ssl_context(
        cafile=str(tls.certs.ca), certfile=str(tls.certs.client_cert), keyfile=str(tls.certs.client_key)
    )
    conn = BrokerConnection("127.0.0.1", tls.mtls_port, ssl_context=ctx)
    await conn.connect()
    assert ApiKey.METADATA in conn.negotiated_versions()
    await conn.close()
    anonymous = BrokerConnection(
        "127.0.0.1",
        tls.mtls_port,
        ssl_context=build_ssl_context(cafile=str(tls.certs.ca)),
        connect_timeout_ms=5000,
    )
    # TLS 1.3 reports a missing client certificate only after the handshake, as a closed stream.
    with pytest.raises(KafkaConnectionError):
        await anonymous.connect()
    assert not anonymous.connected


def test_tls_sync_face(tls: TlsSetup) -> None:
    from kafka_core.sync_client import KafkaClient as SyncClient

    with SyncClient(tls.bootstrap, security_protocol="SSL", ssl_cafile=str(tls.certs.ca)) as client:
        assert client.metadata([]).brokers


def test_bad_tls_material_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(KafkaConfigError):
        build_ssl_context(cafile=str(tmp_path / "junk.pem"))
    with pytest.raises(KafkaConfigError):
        build_ssl_context(keyfile=str(tmp_path / "junk.pem"))
