"""Leader hints (KIP-951): a Produce (v10+) or Fetch (v12+) answer refusing a partition with
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the partition's current leader and epoch, and
(Produce v10+, Fetch v16+) that leader's address, so the client can send to it at once instead of
asking for metadata first. Read here, apart from the producer and the fetcher, which both use it;
the client's ``take_leader_hint`` decides whether a hint is newer than what it knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_core.client.metadata import BrokerMeta
from kafka_core.protocol.errors import LEADER_MOVED_CODES

__all__ = ["LeaderHint", "leader_hint"]


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """The leader a broker named for a partition it refused, with the addresses it sent."""

    leader: int
    epoch: int
    endpoints: tuple[BrokerMeta, ...] = ()


def leader_hint(partition_answer: Any, response: Any) -> LeaderHint | None:
    """The hint in one partition's answer (a Produce ``PartitionProduceResponse`` or a Fetch
    ``PartitionData``) of ``response``, None when it has none: another error, an older version
    (the field then reads -1), or a broker that knows no leader either."""
    if partition_answer.error_code not in LEADER_MOVED_CODES:
        return None
    current = getattr(partition_answer, "current_leader", None)
    if current is None or current.leader_id < 0 or current.leader_epoch < 0:
        return None
    endpoints = tuple(
        BrokerMeta(e.node_id, e.host, e.port, e.rack)
        for e in getattr(response, "node_endpoints", None) or ()
        if e.node_id >= 0 and e.host and e.port > 0
    )
    return LeaderHint(current.leader_id, current.leader_epoch, endpoints)
