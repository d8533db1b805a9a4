"""A loopback broker that speaks SaslHandshake/SaslAuthenticate as Kafka's SaslServerAuthenticator
does, for the mechanisms no broker here can validate (AWS_MSK_IAM) and for the faults a real
broker will not produce on demand (a session that ends in 300 ms, a refusal at the third login).

It keeps Kafka's rules that a client can break: nothing but ApiVersions before authentication,
nothing but SaslAuthenticate between a SaslHandshake and the end of its exchange (re-authentication
included), and no request after the session's end (KIP-368: Kafka closes the connection). Answers
come one request at a time per connection, as Kafka's muted channels give them. Metadata names
this broker as the single node; a topic named ``slow-<ms>`` is answered after that many ms.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fakes.loopback_broker import LoopbackBroker
from kafka_core.protocol import Response, encode_response
from kafka_core.protocol.messages import (
    ApiVersionsResponse,
    MetadataResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)

__all__ = ["Login", "SaslBroker"]

NODE_ID = 1
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SASL_AUTHENTICATION_FAILED = 58
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33

# (mechanism, the client's message) -> None to accept, or the broker's reason to refuse.
Verifier = Callable[[str, bytes], str | None]


@dataclass
class Login:
    """One completed or refused exchange, as the test reads it afterwards."""

    connection: int
    mechanism: str
    message: bytes = field(repr=False)
    refused: str | None
    reauthentication: bool
    in_flight_before: int = 0


@dataclass
class _Conn:
    number: int
    authenticated: bool = False
    mechanism: str | None = None
    session_end: float | None = None
    pending_error: str | None = None  # OAUTHBEARER: the JSON challenge was sent, awaiting 0x01
    last_handshake: float = -10.0
    message: bytes = b""


class SaslBroker(LoopbackBroker):
    """``verify(mechanism, message)`` decides each login; ``session_lifetime_ms`` > 0 makes
    Kafka's KIP-368 session (the connection closes at its end unless re-authenticated)."""

    def __init__(self, verify: Verifier, *, mechanisms: tuple[str, ...] = ("PLAIN",)) -> None:
        super().__init__()
        self.verify = verify
        self.mechanisms = mechanisms
        self.session_lifetime_ms = 0
        # (mechanism, message) -> the latest the session may end (epoch seconds; an OAuth token's
        # expiry bounds Kafka's session), or None
        self.session_bound: Callable[[str, bytes], float | None] = lambda mechanism, message: None
        # (mechanism, message) -> the server's final message on success (AWS_MSK_IAM's JSON)
        self.reply: Callable[[str, bytes], bytes] = lambda mechanism, message: b""
        self.logins: list[Login] = []
        self.violations: list[str] = []  # requests Kafka would have refused (the test asserts none)
        self.metadata_answered = 0
        self._conns: dict[asyncio.StreamWriter, _Conn] = {}

    def _conn(self, writer: asyncio.StreamWriter) -> _Conn:
        conn = self._conns.get(writer)
        if conn is None:
            conn = self._conns[writer] = _Conn(self.connections)
        return conn

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        h = req.header
        conn = self._conn(writer)
        now = asyncio.get_running_loop().time()
        if h.api_key == API_VERSIONS:
            return self._send(writer, h, self._api_versions())
        if h.api_key == SASL_HANDSHAKE:
            if conn.mechanism is not None:
                return self._violation(f"SaslHandshake during an exchange on connection {conn.number}")
            if conn.authenticated and now - conn.last_handshake < 1.0:
                # Kafka's KafkaChannel allows one re-authentication a second; a handshake sooner
                # is a request on an authenticated connection, refused as such.
                self.violations.append(f"re-authentication within a second on {conn.number}")
                refused = SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])
                return self._send(writer, h, refused)
            conn.last_handshake = now
            mechanism = req.body.mechanism
            if mechanism not in self.mechanisms:
                body: Any = SaslHandshakeResponse(
                    error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=list(self.mechanisms)
                )
                return self._send(writer, h, body)
            conn.mechanism = mechanism
            return self._send(
                writer, h, SaslHandshakeResponse(error_code=0, mechanisms=list(self.mechanisms))
            )
        if h.api_key == SASL_AUTHENTICATE:
            return self._authenticate(req, writer, conn, now)
        if conn.mechanism is not None:
            return self._violation(f"api {h.api_key} in the middle of a SASL exchange on {conn.number}")
        if not conn.authenticated:
            return self._violation(f"api {h.api_key} before authentication on connection {conn.number}")
        if conn.session_end is not None and now > conn.session_end:
            # What Kafka does with a request after the session's end: close, no answer.
            self.violations.append(f"api {h.api_key} after the session ended on {conn.number}")
            return False
        if h.api_key != METADATA:
            return self._violation(f"api {h.api_key} is not served here")
        names = [t.name for t in (req.body.topics or [])]
        delay = max((int(n[5:]) for n in names if n and n.startswith("slow-")), default=0)
        if delay:
            await asyncio.sleep(delay / 1000)
        self.metadata_answered += 1
        return self._send(writer, h, self._metadata(names))

    def _authenticate(self, req: Any, writer: asyncio.StreamWriter, conn: _Conn, now: float) -> bool:
        h = req.header
        mechanism = conn.mechanism
        if mechanism is None:
            return self._violation(f"SaslAuthenticate without SaslHandshake on {conn.number}")
        data = bytes(req.body.auth_bytes)
        reauthentication = conn.authenticated
        if conn.pending_error is not None:  # OAUTHBEARER's second step after an error challenge
            error, conn.pending_error = conn.pending_error, None
            conn.mechanism = None
            if data != b"\x01":
                error = f"expected %x01 after the error challenge, got {data!r}"
            body: Any = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED, error_message=error)
            self._send(writer, h, body)
            return False
        refused = self.verify(mechanism, data)
        self.logins.append(Login(conn.number, mechanism, data, refused, reauthentication))
        if refused is not None and mechanism == "OAUTHBEARER":
            conn.pending_error = refused
            challenge = json.dumps({"status": "invalid_token"}).encode()
            return self._send(writer, h, SaslAuthenticateResponse(error_code=0, auth_bytes=challenge))
        conn.mechanism = None
        if refused is not None:
            body = SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED,
                error_message=f"Authentication failed during authentication due to: {refused}",
            )
            self._send(writer, h, body)
            return False
        conn.authenticated = True
        lifetime = self.session_lifetime_ms
        bound = self.session_bound(mechanism, data)
        if lifetime > 0 and bound is not None:
            lifetime = max(0, min(lifetime, int((bound - time.time()) * 1000)))
        conn.session_end = now + lifetime / 1000 if lifetime > 0 else None
        body = SaslAuthenticateResponse(
            error_code=0, auth_bytes=self.reply(mechanism, data), session_lifetime_ms=lifetime
        )
        return self._send(writer, h, body)

    def _violation(self, what: str) -> bool:
        self.violations.append(what)
        return False  # Kafka drops such a connection

    def _send(self, writer: asyncio.StreamWriter, h: Any, body: Any) -> bool:
        frame = encode_response(Response(h.api_key, h.api_version, h.correlation_id, body))
        writer.write(struct.pack(">i", len(frame)) + frame)
        return True

    def _api_versions(self) -> ApiVersionsResponse:
        keys = [(API_VERSIONS, 0, 3), (METADATA, 0, 12), (SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 2)]
        return ApiVersionsResponse(
            error_code=0,
            api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in keys
            ],
        )

    def _metadata(self, names: list[str | None]) -> MetadataResponse:
        broker = MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)
        topics = [
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=n,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=NODE_ID,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                    )
                ],
            )
            for n in names
        ]
        return MetadataResponse(
            brokers=[broker], cluster_id="sasl-fake", controller_id=NODE_ID, topics=topics
        )
