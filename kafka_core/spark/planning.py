"""Offset ranges for Spark tasks: resolving start/end specs, splitting, admission control.

Pure functions over plain dicts, so the rules Spark users rely on (how ``minPartitions`` splits
a skewed partition, how ``maxOffsetsPerTrigger`` is shared out by lag, which gaps count as data
loss) are tested without a broker or a Spark session.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaConfigError
from kafka_core.spark import loss
from kafka_core.spark.options import EARLIEST, LATEST, OffsetSpec

__all__ = [
    "DataLossError",
    "OffsetRange",
    "check_specs",
    "from_json",
    "pack_ranges",
    "rate_limit",
    "resolve",
    "split_ranges",
    "to_json",
]


class DataLossError(KafkaConfigError):
    """Offsets that should be readable are not (aged out, topic deleted or recreated)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition: one Spark task's work."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON: ``{"topic": {"0": 23}}`` (keys are strings after a JSON round trip)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


@dataclass(frozen=True)
class OffsetLookups:
    """What resolving a spec needs from Kafka (the driver passes its offset reader's methods)."""

    earliest: Callable[[list[TopicPartition]], dict[TopicPartition, int]]
    latest: Callable[[list[TopicPartition]], dict[TopicPartition, int]]
    # offset of the first record with timestamp >= ts per partition; None where there is none
    for_times: Callable[[dict[TopicPartition, int]], dict[TopicPartition, int | None]]


def _per_partition(
    spec: OffsetSpec, tps: list[TopicPartition], name: str, what: str
) -> dict[TopicPartition, int]:
    """A JSON spec's number for each partition read; every one must be given, as in Spark."""
    given = {TopicPartition(t, p): v for t, ps in spec.offsets.items() for p, v in ps.items()}
    missing = sorted(set(tps) - set(given))
    if missing:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
        raise KafkaConfigError(f"option {name!r} does not give {what} for every partition: missing {names}")
    extra = sorted(set(given) - set(tps))
    if extra:  # as Spark: the partitions given must be exactly those read
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in extra)
        raise KafkaConfigError(
            f"option {name!r} gives {what} for partitions that are not read: {names} "
            f"(read: {', '.join(f'{tp.topic}-{tp.partition}' for tp in sorted(tps))})"
        )
    return {tp: given[tp] for tp in tps}


def check_specs(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """A batch read's start and end, before any lookup (as Spark checks them when the DataFrame is
    made): per-partition offsets (or timestamps) on both sides name the same partitions, and no
    start is after its end (-2/-1 are not compared)."""
    for kind, what, names in (
        ("offsets", "offset", ("startingOffsets", "endingOffsets")),
        ("timestamps", "timestamp", ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp")),
    ):
        if starting.kind != kind or ending.kind != kind:
            continue
        start = {TopicPartition(t, p): v for t, ps in starting.offsets.items() for p, v in ps.items()}
        end = {TopicPartition(t, p): v for t, ps in ending.offsets.items() for p, v in ps.items()}
        if set(start) != set(end):
            raise KafkaConfigError(
                f"options {names[0]!r} and {names[1]!r} must name the same partitions: "
                f"{_names(start)} against {_names(end)}"
            )
        for tp in sorted(start):
            if start[tp] > end[tp] >= 0:
                raise KafkaConfigError(
                    f"option {names[0]!r} gives {tp.topic}-{tp.partition} the start {what} {start[tp]}, "
                    f"after the end {what} {end[tp]} that {names[1]!r} gives it"
                )


def _names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps)) or "none"


def resolve(
    spec: OffsetSpec,
    tps: list[TopicPartition],
    lookups: OffsetLookups,
    *,
    starting: bool,
    strategy: str = "error",
    name: str = "startingOffsets",
) -> dict[TopicPartition, int]:
    """Concrete offsets for every partition in ``tps`` (-2/-1 turned into real offsets)."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return lookups.earliest(tps)
    if spec.kind == "latest":
        return lookups.latest(tps)
    if spec.kind == "offsets":
        out = _per_partition(spec, tps, name, "an offset")
        earliest = [tp for tp, o in out.items() if o == EARLIEST]
        latest = [tp for tp, o in out.items() if o == LATEST]
        if earliest:
            out.update(lookups.earliest(earliest))
        if latest:
            out.update(lookups.latest(latest))
        return out
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        wanted = dict.fromkeys(tps, spec.timestamp)
    else:  # startingOffsetsByTimestamp / endingOffsetsByTimestamp
        wanted = _per_partition(spec, tps, name.replace("Offsets", "OffsetsByTimestamp"), "a timestamp")
    found = lookups.for_times(wanted)
    out = {}
    none_found = [tp for tp in tps if found.get(tp) is None]
    if none_found and starting and strategy == "error":
        names = ", ".join(f"{tp.topic}-{tp.partition} (timestamp {wanted[tp]})" for tp in none_found)
        raise KafkaConfigError(
            f"no record at or after the given timestamp in {names}; set "
            "'startingOffsetsByTimestampStrategy' to 'latest' to start at the end of such partitions"
        )
    at_end = lookups.latest(none_found) if none_found else {}
    for tp in tps:
        offset = found.get(tp)
        out[tp] = offset if offset is not None else at_end[tp]
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` contiguous pieces of near-equal size (the last absorbs the rounding)."""
    out = []
    remaining = r.size
    start = r.start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def _part_count(size: int, total: int, parts: int) -> int:
    """Spark's share of ``parts`` for a range: Scala's ``math.round`` (half up), at least one."""
    return max(math.floor(size / total * parts + 0.5), 1) if total > 0 else 1


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None,
    max_records: int | None,
    *,
    keep_empty: bool = False,
) -> list[OffsetRange]:
    """Spark's rule (its KafkaOffsetRangeCalculator): empty ranges dropped;
    ``maxRecordsPerPartition`` caps each task; then, while there are fewer tasks than
    ``minPartitions``, big ranges are cut in proportion to their size, the ranges that would
    get one piece anyway left whole and out of the sum.

    ``keep_empty``: a batch read that needs no cutting (no more ``minPartitions`` than
    partitions, no partition over ``maxRecordsPerPartition``) plans one task per partition, empty
    ones included, as Spark's batch relation does; streaming always drops them, as Spark does."""
    ranges = list(ranges)
    if keep_empty and not (
        (min_partitions is not None and min_partitions > len(ranges))
        or (max_records is not None and any(r.size > max_records for r in ranges))
    ):
        return ranges
    nonempty = [r for r in ranges if r.size > 0]
    if max_records is None and (min_partitions is None or len(nonempty) >= min_partitions):
        return nonempty
    divided = nonempty
    if max_records is not None:
        divided = [
            piece for r in nonempty for piece in _divide(r, math.ceil(r.size / max_records)) if piece.size > 0
        ]
    if min_partitions is not None and len(divided) < min_partitions:
        total = sum(r.size for r in divided)
        whole = [r for r in divided if _part_count(r.size, total, min_partitions) == 1]
        whole_tps = {r.tp for r in whole}
        split_total = total - sum(r.size for r in whole)
        split_parts = max(min_partitions - len(whole), 1)
        divided = [
            piece
            for r in divided
            for piece in _divide(r, 1 if r.tp in whole_tps else _part_count(r.size, split_total, split_parts))
            if piece.size > 0
        ]
    return divided


def pack_ranges(
    ranges: Iterable[OffsetRange], min_records: int | None, max_records: int | None = None
) -> list[tuple[OffsetRange, ...]]:
    """Ranges grouped into tasks: a range of at least ``min_records`` records is a task alone;
    smaller ones, in the order given, share a task that closes once it holds ``min_records``
    (or before it would pass ``max_records``). None or 1: one task per range."""
    if min_records is None or min_records <= 1:
        return [(r,) for r in ranges]
    tasks: list[tuple[OffsetRange, ...]] = []
    group: list[OffsetRange] = []
    held = 0
    for r in ranges:
        if r.size >= min_records:
            tasks.append((r,))
            continue
        if group and max_records is not None and held + r.size > max_records:
            tasks.append(tuple(group))
            group, held = [], 0
        group.append(r)
        held += r.size
        if held >= min_records:
            tasks.append(tuple(group))
            group, held = [], 0
    if group:
        tasks.append(tuple(group))
    return tasks


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets that admit at most about ``limit`` records, shared out by each partition's lag
    (a partition with a fraction below one record still gets one, as in Spark)."""
    lags = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = limit * (lags[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end)
    return out


def check_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
    on_loss: Callable[[str], None],
) -> list[OffsetRange]:
    """Ranges from resolved offsets (every partition of ``end`` has a start); an end before its
    start means offsets went backwards (a recreated topic, or data deleted): loss is reported per
    ``failOnDataLoss``."""
    ranges = []
    for tp, stop in sorted(end.items()):
        begin = start[tp]
        if stop < begin:
            message = loss.loss_message(
                tp.topic,
                tp.partition,
                loss.lost_offsets(begin, None),
                loss.backwards(begin, stop),
                fail=fail_on_data_loss,
            )
            if fail_on_data_loss:
                raise DataLossError(message)
            on_loss(message)
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, stop))
    return ranges
