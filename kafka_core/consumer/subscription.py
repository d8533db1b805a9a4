"""Per-partition consuming state: position (with its leader epochs), pause flag, reset need,
validation need, high watermark."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka_core.client.metadata import TopicMeta, TopicPartition
from kafka_core.consumer.policies import OffsetReset

# Position versions, unique across all partition states: a partition revoked and assigned again
# gets a new state whose version no answer sent for the old one (a Fetch, a validation) carries.
_versions = itertools.count(1)


def topics_matching(pattern: re.Pattern[str], topics: Iterable[TopicMeta]) -> list[str]:
    """The topics a pattern subscription takes from a metadata answer: whole names that match,
    internal topics never (both group protocols, where the client resolves the pattern)."""
    return sorted(t.name for t in topics if not t.is_internal and pattern.fullmatch(t.name))


@dataclass
class PartitionState:
    position: int | None = None  # offset of the next record to hand to the application
    paused: bool = False
    reset: OffsetReset | None = None  # set when the position must be looked up (or is unknowable)
    high_watermark: int = -1  # of the last Fetch answer: lag in metrics() and lag()
    # A new version at each seek and reset: fetches and validations sent before are stale.
    epoch: int = field(default_factory=lambda: next(_versions))
    # KIP-320: the leader epoch of the batch holding the record before the position (None:
    # unknown), and the partition leader's epoch the position was last known good under (sent in
    # Fetch as current_leader_epoch; -1: unknown).
    offset_epoch: int | None = None
    leader_epoch: int = -1
    # The position must be checked against the leader's log (OffsetForLeaderEpoch) before it is
    # fetched from: the leader changed, or the position came with an epoch from a commit or seek.
    awaiting_validation: bool = False

    @property
    def fetchable(self) -> bool:
        return (
            self.position is not None
            and not self.paused
            and self.reset is None
            and not self.awaiting_validation
        )


class SubscriptionState:
    """The assignment and its positions. Positions advance only when records are handed over."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, PartitionState] = {}

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        new = {TopicPartition(*tp) for tp in tps}
        old = self._parts
        self._parts = {tp: old.get(tp) or PartitionState() for tp in sorted(new)}

    def add(self, tps: Iterable[TopicPartition]) -> None:
        self.assign(set(self._parts) | {TopicPartition(*tp) for tp in tps})

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        self.assign(set(self._parts) - {TopicPartition(*tp) for tp in tps})

    def assigned(self) -> set[TopicPartition]:
        return set(self._parts)

    def __contains__(self, tp: object) -> bool:
        return tp in self._parts

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._parts[tp]
        except KeyError:
            raise KeyError(f"{tp} is not assigned to this consumer") from None

    def items(self) -> Iterable[tuple[TopicPartition, PartitionState]]:
        return self._parts.items()

    def seek(self, tp: TopicPartition, offset: int, offset_epoch: int | None = None) -> None:
        """Move the position. With ``offset_epoch`` (from a commit or the application) it is
        validated against the leader's log before fetching (KIP-320), else taken as it is."""
        st = self.state(tp)
        st.position = offset
        st.reset = None
        st.epoch = next(_versions)
        st.offset_epoch = offset_epoch if offset_epoch is not None and offset_epoch >= 0 else None
        st.awaiting_validation = st.offset_epoch is not None

    def seek_validated(self, tp: TopicPartition, offset: int, offset_epoch: int | None) -> None:
        """Move the position to where the leader's log is known good (a reset, a truncation)."""
        self.seek(tp, offset)
        st = self.state(tp)
        st.offset_epoch = offset_epoch if offset_epoch is not None and offset_epoch >= 0 else None

    def request_reset(self, tp: TopicPartition, policy: OffsetReset) -> None:
        st = self.state(tp)
        st.reset = policy
        st.epoch = next(_versions)
        st.awaiting_validation = False

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, st in self._parts.items() if st.fetchable]

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.state(TopicPartition(*tp)).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._parts.items() if st.paused}

    def awaiting_validation(self) -> list[TopicPartition]:
        return [
            tp
            for tp, st in self._parts.items()
            if st.awaiting_validation and st.position is not None and st.reset is None
        ]

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}
