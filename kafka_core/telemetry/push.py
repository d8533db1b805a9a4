"""KIP-714: the client side of GetTelemetrySubscriptions and PushTelemetry.

One task per client on its loop: ask a broker for the subscription, push the metrics it
selects every ``push_interval_ms`` (the first push at a random 0.5-1.5 of it, so that clients
started together do not push together), and a last push flagged ``terminating`` on close. A
broker whose ApiVersions lacks GetTelemetrySubscriptions costs nothing; one without a
subscription for this client costs one request per push interval, as KIP-714 says.

Errors, as KIP-714 and the Java client: INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION
(and codes KIP-714 does not name) turn the push off for the client's life; UNKNOWN_SUBSCRIPTION_ID
and UNSUPPORTED_COMPRESSION_TYPE fetch the subscription again at once (the latter without that
codec); TELEMETRY_TOO_LARGE and THROTTLING_QUOTA_EXCEEDED wait a push interval. A lost
connection or a timeout waits a push interval (or ``RETRY_S`` before any subscription) and
asks again, maybe another broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafka_core._version import __version__
from kafka_core.client.waiting import wait_event, within
from kafka_core.codec.compression import compress
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConfigError,
    KafkaError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.metrics.kip714 import MetricsCollector, selector
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
)
from kafka_core.telemetry.otlp import CUMULATIVE, DELTA, encode_metrics_data

log = logging.getLogger("kafka_core.telemetry")

__all__ = ["RETRY_S", "SCOPE_NAME", "TelemetryPusher", "pusher_for", "wait_instance_id"]

RETRY_S = 30.0  # before any subscription is known: how long to wait after a failed ask
STARTED_POLL_S = 1.0  # how often to look whether the owner has bootstrapped the client
TERMINATING_PUSH_S = 5.0  # the most a close without a timeout waits for the last push
DEFAULT_INTERVAL_MS = 300_000  # Java's, for a subscription whose interval is not positive
SCOPE_NAME = "kafka_core"
_CODECS = (1, 2, 3, 4)  # gzip, snappy, lz4, zstd: every one kafka_core.codec compresses
_DISABLE = {ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_VERSION}
_RESUBSCRIBE = {ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
_NEXT_INTERVAL = {ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED}


class Subscription:
    """What GetTelemetrySubscriptions answered."""

    __slots__ = ("codecs", "delta", "id", "instance_id", "interval_s", "max_bytes", "prefixes")

    def __init__(self, resp: Any) -> None:
        self.instance_id: uuid.UUID = resp.client_instance_id
        self.id: int = resp.subscription_id
        self.codecs: list[int] = list(resp.accepted_compression_types)
        interval = resp.push_interval_ms if resp.push_interval_ms > 0 else DEFAULT_INTERVAL_MS
        self.interval_s = interval / 1000.0
        self.max_bytes: int = resp.telemetry_max_bytes
        self.delta: bool = resp.delta_temporality
        self.prefixes = selector(resp.requested_metrics)

    @property
    def wants_metrics(self) -> bool:
        return self.prefixes is None or bool(self.prefixes)


class TelemetryPusher:
    """Pushes one client's metrics to the cluster as its subscription asks (KIP-714).

    ``snapshot`` returns the client's ``metrics()`` dict; ``resource`` the resource attributes
    (``group_id``, ``transactional_id``... of the client, as librdkafka sends them)."""

    def __init__(
        self,
        client: Any,
        kind: str,
        snapshot: Callable[[], Mapping[str, Any]],
        resource: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self._client = client
        self._snapshot = snapshot
        self._resource = resource or dict
        self._collector = MetricsCollector(kind)
        self._kind = kind
        self.subscription: Subscription | None = None
        self.instance_id: uuid.UUID | None = None  # the broker-assigned client instance id
        self.enabled = True
        self.disabled_reason: str | None = None
        self._disabled_error: type[KafkaError] = KafkaError  # what client_instance_id raises then
        self.last_error: KafkaError | None = None  # why the last GetTelemetrySubscriptions failed
        self._answered = asyncio.Event()  # an instance id is known, or none will be
        self._closed = False
        self.pushes = 0  # pushes the broker accepted
        self._bad_codecs: set[int] = set()
        self._node: int | None = None
        self._start_ns = time.time_ns()
        self._last_push_ns = self._start_ns
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy: asyncio.Lock | None = None  # one request at a time: the loop's or the close's

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start pushing on the running loop (once)."""
        if self._task is None and self.enabled:
            self._stop = asyncio.Event()
            self._busy = asyncio.Lock()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self, timeout_s: float | None = None) -> None:
        """Stop; first a last push flagged terminating when a subscription asks for metrics,
        waiting at most ``timeout_s`` (default the client's request timeout, at most
        ``TERMINATING_PUSH_S``) for it."""
        self._closed = True
        self._answered.set()
        if self._task is None:
            return
        task, self._task = self._task, None
        assert self._stop is not None
        limit = (
            min(self._client.request_timeout_ms / 1000.0, TERMINATING_PUSH_S)
            if timeout_s is None
            else timeout_s
        )
        deadline = time.monotonic() + max(limit, 0.0)
        # The loop ends at its next wait; a push in flight is let finish (cancelled, its metrics,
        # already counted as pushed, would be missing from a delta subscription's sums).
        self._stop.set()
        try:
            await within(asyncio.shield(task), max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        sub = self.subscription
        if not self.enabled or sub is None or not sub.wants_metrics:
            return
        try:
            await within(self._push(sub, terminating=True), max(deadline - time.monotonic(), 0.0))
        except (KafkaError, TimeoutError) as exc:
            log.debug("terminating telemetry push failed: %s", exc)

    # -- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._stop is not None
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not take the client down, only its telemetry
            log.exception("telemetry push stopped")
            self._disable("internal error")

    async def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds``; False when closing."""
        assert self._stop is not None
        return not await wait_event(self._stop, max(seconds, 0.0))

    async def _loop(self) -> None:
        if not await self._supported():
            return
        while self.enabled:
            wait = await self._subscribe()
            if wait is None:  # pushing: the first at a random share of the interval
                sub = self.subscription
                assert sub is not None
                wait = sub.interval_s * random.uniform(0.5, 1.5)
                while self.enabled and self.subscription is sub:
                    if not await self._sleep(wait):
                        return
                    wait = await self._push_once(sub)
                    if wait is None:
                        break  # subscribe again at once
                continue
            if not await self._sleep(wait):
                return

    async def _supported(self) -> bool:
        """Whether a broker offers GetTelemetrySubscriptions (ApiVersions says: no request)."""
        # Not before the producer or consumer has bootstrapped the client: started here, a
        # refused login would be tried twice at once, and a client that never starts (a refused
        # login is final) is never started by its telemetry.
        while not getattr(self._client, "started", True):
            if not await self._sleep(STARTED_POLL_S):
                return False
        while True:
            try:
                node = await self._client.any_node()
                await self._client.api_version(node, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
                await self._client.api_version(node, ApiKey.PUSH_TELEMETRY)
            except KafkaUnsupportedVersionError:
                self._disable(
                    "the broker does not support KIP-714 client metrics", KafkaUnsupportedVersionError
                )
                return False
            except KafkaAuthenticationError as exc:
                # Final, as for the client's own requests: asking again would log in again, a
                # refused login per RETRY_S that the application never asked for.
                log.debug("telemetry: off, the login was refused (%s)", exc)
                self._disable(f"the broker refused the client's login ({exc})", KafkaAuthenticationError)
                return False
            except KafkaError as exc:
                log.debug("telemetry: no broker to ask yet (%s); trying later", exc)
                self.last_error = exc
                if not await self._sleep(RETRY_S):
                    return False
                continue
            self._node = node
            return True

    async def _send(self, body: Any) -> Any:
        assert self._busy is not None
        async with self._busy:
            node = self._node if self._node is not None else await self._client.any_node()
            self._node = node
            try:
                return await self._client.send(node, body)
            except KafkaError:
                self._node = None  # another broker next time
                raise

    async def _subscribe(self) -> float | None:
        """Ask for the subscription: None to start pushing, else seconds until asking again."""
        retry = self.subscription.interval_s if self.subscription is not None else RETRY_S
        body = GetTelemetrySubscriptionsRequest(client_instance_id=self.instance_id or uuid.UUID(int=0))
        try:
            resp = await self._send(body)
        except KafkaUnsupportedVersionError:
            self._disable("the broker does not support KIP-714 client metrics", KafkaUnsupportedVersionError)
            return retry
        except KafkaError as exc:
            log.debug("GetTelemetrySubscriptions failed: %s", exc)
            self.last_error = exc
            return retry
        code = resp.error_code
        if code:
            return self._on_error(code, "GetTelemetrySubscriptions", retry, resp.throttle_time_ms)
        sub = Subscription(resp)
        self.subscription = sub
        self.instance_id = sub.instance_id
        self._answered.set()
        if not sub.wants_metrics:
            return sub.interval_s  # nothing asked of this client: ask again after an interval
        return None

    async def _push_once(self, sub: Subscription) -> float | None:
        """One push: seconds until the next, None to subscribe again now."""
        try:
            resp = await self._push(sub, terminating=False)
        except KafkaError as exc:
            log.debug("PushTelemetry failed: %s", exc)
            return sub.interval_s
        if resp is None:  # too large to send: skipped
            return sub.interval_s
        code = resp.error_code
        if not code:
            self.pushes += 1
            return max(sub.interval_s, resp.throttle_time_ms / 1000.0)
        if code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE:
            self._bad_codecs.add(self._codec(sub))
        wait = self._on_error(code, "PushTelemetry", sub.interval_s, resp.throttle_time_ms)
        if code in _RESUBSCRIBE:
            self.subscription = None
            return None
        return wait

    def _on_error(self, code: int, api: str, interval_s: float, throttle_ms: int) -> float:
        """Seconds to wait after ``code`` (disabling the push for the codes that say so)."""
        name = _name(code)
        if code in _DISABLE or (code not in _RESUBSCRIBE and code not in _NEXT_INTERVAL):
            log.warning("%s answered %s: client metrics push turned off for this client", api, name)
            self._disable(f"{api} answered {name}")
        elif code == ErrorCode.TELEMETRY_TOO_LARGE:
            log.warning("PushTelemetry answered TELEMETRY_TOO_LARGE; trying again next interval")
        else:
            log.debug("%s answered %s", api, name)
        return max(0.0 if code in _RESUBSCRIBE else interval_s, throttle_ms / 1000.0)

    def _disable(self, why: str, error: type[KafkaError] = KafkaError) -> None:
        self.enabled = False
        self.disabled_reason = why
        self._disabled_error = error
        self._answered.set()

    # -- the client instance id ----------------------------------------------------------------

    async def client_instance_id(self, timeout_s: float) -> uuid.UUID:
        """The id the broker assigned this client, waiting at most ``timeout_s`` for it."""
        if self.instance_id is None and self.enabled and not self._closed:
            self.start()  # a no-op once started; else it waits for the owner to connect
            try:
                await within(self._answered.wait(), timeout_s)
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"no client instance id within {timeout_s}s: {self._waiting_for()}"
                ) from None
        if self.instance_id is not None:
            return self.instance_id
        if not self.enabled:
            raise self._disabled_error(
                f"no client instance id: client metrics push is off: {self.disabled_reason}"
            )
        raise KafkaClosedError(
            f"no client instance id: the {self._kind} was closed before the broker assigned one"
        )

    def _waiting_for(self) -> str:
        if not getattr(self._client, "started", True):
            return f"the {self._kind} has not connected to the cluster yet"
        if self.last_error is not None:
            return f"no answer to GetTelemetrySubscriptions yet ({self.last_error}); asked again every {RETRY_S:g}s"
        return "no broker has answered GetTelemetrySubscriptions yet"

    # -- one push ----------------------------------------------------------------------------

    def _codec(self, sub: Subscription) -> int:
        """The first codec the broker accepts (its order is its preference) that is usable."""
        for codec in sub.codecs:
            if codec in _CODECS and codec not in self._bad_codecs:
                return codec
        return 0

    def payload(self, sub: Subscription, *, now_ns: int | None = None) -> bytes:
        """The OTLP ``MetricsData`` bytes of the metrics ``sub`` selects, uncompressed."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        points = self._collector.collect(
            self._snapshot(), time.monotonic(), delta=sub.delta, prefixes=sub.prefixes
        )
        data = encode_metrics_data(
            points,
            resource={k: v for k, v in self._resource().items() if v},
            scope_name=SCOPE_NAME,
            scope_version=__version__,
            time_ns=now_ns,
            start_ns=self._last_push_ns if sub.delta else self._start_ns,
            temporality=DELTA if sub.delta else CUMULATIVE,
        )
        self._last_push_ns = now_ns
        return data

    async def _push(self, sub: Subscription, *, terminating: bool) -> Any:
        codec = self._codec(sub)
        raw = self.payload(sub)
        data = compress(codec, raw) if codec else raw
        if sub.max_bytes and len(data) > sub.max_bytes:
            log.warning(
                "client metrics of %d bytes exceed the broker's telemetry_max_bytes (%d): not pushed",
                len(data),
                sub.max_bytes,
            )
            return None
        body = PushTelemetryRequest(
            client_instance_id=sub.instance_id,
            subscription_id=sub.id,
            terminating=terminating,
            compression_type=codec,
            metrics=data,
        )
        return await self._send(body)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def pusher_for(
    client: Any,
    kind: str,
    snapshot: Callable[[], Mapping[str, Any]],
    resource: Callable[[], Mapping[str, str]] | None = None,
) -> TelemetryPusher | None:
    """The pusher of a producer, consumer or admin over ``client``; None when its
    ``enable_metrics_push`` is off."""
    if not getattr(client, "metrics_push", False):
        return None
    return TelemetryPusher(client, kind, snapshot, resource)


async def wait_instance_id(pusher: TelemetryPusher | None, timeout: float) -> uuid.UUID:
    """Java's ``clientInstanceId(Duration)``: the KIP-714 client instance id the broker assigned
    (GetTelemetrySubscriptions), within ``timeout`` seconds.

    Raises KafkaConfigError when metrics push is off (``enable_metrics_push=False``) or the
    timeout is not a number >= 0, KafkaUnsupportedVersionError when the broker does not support
    KIP-714, KafkaTimeoutError naming what is awaited, KafkaClosedError after a close."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise KafkaConfigError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    if pusher is None:
        raise KafkaConfigError(
            "no client instance id: client metrics push is off (enable_metrics_push=False); the broker "
            "assigns one only to clients that ask for their telemetry subscription"
        )
    return await pusher.client_instance_id(float(timeout))
