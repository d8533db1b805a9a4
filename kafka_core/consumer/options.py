"""Consumer option checks: each option on its own, named with its bad value.

A bad value must fail at construction with a message about that option; left to the broker it
shows up as a member that silently never joins, or as an error about some other option.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from kafka_core.client.metadata import TopicPartition, as_topic_partition
from kafka_core.consumer.policies import GroupProtocol, parse_choice
from kafka_core.consumer_base.options import check_int, check_number
from kafka_core.errors import KafkaConfigError

# The classic protocol's client-side group settings, used when the option is left at None.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 3_000
DEFAULT_ASSIGNORS: tuple[str, ...] = ("range", "cooperative-sticky")
# What the KIP-848 protocol moves to the broker (group.consumer.* settings there): a value set
# for them would silently do nothing, so it is refused, as the Java client does.
BROKER_SIDE_OPTIONS = ("session_timeout_ms", "heartbeat_interval_ms", "assignors")


class GroupOptions(NamedTuple):
    """The group settings as resolved from the constructor's options."""

    protocol: GroupProtocol
    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignors: tuple[Any, ...]
    remote_assignor: str | None


def check_consumer_options(opts: dict[str, Any]) -> GroupOptions:
    """Validate the consumer's numeric and flag options (the group ones even without a group),
    and return the group settings resolved.

    ``opts``: the constructor's arguments by name (its ``locals()``).
    """
    group = group_options(opts)
    session = check_int("session_timeout_ms", group.session_timeout_ms, 1)
    heartbeat = group.heartbeat_interval_ms
    check_int("heartbeat_interval_ms", heartbeat, 1)
    if heartbeat >= session:
        raise KafkaConfigError(
            f"heartbeat_interval_ms must be lower than session_timeout_ms ({session}), not {heartbeat!r}"
        )
    check_int("max_poll_interval_ms", opts["max_poll_interval_ms"], 1)
    check_number("auto_commit_interval_ms", opts["auto_commit_interval_ms"], 0)
    check_int("fetch_max_wait_ms", opts["fetch_max_wait_ms"], 0)
    check_int("fetch_min_bytes", opts["fetch_min_bytes"], 0)
    check_int("fetch_max_bytes", opts["fetch_max_bytes"], 1)
    check_int("max_partition_fetch_bytes", opts["max_partition_fetch_bytes"], 1)
    check_int("fetch_concurrency", opts["fetch_concurrency"], 1)
    check_number("coordinator_ready_timeout_ms", opts["coordinator_ready_timeout_ms"], 1)
    check_number("metadata_max_age_ms", opts["metadata_max_age_ms"], 0)
    if opts["max_poll_records"] is not None:
        check_int("max_poll_records", opts["max_poll_records"], 1)
    for flag in ("enable_auto_commit", "check_crcs"):
        if not isinstance(opts[flag], bool):
            raise KafkaConfigError(f"{flag} must be True or False, not {opts[flag]!r}")
    return group


def group_options(opts: Mapping[str, Any]) -> GroupOptions:
    """The group protocol and the settings that go with it (defaults for those left at None).

    With ``group_protocol="consumer"`` the session timeout, heartbeat interval and assignment
    are the broker's (KIP-848): setting them here raises, naming them; ``group_remote_assignor``
    picks one of the broker's assignors instead. With ``"classic"`` the remote assignor means
    nothing and raises likewise.
    """
    protocol = parse_choice("group_protocol", opts["group_protocol"], GroupProtocol)
    remote = opts["group_remote_assignor"]
    if remote is not None and (not isinstance(remote, str) or not remote):
        raise KafkaConfigError(f"group_remote_assignor must be a non-empty string or None, not {remote!r}")
    if protocol == GroupProtocol.CONSUMER:
        given = [name for name in BROKER_SIDE_OPTIONS if opts[name] is not None]
        if given:
            raise KafkaConfigError(
                f"{', '.join(given)} cannot be set with group_protocol='consumer': the broker's "
                "group.consumer.* settings decide them (use group_remote_assignor to pick the "
                "broker's assignor)"
            )
    elif remote is not None:
        raise KafkaConfigError("group_remote_assignor needs group_protocol='consumer'")
    session = opts["session_timeout_ms"]
    heartbeat = opts["heartbeat_interval_ms"]
    assignors = opts["assignors"]
    return GroupOptions(
        protocol,
        DEFAULT_SESSION_TIMEOUT_MS if session is None else session,
        DEFAULT_HEARTBEAT_INTERVAL_MS if heartbeat is None else heartbeat,
        DEFAULT_ASSIGNORS if assignors is None else tuple(assignors),
        remote,
    )


def check_assignment(
    topics: list[str], pattern: str | re.Pattern[str] | None, partitions: Any, group_id: str | None
) -> None:
    """One way to say what to consume, and the group it needs."""
    if partitions is not None and (topics or pattern is not None):
        raise KafkaConfigError("give either partitions (static assignment) or topics/pattern, not both")
    if partitions is None and not topics and pattern is None:
        raise KafkaConfigError("nothing to consume: give topics, pattern or partitions")
    if pattern is not None and group_id is None:
        raise KafkaConfigError("pattern subscriptions need a group_id")
    if group_id is not None and not group_id:
        raise KafkaConfigError("group_id must not be empty")


def partitions_arg(partitions: Mapping[str, Iterable[int]] | Iterable[Any]) -> list[TopicPartition]:
    """``{"t": [0, 1]}`` or an iterable of (topic, partition) as TopicPartitions."""
    if isinstance(partitions, Mapping):
        return [TopicPartition(t, int(p)) for t, ps in partitions.items() for p in ps]
    return [as_topic_partition(x) for x in partitions]
