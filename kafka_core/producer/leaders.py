"""Where each partition of the producer's topics is led, and when to ask again: the producer's
metadata, apart from the sending in ``sender.py``.

A topic is asked about again when records wait for it (parked), when a Produce error or a
dropped connection says its leaders may have moved (stale), and every ``metadata_max_age_ms``
(partitions added, leaders moved without an error). A Produce error that names the new leader
(KIP-951) moves the partition to it at once (``hinted``), ahead of any answer. A failed lookup is retried after the retry
backoff. Only the producer's I/O loop touches it, so it needs no lock; the accumulator's
``available`` check reads it with the accumulator's lock held, on that same loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.client.hints import LeaderHint
from kafka_core.errors import KafkaClosedError, KafkaError
from kafka_core.producer.accumulator import Accumulator
from kafka_core.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafka_core.producer")

__all__ = ["Leaders"]


class Leaders:
    """See the module docstring."""

    def __init__(
        self,
        client: Any,
        acc: Accumulator,
        *,
        backoff: float,
        on_change: Callable[[], None],
        on_failed: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.client = client
        self.acc = acc
        self.backoff = backoff
        self._on_change = on_change  # wakes the sender: an answer (or a failure) may unblock it
        self._on_failed = on_failed  # records failed here (a transaction cannot commit now)
        self._leaders: dict[str, list[int]] = {}
        self.stale: set[str] = set()  # topics to ask about again
        self.last_error: dict[str, BaseException] = {}  # per topic: why its lookup failed last
        self.max_age = float(getattr(client, "metadata_max_age", 300.0))
        self._task: asyncio.Task[None] | None = None
        self._backoff_until = 0.0
        self._last_refresh = time.monotonic()

    def leader(self, topic: str, partition: int) -> int:
        """The node leading ``topic[partition]``, or -1 when none is known."""
        leaders = self._leaders.get(topic)
        return leaders[partition] if leaders and partition < len(leaders) else -1

    def mark_stale(self, topic: str) -> None:
        self.stale.add(topic)

    def hinted(self, topic: str, partition: int, hint: LeaderHint) -> bool:
        """A Produce answer named ``topic[partition]``'s new leader (KIP-951): True when the
        client's cache takes it (its epoch is newer than any known), and the partition is then
        routed to it now; False leaves the partition to the metadata refresh."""
        take = getattr(self.client, "take_leader_hint", None)
        leaders = self._leaders.get(topic)
        if take is None or not leaders or partition >= len(leaders) or not take(topic, partition, hint):
            return False
        if leaders[partition] != hint.leader:
            leaders[partition] = hint.leader
            self._on_change()
        return True

    def refresh_due(self, now: float, parked: Iterable[str]) -> None:
        """Start one lookup of the topics that need it, unless one runs or the backoff holds."""
        if now - self._last_refresh > self.max_age:
            self._last_refresh = now
            self.stale.update(self._leaders)
        topics = set(parked) | self.stale
        if topics and (self._task is None or self._task.done()) and now >= self._backoff_until:
            self._task = asyncio.get_running_loop().create_task(self._refresh(sorted(topics)))

    async def _refresh(self, topics: list[str]) -> None:
        try:
            meta = await self.client.metadata(topics)
        except KafkaClosedError:
            return
        except KafkaError as exc:
            log.debug("metadata refresh for %s failed: %s", topics, exc)
            for t in topics:
                self.last_error[t] = exc
            self._backoff_until = time.monotonic() + self.backoff
            self._on_change()
            return
        self.apply(meta, topics)
        self._on_change()

    def apply(self, meta: Any, topics: list[str]) -> None:
        """Take in a metadata answer for ``topics``: leaders noted, the accumulator's partitions
        created (its parked records partitioned), errors kept as each topic's last error."""
        retry_soon = False
        for name in topics:
            t = meta.topic(name)
            if t is None or t.error_code or not t.partitions:
                code = (
                    t.error_code if t is not None and t.error_code else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                error = self.last_error[name] = error_for(code, name)
                if not error.retriable:
                    self._fail_parked(name, error)
                retry_soon = True
                continue
            leaders = [-1] * (max(p.partition for p in t.partitions) + 1)
            for p in t.partitions:
                leaders[p.partition] = (
                    p.leader if p.error_code in (ErrorCode.NONE, ErrorCode.REPLICA_NOT_AVAILABLE) else -1
                )
            self._leaders[name] = leaders
            if -1 in leaders:
                retry_soon = True
            else:
                self.stale.discard(name)
            for result, targets in self.acc.set_partitions(name, len(leaders)):
                result.forward(targets)
        if retry_soon:
            self._backoff_until = time.monotonic() + self.backoff

    def _fail_parked(self, topic: str, error: BaseException) -> None:
        """An answer asking again cannot mend (TOPIC_AUTHORIZATION_FAILED...): the records parked
        for ``topic`` (sent from a delivery callback, which never waits) fail with it now."""
        taken = self.acc.expire_parked(topic)
        if taken is not None and not taken[0].done:
            taken[0].set_error(error)
            if self._on_failed is not None:
                self._on_failed(error)
