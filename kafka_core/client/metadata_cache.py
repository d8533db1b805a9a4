"""The client's picture of the cluster's topics and how fresh it is: one job, apart from the
connections and retries in ``cluster.py``.

A topic's entry is fresh for ``metadata_max_age_ms`` after the answer that brought it, unless it
was invalidated (an error naming it) or everything was marked stale (a dropped connection: its
leaders may have moved). Only the I/O loop touches it, so it needs no lock.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import MetadataRequest

__all__ = ["MetadataCache", "metadata_request", "parse_metadata"]

_ZERO_UUID = uuid.UUID(int=0)


def metadata_request(version: int, topics: list[str] | None, auto_create: bool = False) -> MetadataRequest:
    """A Metadata request for ``topics`` (None: all of them) in the negotiated ``version``."""
    if topics is None and version == 0:
        req_topics: list[Any] | None = []  # v0: an empty list means all topics
    elif topics is None:
        req_topics = None
    else:
        req_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    if version < 4 and not topics:
        # Before v4 the broker's own setting decides, and a request naming no topic creates none:
        # the flag is left out, so that a broker that old (kafka-rs) can be asked at all. Naming
        # topics without auto-creation still cannot be said before v4 and fails to encode, as in
        # the Java client.
        auto_create = True
    return MetadataRequest(topics=req_topics, allow_auto_topic_creation=auto_create)


def parse_metadata(resp: Any) -> ClusterMeta:
    """A Metadata response as plain data (partitions sorted, an all-zero topic id as None)."""
    brokers = [BrokerMeta(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in resp.brokers]
    topics: list[TopicMeta] = []
    for t in resp.topics:
        parts = [
            PartitionMeta(
                partition=p.partition_index,
                leader=p.leader_id,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                leader_epoch=getattr(p, "leader_epoch", -1),
                offline_replicas=tuple(getattr(p, "offline_replicas", ()) or ()),
                error_code=p.error_code,
            )
            for p in t.partitions
        ]
        parts.sort(key=lambda p: p.partition)
        topic_id = getattr(t, "topic_id", None)
        if topic_id is not None and not isinstance(topic_id, uuid.UUID):
            topic_id = uuid.UUID(bytes=bytes(topic_id))
        topics.append(
            TopicMeta(
                name=t.name or "",
                partitions=parts,
                topic_id=None if topic_id in (None, _ZERO_UUID) else topic_id,
                is_internal=bool(getattr(t, "is_internal", False)),
                error_code=t.error_code,
            )
        )
    return ClusterMeta(
        brokers=brokers,
        topics=topics,
        controller_id=getattr(resp, "controller_id", -1),
        cluster_id=getattr(resp, "cluster_id", None),
    )


class MetadataCache:
    """See the module docstring."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age = max_age_s
        self._cluster = ClusterMeta(brokers=[], topics=[])
        self._topics: dict[str, TopicMeta] = {}
        self._fetched: dict[str, float] = {}
        self._stale_before = 0.0
        # Each topic's id and partitions as last accepted, kept through invalidations: the
        # leader epochs a later answer must not go back from.
        self._last: dict[str, TopicMeta] = {}

    def update(self, answer: ClusterMeta, *, full: bool) -> ClusterMeta:
        """Take in an answer: ``full`` (all topics) replaces the topic list, else merges it; a
        topic answered with an error is forgotten. Returns the answer as taken: a partition whose
        leader epoch went back (a broker behind the others answered) keeps the newer leader, so
        no caller routes to a leader already known to be gone."""
        now = time.monotonic()
        if full:
            self._topics = {t.name: self._newest(t) for t in answer.topics if t.error_code == ErrorCode.NONE}
            self._fetched = dict.fromkeys(self._topics, now)
            for name in [n for n in self._last if n not in self._topics]:
                del self._last[name]  # deleted: a topic made again under its name starts afresh
        else:
            for t in answer.topics:
                if t.error_code == ErrorCode.NONE:
                    self._topics[t.name] = self._newest(t)
                    self._fetched[t.name] = now
                else:
                    self.invalidate(t.name)
                    if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        self._last.pop(t.name, None)
        self._cluster = ClusterMeta(
            brokers=answer.brokers,
            topics=list(self._topics.values()),
            controller_id=answer.controller_id,
            cluster_id=answer.cluster_id,
        )
        taken = [self._topics.get(t.name, t) if t.error_code == ErrorCode.NONE else t for t in answer.topics]
        return ClusterMeta(
            brokers=answer.brokers,
            topics=taken,
            controller_id=answer.controller_id,
            cluster_id=answer.cluster_id,
        )

    def take_leader(self, topic: str, partition: int, leader: int, epoch: int) -> bool:
        """A leader named outside a Metadata answer (KIP-951: a Produce or Fetch error carrying
        the new leader). Taken only when its epoch is newer than any seen for the partition, so
        a late or reordered hint never moves a partition back; True when the cache now names
        ``leader`` at ``epoch`` (taken now, or known already). The topic's freshness is kept:
        the hint speaks for one partition, and the refresh that follows it for the rest."""
        known = self._last.get(topic)
        if known is None or leader < 0 or epoch < 0:
            return False
        prev = known.partition(partition)
        if prev is None:
            return False
        if prev.leader_epoch >= epoch:
            return prev.leader_epoch == epoch and prev.leader == leader
        moved = replace(prev, leader=leader, leader_epoch=epoch, error_code=ErrorCode.NONE)
        for entries in (self._last, self._topics):
            t = entries.get(topic)
            if t is not None:
                parts = [moved if p.partition == partition else p for p in t.partitions]
                entries[topic] = replace(t, partitions=parts)
        c = self._cluster
        self._cluster = replace(c, topics=list(self._topics.values()))
        return True

    def _newest(self, answer: TopicMeta) -> TopicMeta:
        """``answer``, except partitions whose leader epoch is older than the one seen before:
        a broker with stale metadata answered, and an epoch never goes back (KIP-320, as Java's
        Metadata). A recreated topic (another id) starts its epochs afresh."""
        known = self._last.get(answer.name)
        if known is None or known.topic_id != answer.topic_id:
            self._last[answer.name] = answer
            return answer
        old = {p.partition: p for p in known.partitions}
        parts: list[PartitionMeta] = []
        kept = False
        for p in answer.partitions:
            prev = old.get(p.partition)
            if prev is not None and p.leader_epoch >= 0 and prev.leader_epoch > p.leader_epoch:
                parts.append(prev)
                kept = True
            else:
                parts.append(p)
        if kept:
            answer = TopicMeta(
                name=answer.name,
                partitions=parts,
                topic_id=answer.topic_id,
                is_internal=answer.is_internal,
                error_code=answer.error_code,
            )
        self._last[answer.name] = answer
        return answer

    def snapshot(self) -> ClusterMeta:
        """Everything known, fresh or not (the last answer's brokers and controller)."""
        return self._cluster

    def topic(self, name: str) -> TopicMeta | None:
        """What is known of ``name``, fresh or not."""
        return self._topics.get(name)

    def fresh_topic(self, name: str) -> TopicMeta | None:
        """``name``'s entry if it is still fresh, else None (time to ask again)."""
        fetched = self._fetched.get(name)
        if fetched is None or fetched <= self._stale_before or time.monotonic() - fetched >= self.max_age:
            return None
        return self._topics.get(name)

    def invalidate(self, topic: str | None = None) -> None:
        """Forget ``topic``, or with None mark every entry stale."""
        if topic is None:
            self._stale_before = time.monotonic()
        else:
            self._topics.pop(topic, None)
            self._fetched.pop(topic, None)
