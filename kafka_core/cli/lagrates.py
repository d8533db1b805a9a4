"""The arithmetic of ``kafka-core groups lag --watch``: rates, trends and rebalances from the
group's successive readings (no I/O, so it is tested without a broker).

Rates compare a reading with the oldest one still in the window (the last ``window`` refreshes),
not with the one just before: a refresh that came late or early then moves the figure a little,
not by its whole gap. Consumed records/s is the committed offset's rate (what the group
committed, so it moves in steps of the consumers' commit interval); produced records/s is the end
offset's rate; the lag's trend is its change per second (above 0: rising, the group falls behind).
An offset that went back (the group's offsets reset, the topic deleted and created again) has no
rate until the window has moved past it: a negative "consumed" figure would be a lie.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kafka_core.client.metadata import TopicPartition

__all__ = [
    "REBALANCING",
    "Offsets",
    "PartitionRates",
    "RateWindow",
    "RebalanceCounter",
    "Totals",
    "format_rate",
    "top_by",
    "totals",
    "trend_text",
]

# States of a group between two assignments: classic (DescribeGroups) and KIP-848 (ConsumerGroupDescribe).
R = TypeVar("R")

REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


@dataclass(frozen=True, slots=True)
class Offsets:
    """One partition in one reading: None where it was not known (no commit, an error)."""

    committed: int | None
    end: int | None
    lag: int | None


@dataclass(frozen=True, slots=True)
class PartitionRates:
    """One partition's offsets now and their rates over the window (None: not measurable yet)."""

    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    lag_per_s: float | None
    consumed_per_s: float | None
    produced_per_s: float | None


@dataclass(frozen=True, slots=True)
class Totals:
    """The group's sums: rates over the partitions that have one (None when none has)."""

    partitions: int
    lag: int
    lag_per_s: float | None
    consumed_per_s: float | None
    produced_per_s: float | None


def _rate(now: int | None, then: int | None, seconds: float, *, signed: bool = False) -> float | None:
    if now is None or then is None or seconds <= 0:
        return None
    if not signed and now < then:  # an offset that went back: reset or a new log, no rate
        return None
    return (now - then) / seconds


class RateWindow:
    """The offsets of the last ``window`` + 1 readings; each new reading's rates are taken
    against the oldest of them that knew the partition (a partition new to the group gets its
    rates from its second reading on)."""

    def __init__(self, window: int = 5) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, not {window}")
        self._readings: deque[tuple[float, Mapping[TopicPartition, Offsets]]] = deque(maxlen=window + 1)

    @property
    def seconds(self) -> float:
        """The time the rates are taken over (0 before the second reading)."""
        if len(self._readings) < 2:
            return 0.0
        return self._readings[-1][0] - self._readings[0][0]

    def add(self, at: float, offsets: Mapping[TopicPartition, Offsets]) -> list[PartitionRates]:
        """Keep the reading taken at ``at`` (monotonic seconds) and return every partition's rates."""
        if self._readings and at <= self._readings[-1][0]:
            raise ValueError("readings must come in time order")
        self._readings.append((at, offsets))
        older = list(self._readings)[:-1]
        out = []
        for tp, now in offsets.items():
            then, seconds = None, 0.0
            for when, reading in older:  # oldest first: the widest span that has the partition
                then = reading.get(tp)
                if then is not None:
                    seconds = at - when
                    break
            out.append(
                PartitionRates(
                    tp.topic,
                    tp.partition,
                    now.committed,
                    now.end,
                    now.lag,
                    _rate(now.lag, then.lag, seconds, signed=True) if then else None,
                    _rate(now.committed, then.committed, seconds) if then else None,
                    _rate(now.end, then.end, seconds) if then else None,
                )
            )
        return out


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def totals(rows: list[PartitionRates]) -> Totals:
    return Totals(
        len(rows),
        sum(r.lag for r in rows if r.lag is not None),
        _sum(r.lag_per_s for r in rows),
        _sum(r.consumed_per_s for r in rows),
        _sum(r.produced_per_s for r in rows),
    )


def top_by(rows: Sequence[R], n: int | None, value: Callable[[R], float | None]) -> list[R]:
    """The ``n`` rows with the largest ``value`` (all with None), largest first, ties in the
    rows' order, rows without a value last. A partial sort: thousands of partitions, twenty shown."""

    def key(item: tuple[int, R]) -> tuple[bool, float, int]:
        v = value(item[1])
        return (v is None, -(v or 0), item[0])

    ranked = list(enumerate(rows))
    best = sorted(ranked, key=key) if n is None or n >= len(rows) else heapq.nsmallest(n, ranked, key=key)
    return [row for _, row in best]


def format_rate(value: float | None) -> str:
    """``-`` (unknown), ``0``, ``2.5``, ``1,234``: one decimal below 10, none above."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:,.1f}" if abs(value) < 10 else f"{value:,.0f}"


def trend_text(lag_per_s: float | None) -> str:
    """The lag's direction for people: ``rising 12/s``, ``falling 3.5/s``, ``steady``."""
    if lag_per_s is None:
        return "-"
    if abs(lag_per_s) < 0.05:  # below what one decimal shows
        return "steady"
    word = "rising" if lag_per_s > 0 else "falling"
    return f"{word} {format_rate(abs(lag_per_s))}/s"


class RebalanceCounter:
    """Rebalances seen while watching: the first reading is the baseline, not counted.

    A KIP-848 group counts each new group epoch (the broker bumps it for every change of
    members or subscriptions). A classic group counts each entry into PreparingRebalance or
    CompletingRebalance, and a settled assignment (Stable or Empty) that differs from the last
    settled one with no such state seen between (a rebalance that began and ended between two
    refreshes). A classic rebalance that ended with the same members and assignment between two
    refreshes is invisible to DescribeGroups, which does not give the generation.
    """

    def __init__(self) -> None:
        self.seen = 0
        self._started = False
        self._epoch: int | None = None
        self._settled: frozenset[object] | None = None
        self._rebalancing = False

    def observe(self, state: str | None, epoch: int | None, assignment: frozenset[object]) -> int:
        """One reading: the group's state, its epoch (KIP-848; None for classic) and its members'
        assignment (any hashable fingerprint); returns the rebalances seen so far."""
        first, self._started = not self._started, True
        if epoch is not None:
            if not first and self._epoch is not None and epoch != self._epoch:
                self.seen += 1
            self._epoch = epoch
            return self.seen
        if state in REBALANCING:
            if not first and not self._rebalancing:
                self.seen += 1
            self._rebalancing = True
        elif state in ("Stable", "Empty"):
            if not first and not self._rebalancing and assignment != self._settled:
                self.seen += 1
            self._rebalancing = False
            self._settled = assignment
        return self.seen
