"""The group leader's job in a join: run the chosen assignor over every member's subscription
with partition counts read from the cluster (the assignors themselves do no I/O)."""

from __future__ import annotations

from typing import Any

from kafka_core.client.watch import TopicView, topic_view
from kafka_core.consumer.group.assignors import MemberInfo
from kafka_core.consumer.group.classic_meta import Assignment, decode_subscription
from kafka_core.protocol.errors import ErrorCode, error_for


async def leader_plan(
    client: Any, assignors: list[Any], protocol: str, members: list[Any]
) -> tuple[dict[str, Assignment], set[str], TopicView]:
    """The group leader's job: every member's assignment by the assignor the group chose, the
    topics the members subscribe to, and what the assignment was made from (those that exist,
    their partition counts and ids): a change in that (a subscribed topic created, deleted,
    recreated or grown) means a new rebalance."""
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
    view: TopicView = {}
    if topics:
        meta = await client.metadata(sorted(topics))
        view = topic_view(meta.topics, topics)
    plan = assignor.assign({name: count for name, (count, _) in view.items()}, infos)
    for member_id in infos:
        plan.setdefault(member_id, Assignment())
    return plan, topics, view
