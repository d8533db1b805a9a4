"""The asyncio cluster client: bootstrap, one connection per broker, metadata cache, retries.

Higher-level calls (offsets, coordinators, producer ids, topics) live in ``operations.py`` as a
mixin; this module owns connections and metadata, the state every call depends on.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import random
import re
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Self, TypeVar

from kafka_core.auth.options import mechanism_options, oauth_settings_provider
from kafka_core.client import deadline as call_deadline
from kafka_core.client.hints import LeaderHint
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, TopicMeta
from kafka_core.client.metadata_cache import MetadataCache, metadata_request, parse_metadata
from kafka_core.client.nodes import Node, parse_bootstrap
from kafka_core.client.operations import ClientOperations
from kafka_core.client.watch import TopicInterest, TopicView, TopicWatcher
from kafka_core.config import keywords_from_config, role_keywords, takes_config
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kafka_core.metrics.registry import NetworkMetrics
from kafka_core.network.backoff import Backoff
from kafka_core.network.connection import DEFAULT_MAX_RESPONSE_SIZE, BrokerConnection
from kafka_core.network.sasl import KerberosOptions, SaslSettings, mechanism_names, validate_settings
from kafka_core.network.tls import build_ssl_context
from kafka_core.option_names import accepted_keywords, reject_unknown
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import COORDINATOR_CODES, STALE_METADATA_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import MetadataRequest

log = logging.getLogger("kafka_core.client")
T = TypeVar("T")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
RECOVERY_STRATEGIES = ("rebootstrap", "none")


def _refuse_sasl_options(protocol: str, **given: Any) -> None:
    """SASL options with a protocol that does no SASL would be ignored, and the client would
    meet a SASL listener unauthenticated (it closes the connection, saying nothing): refused here,
    naming them and the fix. Java's client and librdkafka ignore them silently."""
    named = [name for name, value in given.items() if value is not None]
    if not named:
        return
    tls = protocol == "SSL"
    raise KafkaConfigError(
        f"{', '.join(named)} given, but security_protocol={protocol!r} does no SASL, so "
        f"{'they' if len(named) > 1 else 'it'} would be ignored: set security_protocol="
        f"{'SASL_SSL' if tls else 'SASL_PLAINTEXT'!r} (or {'SASL_PLAINTEXT' if tls else 'SASL_SSL'!r}) "
        f"with sasl_mechanism, or leave out the SASL options"
    )


def _consume_exception(task: asyncio.Task[Any]) -> None:
    # A shared refresh whose waiters all gave up must not log "exception never retrieved".
    if not task.cancelled():
        task.exception()


class KafkaClient(ClientOperations):
    """Asyncio Kafka cluster client. Use ``async with KafkaClient(...)`` or call ``close()``.

    ``send`` is the raw primitive (no retries: resending is the caller's call); the named
    operations (``metadata``, ``list_offsets``, ``commit_offsets``, ...) retry retriable errors
    until ``api_timeout_ms``.

    Options (the producer, consumer, admin and transport pass theirs on to it):

    - ``bootstrap_servers``: ``"host:port"``, a comma list or a sequence of them; or, in its
      place, a dict of Java-style names as confluent-kafka takes (translated as ``from_config``
      does, keyword arguments beside it winning over the same option in the dict).
    - ``client_id``: the name brokers log and quota by.
    - ``connect_timeout_ms``: connecting, TLS/SASL and the ApiVersions exchange, per broker.
    - ``request_timeout_ms``: the default bound of one request (its connection is dropped after).
    - ``api_timeout_ms``: the bound of a named operation, its retries included.
    - ``metadata_max_age_ms``: cached metadata is refreshed after this even without an error.
    - ``retry_backoff_ms`` / ``retry_backoff_max_ms``: the wait between retries, growing to the max.
    - ``reconnect_backoff_ms`` / ``reconnect_backoff_max_ms``: the same between reconnects.
    - ``allow_auto_create_topics``: whether asking about a missing topic may create it.
    - ``metadata_recovery_strategy``: ``"rebootstrap"`` (the default, as Java 4.0's) goes back to
      the bootstrap servers, their names resolved again, when no known broker can be reached, when
      metadata could not be had for ``metadata_recovery_rebootstrap_trigger_ms`` although some
      broker still takes connections (KIP-1102: a decommissioned broker left running), and when a
      broker answers REBOOTSTRAP_REQUIRED; the brokers the bootstrap answer does not name are
      forgotten. ``"none"`` never does (KIP-899).
    - ``max_response_size``: a larger answer frame is refused (a garbled or hostile length).
    - ``connections_max_idle_ms``: an idle connection is replaced before the broker reaps it.
    - ``security_protocol``: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
    - ``ssl_context``, or ``ssl_cafile`` / ``ssl_certfile`` / ``ssl_keyfile`` / ``ssl_password``
      / ``ssl_check_hostname`` to build one.
    - ``sasl_mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``...;
      ``kafka_core.network.sasl.mechanism_names()``), ``sasl_username``, ``sasl_password``;
      ``sasl_oauth_token_provider`` (OAUTHBEARER: a callable, sync or async, returning a
      ``kafka_core.auth.OAuthBearerToken``) or the built-in OIDC client-credentials grant:
      ``sasl_oauth_token_endpoint_url``, ``sasl_oauth_client_id``, ``sasl_oauth_client_secret``,
      ``sasl_oauth_scope``, ``sasl_oauth_extensions``, ``sasl_oauth_ssl_cafile`` (default
      ``ssl_cafile``); tokens are cached per process and refreshed before they expire;
      ``sasl_kerberos`` (GSSAPI's
      ``KerberosOptions``), ``sasl_options`` (a mechanism's own options, e.g. AWS's region).
    - GSSAPI (Kerberos), when ``sasl_kerberos`` is not given: ``sasl_kerberos_service_name``
      (``"kafka"``), ``sasl_kerberos_principal`` and ``sasl_kerberos_keytab`` (None: the ticket
      cache), ``sasl_kerberos_domain_name`` (the service principal's host; None: the broker's).
    - ``api_version_caps``: ``{api_key: highest version}`` to hold back what is negotiated.
    - ``enable_metrics_push``: push the producer's/consumer's metrics to brokers that ask for
      them (KIP-714, as Java's ``enable.metrics.push``; ``kafka_core.telemetry``).
    """

    def __new__(cls, *args: Any, **options: Any) -> Self:
        """An option this class does not take (another client's name for one, a typo) is refused
        naming what it means here, as the producer and consumers do, not with Python's bare
        TypeError; the signature the type checkers read is __init__'s."""
        reject_unknown(cls.__name__, options, accepted_keywords(cls.__init__))
        return super().__new__(cls)

    @takes_config(role_keywords("client"))
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] | Mapping[str, Any] = "localhost:9092",
        *,
        client_id: str = "kafka-core",
        connect_timeout_ms: float = 10_000,
        request_timeout_ms: float = 30_000,
        api_timeout_ms: float = 60_000,
        metadata_max_age_ms: float = 300_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1_000,
        reconnect_backoff_ms: float = 50,
        reconnect_backoff_max_ms: float = 1_000,
        allow_auto_create_topics: bool = True,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: float = 300_000,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        connections_max_idle_ms: float = 540_000,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
        sasl_oauth_token_endpoint_url: str | None = None,
        sasl_oauth_client_id: str | None = None,
        sasl_oauth_client_secret: str | None = None,
        sasl_oauth_scope: str | None = None,
        sasl_oauth_extensions: Mapping[str, str] | str | None = None,
        sasl_oauth_ssl_cafile: str | None = None,
        sasl_kerberos: KerberosOptions | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_principal: str | None = None,
        sasl_kerberos_keytab: str | None = None,
        sasl_kerberos_domain_name: str | None = None,
        sasl_options: Mapping[str, Any] | None = None,
        api_version_caps: dict[int, int] | None = None,
        enable_metrics_push: bool = True,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        protocol = security_protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise KafkaConfigError(
                f"security_protocol must be one of {SECURITY_PROTOCOLS}, not {security_protocol!r}"
            )
        self.security_protocol = protocol
        recovery = str(metadata_recovery_strategy).strip().lower()
        if recovery not in RECOVERY_STRATEGIES:
            raise KafkaConfigError(
                f"metadata_recovery_strategy must be one of {RECOVERY_STRATEGIES}, "
                f"not {metadata_recovery_strategy!r}"
            )
        if not metadata_recovery_rebootstrap_trigger_ms > 0:
            raise KafkaConfigError(
                "metadata_recovery_rebootstrap_trigger_ms must be > 0, "
                f"not {metadata_recovery_rebootstrap_trigger_ms!r}"
            )
        self.metadata_recovery_strategy = recovery
        self._rebootstrap_after = metadata_recovery_rebootstrap_trigger_ms / 1000.0
        # Since when (monotonic) calls have failed with no Metadata answer or success in between:
        # KIP-1102's clock; None while things work.
        self._failing_since: float | None = None
        self._rebootstrap_task: asyncio.Task[None] | None = None
        # Topics a leader hint moved (KIP-951): asked about in the background, one task at a time.
        self._hinted: set[str] = set()
        self._hint_refresh: asyncio.Task[None] | None = None
        self.rebootstraps = 0  # how many times the client went back to its bootstrap servers
        # Produce/Fetch answers whose leader hint was followed (KIP-951); one move answered to
        # several requests counts each.
        self.leader_hints = 0
        self._ssl: ssl.SSLContext | None = None
        if protocol in ("SSL", "SASL_SSL"):
            self._ssl = ssl_context or build_ssl_context(
                cafile=ssl_cafile,
                certfile=ssl_certfile,
                keyfile=ssl_keyfile,
                password=ssl_password,
                check_hostname=ssl_check_hostname,
            )
        if not protocol.startswith("SASL"):
            _refuse_sasl_options(
                protocol,
                sasl_mechanism=sasl_mechanism,
                sasl_username=sasl_username,
                sasl_password=sasl_password,
                sasl_oauth_token_provider=sasl_oauth_token_provider,
                sasl_oauth_token_endpoint_url=sasl_oauth_token_endpoint_url,
                sasl_oauth_client_id=sasl_oauth_client_id,
                sasl_oauth_client_secret=sasl_oauth_client_secret,
                sasl_oauth_scope=sasl_oauth_scope,
                sasl_oauth_extensions=sasl_oauth_extensions,
                sasl_kerberos=sasl_kerberos,
                sasl_kerberos_principal=sasl_kerberos_principal,
                sasl_kerberos_keytab=sasl_kerberos_keytab,
                sasl_options=sasl_options,
            )
        # One immutable value for every connection; its password is a Secret (masked in repr/str).
        self._sasl: SaslSettings | None = None
        if protocol.startswith("SASL"):
            if not sasl_mechanism or sasl_mechanism.strip().upper() not in mechanism_names():
                raise KafkaConfigError(
                    f"{protocol} needs sasl_mechanism, one of {mechanism_names()}, not {sasl_mechanism!r}"
                )
            self._sasl = SaslSettings(
                sasl_mechanism,
                username=sasl_username,
                password=sasl_password,
                token_provider=oauth_settings_provider(
                    token_provider=sasl_oauth_token_provider,
                    token_endpoint_url=sasl_oauth_token_endpoint_url,
                    client_id=sasl_oauth_client_id,
                    client_secret=sasl_oauth_client_secret,
                    scope=sasl_oauth_scope,
                    extensions=sasl_oauth_extensions,
                    ssl_cafile=sasl_oauth_ssl_cafile or ssl_cafile,
                ),
                kerberos=sasl_kerberos
                or KerberosOptions(
                    service_name=sasl_kerberos_service_name,
                    principal=sasl_kerberos_principal,
                    keytab=sasl_kerberos_keytab,
                    host_name=sasl_kerberos_domain_name,
                ),
                extra=tuple(sorted(mechanism_options(sasl_mechanism, sasl_options).items())),
            )
            try:
                validate_settings(self._sasl)
            except KafkaConfigError as exc:
                raise KafkaConfigError(f"{protocol}: {exc}") from None
        self.client_id = client_id
        self._connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self.api_timeout_ms = api_timeout_ms
        self._meta = MetadataCache(metadata_max_age_ms / 1000.0)
        self._retry_backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self._reconnect_backoff = (reconnect_backoff_ms, reconnect_backoff_max_ms)
        self.allow_auto_create_topics = allow_auto_create_topics
        # Topics components wait on (a subscription to one not there yet): one task asks for them.
        self._watcher = TopicWatcher(self.metadata, self._retry_backoff)
        self._max_response_size = max_response_size
        self._max_idle = connections_max_idle_ms / 1000.0
        self._version_caps = dict(api_version_caps or {})
        self.metrics_push = bool(enable_metrics_push)  # read by the clients built on this one
        self._nodes: dict[int, Node] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._full_refresh: asyncio.Task[ClusterMeta] | None = None
        self._coordinators: dict[tuple[int, str], BrokerMeta] = {}
        self._start_lock: asyncio.Lock | None = None
        self._started = False
        self._closed = False
        # The last error a retry loop swallowed (bootstrap, metadata...): the cause a caller that
        # gives up first (a producer's max_block_ms) can report.
        self.last_error: BaseException | None = None
        # Requests, latency, errors, connections, retries: shared with every connection made here.
        self.network_metrics = NetworkMetrics()

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Bootstrap: connect to the first reachable bootstrap server and load cluster metadata."""
        self._check_open()
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._started:
                await self._retry("bootstrap", self._bootstrap_once)
                self._started = True

    async def _bootstrap_once(self, *, rebootstrap: bool = False) -> None:
        """Connect to a bootstrap server (the names resolved again: each connect looks them up)
        and take its Metadata answer. ``rebootstrap``: the answer replaces the brokers known so
        far; connections to the others are closed (KIP-899)."""
        errors: list[str] = []
        servers = list(self._bootstrap)
        random.shuffle(servers)
        for host, port in servers:
            conn = self._new_connection(host, port, None)
            try:
                await conn.connect()
                resp = await conn.send(self._metadata_request(conn, []))
            except KafkaAuthenticationError:
                await conn.close()
                raise
            except KafkaError as exc:
                await conn.close()
                errors.append(f"{host}:{port}: {exc}")
                continue
            if getattr(resp, "error_code", 0) == ErrorCode.REBOOTSTRAP_REQUIRED:
                await conn.close()
                errors.append(f"{host}:{port}: answered REBOOTSTRAP_REQUIRED")
                continue
            if rebootstrap:
                self._forget_brokers({b.node_id for b in resp.brokers})
            self._apply_metadata(resp, full=False)
            adopted = False
            for node in self._nodes.values():
                same = (node.broker.host, node.broker.port) == (host, port)
                if same and (node.conn is None or not node.conn.connected):
                    conn.node_id = node.broker.node_id
                    node.conn = conn
                    adopted = True
                    break
            if not adopted:
                await conn.close()
            return
        raise KafkaConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    def _forget_brokers(self, keep: set[int]) -> None:
        """Rebootstrap: every connection is closed (requests on them fail and are retried on
        the new picture), brokers not in ``keep`` forgotten, coordinators looked up again."""
        loop = asyncio.get_running_loop()
        for node_id, node in list(self._nodes.items()):
            for old in node.all_conns():
                task = loop.create_task(old.close("rebootstrap: the cluster is asked afresh"))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            node.conn = None
            node.lanes.clear()
            node.backoff.reset()
            node.next_attempt = 0.0
            if node_id not in keep:
                del self._nodes[node_id]
        self._coordinators.clear()
        self._meta.invalidate()

    async def rebootstrap(self, why: str) -> None:
        """Go back to the bootstrap servers (KIP-899): one at a time, shared by every caller.
        Does nothing under ``metadata_recovery_strategy="none"``."""
        if self.metadata_recovery_strategy == "none" or not self._started:
            return
        task = self._rebootstrap_task
        if task is None or task.done():
            log.warning("rebootstrapping from %s: %s", self._bootstrap_text(), why)
            task = self._rebootstrap_task = asyncio.get_running_loop().create_task(
                self._bootstrap_once(rebootstrap=True)
            )
            task.add_done_callback(_consume_exception)
            self.rebootstraps += 1
        await asyncio.shield(task)
        self._failing_since = None

    def _bootstrap_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self._bootstrap)

    def _note_failure(self) -> str | None:
        """A call failed: KIP-1102's clock runs; the reason to rebootstrap once it has run
        ``metadata_recovery_rebootstrap_trigger_ms``, else None."""
        now = asyncio.get_running_loop().time()
        if self._failing_since is None:
            self._failing_since = now
            return None
        failing = now - self._failing_since
        if self.metadata_recovery_strategy == "none" or failing < self._rebootstrap_after:
            return None
        return f"no metadata could be had for {failing:.1f}s (metadata_recovery_rebootstrap_trigger_ms)"

    async def close(self) -> None:
        """Close every connection; pending requests fail with KafkaClosedError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._watcher.close()
        if self._full_refresh is not None and not self._full_refresh.done():
            self._full_refresh.cancel()
        for task in (self._rebootstrap_task, self._hint_refresh):
            if task is not None and not task.done():
                task.cancel()
        conns = [c for n in self._nodes.values() for c in n.all_conns()]
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """A client from Java-style names (``{"bootstrap.servers": ..., "client.id": ...}``), with
        ``overrides`` (keyword names) on top; unknown names raise KafkaConfigError naming them."""
        return cls(**keywords_from_config(config, "client", overrides))

    @property
    def request_timeout_ms(self) -> float:
        """How long one request may take; components sharing this client bound their waits by it."""
        return self._request_timeout_ms

    @property
    def metadata_max_age(self) -> float:
        """Seconds after which cached metadata is refreshed even without an error (the producer
        refreshes its own topics on the same period)."""
        return self._meta.max_age

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot of this client's counters, cheap to call (keys: docs/metrics.md)."""
        in_flight = {nid: sum(c.in_flight_count for c in n.all_conns()) for nid, n in self._nodes.items()}
        return {"client_id": self.client_id, "network": self.network_metrics.snapshot(in_flight)}

    @property
    def started(self) -> bool:
        """Whether a bootstrap has succeeded (for helpers that must not start the client themselves)."""
        return self._started

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaClosedError("KafkaClient is closed")

    async def _ensure_started(self) -> None:
        if not self._started:
            await self.start()

    # -- connections -----------------------------------------------------------------------

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.client_id,
            ssl_context=self._ssl,
            sasl=self._sasl,
            connect_timeout_ms=self._connect_timeout_ms,
            request_timeout_ms=self._request_timeout_ms,
            max_response_size=self._max_response_size,
            version_caps=self._version_caps,
            metrics=self.network_metrics,
        )

    def _register_broker(self, broker: BrokerMeta) -> None:
        node = self._nodes.get(broker.node_id)
        if node is None:
            self._nodes[broker.node_id] = Node(broker, Backoff(*self._reconnect_backoff))
            return
        if (node.broker.host, node.broker.port) != (broker.host, broker.port):
            for old in node.all_conns():
                task = asyncio.get_running_loop().create_task(old.close("broker address changed"))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            node.conn = None
            node.lanes.clear()
        node.broker = broker

    async def connection(self, node_id: int, lane: int = 0) -> BrokerConnection:
        """A ready connection to ``node_id``, (re)connecting with backoff if needed.

        ``lane`` > 0 picks a further connection to the same broker (see ``send``)."""
        self._check_open()
        await self._ensure_started()
        node = self._nodes.get(node_id)
        if node is None:
            raise KafkaConnectionError(f"unknown broker node id {node_id}")
        conn = node.lane(lane)
        if conn is not None and conn.connected:
            if conn.in_flight_count or not (conn.reauthentication_due or conn.idle_for() > self._max_idle):
                return conn
            # Reconnect before the broker cuts us off (idle reaping at connections.max.idle.ms,
            # SASL session expiry) rather than racing a request against its close.
            await conn.close("idle too long or SASL session about to expire")
        failed = node.failed_attempts
        async with node.lock:
            conn = node.lane(lane)
            if conn is not None and conn.connected:
                return conn
            if node.failed_attempts != failed and node.last_failure is not None:
                # An attempt made while this request waited failed: the request fails with it
                # rather than connecting on its own after the backoff, so a request never
                # reaches a broker ahead of an earlier one to it that could not (a producer's
                # pipelined batches keep their order where the broker checks no sequences), and
                # its caller hears of the outage at once.
                raise copy.copy(node.last_failure)
            delay = node.next_attempt - asyncio.get_running_loop().time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._check_open()
            conn = self._new_connection(node.broker.host, node.broker.port, node_id)
            try:
                await conn.connect()
            except KafkaError as exc:
                node.failed_attempts += 1
                node.last_failure = exc
                node.next_attempt = asyncio.get_running_loop().time() + node.backoff.next_s()
                self._meta.invalidate()
                raise
            node.backoff.reset()
            node.set_lane(lane, conn)
            if self._closed:
                await conn.close()
                raise KafkaClosedError("KafkaClient is closed")
            return conn

    async def send(
        self,
        node_id: int,
        request_body: Any,
        version: int | None = None,
        *,
        timeout_ms: float | None = None,
        max_version: int | None = None,
        lane: int = 0,
    ) -> Any:
        """Send one request to a broker and return the response body. No retries.

        ``version=None`` uses the negotiated version (capped by ``max_version``). ``timeout_ms``
        (default ``request_timeout_ms``) drops the connection when it expires, so keep it above
        any broker-side wait such as Fetch ``max_wait_ms``. Error codes inside the body are the
        caller's to interpret (``note_error`` invalidates caches for the stale-metadata ones).
        ``lane`` > 0 sends on a further connection to the broker: requests on different lanes
        are served side by side, and a long-polling Fetch on one does not hold up the others.
        """
        conn = await self.connection(node_id, lane)
        if version is None:
            version = conn.choose_version(request_body.API_KEY, max_version=max_version)
        try:
            return await conn.send(request_body, version, timeout_ms=timeout_ms)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._meta.invalidate()
            raise

    async def send_to_leader(
        self,
        topic: str,
        partition: int,
        request_body: Any,
        version: int | None = None,
        *,
        timeout_ms: float | None = None,
        max_version: int | None = None,
    ) -> Any:
        """``send`` to the partition's current leader (looked up, waiting for one if needed)."""
        node_id = await self.leader_for(topic, partition)
        try:
            return await self.send(
                node_id, request_body, version, timeout_ms=timeout_ms, max_version=max_version
            )
        except (KafkaConnectionError, KafkaTimeoutError):
            self.invalidate_metadata(topic)
            raise

    def least_loaded_node(self) -> int | None:
        """A connected broker with the fewest requests in flight, else any known broker."""
        connected = [n for n in self._nodes.values() if n.conn is not None and n.conn.connected]
        if connected:
            return min(connected, key=lambda n: n.conn.in_flight_count if n.conn else 0).broker.node_id
        ready = [n for n in self._nodes.values() if n.next_attempt <= asyncio.get_running_loop().time()]
        pool = ready or list(self._nodes.values())
        return random.choice(pool).broker.node_id if pool else None

    async def _any_node(self) -> int:
        await self._ensure_started()
        node_id = self.least_loaded_node()
        if node_id is None:
            raise KafkaConnectionError("no broker known")
        return node_id

    async def negotiated_versions(self, node_id: int | None = None) -> dict[int, dict[ApiKey, int]]:
        """Per broker: the version this client will use for each API (connecting if needed)."""
        await self._ensure_started()
        ids = [node_id] if node_id is not None else sorted(self._nodes)
        out: dict[int, dict[ApiKey, int]] = {}
        for nid in ids:
            out[nid] = (await self.connection(nid)).negotiated_versions()
        return out

    # -- metadata --------------------------------------------------------------------------

    def _metadata_request(
        self, conn: BrokerConnection, topics: list[str] | None, auto_create: bool = False
    ) -> MetadataRequest:
        return metadata_request(conn.choose_version(ApiKey.METADATA), topics, auto_create)

    def _apply_metadata(self, resp: Any, *, full: bool) -> ClusterMeta:
        """Take in a Metadata answer: its brokers become connectable, its topics cached."""
        answer = parse_metadata(resp)
        for b in answer.brokers:
            self._register_broker(b)
        self._failing_since = None  # a broker served metadata
        return self._meta.update(answer, full=full)

    async def _metadata_once(
        self, topics: list[str] | None, auto_create: bool, *, again: bool = True
    ) -> ClusterMeta:
        node_id = await self._any_node()
        try:
            conn = await self.connection(node_id)
        except KafkaAuthenticationError:
            raise
        except (KafkaConnectionError, KafkaTimeoutError):
            # No known broker answers: ask the bootstrap servers again (KIP-899), in case the
            # cluster's nodes changed under us; the retry loop then tries the fresh picture.
            # Any connection counts (a producer's or fetcher's lane too): a broker that serves
            # those is reachable, and a rebootstrap would drop them.
            if not any(c.connected for n in self._nodes.values() for c in n.all_conns()):
                await self.rebootstrap("no known broker can be reached")
            raise
        try:
            resp = await conn.send(self._metadata_request(conn, topics, auto_create))
        except (KafkaConnectionError, KafkaTimeoutError):
            self._meta.invalidate()
            raise
        if getattr(resp, "error_code", 0) == ErrorCode.REBOOTSTRAP_REQUIRED:
            if self.metadata_recovery_strategy == "none":
                raise error_for(ErrorCode.REBOOTSTRAP_REQUIRED, f"Metadata from node {node_id}")
            await self.rebootstrap(f"node {node_id} answered REBOOTSTRAP_REQUIRED")
            if again:
                return await self._metadata_once(topics, auto_create, again=False)
            raise KafkaConnectionError(
                f"node {node_id} still answers REBOOTSTRAP_REQUIRED after a rebootstrap"
            )
        return self._apply_metadata(resp, full=topics is None)

    async def metadata(
        self, topics: list[str] | None = None, *, allow_auto_topic_creation: bool | None = None
    ) -> ClusterMeta:
        """Fresh metadata for ``topics`` (None: all topics), also refreshing the cache.

        Per-topic errors (e.g. UNKNOWN_TOPIC_OR_PARTITION) are reported in ``TopicMeta.error_code``
        rather than raised, so one missing topic does not hide the others.
        """
        self._check_open()
        await self._ensure_started()
        auto = (
            self.allow_auto_create_topics if allow_auto_topic_creation is None else allow_auto_topic_creation
        )
        if topics is None:
            # Concurrent full refreshes share one request.
            task = self._full_refresh
            if task is None or task.done():
                task = asyncio.get_running_loop().create_task(
                    self._retry("metadata", lambda: self._metadata_once(None, auto))
                )
                task.add_done_callback(_consume_exception)
                self._full_refresh = task
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled() and self._closed:  # close() cancelled the shared refresh
                    raise KafkaClosedError("KafkaClient is closed") from None
                raise
        return await self._retry("metadata", lambda: self._metadata_once(list(topics), auto))

    def watch_topics(
        self,
        on_change: Callable[[TopicView], None],
        *,
        topics: Iterable[str] = (),
        pattern: re.Pattern[str] | None = None,
        search: bool = False,
        refresh_ms: float | None = None,
        view: TopicView | None = None,
    ) -> TopicInterest:
        """Call ``on_change(view)`` whenever the named ``topics`` (or those ``pattern`` matches)
        appear, go, are recreated or gain partitions; ``close()`` the interest when done.

        A wanted topic the cluster does not have yet is asked about at the retry backoff
        (``retry_backoff_ms`` growing to ``retry_backoff_max_ms``), as Java's and librdkafka's
        clients do; otherwise every ``refresh_ms`` (default ``metadata_max_age_ms``). ``view``
        is what the caller already knows (e.g. the metadata it assigned from). Runs on the
        client's event loop (see ``watch.py``)."""
        self._check_open()
        refresh_s = self._meta.max_age if refresh_ms is None else refresh_ms / 1000.0
        return self._watcher.watch(
            on_change, topics=topics, pattern=pattern, search=search, refresh_s=refresh_s, view=view
        )

    def cached_metadata(self) -> ClusterMeta:
        """The cache as it stands, without a request (may be stale or partial)."""
        return self._meta.snapshot()

    def invalidate_metadata(self, topic: str | None = None) -> None:
        """Forget what we know about ``topic`` (or mark everything stale) so the next lookup refreshes."""
        self._meta.invalidate(topic)

    def note_error(
        self, error_code: int, topic: str | None = None, *, coordinator_key: str | None = None
    ) -> bool:
        """Record a broker error: stale metadata or coordinator moves invalidate the cache. True if retriable."""
        if error_code in STALE_METADATA_CODES:
            self.invalidate_metadata(topic)
            return True
        if error_code == ErrorCode.REBOOTSTRAP_REQUIRED and self.metadata_recovery_strategy != "none":
            self._spawn(self.rebootstrap(f"a broker answered REBOOTSTRAP_REQUIRED ({topic or 'no topic'})"))
            return True
        if error_code in COORDINATOR_CODES:
            if (
                coordinator_key is not None and error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            ):  # same coordinator
                for kt in (0, 1):
                    self._coordinators.pop((kt, coordinator_key), None)
            return True
        return bool(error_code) and error_for(error_code).retriable

    def take_leader_hint(self, topic: str, partition: int, hint: LeaderHint) -> bool:
        """A Produce or Fetch answer named the partition's new leader (KIP-951): route to it now.

        The leader's address from the answer makes a broker not known yet connectable; the hint
        is taken only when its leader epoch is newer than the cache's (a stale or reordered
        answer never moves a partition back). True when the cache now names that leader (so
        ``leader_for`` answers it without a request); a Metadata request for the topic follows
        in the background, as Java's client asks for one, but nothing waits for it."""
        for broker in hint.endpoints:
            if broker.node_id not in self._nodes:  # a known node's address is Metadata's to change
                self._register_broker(broker)
        if hint.leader not in self._nodes:
            log.debug("%s[%d]: leader hint %s names a broker of unknown address", topic, partition, hint)
            return False
        if not self._meta.take_leader(topic, partition, hint.leader, hint.epoch):
            log.debug("%s[%d]: leader hint %s not newer than the cache's", topic, partition, hint)
            return False
        self.leader_hints += 1
        log.debug(
            "%s[%d]: leader is node %d (epoch %d), as an answer said",
            topic,
            partition,
            hint.leader,
            hint.epoch,
        )
        self._hinted.add(topic)
        if self._hint_refresh is None or self._hint_refresh.done():
            self._hint_refresh = self._spawn(self._refresh_hinted())
        return True

    async def _refresh_hinted(self) -> None:
        await asyncio.sleep(0)  # the other partitions of the same answer join this request
        while self._hinted and not self._closed:
            topics, self._hinted = sorted(self._hinted), set()
            try:
                await self.metadata(topics)
            except KafkaError as exc:
                log.debug("metadata refresh after a leader hint failed: %s", exc)
                return

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_consume_exception)
        return task

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        """Node id of the partition's leader, waiting (with metadata refreshes) while it has none."""
        self._check_open()
        await self._ensure_started()
        t = self._meta.fresh_topic(topic)
        p = t.partition(partition) if t is not None else None
        if p is not None and p.leader >= 0 and p.leader in self._nodes:
            return p.leader

        async def lookup() -> int:
            await self._metadata_once([topic], self.allow_auto_create_topics)
            meta = self._meta.topic(topic)
            part = meta.partition(partition) if meta is not None else None
            if part is None:
                raise error_for(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} not (yet) in metadata"
                )
            if part.leader < 0 or part.leader not in self._nodes:
                raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader yet")
            return part.leader

        return await self._retry(f"leader lookup for {topic}-{partition}", lookup, timeout_ms)

    async def await_topic_ready(
        self, topic: str, min_partitions: int = 1, *, timeout_ms: float | None = None
    ) -> TopicMeta:
        """Wait until ``topic`` exists with at least ``min_partitions`` partitions, all with leaders."""
        self._check_open()

        async def check() -> TopicMeta:
            meta = await self._metadata_once([topic], self.allow_auto_create_topics)
            t = meta.topic(topic)
            if t is None or t.error_code:
                raise error_for(
                    t.error_code if t is not None and t.error_code else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {topic!r}",
                )
            if len(t.partitions) < min_partitions or not t.ready:
                raise error_for(
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    f"topic {topic!r}: {len(t.partitions)} partitions, not all led yet",
                )
            return t

        return await self._retry(f"waiting for topic {topic!r}", check, timeout_ms)

    # -- retries ---------------------------------------------------------------------------

    async def _retry(
        self, what: str, attempt: Callable[[], Awaitable[T]], timeout_ms: float | None = None
    ) -> T:
        """Run ``attempt`` until it succeeds, a non-retriable error occurs, or the deadline passes.

        The deadline is the call's own or an earlier one of a loop around it (deadline.py), and
        an attempt still under way then is cut short: the call returns within its time."""
        from kafka_core.errors import KafkaProtocolError

        loop = asyncio.get_running_loop()
        timeout = (self.api_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        backoff = Backoff(*self._retry_backoff)
        # what this call's tries met; a loop nested in the attempt cut short records its own
        # causes only in last_error, so a newer one there is this call's too
        cause: BaseException | None = None
        before = self.last_error
        with call_deadline.scope(loop.time() + timeout) as deadline:
            while True:
                self._check_open()
                bound = asyncio.timeout_at(deadline)
                try:
                    async with bound:
                        result = await attempt()
                    if self._started:
                        self._failing_since = None
                    return result
                except (KafkaAuthenticationError, KafkaClosedError):
                    raise
                except (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError, TimeoutError) as exc:
                    if isinstance(exc, KafkaProtocolError) and not exc.retriable:
                        raise
                    if bound.expired():  # cut short: the cause is what the earlier tries met
                        if cause is None and self.last_error is not before:
                            cause = self.last_error
                        raise call_deadline.DeadlinePassed(
                            f"{what} did not succeed within {timeout:.1f}s"
                            + (f"; last error: {cause}" if cause is not None else "; no answer yet"),
                            cause,
                        ) from cause
                    if not isinstance(exc, KafkaError):
                        raise
                    cause = call_deadline.root_cause(exc)
                    self.last_error = cause
                    why = self._note_failure() if self._started else None
                    if why is not None:
                        try:
                            async with asyncio.timeout_at(deadline):
                                await self.rebootstrap(f"{why}; last error: {cause}")
                        except (KafkaError, TimeoutError) as failed:
                            log.warning("rebootstrap failed: %s", failed)
                    delay = backoff.next_s()
                    if isinstance(exc, call_deadline.DeadlinePassed) or loop.time() + delay >= deadline:
                        raise call_deadline.DeadlinePassed(
                            f"{what} did not succeed within {timeout:.1f}s; last error: {cause}", cause
                        ) from cause
                    log.debug("%s: retrying in %.3fs after %s", what, delay, exc)
                    self.network_metrics.retries += 1
                    await asyncio.sleep(delay)


# help() and inspect.signature() read __new__'s (*args, **options) before __init__'s: they
# show the options again (the blocking face copies this signature).
_INIT = inspect.signature(KafkaClient.__init__)
KafkaClient.__signature__ = _INIT.replace(parameters=list(_INIT.parameters.values())[1:])  # type: ignore[attr-defined]
