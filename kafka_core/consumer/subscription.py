"""Per-partition consuming state: position (with its leader epochs), pause flag, reset need,
validation need, high watermark.

Every change to a partition's state (but its high watermark) is noted: the fetcher works on the
partitions that changed, never on the whole assignment per round (issue 40), and the partitions
waiting for a reset or a validation are indexed for the same reason."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka_core.client.metadata import TopicMeta, TopicPartition
from kafka_core.consumer.policies import OffsetReset

# Position versions, unique across all partition states: a partition revoked and assigned again
# gets a new state whose version no answer sent for the old one (a Fetch, a validation) carries.
_versions = itertools.count(1)


def topics_matching(pattern: re.Pattern[str], topics: Iterable[TopicMeta]) -> list[str]:
    """The topics a pattern subscription takes from a metadata answer: whole names that match,
    internal topics never (both group protocols, where the client resolves the pattern)."""
    return sorted(t.name for t in topics if not t.is_internal and pattern.fullmatch(t.name))


_UNTRACKED = frozenset({"high_watermark", "owner", "tp"})


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
    # Offsets at or past this are not fetched (None: no bound): a reader of a known offset range
    # (a Spark task) neither fetches past its range nor leaves a fetch waiting at the log's end.
    fetch_until: int | None = None
    # The subscription that holds this state, and its partition (set by assign): told of changes.
    owner: SubscriptionState | None = field(default=None, repr=False, compare=False)
    tp: TopicPartition | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _UNTRACKED:
            return
        owner = self.__dict__.get("owner")
        if owner is not None:
            owner.changed(self)
            if name == "position":
                owner.moved(self)

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
        # Partitions whose state changed, or that were assigned or revoked, since the fetcher
        # last took them; and the indexes of partitions waiting for a reset or a validation.
        self._changed: set[TopicPartition] = set()
        self._resets: set[TopicPartition] = set()
        self._awaiting: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        # Partitions whose position moved since the commit bookkeeping last took them.
        self._moved: set[TopicPartition] = set()

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        new = {TopicPartition(*tp) for tp in tps}
        old = self._parts
        parts: dict[TopicPartition, PartitionState] = {}
        for tp in sorted(new):
            st = old.get(tp)
            if st is None:
                st = PartitionState()
                st.tp = tp
                st.owner = self
                self.changed(st)
            parts[tp] = st
        gone = [tp for tp in old if tp not in new]
        for tp in gone:
            old[tp].owner = None
        self._parts = parts
        self._changed.update(gone)
        self._resets.difference_update(gone)
        self._awaiting.difference_update(gone)
        self._paused.difference_update(gone)

    def changed(self, st: PartitionState) -> None:
        """``st`` (one of ours) changed: note it for the fetcher, keep the indexes."""
        tp = st.tp
        if tp is None:
            return
        self._changed.add(tp)
        if st.reset is not None:
            self._resets.add(tp)
        else:
            self._resets.discard(tp)
        if st.awaiting_validation and st.position is not None and st.reset is None:
            self._awaiting.add(tp)
        else:
            self._awaiting.discard(tp)
        if st.paused:
            self._paused.add(tp)
        else:
            self._paused.discard(tp)

    def moved(self, st: PartitionState) -> None:
        if st.tp is not None:
            self._moved.add(st.tp)

    def take_moved(self) -> set[TopicPartition]:
        """The partitions whose position moved since the last call (what a commit may need)."""
        out, self._moved = self._moved, set()
        return out

    def take_changed(self) -> set[TopicPartition]:
        """The partitions changed (or assigned, or revoked) since the last call."""
        out, self._changed = self._changed, set()
        return out

    def resets(self) -> list[TopicPartition]:
        """Partitions whose position must be looked up (or is unknowable)."""
        return list(self._resets)

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
        return set(self._paused)

    def fetch_until(self, tp: TopicPartition, offset: int | None) -> None:
        self.state(TopicPartition(*tp)).fetch_until = offset

    def awaiting_validation(self) -> list[TopicPartition]:
        return list(self._awaiting)

    def size(self) -> int:
        return len(self._parts)

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}
