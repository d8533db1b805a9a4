"""SASL PLAIN and SCRAM against an in-test SASL endpoint in front of the test broker.

Tansu offers neither PLAIN nor stored SCRAM users, so a small asyncio server built on
kafka_core.protocol speaks SaslHandshake/SaslAuthenticate itself (with a server-side SCRAM per
RFC 5802), forwards ApiVersions, and after a successful exchange pipes bytes to Tansu, which
advertises the endpoint's port. Optionally it terminates TLS too (SASL_SSL).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import os
import ssl
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_core._sync import LoopThread
from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaAuthenticationError
from kafka_core.network.connection import BrokerConnection
from kafka_core.protocol import ApiKey, Response, decode_request, encode_response
from kafka_core.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

USERS = {"alice": "alice-secret", "bob": "p\u00e4ssword,=x"}


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


class ScramServer:
    """Server side of RFC 5802 for one exchange, with credentials derived from the plain password."""

    def __init__(self, mechanism: str, users: dict[str, str], *, forge_signature: bool = False) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.users = users
        self.forge_signature = forge_signature
        self.state = 0
        self.salt = os.urandom(16)
        self.iterations = 4096

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def step(self, data: bytes) -> tuple[bytes | None, str | None]:
        """(reply, error): reply None with an error means authentication failed."""
        text = data.decode()
        if self.state == 0:
            if not text.startswith("n,,"):
                return None, "channel binding not supported"
            self.client_first_bare = text[3:]
            attrs = dict(part.split("=", 1) for part in self.client_first_bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            password = self.users.get(user)
            if password is None:
                return None, f"unknown user {user}"
            salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
            self.stored_key = hashlib.new(self.hash, self._hmac(salted, b"Client Key")).digest()
            self.server_key = self._hmac(salted, b"Server Key")
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            self.server_first = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
            self.state = 1
            return self.server_first.encode(), None
        without_proof, _, proof_b64 = text.rpartition(",p=")
        if without_proof != f"c=biws,r={self.nonce}":
            return None, "bad channel binding or nonce"
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = self._hmac(self.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True))
        if hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return None, "Authentication failed during authentication due to invalid credentials"
        server_signature = self._hmac(self.server_key, auth_message)
        if self.forge_signature:
            server_signature = bytes(len(server_signature))
        self.state = 2
        return b"v=" + base64.b64encode(server_signature), None


class SaslEndpoint:
    """Authenticate clients itself, then pipe their bytes to the broker."""

    def __init__(
        self, mechanisms: list[str], *, ssl_ctx: ssl.SSLContext | None = None, forge: bool = False
    ) -> None:
        self.mechanisms = mechanisms
        self.ssl_ctx = ssl_ctx
        self.forge = forge
        self.upstream_port = 0
        self.port = 0
        self.authenticated = 0
        self.lifetime_ms = 3_600_000  # SaslAuthenticate session_lifetime_ms (KIP-368)
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> SaslEndpoint:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl_ctx)
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
        up_writer: asyncio.StreamWriter | None = None
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            if await self._authenticate(reader, writer, up_reader, up_writer):
                self.authenticated += 1
                await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            if up_writer is not None:
                up_writer.close()
            self._tasks.discard(task)

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        mechanism: str | None = None
        scram: ScramServer | None = None
        while True:
            head = await reader.readexactly(4)
            frame = await reader.readexactly(struct.unpack(">i", head)[0])
            req = decode_request(frame)
            h = req.header
            if h.api_key == ApiKey.API_VERSIONS:  # allowed before authentication: ask the broker
                up_writer.write(head + frame)
                size = await up_reader.readexactly(4)
                writer.write(size + await up_reader.readexactly(struct.unpack(">i", size)[0]))
                continue
            if h.api_key == ApiKey.SASL_HANDSHAKE:
                ok = req.body.mechanism in self.mechanisms
                mechanism = req.body.mechanism if ok else None
                body: Any = SaslHandshakeResponse(error_code=0 if ok else 33, mechanisms=self.mechanisms)
                self._reply(writer, h, body)
                if not ok:
                    return False
                continue
            if h.api_key == ApiKey.SASL_AUTHENTICATE and mechanism is not None:
                token = bytes(req.body.auth_bytes)
                if mechanism == "PLAIN":
                    _, user, password = token.decode().split("\x00")
                    if USERS.get(user) != password:
                        self._reply(
                            writer, h, SaslAuthenticateResponse(error_code=58, error_message="bad password")
                        )
                        return False
                    self._reply(writer, h, SaslAuthenticateResponse(auth_bytes=b""))
                    return True
                if scram is None:
                    scram = ScramServer(mechanism, USERS, forge_signature=self.forge)
                reply, error = scram.step(token)
                if reply is None:
                    self._reply(writer, h, SaslAuthenticateResponse(error_code=58, error_message=error))
                    return False
                self._reply(
                    writer,
                    h,
                    SaslAuthenticateResponse(auth_bytes=reply, session_lifetime_ms=self.lifetime_ms),
                )
                if scram.state == 2:
                    return True
                continue
            return False  # anything else before authentication: drop, as Kafka does

    @staticmethod
    def _reply(writer: asyncio.StreamWriter, h: Any, body: Any) -> None:
        frame = encode_response(Response(h.api_key, h.api_version, h.correlation_id, body))
        writer.write(struct.pack(">i", len(frame)) + frame)


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
class SaslSetup:
    bootstrap: str
    scram512_only_port: int
    forging_port: int
    sasl_ssl_port: int
    cafile: str
    endpoint: SaslEndpoint


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSetup]:
    from test_tls import make_certs, server_context  # the certificate helpers of the TLS tests

    from kafka_core.devbroker import TansuBroker

    certs = make_certs(tmp_path_factory.mktemp("sasl-certs"))
    loop = LoopThread("sasl-endpoint")
    main = SaslEndpoint(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    endpoints = [
        main,
        SaslEndpoint(["SCRAM-SHA-512"]),
        SaslEndpoint(["SCRAM-SHA-256"], forge=True),
        SaslEndpoint(["PLAIN"], ssl_ctx=server_context(certs.server_cert, certs.server_key)),
    ]
    for e in endpoints:
        loop.run(e.start())
    broker = TansuBroker(advertised_port=main.port)
    for e in endpoints:
        e.upstream_port = broker.port
    try:
        broker.start()
        yield SaslSetup(
            bootstrap=f"127.0.0.1:{main.port}",
            scram512_only_port=endpoints[1].port,
            forging_port=endpoints[2].port,
            sasl_ssl_port=endpoints[3].port,
            cafile=str(certs.ca),
            endpoint=main,
        )
    finally:
        broker.close()
        for e in endpoints:
            loop.run(e.stop())
        loop.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@aio
async def test_sasl_mechanisms_authenticate(sasl: SaslSetup, mechanism: str) -> None:
    before = sasl.endpoint.authenticated
    async with KafkaClient(
        sasl.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username="bob",
        sasl_password=USERS["bob"],
    ) as client:
        meta = await client.await_topic_ready("sasl-topic", 1, timeout_ms=30_000)
        assert meta.ready
        assert (await client.init_producer_id()).producer_id >= 0
        versions = await client.negotiated_versions()
        assert all(ApiKey.METADATA in v for v in versions.values())
    assert sasl.endpoint.authenticated > before


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@aio
async def test_wrong_password_fails_fast_and_clearly(sasl: SaslSetup, mechanism: str) -> None:
    client = KafkaClient(
        sasl.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username="alice",
        sasl_password="wrong",
        api_timeout_ms=60_000,
    )
    # Not retried until the 60 s deadline: authentication errors are final.
    with pytest.raises(KafkaAuthenticationError, match=f"SASL {mechanism} authentication .* failed"):
        await asyncio.wait_for(client.start(), 30)
    await client.close()


@aio
async def test_mechanism_not_offered(sasl: SaslSetup) -> None:
    conn = BrokerConnection(
        "127.0.0.1",
        sasl.scram512_only_port,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password=USERS["alice"],
    )
    with pytest.raises(KafkaAuthenticationError, match=r"does not offer SASL SCRAM-SHA-256 .*SCRAM-SHA-512"):
        await conn.connect()
    assert conn.failed


@aio
async def test_server_that_does_not_know_the_password_is_rejected(sasl: SaslSetup) -> None:
    # The endpoint accepts the proof but answers with a forged signature: SCRAM's mutual auth.
    conn = BrokerConnection(
        "127.0.0.1",
        sasl.forging_port,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password=USERS["alice"],
    )
    with pytest.raises(KafkaAuthenticationError, match="signature mismatch"):
        await conn.connect()


@aio
async def test_sasl_ssl(sasl: SaslSetup) -> None:
    conn = BrokerConnection(
        "127.0.0.1",
        sasl.sasl_ssl_port,
        ssl_context=ssl.create_default_context(cafile=sasl.cafile),
        sasl_mechanism="PLAIN",
        sasl_username="alice",
        sasl_password=USERS["alice"],
    )
    await conn.connect()
    assert conn.connected
    from kafka_core.protocol.messages import MetadataRequest

    resp = await conn.send(MetadataRequest(topics=[]))
    assert resp.brokers
    await conn.close()


@pytest.fixture(scope="module")
def sasl_ssl_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A second broker whose advertised listener is a SASL_SSL endpoint: (bootstrap, cafile)."""
    from test_tls import make_certs, server_context

    from kafka_core.devbroker import TansuBroker

    certs = make_certs(tmp_path_factory.mktemp("sasl-ssl-certs"))
    loop = LoopThread("sasl-ssl-endpoint")
    endpoint = loop.run(
        SaslEndpoint(["SCRAM-SHA-512"], ssl_ctx=server_context(certs.server_cert, certs.server_key)).start()
    )
    broker = TansuBroker(advertised_port=endpoint.port)
    endpoint.upstream_port = broker.port
    try:
        broker.start()
        yield f"127.0.0.1:{endpoint.port}", str(certs.ca)
    finally:
        broker.close()
        loop.run(endpoint.stop())
        loop.stop()


def test_sasl_ssl_client(sasl_ssl_bootstrap: tuple[str, str]) -> None:
    from kafka_core.sync_client import KafkaClient as SyncClient

    bootstrap, cafile = sasl_ssl_bootstrap
    with SyncClient(
        bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=cafile,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password=USERS["alice"],
    ) as client:
        topic = client.await_topic_ready("sasl-ssl-topic", 1, timeout_ms=30_000)
        assert topic.ready
        client.commit_offsets("sasl-ssl-group", {("sasl-ssl-topic", 0): 4})
        got = client.fetch_committed_offsets("sasl-ssl-group")
        assert [(tp.partition, om.offset) for tp, om in got.items()] == [(0, 4)]


@aio
async def test_reconnects_before_the_sasl_session_expires(sasl: SaslSetup) -> None:
    sasl.endpoint.lifetime_ms = 300
    try:
        async with KafkaClient(
            sasl.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="alice",
            sasl_password=USERS["alice"],
        ) as client:
            node = (await client.metadata([])).brokers[0].node_id
            first = await client.connection(node)
            assert first.sasl_session_lifetime_ms == 300
            await asyncio.sleep(0.3)  # past 85% of the session lifetime
            assert first.reauthentication_due
            second = await client.connection(node)
            assert second is not first and second.connected and not first.connected
            assert (await client.metadata([])).brokers
    finally:
        sasl.endpoint.lifetime_ms = 3_600_000
