"""One reading of a group for ``kafka-core groups lag`` (once, or each refresh of ``--watch``):
its description and its lag, with the one error a group that does not exist gets.

The calls per reading stay the same whatever the group's width: DescribeGroups (or
ConsumerGroupDescribe) to the coordinator, one OffsetFetch for every committed offset, and one
ListOffsets per partition leader for the end offsets (``KafkaAdmin.consumer_group_lag``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_core.admin.results import GroupLag
from kafka_core.cli.output import EXIT_FAILED, EXIT_NOT_FOUND, CliError, one_line
from kafka_core.cli.share import describe_any

__all__ = ["GroupReading", "group_error", "read_group"]

MISSING = ("GROUP_ID_NOT_FOUND",)


@dataclass(frozen=True, slots=True)
class GroupReading:
    """A group at one moment. ``share``: a share group, whose ``committed`` offsets are start
    offsets; ``epoch``: a KIP-848 group's epoch (None for classic and share groups);
    ``assignment``: each member's id with its partitions, to see rebalances by."""

    group_id: str
    state: str | None
    members: int | None
    share: bool
    epoch: int | None
    assignment: frozenset[object]
    lag: GroupLag


def group_error(group_id: str, error: BaseException | None) -> tuple[str, int]:
    """The line and exit code for a group that could not be described (4: it does not exist)."""
    if getattr(error, "name", "") in MISSING:
        return f"group {group_id!r} does not exist", EXIT_NOT_FOUND
    return f"group {group_id!r}: {one_line(error)}", EXIT_FAILED


def read_group(admin: Any, group_id: str, *, timeout_ms: float | None = None) -> GroupReading:
    """The group's state, members and lag; a group with neither a description nor committed
    offsets raises the CliError of :func:`group_error` (a description's error alone does not:
    offsets the group committed are still worth showing)."""
    res = describe_any(admin, [group_id], timeout_ms=timeout_ms)[group_id]
    share = res.ok and res.value.group_type == "share"  # start offsets, not committed ones
    lag_of = admin.share_group_lag if share else admin.consumer_group_lag
    lag = lag_of(group_id, timeout_ms=timeout_ms)
    if not res.ok and len(lag) == 0:  # nothing committed and nothing to describe
        raise CliError(*group_error(group_id, res.error))
    desc = res.value if res.ok else None
    assignment: frozenset[object] = frozenset()
    if desc is not None:
        assignment = frozenset((m.member_id, frozenset(m.assignment)) for m in desc.members)
    return GroupReading(
        group_id,
        desc.state if desc is not None else None,
        len(desc.members) if desc is not None else None,
        share,
        desc.group_epoch if desc is not None else None,
        assignment,
        lag,
    )
