"""The consumer's named choices as enums, parsed once from what users pass (strings or members).

Users write ``auto_offset_reset="earliest"`` as in every other client; inside, the policy is an
enum member, so a typo fails at construction naming the option instead of somewhere in the
fetcher, and comparisons are against members, never string literals.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from kafka_core.errors import KafkaConfigError


class OffsetReset(enum.StrEnum):
    """Where to start a partition that has no committed offset (or whose offset is gone)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"  # no guess: poll raises an OFFSET_OUT_OF_RANGE error for the partition


class IsolationLevel(enum.IntEnum):
    """Which records a fetch may see; the value is the wire field's."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1  # only committed transactions, up to the last stable offset


class GroupProtocol(enum.StrEnum):
    """How a group member gets its partitions: ``classic`` (JoinGroup/SyncGroup, the client's
    assignors) or ``consumer`` (KIP-848: ConsumerGroupHeartbeat, the broker assigns)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


E = TypeVar("E", OffsetReset, IsolationLevel, GroupProtocol)


def parse_choice(option: str, value: object, kind: type[E]) -> E:
    """``value`` (a member, or the string users write) as a member of ``kind``, else
    KafkaConfigError naming ``option`` and the accepted values."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        for member in kind:
            if value == member.name.lower():
                return member
    choices = tuple(m.name.lower() for m in kind)
    raise KafkaConfigError(f"{option} must be one of {choices}, not {value!r}")
