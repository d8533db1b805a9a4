"""One broker connection: framing, correlation ids, pipelined in-flight requests, timeouts, TLS, SASL.

A connection is single-use: once it fails or is closed it stays dead, and the cluster client builds
a new one (with backoff). That keeps the state machine trivial: every error path ends in
:meth:`BrokerConnection._fail`, which fails every in-flight request and closes the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
import ssl
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kafka_core._version import __version__
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaCodecError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.metrics.registry import NetworkMetrics
from kafka_core.network.framing import FrameProtocol, FrameSink, foreign_protocol, open_frames
from kafka_core.network.sasl import MechanismContext, SaslSettings, create_mechanism
from kafka_core.protocol import (
    REQUEST_CLASSES,
    ApiKey,
    Request,
    RequestHeader,
    decode_response,
    encode_request_parts,
)
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

log = logging.getLogger("kafka_core.network")

# KIP-896: Kafka 4 brokers reject anything older, even where they still advertise it (KAFKA-18659).
KAFKA4_MIN_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 3,
    ApiKey.FETCH: 4,
    ApiKey.LIST_OFFSETS: 1,
    ApiKey.METADATA: 0,
    ApiKey.OFFSET_COMMIT: 2,
    ApiKey.OFFSET_FETCH: 1,
    ApiKey.JOIN_GROUP: 2,
    ApiKey.CREATE_TOPICS: 2,
    ApiKey.DELETE_TOPICS: 1,
}
# ApiVersions v5 (Kafka 4.4, KIP-1242) names the cluster and node the client means, answered by
# REBOOTSTRAP_REQUIRED when they are not: until the client sends them and handles that, it asks at v4.
API_VERSIONS_MAX_VERSION = 4
DEFAULT_MAX_RESPONSE_SIZE = 100 * 1024 * 1024 + 4096
UNSUPPORTED_VERSION = 35
_SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# KafkaChannel's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS, with a margin for the clocks' drift
MIN_REAUTH_INTERVAL_S = 1.1
CLIENT_SOFTWARE_NAME = "kafka-core"
_NOT_TLS_HINT = (
    "a listener that does not speak TLS does this: check the port, "
    "or set security_protocol='PLAINTEXT' (or 'SASL_PLAINTEXT')"
)


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[Any]
    api_key: int
    api_version: int
    sent_at: float = 0.0


def _consume_exception(fut: asyncio.Future[Any]) -> None:
    # A failed request whose caller already gave up must not log "exception never retrieved".
    if not fut.cancelled():
        fut.exception()


class BrokerConnection:
    """A connection to one broker. ``await connect()``, then ``await send(body, version)``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        client_id: str | None = "kafka-core",
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        sasl: SaslSettings | None = None,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        connect_timeout_ms: float = 10_000,
        request_timeout_ms: float = 30_000,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        api_versions_version: int | None = None,
        version_caps: dict[int, int] | None = None,
        metrics: NetworkMetrics | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname
        if sasl is None and sasl_mechanism:  # the three loose options of the first API
            sasl = SaslSettings(sasl_mechanism, username=sasl_username, password=sasl_password)
        self.sasl = sasl
        self.sasl_mechanism = sasl.mechanism if sasl is not None else None
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.request_timeout = request_timeout_ms / 1000.0
        self.max_response_size = max_response_size
        self._api_versions_version = api_versions_version
        self._version_caps = dict(version_caps or {})
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_used = -1
        self.sasl_session_lifetime_ms = 0
        # KIP-368: when the broker's SASL session ends (loop time; 0 = never) and the exchange
        # that re-authenticates in band before it does, holding other requests back meanwhile.
        self._session_end = 0.0
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._auth_gate = asyncio.Event()  # set while requests may go out (cleared mid-exchange)
        self._auth_gate.set()
        self.reauthentications = 0
        self._last_auth_start = 0.0
        self._ready_at = 0.0
        self._last_used = 0.0
        # KIP-219: a broker answers a quota-violating request at once with throttle_time_ms and
        # expects the client to send it nothing more until that time has passed.
        self.throttled_until = 0.0
        self.throttle_time_ms_total = 0
        self._stream: FrameProtocol | None = None
        self._in_flight: OrderedDict[int, _Pending] = OrderedDict()
        self._correlation = itertools.count(1)
        self._ready = False
        self._closing = False  # close() was called: the end is ours, not the broker's
        self._responses = 0  # answers read: a close right after ApiVersions hints at a SASL listener
        self._error: BaseException | None = None
        self._closed_event = asyncio.Event()
        self.metrics = metrics  # counts requests, latency, errors and connections when set

    def __repr__(self) -> str:
        state = "ready" if self._ready else ("failed" if self._error else "new")
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    # -- state -----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Usable for requests: connected, negotiated, authenticated, not failed."""
        return self._ready and self._error is None

    @property
    def reauthentication_due(self) -> bool:
        """The broker's SASL session (KIP-368) ends within half a second and no re-authentication
        renewed it (the in-band one failed to get a token in time, or the session was too short
        to renew): better reconnect while idle than send a request the broker will not answer."""
        if self._session_end <= 0 or not self._ready:
            return False
        if self._reauth_timer is not None or self._reauth_task is not None:
            return False  # one is on its way
        return asyncio.get_running_loop().time() > self._session_end - 0.5

    def idle_for(self) -> float:
        """Seconds since the last request was sent (0 while requests are in flight)."""
        if self._in_flight:
            return 0.0
        return asyncio.get_running_loop().time() - self._last_used

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    # -- connect ---------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the socket (TLS if configured), negotiate ApiVersions, then authenticate (SASL)."""
        if self._error is not None:
            raise KafkaConnectionError(f"{self!r} already failed: {self._error}")
        try:
            async with asyncio.timeout(self.connect_timeout):
                await self._open()
                await self._negotiate_api_versions()
                if self.sasl is not None:
                    await self._authenticate(self.sasl)
        except TimeoutError:
            err: KafkaError = KafkaTimeoutError(
                f"connecting to {self.host}:{self.port} timed out after {self.connect_timeout:.1f}s"
            )
            self._fail(err)
            raise err from None
        except KafkaError as exc:
            self._fail(exc)
            raise
        except ssl.SSLError as exc:
            # Like Java's SslAuthenticationException: a bad certificate will not fix itself on retry.
            hint = f" ({_NOT_TLS_HINT})" if isinstance(exc, ssl.SSLEOFError) else ""
            err = KafkaAuthenticationError(f"TLS handshake with {self.host}:{self.port} failed: {exc}{hint}")
            self._fail(err)
            raise err from exc
        except socket.gaierror as exc:
            # Retried, as Java's client and librdkafka retry a name that does not resolve (DNS may
            # catch up), but named as such: "[Errno -2]" alone reads like a refused port.
            err = KafkaConnectionError(
                f"cannot connect to {self.host}:{self.port}: the host name {self.host!r} does not "
                f"resolve (DNS: {exc.strerror or exc})"
            )
            self._fail(err)
            raise err from exc
        except OSError as exc:
            if (
                self.ssl_context is not None
                and self._stream is None
                and isinstance(exc, ConnectionResetError)
            ):
                # The peer closed the socket before answering our TLS ClientHello: a plaintext
                # Kafka listener does, reading the hello as a frame size it refuses. Final, as
                # Java's SslAuthenticationException is: no retry makes the listener speak TLS.
                err = KafkaAuthenticationError(
                    f"TLS handshake with {self.host}:{self.port} failed: it closed the connection "
                    f"without answering ({_NOT_TLS_HINT})"
                )
            else:
                reason = str(exc) or type(exc).__name__
                err = KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {reason}")
            self._fail(err)
            raise err from exc
        except BaseException as exc:  # cancellation: leave nothing half-open
            self._fail(KafkaConnectionError(f"connect to {self.host}:{self.port} interrupted"))
            raise exc
        self._ready = True
        self._ready_at = self._last_used = asyncio.get_running_loop().time()
        self._schedule_reauthentication()
        if self.metrics is not None:
            self.metrics.connections_created += 1
            self.metrics.connections_active += 1
        log.debug("connected %r versions=%d apis", self, len(self.api_versions))

    async def _open(self) -> None:
        server_hostname = None
        if self.ssl_context is not None:
            server_hostname = self.server_hostname or self.host
        self._stream = await open_frames(
            self.host,
            self.port,
            lambda: _Sink(self),
            max_frame=self.max_response_size,
            ssl=self.ssl_context,
            server_hostname=server_hostname,
        )
        if self._error is not None:  # failed while connecting (the stream is closed by now)
            raise self._error

    async def _negotiate_api_versions(self) -> None:
        version = min(ApiVersionsRequest.MAX_VERSION, API_VERSIONS_MAX_VERSION)
        if self._api_versions_version is not None:
            version = min(version, self._api_versions_version)
        for _ in range(4):
            body = ApiVersionsRequest(
                client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=__version__
            )
            resp = await self._request(body, version, self.connect_timeout)
            if isinstance(resp, _OlderDialect):
                # As the Java client reads such an answer at v0: ask at v0, which it speaks.
                log.info(
                    "%s answered ApiVersions v%d in an older version's layout; asking again at v0",
                    self,
                    version,
                )
                version = 0
                continue
            if resp.error_code == UNSUPPORTED_VERSION and version > 0:
                # The broker answered in v0 format; it lists its own ApiVersions range when it can.
                broker_max = next(
                    (k.max_version for k in resp.api_keys if k.api_key == ApiKey.API_VERSIONS), 0
                )
                version = min(version - 1, broker_max)
                log.debug("%s rejected ApiVersions; retrying with v%d", self, version)
                continue
            if resp.error_code == UNSUPPORTED_VERSION:
                raise KafkaUnsupportedVersionError(
                    f"{self.host}:{self.port} refused ApiVersions down to v0 (UNSUPPORTED_VERSION)"
                )
            if resp.error_code:
                raise error_for(resp.error_code, f"ApiVersions from {self.host}:{self.port}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.api_versions_used = version
            return
        raise KafkaUnsupportedVersionError(f"{self.host}:{self.port} accepts no ApiVersions version")

    async def _authenticate(self, settings: SaslSettings) -> None:
        """One SASL exchange: at connect, and again in band before the session ends (KIP-368)."""
        mech = create_mechanism(settings, MechanismContext(self.host, self.port))
        hs_range = self.api_versions.get(ApiKey.SASL_HANDSHAKE)
        auth_range = self.api_versions.get(ApiKey.SASL_AUTHENTICATE)
        if hs_range is None or hs_range[1] < 1 or auth_range is None:
            raise KafkaAuthenticationError(
                f"{self.host}:{self.port} does not support SaslHandshake v1 / SaslAuthenticate"
            )
        hs = await self._request(SaslHandshakeRequest(mechanism=mech.name), 1, self.connect_timeout)
        if hs.error_code:
            raise KafkaAuthenticationError(
                f"{self.host}:{self.port} does not offer SASL {mech.name} (offers {list(hs.mechanisms)})"
            )
        auth_version = min(SaslAuthenticateRequest.MAX_VERSION, auth_range[1])
        self._last_auth_start = asyncio.get_running_loop().time()
        token = await mech.evaluate(None)
        self._session_end = 0.0
        while token is not None:
            sent_at = asyncio.get_running_loop().time()
            resp = await self._request(
                SaslAuthenticateRequest(auth_bytes=token), auth_version, self.connect_timeout
            )
            if resp.error_code:
                detail = mech.failure_detail()
                raise KafkaAuthenticationError(
                    f"SASL {mech.name} authentication to {self.host}:{self.port} failed: "
                    f"{resp.error_message or 'error code ' + str(resp.error_code)}"
                    + (f" ({detail})" if detail and detail not in (resp.error_message or "") else "")
                )
            self.sasl_session_lifetime_ms = getattr(resp, "session_lifetime_ms", 0) or 0
            if self.sasl_session_lifetime_ms > 0:  # counted from the send, as Java's client does
                self._session_end = sent_at + self.sasl_session_lifetime_ms / 1000.0
            token = await mech.evaluate(bytes(resp.auth_bytes or b""))
        if not mech.complete:
            raise KafkaAuthenticationError(f"SASL {mech.name} exchange ended early")

    def _schedule_reauthentication(self) -> None:
        """Re-authenticate at 85-95% of the session the broker granted (KIP-368; Java's client
        picks the same window), so that the session never ends under a busy connection."""
        if self._session_end <= 0 or self.sasl is None or self._error is not None:
            return
        loop = asyncio.get_running_loop()
        remaining = self._session_end - loop.time()
        if remaining < 0.5:  # too short to renew: it lapses, and an idle connection is replaced
            return
        # The handshake must reach the broker before the session ends, behind whatever requests
        # are in flight then (Kafka reads them first and closes on one read after the end): keep
        # at least min(1 s, a quarter of the session) for them.
        delay = min(remaining * random.uniform(0.85, 0.95), remaining - min(1.0, remaining / 4))
        # Kafka refuses a re-authentication begun less than a second after the previous one.
        delay = max(delay, self._last_auth_start + MIN_REAUTH_INTERVAL_S - loop.time())
        if delay >= remaining:
            return
        self._reauth_timer = loop.call_later(delay, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._error is None and self._reauth_task is None:
            self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """The same exchange on the live connection. Requests already sent are answered first
        (Kafka answers in order); new ones wait at the gate until the exchange is over, because
        the broker takes nothing but SASL requests in between. A refusal drops the connection:
        requests in flight fail as retriable, and reconnecting reports the broker's reason."""
        assert self.sasl is not None
        self._auth_gate.clear()
        try:
            async with asyncio.timeout(self.connect_timeout):
                await self._authenticate(self.sasl)
        except TimeoutError:
            self._fail(
                KafkaConnectionError(
                    f"re-authentication with {self.host}:{self.port} timed out after "
                    f"{self.connect_timeout:.1f}s; connection dropped"
                )
            )
        except KafkaError as exc:
            self._fail(KafkaConnectionError(f"re-authentication with {self.host}:{self.port} failed: {exc}"))
        else:
            self.reauthentications += 1
            log.debug("%r re-authenticated; session %d ms", self, self.sasl_session_lifetime_ms)
            self._schedule_reauthentication()
        finally:
            self._reauth_task = None
            self._auth_gate.set()

    # -- versions --------------------------------------------------------------------------

    def choose_version(self, api_key: int, *, max_version: int | None = None) -> int:
        """Highest version both sides support, never below the Kafka 4 floor."""
        cls: Any = REQUEST_CLASSES.get(api_key)
        broker = self.api_versions.get(api_key)
        if cls is None or broker is None:
            raise KafkaUnsupportedVersionError(
                f"broker {self.node_id} ({self.host}:{self.port}) does not support API {_api_name(api_key)}"
            )
        low = max(cls.MIN_VERSION, broker[0], KAFKA4_MIN_VERSIONS.get(api_key, 0))
        high = min(cls.MAX_VERSION, broker[1])
        cap = self._version_caps.get(api_key)
        if cap is not None:
            high = min(high, cap)
        if max_version is not None:
            high = min(high, max_version)
        if high < low:
            raise KafkaUnsupportedVersionError(
                f"no usable version of {_api_name(api_key)}: broker {self.node_id} offers "
                f"{broker[0]}-{broker[1]}, client needs {low}-{high}"
            )
        return high

    def negotiated_versions(self) -> dict[ApiKey, int]:
        out: dict[ApiKey, int] = {}
        for key in sorted(self.api_versions):
            with contextlib.suppress(KafkaUnsupportedVersionError, ValueError):
                out[ApiKey(key)] = self.choose_version(key)
        return out

    # -- requests --------------------------------------------------------------------------

    async def send(
        self,
        body: Any,
        version: int | None = None,
        *,
        timeout_ms: float | None = None,
        expect_response: bool | None = None,
    ) -> Any:
        """Send one request and return the decoded response body (None for acks=0 Produce).

        On timeout the connection is dropped (the broker may still answer later and we could not
        tell which request it answers), so every other in-flight request fails too.
        """
        if not self.connected:
            if self._error is not None:
                raise KafkaConnectionError(f"connection to {self.host}:{self.port} is down: {self._error}")
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is not ready")
        if version is None:
            version = self.choose_version(body.API_KEY)
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000.0
        if expect_response is None:
            expect_response = not (body.API_KEY == ApiKey.PRODUCE and getattr(body, "acks", -1) == 0)
        return await self._request(body, version, timeout, expect_response=expect_response)

    async def _request(self, body: Any, version: int, timeout: float, *, expect_response: bool = True) -> Any:
        delay = self.throttled_until - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)  # the broker's quota: held back here, not on the wire
        if not self._auth_gate.is_set() and body.API_KEY not in _SASL_APIS:
            await self._pass_auth_gate(body, version, timeout)
        writer = self._stream
        if writer is None or self._error is not None:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is down: {self._error}")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        header = RequestHeader(body.API_KEY, version, correlation_id, self.client_id)
        try:
            parts = encode_request_parts(Request(header, body))
        except KafkaError:
            raise
        except Exception as exc:
            raise KafkaCodecError(f"cannot encode {type(body).__name__} v{version}: {exc}") from exc
        size = sum(len(p) for p in parts)
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            fut.add_done_callback(_consume_exception)
            now = asyncio.get_running_loop().time()
            self._in_flight[correlation_id] = _Pending(fut, body.API_KEY, version, now)
        writer.write([size.to_bytes(4, "big"), *parts])
        self._last_used = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(timeout):
                await writer.drain()
                if fut is None:
                    return None
                # A cancelled caller cancels ``fut`` but its entry stays in flight until the
                # broker answers, so the next response still finds its own waiter.
                return await fut
        except TimeoutError:
            err: KafkaError = KafkaTimeoutError(
                f"{_api_name(body.API_KEY)} v{version} to {self.host}:{self.port} "
                f"got no response within {timeout:.1f}s; connection dropped"
            )
            self._fail(err)
            raise err from None
        except (ConnectionError, OSError) as exc:
            err = KafkaConnectionError(f"write to {self.host}:{self.port} failed: {exc}")
            self._fail(err)
            raise err from exc

    async def _pass_auth_gate(self, body: Any, version: int, timeout: float) -> None:
        """Wait out a re-authentication (itself bounded by connect_timeout), within ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                while not self._auth_gate.is_set():
                    await self._auth_gate.wait()
        except TimeoutError:
            raise KafkaTimeoutError(
                f"{_api_name(body.API_KEY)} v{version} to {self.host}:{self.port} waited {timeout:.1f}s "
                f"for a re-authentication to finish"
            ) from None

    # -- reading ---------------------------------------------------------------------------

    def _bad_frame_size(self, size: int) -> None:
        self._fail(KafkaConnectionError(self._bad_frame_message(size)))

    def _bad_frame_message(self, size: int) -> str:
        head = size.to_bytes(4, "big", signed=True)
        where = f"{self.host}:{self.port}"
        peer = foreign_protocol(head)
        if peer is not None and peer.startswith("TLS"):
            hint = (
                "it expects TLS: set security_protocol='SSL' (or 'SASL_SSL')"
                if self.ssl_context is None
                else "a TLS layer inside the TLS connection: check the port"
            )
            return f"{where} speaks {peer}, not Kafka: {hint}; connection dropped"
        if peer is not None:
            return (
                f"{where} speaks {peer}, not Kafka (an HTTP server or proxy, not a broker's "
                f"listener: check the host and port); connection dropped"
            )
        text = head.decode("ascii", "replace")
        seen = (
            f" (its first bytes, {text!r}, look like text)" if text.isprintable() and text.isascii() else ""
        )
        return (
            f"{where} sent a response frame of {size} bytes (limit max_response_size="
            f"{self.max_response_size}){seen}; is it a Kafka broker? connection dropped"
        )

    def _stream_ended(self, exc: BaseException | None, mid_frame: bool) -> None:
        if exc is None:
            mid = "mid-response" if mid_frame or self._in_flight else "idle"
            hint = ""
            if self.sasl is None and self._in_flight and self._responses <= 1:
                # A SASL listener answers ApiVersions, then closes on any request but a SASL
                # handshake (Kafka logs "Unexpected Kafka request ... during SASL handshake").
                protocol = "SASL_SSL" if self.ssl_context is not None else "SASL_PLAINTEXT"
                hint = (
                    " right after ApiVersions: the listener likely expects SASL: set "
                    f"security_protocol={protocol!r} and sasl_mechanism"
                )
            self._fail(KafkaConnectionError(f"{self.host}:{self.port} closed the connection ({mid}){hint}"))
        else:
            self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} lost: {exc}"))

    def _dispatch(self, frame: bytes | bytearray) -> bool:
        """Hand one frame to its waiter. False when the stream can no longer be trusted."""
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if not self._in_flight:
            self._fail(
                KafkaConnectionError(
                    f"{self.host}:{self.port} sent an unsolicited response (correlation id {correlation_id})"
                )
            )
            return False
        expected, pending = next(iter(self._in_flight.items()))
        if correlation_id != expected:
            # Kafka answers in order on a connection: a mismatch means we are out of sync.
            self._fail(
                KafkaConnectionError(
                    f"{self.host}:{self.port} answered correlation id {correlation_id}, expected {expected}"
                )
            )
            return False
        del self._in_flight[expected]
        self._responses += 1
        try:
            body = self._decode(pending, frame)
        except Exception as exc:
            msg = (
                f"garbled {_api_name(pending.api_key)} v{pending.api_version} response from "
                f"{self.host}:{self.port}: {exc}"
            )
            if self.metrics is not None:
                self.metrics.error(pending.api_key, self.node_id, "GARBLED_RESPONSE")
            if not pending.future.done():
                if isinstance(exc, KafkaProtocolError):
                    pending.future.set_exception(error_for(exc.code, msg))
                else:
                    pending.future.set_exception(KafkaCodecError(msg))
            self._fail(KafkaConnectionError(f"connection dropped after a {msg}"))
            return False
        if self.metrics is not None:
            self.metrics.request_done(
                pending.api_key,
                self.node_id,
                asyncio.get_running_loop().time() - pending.sent_at,
                getattr(body, "error_code", 0) or 0,
            )
        throttle_ms = getattr(body, "throttle_time_ms", 0)
        if throttle_ms and throttle_ms > 0:
            self.throttle_time_ms_total += throttle_ms
            if self.metrics is not None:
                self.metrics.throttled(pending.api_key, self.node_id, throttle_ms)
            until = asyncio.get_running_loop().time() + throttle_ms / 1000.0
            if until > self.throttled_until:
                self.throttled_until = until
                log.debug("%s throttles us for %d ms (quota)", self, throttle_ms)
        if not pending.future.done():
            pending.future.set_result(body)
        return True

    @staticmethod
    def _decode(pending: _Pending, frame: bytes | bytearray) -> Any:
        version = pending.api_version
        if pending.api_key == ApiKey.API_VERSIONS and frame[4:6] == b"\x00\x23":
            # UNSUPPORTED_VERSION: brokers fall back to a v0 body so the client can read the ranges.
            try:
                return decode_response(pending.api_key, 0, frame).body
            except KafkaError:
                # Not every broker does (librdkafka's mock cluster): the error code is enough.
                return _salvage_api_versions_rejection(frame)
        try:
            return decode_response(pending.api_key, version, frame).body
        except KafkaError:
            older = _older_api_versions_dialect(frame) if pending.api_key == ApiKey.API_VERSIONS else None
            if older is None or version == 0:
                raise
            return older

    # -- failure and close -----------------------------------------------------------------

    def _fail(self, error: BaseException) -> None:
        """Fail every in-flight request with ``error`` and close the socket. Idempotent."""
        if self._error is None:
            self._error = error
            if self._ready:
                # a close we asked for (ours or the client's retiring an idle connection) is
                # routine; a drop we did not ask for is worth a line
                asked = isinstance(error, KafkaClosedError) or self._closing
                log.log(
                    logging.DEBUG if asked else logging.INFO,
                    "connection to %s:%s %s: %s",
                    self.host,
                    self.port,
                    "closed" if asked else "dropped",
                    error,
                )
            if self.metrics is not None:
                self._count_failure(error)
        pending, self._in_flight = self._in_flight, OrderedDict()
        for p in pending.values():
            if self.metrics is not None and not isinstance(error, KafkaClosedError):
                kind = "TIMEOUT" if isinstance(error, KafkaTimeoutError) else "CONNECTION"
                self.metrics.error(p.api_key, self.node_id, kind)
            if not p.future.done():
                p.future.set_exception(
                    error if isinstance(error, KafkaError) else KafkaConnectionError(str(error))
                )
        self._ready = False
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._reauth_task is not None and self._reauth_task is not _current_task():
            self._reauth_task.cancel()
        self._auth_gate.set()  # waiters find the connection down
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()
        self._closed_event.set()

    def _count_failure(self, error: BaseException) -> None:
        m = self.metrics
        assert m is not None
        if self._ready:
            m.connections_closed += 1
            m.connections_active -= 1
        elif not isinstance(error, KafkaClosedError):
            m.connection_failures += 1

    async def close(self, reason: str | None = None) -> None:
        """Close the connection. In-flight requests fail with KafkaClosedError, or with a
        (retriable) KafkaConnectionError carrying ``reason`` when the client retires it."""
        self._closing = True
        if reason is None:
            self._fail(KafkaClosedError(f"connection to {self.host}:{self.port} closed"))
        else:
            self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} retired: {reason}"))
        if self._stream is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._stream.closed), 1.0)


class _Sink(FrameSink):
    """The connection's side of its FrameProtocol (no reference cycle through the loop)."""

    __slots__ = ("conn",)

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    def frame_received(self, frame: bytearray | bytes) -> bool:
        conn = self.conn
        try:
            return conn._dispatch(frame)
        except Exception as exc:  # never let a bad frame leave requests waiting
            conn._fail(KafkaConnectionError(f"reader for {conn.host}:{conn.port} crashed: {exc!r}"))
            return False

    def bad_frame_size(self, size: int) -> None:
        self.conn._bad_frame_size(size)

    def stream_ended(self, exc: BaseException | None, mid_frame: bool) -> None:
        self.conn._stream_ended(exc, mid_frame)


def _salvage_api_versions_rejection(frame: bytes | bytearray) -> ApiVersionsResponse:
    """An UNSUPPORTED_VERSION answer to ApiVersions that decodes in no version (as librdkafka's mock
    sends: a one-byte count, then entries without tagged fields): keep the error code, and the
    broker's own ApiVersions range if it is the first entry after a 1- or 4-byte count, so the
    retry can go straight to the highest version it takes (librdkafka retries on the code alone)."""
    keys: list[ApiVersionsResponse.ApiVersion] = []
    for offset in (7, 10):
        entry = bytes(frame[offset : offset + 6])
        if len(entry) < 6:
            continue
        api_key, low, high = struct.unpack(">hhh", entry)
        if api_key == ApiKey.API_VERSIONS and 0 <= low <= high:
            keys.append(ApiVersionsResponse.ApiVersion(api_key=api_key, min_version=low, max_version=high))
            break
    return ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=keys)


@dataclass(frozen=True, slots=True)
class _OlderDialect:
    """A successful ApiVersions answer laid out as an older version than the one asked (kafka-rs
    answers every version with its v1/v2 body): the negotiation asks again at v0."""

    body: ApiVersionsResponse
    error_code: int = 0


def _older_api_versions_dialect(frame: bytes | bytearray) -> _OlderDialect | None:
    """The frame read as a v0 ApiVersions body, with nothing after it but v1/v2's throttle time,
    if that reading is a successful answer listing APIs; else None (the frame stays garbled)."""
    try:
        resp = decode_response(ApiKey.API_VERSIONS, 0, frame)
    except KafkaError:
        return None
    body = resp.body
    if len(resp.trailing) not in (0, 4) or body.error_code != 0 or not body.api_keys:
        return None
    return _OlderDialect(body)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop (a close from a finaliser)
        return None


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"
