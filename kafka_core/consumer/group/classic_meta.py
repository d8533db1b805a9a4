"""The consumer protocol's embedded structs (JoinGroup metadata, SyncGroup assignment).

They travel as opaque bytes inside group requests: an int16 version, then the generated
ConsumerProtocolSubscription / ConsumerProtocolAssignment body of that version. The assignors
work on the small dataclasses here (partitions as ``{topic: [partition, ...]}``), which is all
they need and what the admin's group description shows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

SUBSCRIPTION_VERSION = 3  # v1 owned partitions (KIP-429), v2 generation, v3 rack
ASSIGNMENT_VERSION = 3

_H = struct.Struct(">h")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass
class Assignment:
    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    tp = ConsumerProtocolSubscription.TopicPartition
    body = ConsumerProtocolSubscription(
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=_topic_partitions(tp, sub.owned_partitions) if version >= 1 else [],
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
    )
    return _H.pack(version) + body.encode(version)


def decode_subscription(buf: bytes) -> Subscription:
    """Read any version; fields of newer versions than we know are ignored (forward compatible)."""
    body = _decode(ConsumerProtocolSubscription, buf, "subscription")
    return Subscription(
        topics=list(body.topics),
        user_data=body.user_data,
        owned_partitions=_as_dict(body.owned_partitions),
        generation_id=body.generation_id,
        rack_id=body.rack_id,
    )


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    tp = ConsumerProtocolAssignment.TopicPartition
    body = ConsumerProtocolAssignment(
        assigned_partitions=_topic_partitions(tp, a.partitions), user_data=a.user_data
    )
    return _H.pack(version) + body.encode(version)


def decode_assignment(buf: bytes | None) -> Assignment:
    """An empty buffer is a valid 'nothing for you' (brokers send it to members left out)."""
    if not buf:
        return Assignment()
    body = _decode(ConsumerProtocolAssignment, buf, "assignment")
    return Assignment(partitions=_as_dict(body.assigned_partitions), user_data=body.user_data)


def _topic_partitions(cls: Any, tps: dict[str, list[int]]) -> list[Any]:
    return [cls(topic=t, partitions=list(tps[t])) for t in sorted(tps)]  # sorted: stable bytes


def _as_dict(tps: list[Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


def _decode(cls: Any, buf: bytes, what: str) -> Any:
    """The body at its stated version (bytes after it, fields of versions newer than ours, are
    ignored); failing that, at a lower version it fills exactly: other clients label some
    versions without writing their last fields."""
    view = memoryview(bytes(buf))
    if len(view) < 2:
        raise _bad(f"{what} shorter than its version")
    version = _H.unpack_from(view, 0)[0]
    if version < 0:
        raise _bad(f"negative {what} version {version}")
    stated = min(version, cls.MAX_VERSION)
    try:
        return cls.read_from(view, 2, stated)[0]
    except KafkaProtocolError as exc:
        for v in range(stated - 1, -1, -1):
            try:
                body, end = cls.read_from(view, 2, v)
            except KafkaProtocolError:
                continue
            if end == len(view):
                return body
        raise _bad(f"{what}: {exc}") from exc


def _bad(what: str) -> KafkaProtocolError:
    return KafkaProtocolError(-1, "CORRUPT_GROUP_METADATA", False, f"consumer protocol: {what}")
