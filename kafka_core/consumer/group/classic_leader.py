"""The group leader's job in a join: run the chosen assignor over every member's subscription
with partition counts read from the cluster (the assignors themselves do no I/O)."""

from __future__ import annotations

from typing import Any

from kafka_core.consumer.group.assignors import MemberInfo
from kafka_core.consumer.group.classic_meta import Assignment, decode_subscription
from kafka_core.protocol.errors import ErrorCode, error_for


async def leader_plan(
    client: Any, assignors: list[Any], protocol: str, members: list[Any]
) -> tuple[dict[str, Assignment], dict[str, int]]:
    """The group leader's job: every member's assignment by the assignor the group chose, and
    the partition counts it was made from (a change in them means a new rebalance)."""
    assignor = next((a for a in assignors if a.name == protocol), None)
    if assignor is None:
        raise error_for(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"group chose assignor {protocol!r} that this consumer does not have",
        )
    infos: dict[str, MemberInfo] = {}
    topics: set[str] = set()
    for m in members:
        sub = decode_subscription(m.metadata)
        infos[m.member_id] = MemberInfo(m.member_id, sub, getattr(m, "group_instance_id", None))
        topics.update(sub.topics)
    counts: dict[str, int] = {}
    if topics:
        meta = await client.metadata(sorted(topics))
        for t in meta.topics:
            if t.name in topics and not t.error_code and t.partitions:
                counts[t.name] = len(t.partitions)
    plan = assignor.assign(counts, infos)
    for member_id in infos:
        plan.setdefault(member_id, Assignment())
    return plan, dict(counts)
