"""``kafka-core topics watch TOPIC``: records/s produced per partition, refreshed by
:mod:`kafka_core.cli.watch`.

Each refresh is one Metadata request (the partitions and their leaders: partitions added while
watching show up) and one ListOffsets per leader for the end offsets; the produce rate is the
end offset's rate over the last refreshes (:mod:`kafka_core.cli.lagrates`). The busiest
partitions are shown first (``--top``), beside the topic's total.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kafka_core.cli.lagrates import Offsets, PartitionRates, RateWindow, format_rate, top_by, totals
from kafka_core.cli.output import EXIT_NOT_FOUND, CliError, Output, one_line, plain_table
from kafka_core.cli.watch import DEFAULT_INTERVAL, DEFAULT_TOP, TREND_WINDOW, run_watch
from kafka_core.client.metadata import TopicPartition

__all__ = ["TopicFrame", "TopicWatch", "topic_frame_json", "topic_frame_text", "watch_topic"]

MISSING = ("UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID")


@dataclass(frozen=True, slots=True)
class TopicReading:
    """The topic's partitions' leaders and end offsets (None where ListOffsets failed)."""

    leaders: dict[int, int]
    ends: dict[TopicPartition, int | None]


@dataclass(frozen=True, slots=True)
class TopicFrame:
    """What one refresh shows. ``error``: the refresh failed (the figures are absent)."""

    topic: str
    at: datetime
    refresh: int
    interval: float
    window_s: float
    partitions: int = 0
    produced_per_s: float | None = None
    rows: tuple[PartitionRates, ...] = ()
    leaders: dict[int, int] | None = None
    error: str | None = None


def read_topic(admin: Any, topic: str, timeout_ms: float) -> TopicReading:
    """Leaders from Metadata, then the end offsets; a topic that does not exist: exit 4."""
    res = admin.describe_topics([topic], timeout_ms=timeout_ms)[topic]
    if not res.ok:
        if getattr(res.error, "name", "") in MISSING:
            raise CliError(f"topic {topic!r} does not exist", EXIT_NOT_FOUND)
        raise res.error
    leaders = {p.partition: p.leader for p in res.value.partitions}
    tps = [TopicPartition(topic, p) for p in sorted(leaders)]
    listed = admin.list_offsets(dict.fromkeys(tps, "latest"), timeout_ms=timeout_ms) if tps else {}
    ends = {tp: listed[tp].value.offset if listed[tp].ok else None for tp in tps}
    return TopicReading(leaders, ends)


class TopicWatch:
    """The watch's state across refreshes: the rate window."""

    def __init__(self, topic: str, interval: float, top: int) -> None:
        self.topic = topic
        self.interval = interval
        self.top = top
        self.window = RateWindow(TREND_WINDOW)
        self.refreshes = 0

    def read(self, admin: Any, timeout_ms: float) -> TopicReading:
        return read_topic(admin, self.topic, timeout_ms)

    def frame(self, reading: TopicReading, at: float) -> TopicFrame:
        rows = self.window.add(at, {tp: Offsets(None, end, None) for tp, end in reading.ends.items()})
        return self._next(
            partitions=len(rows),
            produced_per_s=totals(rows).produced_per_s,
            rows=tuple(top_by(rows, self.top, lambda r: r.produced_per_s)),
            leaders=reading.leaders,
        )

    def failed(self, error: BaseException) -> TopicFrame:
        return self._next(error=one_line(error))

    def _next(self, **shown: Any) -> TopicFrame:
        self.refreshes += 1
        return TopicFrame(
            self.topic, datetime.now(UTC), self.refreshes, self.interval, self.window.seconds, **shown
        )

    def text(self, frame: TopicFrame) -> str:
        return topic_frame_text(frame)

    def json(self, frame: TopicFrame) -> dict[str, Any]:
        return topic_frame_json(frame)

    def rich(self, frame: TopicFrame) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        head, *rest = topic_frame_text(frame).split("\n", 2)[:2]
        parts: list[Any] = [Text(head, style="bold"), *(Text(line) for line in rest)]
        if frame.error is None and frame.rows:
            table = Table(header_style="bold")
            for name in COLUMNS:
                table.add_column(name, justify="right", no_wrap=True)
            for row in _cells(frame):
                table.add_row(*("-" if v is None else str(v) for v in row))
            parts.append(table)
        parts.append(Text("Ctrl-C to stop", style="dim"))
        return Group(*parts)

    def stopped(self) -> str:
        return ""


COLUMNS = ["partition", "leader", "end", "produced/s"]


def _cells(f: TopicFrame) -> list[list[Any]]:
    leaders = f.leaders or {}
    return [[r.partition, leaders.get(r.partition), r.end, format_rate(r.produced_per_s)] for r in f.rows]


def topic_frame_text(f: TopicFrame) -> str:
    """One refresh as plain text: the headline, the total, the table (no escape codes)."""
    head = f"{f.topic}  [{f.at:%H:%M:%S} UTC, every {f.interval:g} s]"
    if f.error is not None:
        return f"{head}\nrefresh failed: {f.error}"
    over = f"over the last {f.window_s:.0f} s" if f.window_s > 0 else "rates from the next refresh"
    shown = f"; top {len(f.rows)} by produce rate" if len(f.rows) < f.partitions else ""
    summary = f"{f.partitions:,} partitions; produced {format_rate(f.produced_per_s)}/s {over}{shown}"
    return "\n".join([head, summary, plain_table(COLUMNS, _cells(f), numeric=COLUMNS)])


def topic_frame_json(f: TopicFrame) -> dict[str, Any]:
    """One refresh for scripts: records/s, None where not measurable yet."""
    out: dict[str, Any] = {
        "topic": f.topic,
        "time": f.at.isoformat(timespec="seconds"),
        "refresh": f.refresh,
        "window_s": round(f.window_s, 3),
        "error": f.error,
    }
    if f.error is None:
        leaders = f.leaders or {}
        out["partition_count"] = f.partitions
        out["total"] = {"produced_per_s": f.produced_per_s}
        out["partitions"] = [
            {
                "partition": r.partition,
                "leader": leaders.get(r.partition),
                "end": r.end,
                "produced_per_s": r.produced_per_s,
            }
            for r in f.rows
        ]
    return out


def watch_topic(args: argparse.Namespace, out: Output) -> int:
    watch = TopicWatch(args.name, args.interval or DEFAULT_INTERVAL, args.top or DEFAULT_TOP)
    return run_watch(args, out, watch, "kafka-core topics watch")
