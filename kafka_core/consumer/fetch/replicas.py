"""Follower fetching (KIP-392): the replica each partition is read from, when not its leader.

A consumer with ``client_rack`` sends its rack in every Fetch (v11+). A leader whose brokers set
``replica.selector.class`` (``org.apache.kafka.common.replica.RackAwareReplicaSelector`` picks
an in-sync replica in the client's rack) answers a partition with no records and the replica to
read it from (``preferred_read_replica``). The partition is then fetched from that replica
until its lease ends (``metadata_max_age_ms``, as Java's consumer), it answers an error, a fetch
from it fails, or the metadata no longer shows it online for the partition; then from the leader
again, which may name the replica anew. An OFFSET_OUT_OF_RANGE from a replica is not acted on
(no reset): the leader, fetched next, is the one whose answer decides, as KIP-392 and Java's
consumer do (a follower may be behind the leader, or have deleted more of its log).

Positions, validations (OffsetForLeaderEpoch) and offset lookups stay with the leader; the
replica checks the leader epoch a Fetch carries, so a stale one is fenced there too (KIP-320).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Container, Mapping

from kafka_core.client.metadata import TopicMeta, TopicPartition


class ReadReplicas:
    """The preferred read replica of each partition that has one, with its lease."""

    def __init__(self, lease_s: float) -> None:
        self.lease_s = lease_s
        self._replica: dict[TopicPartition, tuple[int, float]] = {}  # node, lease end (monotonic)
        self._ends: list[tuple[float, TopicPartition]] = []  # lease ends, looked at once due

    def __len__(self) -> int:
        return len(self._replica)

    def node(self, tp: TopicPartition) -> int | None:
        """The replica ``tp`` is read from now (None: its leader)."""
        got = self._replica.get(tp)
        return None if got is None else got[0]

    def prefer(self, tp: TopicPartition, node: int, now: float | None = None) -> None:
        """The leader named ``node`` to read ``tp`` from: for the lease's time."""
        end = (time.monotonic() if now is None else now) + self.lease_s
        self._replica[tp] = (node, end)
        heapq.heappush(self._ends, (end, tp))

    def clear(self, tp: TopicPartition, node: int | None = None) -> bool:
        """Read ``tp`` from its leader again (only if read from ``node``, when given); True if
        it was read from a replica."""
        got = self._replica.get(tp)
        if got is None or (node is not None and got[0] != node):
            return False
        del self._replica[tp]
        return True

    def choose(
        self,
        tp: TopicPartition,
        leader: int,
        topics: Mapping[str, TopicMeta],
        brokers: Container[int],
        now: float,
    ) -> int:
        """The node to fetch ``tp`` from: its replica while leased and online, else ``leader``.

        ``topics`` and ``brokers``: the metadata, by topic name and the live brokers' ids."""
        got = self._replica.get(tp)
        if got is None:
            return leader
        node, end = got
        if end <= now or node == leader or not online(topics, brokers, tp, node):
            del self._replica[tp]
            return leader
        return node

    def due(self, now: float) -> list[TopicPartition]:
        """Partitions whose lease ended by ``now``: to be placed again (back on the leader)."""
        out: list[TopicPartition] = []
        ends = self._ends
        while ends and ends[0][0] <= now:
            end, tp = heapq.heappop(ends)
            got = self._replica.get(tp)
            if got is not None and got[1] == end:
                out.append(tp)  # not a lease since renewed or cleared
        return out

    def next_due(self) -> float | None:
        """When the next lease may end (monotonic), if any is running."""
        ends = self._ends
        while ends:
            end, tp = ends[0]
            got = self._replica.get(tp)
            if got is not None and got[1] == end:
                return end
            heapq.heappop(ends)  # renewed or cleared since
        return None


def online(topics: Mapping[str, TopicMeta], brokers: Container[int], tp: TopicPartition, node: int) -> bool:
    """Whether the metadata shows ``node`` as a live replica of ``tp`` (a known broker, among the
    partition's replicas, not among its offline ones), as Java's ``nodeIfOnline``."""
    t = topics.get(tp.topic)
    p = t.partition(tp.partition) if t is not None else None
    return p is not None and node in p.replicas and node not in p.offline_replicas and node in brokers
