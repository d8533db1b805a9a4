"""Filter pushdown for batch reads: Spark's filters on ``topic``, ``partition``, ``offset`` and
``timestamp`` turned into the offset ranges the tasks read (Spark 4.1+ ``pushFilters``, with
``spark.sql.python.filterPushdown.enabled``).

What each column allows:

- ``topic`` and ``partition``: a task reads one whole partition, so any filter on them is
  decided per partition on the driver, exactly; Spark is told they are handled.
- ``offset``: equality, ranges, ``IN`` and their negations are a set of offset intervals cut out
  of each partition's range, exactly; handled (unless so many intervals that one span is read
  instead, and Spark checks them).
- ``timestamp``: only a lower bound (``>``, ``>=``, ``=``, ``IN``) moves a start, through
  ListOffsets by time: the broker answers the first offset whose record has a timestamp at or
  after the bound, and no record before it has one. Records after it may be older (producers set
  CreateTime), so Spark still checks every timestamp filter; an upper bound cannot move an end.

Pure functions over pyspark's ``Filter`` dataclasses (picklable: the reader carries them from
``pushFilters`` to ``partitions``); the lookups are the driver's.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time imported where used: the source module loads no network stack
    from kafka_core.client.metadata import TopicPartition
    from kafka_core.spark.planning import OffsetRange

__all__ = ["INF", "Pushdown", "in_pushdown_planner", "narrow", "push"]

INF = 1 << 63
# Past this many disjoint offset intervals (a long IN list of scattered offsets) one span per
# partition is read instead, and Spark checks the offset filters itself.
MAX_INTERVALS = 256
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"

Intervals = tuple[tuple[int, int], ...]  # disjoint, sorted [lo, hi)
ALL: Intervals = ((-INF, INF),)


@dataclass(frozen=True)
class Pushdown:
    """What a batch read's filters allow it to skip (picklable; empty: nothing pushed)."""

    partition_filters: tuple[Any, ...] = ()  # on topic/partition, decided per partition
    offsets: Intervals = ALL  # the offsets every partition keeps
    since_ms: int | None = None  # no record before the first with timestamp >= this is read
    pushed: tuple[str, ...] = ()  # the filters used, as text (for the driver's log)

    @property
    def empty(self) -> bool:
        return not self.partition_filters and self.offsets == ALL and self.since_ms is None

    def keeps(self, tp: TopicPartition) -> bool:
        """Whether a partition can hold a row the filters keep."""
        return all(_holds(f, {"topic": tp.topic, "partition": tp.partition}) for f in self.partition_filters)


def in_pushdown_planner() -> bool:
    """Whether Spark is planning this read in its filter-pushdown worker. Spark 4.1+ refuses a
    reader that implements ``pushFilters`` in its plain planning worker, which it uses whenever
    ``spark.sql.python.filterPushdown.enabled`` is off (the default) or no filter could be sent:
    the data source hands out its pushdown reader only when called from the pushdown worker (the
    module Spark runs it in, found on the call stack), the plain reader otherwise. A renamed
    worker module only turns pushdown off: the plain reader's results are the same."""
    frame = sys._getframe(1)
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        name = getattr(spec, "name", None) or frame.f_globals.get("__name__")
        if name == _PUSHDOWN_PLANNER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# -- reading the filters -------------------------------------------------------------------------


def _column(f: Any) -> str | None:
    attribute = getattr(f, "attribute", None)
    if attribute is None and type(f).__name__ == "Not":
        return _column(f.child)
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _values(f: Any) -> tuple[Any, ...] | None:
    """The literal(s) of a comparison filter; None for a filter without one (IS NULL)."""
    kind = type(f).__name__
    if kind == "In":
        return tuple(f.value)
    if kind in ("IsNull", "IsNotNull"):
        return None
    return (f.value,)


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "topic": lambda v: isinstance(v, str),
    "partition": _is_int,
    "offset": _is_int,
}
_KINDS = {
    "EqualTo",
    "EqualNullSafe",
    "GreaterThan",
    "GreaterThanOrEqual",
    "LessThan",
    "LessThanOrEqual",
    "In",
    "IsNull",
    "IsNotNull",
    "Not",
    "StringStartsWith",
    "StringEndsWith",
    "StringContains",
}


def _decidable(f: Any, column: str) -> bool:
    """A filter on a never-null column of a plain type whose every literal has that type (no
    NULL literal: ``NOT (x IN (1, NULL))`` keeps nothing, which evaluating it here would not)."""
    kind = type(f).__name__
    if kind not in _KINDS:
        return False
    if kind == "Not":
        return _decidable(f.child, column)
    if kind.startswith("String") and column != "topic":
        return False
    values = _values(f)
    return values is None or (bool(values) and all(_CHECKS[column](v) for v in values))


def _holds(f: Any, row: Mapping[str, Any]) -> bool:
    """``f`` on a row's never-null value (SQL's comparisons; strings compare as UTF-8 bytes,
    which is code point order, Python's)."""
    kind = type(f).__name__
    if kind == "Not":
        return not _holds(f.child, row)
    v = row[_column(f) or ""]
    if kind == "IsNull":
        return False
    if kind == "IsNotNull":
        return True
    if kind in ("EqualTo", "EqualNullSafe"):
        return bool(v == f.value)
    if kind == "GreaterThan":
        return bool(v > f.value)
    if kind == "GreaterThanOrEqual":
        return bool(v >= f.value)
    if kind == "LessThan":
        return bool(v < f.value)
    if kind == "LessThanOrEqual":
        return bool(v <= f.value)
    if kind == "In":
        return v in f.value
    if kind == "StringStartsWith":
        return bool(v.startswith(f.value))
    if kind == "StringEndsWith":
        return bool(v.endswith(f.value))
    if kind == "StringContains":
        return f.value in v
    raise AssertionError(kind)  # pragma: no cover - _decidable lets no other kind through


# -- offsets as interval sets --------------------------------------------------------------------


def _normal(spans: Iterable[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(s for s in spans if s[0] < s[1]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(spans: Intervals) -> Intervals:
    out = []
    at = -INF
    for lo, hi in spans:
        out.append((at, lo))
        at = hi
    out.append((at, INF))
    return _normal(out)


def intersect(a: Intervals, b: Intervals) -> Intervals:
    out = []
    for lo, hi in a:
        for lo2, hi2 in b:
            if lo2 >= hi:
                break
            out.append((max(lo, lo2), min(hi, hi2)))
    return _normal(out)


def _offset_intervals(f: Any) -> Intervals:
    kind = type(f).__name__
    if kind == "Not":
        return _complement(_offset_intervals(f.child))
    if kind == "IsNull":
        return ()
    if kind == "IsNotNull":
        return ALL
    if kind in ("EqualTo", "EqualNullSafe"):
        return ((f.value, f.value + 1),)
    if kind == "GreaterThan":
        return ((f.value + 1, INF),)
    if kind == "GreaterThanOrEqual":
        return ((f.value, INF),)
    if kind == "LessThan":
        return ((-INF, f.value),)
    if kind == "LessThanOrEqual":
        return ((-INF, f.value + 1),)
    if kind == "In":
        return _normal((v, v + 1) for v in f.value)
    raise AssertionError(kind)  # pragma: no cover - _decidable lets no other kind through


# -- timestamps: lower bounds only ---------------------------------------------------------------


def _micros(value: Any) -> int | None:
    """Microseconds since the epoch of an instant (Spark's TIMESTAMP literal, zone-aware)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def _since_ms(f: Any) -> int | None:
    """The smallest Kafka timestamp (ms) a row kept by ``f`` can have; None: no lower bound.
    Spark's timestamp column holds a record's milliseconds times 1000."""
    kind = type(f).__name__
    if kind == "In":
        found = [_micros(v) for v in f.value]
        if not found or any(m is None for m in found):
            return None
        least = min(m for m in found if m is not None)
        return -(-least // 1000)
    if kind not in ("EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual"):
        return None
    micros = _micros(f.value)
    if micros is None:
        return None
    if kind == "GreaterThan":
        return micros // 1000 + 1  # ms * 1000 > micros
    return -(-micros // 1000)  # ms * 1000 >= micros


# -- pushFilters ---------------------------------------------------------------------------------


def push(filters: Sequence[Any], columns: Iterable[str]) -> tuple[Pushdown, list[Any]]:
    """The pushdown of ``filters`` (their AND) on a read whose schema has ``columns``, and the
    filters Spark must still evaluate (each one of ``filters``, by reference, as Spark asks)."""
    have = set(columns)
    partition_filters: list[Any] = []
    offset_filters: list[Any] = []
    offsets = ALL
    since: int | None = None
    pushed: list[str] = []
    remaining: list[Any] = []
    for f in filters:
        column = _column(f)
        if column not in have:
            remaining.append(f)
        elif column in ("topic", "partition") and _decidable(f, column):
            partition_filters.append(f)
            pushed.append(repr(f))
        elif column == "offset" and _decidable(f, column):
            offsets = intersect(offsets, _offset_intervals(f))
            offset_filters.append(f)
            pushed.append(repr(f))
        elif column == "timestamp":
            bound = _since_ms(f)
            if bound is not None and bound > 0:  # ListOffsets reads a negative time as a special offset
                since = bound if since is None else max(since, bound)
                pushed.append(repr(f))
            remaining.append(f)  # records after the bound's offset may be older: Spark checks
        else:
            remaining.append(f)
    if len(offsets) > MAX_INTERVALS:
        offsets = ((offsets[0][0], offsets[-1][1]),)
        remaining.extend(offset_filters)
    pushdown = Pushdown(tuple(partition_filters), offsets, since, tuple(pushed))
    return pushdown, [f for f in filters if any(f is r for r in remaining)]


def narrow(
    ranges: Sequence[OffsetRange],
    pushdown: Pushdown,
    since: Mapping[TopicPartition, int | None] | None = None,
) -> list[OffsetRange]:
    """The pieces of ``ranges`` the pushed filters can keep rows from. ``since``: per partition,
    the first offset whose timestamp is at or after ``pushdown.since_ms`` (None where there is
    none: the partition has no such record), looked up after the ranges' ends were."""
    from kafka_core.spark.planning import OffsetRange

    out: list[OffsetRange] = []
    for r in ranges:
        start = r.start
        if since is not None and r.tp in since:
            first = since[r.tp]
            start = r.end if first is None else min(max(start, first), r.end)
        for lo, hi in intersect(((start, r.end),), pushdown.offsets):
            out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out
