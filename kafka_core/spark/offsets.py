"""The driver's view of Kafka: which partitions a query reads and their offsets.

One blocking client per reader object (the planning of a batch read, or a streaming query's
whole life), closed when the reader is done with it; before it is opened, bootstrap addresses
that all refuse connections fail the query within seconds (:mod:`kafka_core.spark.reach`). The end of a partition is its true log end
(or last stable offset under read_committed), checked against the last batch: some brokers answer
ListOffsets latest with the last batch's base offset + 1.

Every lookup is tried ``fetchOffset.numRetries`` times (default 3), ``fetchOffset.retryIntervalMs``
apart (default 1000), each retry on a fresh connection, as Spark's connector does; only failures
that can pass (a lost connection, a timeout, a retriable broker error) are retried.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.spark.options import SourceOptions
from kafka_core.spark.planning import OffsetLookups

__all__ = ["OffsetReader", "transient"]

log = logging.getLogger("kafka_core.spark")

T = TypeVar("T")


def transient(exc: BaseException) -> bool:
    """A failure that another attempt may not meet: retried under ``fetchOffset.numRetries``.
    Refused credentials, bad options and final broker errors fail at once."""
    if isinstance(exc, KafkaAuthenticationError):
        return False
    if isinstance(exc, KafkaProtocolError):
        return exc.retriable
    return isinstance(exc, (KafkaConnectionError, KafkaTimeoutError, KafkaClosedError))


class OffsetReader:
    """Partitions and offsets for a source's topics (subscribe, pattern or assign)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._client: Any = None
        self._consumer: Any = None

    def _open(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                from kafka_core.client.nodes import parse_bootstrap
                from kafka_core.consumer.sync import KafkaConsumer
                from kafka_core.spark.reach import check_bootstrap
                from kafka_core.sync_client import KafkaClient

                # A wrong host or port fails here within seconds, not after the client's 60 s.
                check_bootstrap(parse_bootstrap(self.options.client["bootstrap_servers"]))
                client = KafkaClient(**self.options.client)
                try:
                    self._consumer = KafkaConsumer(
                        client=client,
                        partitions={},
                        group_id=None,
                        isolation_level=self.options.isolation_level,
                    )
                except BaseException:
                    client.close()
                    raise
                self._client = client
            return self._client, self._consumer

    def close(self) -> None:
        with self._lock:
            consumer, client = self._consumer, self._client
            self._consumer = self._client = None
        if consumer is not None:
            consumer.close(commit=False)
        if client is not None:
            client.close()

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """``call`` up to ``fetchOffset.numRetries`` times; before each retry the connection is
        dropped (the next attempt opens a fresh one) and ``fetchOffset.retryIntervalMs`` waited."""
        attempts = self.options.fetch_offset_attempts
        attempt = 1
        while True:
            # Not retried: a bootstrap list whose every address refuses has had its own 2.5 s
            # (kafka_core.spark.reach), and a client that cannot be built never will be.
            self._open()
            try:
                return call()
            except Exception as exc:
                if attempt >= attempts or not transient(exc):
                    if attempt > 1:
                        exc.add_note(
                            f"kafka_core: {what} failed {attempt} times (option 'fetchOffset.numRetries')"
                        )
                    raise
                log.warning(
                    "kafka_core: %s failed (attempt %d of %d, option 'fetchOffset.numRetries'): %s; "
                    "retrying in %d ms on a new connection",
                    what,
                    attempt,
                    attempts,
                    exc,
                    self.options.fetch_offset_interval_ms,
                )
            self.close()
            time.sleep(self.options.fetch_offset_interval_ms / 1000)
            attempt += 1

    # -- partitions ---------------------------------------------------------------------------

    def topic_ids(self) -> dict[str, str]:
        """Topic id per topic read (from the last metadata), to tell a recreated topic."""
        client, _ = self._open()
        return {t.name: str(t.topic_id) for t in client.cached_metadata().topics if t.topic_id is not None}

    def partitions(self) -> list[TopicPartition]:
        """Every partition the query reads now (assign: checked to exist)."""
        return self._retrying("looking up the partitions to read", self._partitions)

    def _partitions(self) -> list[TopicPartition]:
        client, _ = self._open()
        opts = self.options
        if opts.assign is not None:
            meta = client.metadata(sorted(opts.assign), allow_auto_topic_creation=False)
            out: list[TopicPartition] = []
            for topic, parts in sorted(opts.assign.items()):
                t = meta.topic(topic)
                if t is None or t.error_code or not t.partitions:
                    raise KafkaConfigError(f"option 'assign' names topic {topic!r}, which does not exist")
                have = {p.partition for p in t.partitions}
                missing = [p for p in parts if p not in have]
                if missing:
                    raise KafkaConfigError(
                        f"option 'assign' names partitions {missing} of {topic!r}, which has only {len(have)}"
                    )
                out.extend(TopicPartition(topic, p) for p in parts)
            return out
        if opts.pattern is not None:
            meta = client.metadata(None, allow_auto_topic_creation=False)
            # Spark's offset reader matches a pattern anywhere in the name (Regex.findFirstIn),
            # not the whole name: "orders" matches "orders-dlq" too.
            regex = re.compile(opts.pattern)
            topics = [
                t for t in meta.topics if not t.is_internal and not t.error_code and regex.search(t.name)
            ]
        else:
            meta = client.metadata(list(opts.subscribe), allow_auto_topic_creation=False)
            topics = [t for t in meta.topics if t.name in opts.subscribe and not t.error_code]
        return sorted(TopicPartition(t.name, p.partition) for t in topics for p in t.partitions)

    # -- offsets ------------------------------------------------------------------------------

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        return self._retrying(
            "fetching the earliest offsets", lambda: dict(self._open()[1].beginning_offsets(tps))
        )

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        return self._retrying("fetching the latest offsets", lambda: dict(self._open()[1].end_offsets(tps)))

    def for_times(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        if not wanted:
            return {}
        found = self._retrying(
            "fetching offsets by timestamp", lambda: self._open()[1].offsets_for_times(wanted)
        )
        # "No such record" is offset -1 and timestamp -1; some brokers (Tansu) answer offset 0 with
        # timestamp -1 instead. A record that was found always carries its timestamp.
        return {tp: (None if lo is None or lo.timestamp < 0 else lo.offset) for tp, lo in found.items()}

    def lookups(self) -> OffsetLookups:
        return OffsetLookups(earliest=self.earliest, latest=self.latest, for_times=self.for_times)
