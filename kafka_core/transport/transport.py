"""The asyncio publish/subscribe adapter (``kafka_core.aio.KafkaStreamTransport``).

One producer for every publish; one group consumer per subscription, each running its own
poll loop as a task (``subscription.py``), or in queue mode (``share=True``) a share consumer
(KIP-932) whose records are acknowledged one by one (``modes.py``). The blocking
``kafka_core.KafkaStreamTransport`` (``sync.py``) is a thin face over this class.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from kafka_core.client.cluster import KafkaClient
from kafka_core.config import takes_config, transport_keywords
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import KafkaClosedError, KafkaConfigError, KafkaError, KafkaTimeoutError
from kafka_core.option_names import accepted_keywords, reject_unknown
from kafka_core.producer.futures import RecordMetadata
from kafka_core.producer.producer import KafkaProducer
from kafka_core.transport.modes import ShareMode, check_max_deliveries
from kafka_core.transport.options import ErrorPolicy, share_consumer_options, split_options
from kafka_core.transport.payload import Message, encode_headers, encode_value
from kafka_core.transport.subscription import Subscription

log = logging.getLogger("kafka_core.transport")

__all__ = ["KafkaStreamTransport"]

Headers = Mapping[str, Any] | Iterable[tuple[str, Any]] | None
# A subscription starts at the beginning of the log when its group has committed nothing yet:
# records published before the first subscriber joined are handled, not skipped.
CONSUMER_DEFAULTS = {"auto_offset_reset": "earliest", "max_poll_records": 500}


def _transport_options() -> frozenset[str]:
    """The ``**options`` a transport takes: its client's (for both sides), ``producer_<name>`` for
    the producer's, ``consumer_<name>`` for the group consumer's (a share consumer's are a subset)."""
    client = accepted_keywords(KafkaClient.__init__)
    producer = accepted_keywords(KafkaProducer.__init__) | client
    consumer = accepted_keywords(KafkaConsumer.__init__) | client
    return client | {f"producer_{n}" for n in producer} | {f"consumer_{n}" for n in consumer}


SHARE_RESETS = ("earliest", "latest")


class KafkaStreamTransport:
    """Publish to topics and subscribe handlers to them (asyncio).

    ``publish`` awaits the broker's acknowledgement and returns the RecordMetadata;
    ``publish_many`` queues many records at once and awaits them together. ``subscribe`` starts
    a group consumer whose handler gets each record (a :class:`Message`) in order per partition;
    only handled records are committed. Options: ``producer_<name>`` goes to the producer as
    ``<name>``, ``consumer_<name>`` to each subscription's consumer, other keywords (connection
    options) to both. Handler errors: ``error_policy`` ("retry", "skip", "stop"), with
    ``retry_attempts``, ``retry_backoff_ms``, ``retry_backoff_max_ms`` and ``retry_fallback``,
    reported to ``on_error(error)`` or the log; each can be overridden per ``subscribe``.

    Queue mode (``subscribe(..., share=True)``, a share group): "retry" releases the record for
    redelivery until its delivery count reaches ``max_deliveries`` (default ``retry_attempts`` +
    1), then rejects it; "skip" rejects it; "stop" stops. ``share_auto_offset_reset`` (default
    "earliest", as the group mode) is set on the share group when a subscription starts, for the
    partitions it has no state for yet; None leaves the group's config alone.

    In place of ``bootstrap_servers``, a dict of Java-style names as confluent-kafka takes
    (``{"bootstrap.servers": ..., "enable.idempotence": True, "group.id": "g"}``): the client's
    names go to both sides, a producer's to the producer and a consumer's to each subscription's
    consumer; keyword arguments beside it win over the same option in the dict.
    """

    @takes_config(transport_keywords)
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] = "localhost:9092",
        *,
        error_policy: str = "retry",
        retry_attempts: int = 3,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 5_000,
        retry_fallback: str = "stop",
        on_error: Callable[[KafkaError], Any] | None = None,
        commit_interval_ms: float = 0,
        poll_timeout_ms: float = 500,
        close_timeout: float = 30.0,
        max_deliveries: int | None = None,
        share_auto_offset_reset: str | None = "earliest",
        **options: Any,
    ) -> None:
        reject_unknown(type(self).__name__, options, _transport_options())
        self._policy = ErrorPolicy(
            error_policy, retry_attempts, retry_backoff_ms, retry_backoff_max_ms, retry_fallback
        )
        if on_error is not None and not callable(on_error):
            raise KafkaConfigError(f"on_error must be callable, not {on_error!r}")
        for name, value in (
            ("commit_interval_ms", commit_interval_ms),
            ("poll_timeout_ms", poll_timeout_ms),
            ("close_timeout", close_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise KafkaConfigError(f"{name} must be a number >= 0, not {value!r}")
        if max_deliveries is not None:
            check_max_deliveries(max_deliveries)
        if share_auto_offset_reset is not None and share_auto_offset_reset not in SHARE_RESETS:
            raise KafkaConfigError(
                f"share_auto_offset_reset must be one of {SHARE_RESETS} or None, not {share_auto_offset_reset!r}"
            )
        self._max_deliveries = max_deliveries
        self._share_reset = share_auto_offset_reset
        self._on_error = on_error
        self._commit_interval_ms = commit_interval_ms
        self._poll_timeout_ms = poll_timeout_ms
        self._close_timeout = float(close_timeout)
        self.bootstrap_servers = bootstrap_servers
        producer_options, consumer_options = split_options(options)
        self._consumer_options = {**CONSUMER_DEFAULTS, **consumer_options}
        self._share_options = share_consumer_options(options)
        self._connection_options = {
            k: v for k, v in options.items() if not k.startswith(("producer_", "consumer_"))
        }
        self._producer = KafkaProducer(bootstrap_servers, **producer_options)
        self._subscriptions: list[Subscription] = []
        self._published = 0
        self._closed = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """A transport from Java-style names, with keyword ``overrides`` on top: the same as
        passing the dict first (``KafkaStreamTransport(config, **overrides)``)."""
        return cls(config, **overrides)

    async def __aenter__(self) -> KafkaStreamTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- publishing --------------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        payload: Any,
        key: Any = None,
        headers: Headers = None,
        *,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """Publish one record and wait until the broker acknowledged it.

        ``payload`` and ``key``: bytes and str as they are (str as UTF-8), None as null, other
        objects as JSON. ``headers``: a dict or (name, value) pairs with bytes/str values.
        ``timeout`` (s) bounds the wait (else the producer's ``delivery_timeout_ms`` does).
        """
        [meta] = await self._publish(topic, [payload], [key], headers, partition, timeout)
        return meta

    async def publish_many(
        self,
        topic: str,
        payloads: Iterable[Any],
        keys: Iterable[Any] | None = None,
        headers: Headers = None,
        *,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> list[RecordMetadata]:
        """Publish many records at once (batched together) and wait for every acknowledgement.

        ``keys``, when given, pairs one key with each payload; ``headers`` go on every record.
        Returns their RecordMetadata in order; the first failure is raised.
        """
        values = list(payloads)
        key_list = [None] * len(values) if keys is None else list(keys)
        if len(key_list) != len(values):
            raise KafkaConfigError(f"{len(key_list)} keys for {len(values)} payloads")
        return await self._publish(topic, values, key_list, headers, partition, timeout)

    async def _publish(
        self,
        topic: str,
        payloads: list[Any],
        keys: list[Any],
        headers: Headers,
        partition: int | None,
        timeout: float | None,
    ) -> list[RecordMetadata]:
        if self._closed:
            raise KafkaClosedError("this transport is closed")
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"topic must be a non-empty str, not {topic!r}")
        encoded = [(encode_value(p), encode_value(k, "key")) for p, k in zip(payloads, keys, strict=True)]
        wire_headers = encode_headers(headers)
        try:
            async with asyncio.timeout(timeout):
                futures = [
                    await self._producer.send(topic, value, key, partition, wire_headers)
                    for value, key in encoded
                ]
                metas: list[RecordMetadata] = [await f for f in futures]
        except TimeoutError:
            raise KafkaTimeoutError(
                f"publish to {topic!r} not acknowledged within {timeout}s (the records may still be delivered)"
            ) from None
        self._published += len(metas)
        return metas

    # -- subscribing -------------------------------------------------------------------------

    async def subscribe(
        self,
        topic: str,
        group_id: str,
        handler: Callable[[Message], Any],
        *,
        on_error: Callable[[KafkaError], Any] | None = None,
        threaded: bool = False,
        error_policy: str | None = None,
        retry_attempts: int | None = None,
        retry_backoff_ms: float | None = None,
        retry_backoff_max_ms: float | None = None,
        retry_fallback: str | None = None,
        share: bool = False,
        max_deliveries: int | None = None,
    ) -> Subscription:
        """Start handling ``topic``'s records as a member of ``group_id``; returns the unsubscribe.

        ``handler(message)`` may be a plain function or a coroutine function (awaited). A plain
        handler runs on the event loop unless ``threaded=True``: then it runs in a thread of the
        subscription's own (for blocking handlers). The returned :class:`Subscription` is the
        ``unsubscribe`` callable (``await unsubscribe(timeout)``); it also has ``running``,
        ``error`` and ``wait()``. The error policy options override the transport's.

        ``share=True``: queue mode, ``group_id`` a share group (KIP-932; Apache Kafka 4.1+): the
        group's members share the partitions, each record goes to one member at a time and is
        accepted when the handler returns; a failure releases it (delivered again, to any
        member, ``message.delivery_count`` raised) until ``max_deliveries``, then rejects it,
        as the policy says (see the class). A broker without share groups raises
        KafkaShareGroupsUnsupportedError here.
        """
        if self._closed:
            raise KafkaClosedError("this transport is closed")
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"topic must be a non-empty str, not {topic!r}")
        if not isinstance(group_id, str) or not group_id:
            raise KafkaConfigError(f"group_id must be a non-empty str, not {group_id!r}")
        if not callable(handler):
            raise KafkaConfigError(f"handler must be callable, not {handler!r}")
        if on_error is not None and not callable(on_error):
            raise KafkaConfigError(f"on_error must be callable, not {on_error!r}")
        overrides: dict[str, Any] = {
            "policy": error_policy,
            "retry_attempts": retry_attempts,
            "retry_backoff_ms": retry_backoff_ms,
            "retry_backoff_max_ms": retry_backoff_max_ms,
            "retry_fallback": retry_fallback,
        }
        sub_policy = dataclasses.replace(
            self._policy, **{k: v for k, v in overrides.items() if v is not None}
        )
        if share:
            return await self._subscribe_share(
                topic, group_id, handler, sub_policy, on_error, threaded, max_deliveries
            )
        options = dict(self._consumer_options)
        user_revoke = options.pop("on_revoke", None)
        user_lost = options.pop("on_lost", None)

        def make_consumer(**callbacks: Any) -> KafkaConsumer:
            return KafkaConsumer(
                bootstrap_servers=self.bootstrap_servers,
                topics=[topic],
                group_id=group_id,
                enable_auto_commit=False,
                **options,
                **callbacks,
            )

        sub = Subscription(
            make_consumer,
            topic,
            group_id,
            handler,
            policy=sub_policy,
            on_error=on_error if on_error is not None else self._on_error,
            threaded=threaded,
            commit_interval_ms=self._commit_interval_ms,
            poll_timeout_ms=self._poll_timeout_ms,
            close_timeout=self._close_timeout,
            on_revoke=user_revoke,
            on_lost=user_lost,
        )
        return self._start(sub)

    def _start(self, sub: Subscription) -> Subscription:
        sub.start()
        self._subscriptions = [s for s in self._subscriptions if s.running]
        self._subscriptions.append(sub)
        return sub

    async def _subscribe_share(
        self,
        topic: str,
        group_id: str,
        handler: Callable[[Message], Any],
        policy: ErrorPolicy,
        on_error: Callable[[KafkaError], Any] | None,
        threaded: bool,
        max_deliveries: int | None,
    ) -> Subscription:
        """A queue-mode subscription: the share group checked (and its start set), then a share
        consumer in explicit acknowledgement mode."""
        from kafka_core.share.consumer import KafkaShareConsumer

        bound = max_deliveries if max_deliveries is not None else self._max_deliveries
        bound = check_max_deliveries(bound if bound is not None else policy.retry_attempts + 1)
        await self._prepare_share_group(group_id)
        options = dict(self._share_options)

        def make_consumer() -> KafkaShareConsumer:
            return KafkaShareConsumer(
                topic,
                bootstrap_servers=self.bootstrap_servers,
                group_id=group_id,
                share_acknowledgement_mode="explicit",
                **options,
            )

        sub = Subscription(
            None,
            topic,
            group_id,
            handler,
            policy=policy,
            on_error=on_error if on_error is not None else self._on_error,
            threaded=threaded,
            commit_interval_ms=self._commit_interval_ms,
            poll_timeout_ms=self._poll_timeout_ms,
            close_timeout=self._close_timeout,
            mode=ShareMode(make_consumer, topic, max_deliveries=bound),
        )
        return self._start(sub)

    async def _prepare_share_group(self, group_id: str) -> None:
        """Raise at once for a broker without share groups; set the group's start for the
        partitions it has no state for (a refusal, e.g. no ALTER_CONFIGS right, is only logged)."""
        from kafka_core.admin.admin import KafkaAdmin
        from kafka_core.admin.results import ConfigResource

        async with KafkaAdmin(self.bootstrap_servers, **self._connection_options) as admin:
            await admin.describe_share_groups([group_id])  # raises KafkaShareGroupsUnsupportedError
            if self._share_reset is None:
                return
            resource = ConfigResource.group(group_id)
            done = await admin.incremental_alter_configs(
                {resource: {"share.auto.offset.reset": self._share_reset}}
            )
            if not done[resource].ok:
                log.warning(
                    "share group %r: could not set share.auto.offset.reset=%s: %s",
                    group_id,
                    self._share_reset,
                    done[resource].error,
                )

    def subscriptions(self) -> list[Subscription]:
        """The subscriptions still running."""
        return [s for s in self._subscriptions if s.running]

    # -- the rest ----------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """A snapshot: the producer's ``metrics()`` and each running subscription's (with its consumer's)."""
        return {
            "published": self._published,
            "producer": self._producer.metrics(),
            "subscriptions": [s.metrics() for s in self.subscriptions()],
        }

    async def close(self, timeout: float | None = None) -> None:
        """Unsubscribe everything (drain, commit handled records, leave the groups), then deliver
        what is queued and close the producer, all within ``timeout`` s (default ``close_timeout``).

        Raises the first error (e.g. KafkaTimeoutError for a drain cut short) after closing all.
        """
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        timeout = self._close_timeout if timeout is None else max(float(timeout), 0.0)
        deadline = loop.time() + timeout
        subs, self._subscriptions = self._subscriptions, []
        results = await asyncio.gather(*(s.unsubscribe(timeout) for s in subs), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        abandoned = await self._producer.close(max(deadline - loop.time(), 0.0))
        if abandoned:
            errors.append(
                KafkaTimeoutError(f"close: {abandoned} published records were not delivered in time")
            )
        for err in errors[1:]:
            log.warning("transport close: %r", err)
        if errors:
            raise errors[0]
