"""What the group calls and the share group calls share: a group lives on its coordinator.

Everything about a group (classic, consumer or share) is asked of its coordinator, found per
group and cached by the client; an error that says the coordinator moved forgets the cached one,
so the resource's next round finds the new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_core.admin.engine import detail_suffix, per_coordinator
from kafka_core.admin.results import GroupListing, Result
from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol.errors import error_for

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

K = TypeVar("K")


class Coordinators:
    """Sends a call's requests to the coordinators of its groups and names their errors."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def error(
        self, group_id: str, code: int, what: str, *, kind: str = "group", detail: str | None = None
    ) -> KafkaProtocolError:
        """The error for a group's answer; a moved coordinator is forgotten so the retry finds the new one."""
        self.client.note_error(code, coordinator_key=group_id)
        return error_for(code, f"{what} {kind} {group_id!r}{detail_suffix(detail)}")

    async def ask(
        self,
        group_ids: list[str],
        keys_of_group: Callable[[str], list[K]],
        ask: Callable[[int, list[str]], Awaitable[Mapping[K, Any]]],
    ) -> dict[K, Any]:
        """``ask(node, groups)`` once per coordinator, for the groups it coordinates."""
        return await per_coordinator(
            lambda g: self.client.find_coordinator(g, 0), group_ids, keys_of_group, ask
        )


def assigned_partitions(assignment: Any) -> list[TopicPartition]:
    """A member's partitions from a ConsumerGroupDescribe or ShareGroupDescribe assignment."""
    if assignment is None:
        return []
    return sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def merge_listings(results: Mapping[int, Result[Any]]) -> list[GroupListing]:
    """Each broker's listing merged, sorted by group id; a broker that never answered fails the
    whole listing."""
    merged: dict[str, GroupListing] = {}
    for res in results.values():
        for listing in res.result():
            merged.setdefault(listing.group_id, listing)
    return [merged[g] for g in sorted(merged)]
