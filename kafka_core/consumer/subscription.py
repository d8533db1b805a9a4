"""Per-partition consuming state: position, pause flag, reset need, high watermark."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.policies import OffsetReset


@dataclass
class PartitionState:
    position: int | None = None  # offset of the next record to hand to the application
    paused: bool = False
    reset: OffsetReset | None = None  # set when the position must be looked up (or is unknowable)
    high_watermark: int = -1  # of the last Fetch answer: lag in metrics() and lag()
    epoch: int = 0  # bumped by seeks and resets: fetches sent before are stale

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused and self.reset is None


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

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.state(tp)
        st.position = offset
        st.reset = None
        st.epoch += 1

    def request_reset(self, tp: TopicPartition, policy: OffsetReset) -> None:
        st = self.state(tp)
        st.reset = policy
        st.epoch += 1

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

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}
