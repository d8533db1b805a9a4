"""``kafka-core groups lag GROUP --watch``: the group's lag, refreshed by :mod:`kafka_core.cli.watch`.

Each refresh reads the group once (:mod:`kafka_core.cli.grouplag`: the same few requests however
many partitions it has) and shows the partitions with the most lag (``--top``) beside the
totals: lag and its trend, records/s consumed and produced (:mod:`kafka_core.cli.lagrates`),
the state, members and rebalances seen.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kafka_core.cli.grouplag import GroupReading, read_group
from kafka_core.cli.lagrates import (
    Offsets,
    PartitionRates,
    RateWindow,
    RebalanceCounter,
    Totals,
    format_rate,
    top_by,
    totals,
    trend_text,
)
from kafka_core.cli.output import Output, one_line, plain_table, plural
from kafka_core.cli.watch import DEFAULT_INTERVAL, DEFAULT_TOP, TREND_WINDOW, run_watch

__all__ = ["Frame", "LagWatch", "frame_json", "frame_text", "watch_lag"]


@dataclass(frozen=True, slots=True)
class Frame:
    """What one refresh shows. ``error``: the refresh failed (the figures are absent)."""

    group_id: str
    at: datetime
    refresh: int
    interval: float
    window_s: float
    state: str | None = None
    members: int | None = None
    share: bool = False
    epoch: int | None = None
    rebalances: int = 0
    totals: Totals | None = None
    rows: tuple[PartitionRates, ...] = ()
    error: str | None = None


class LagWatch:
    """The watch's state across refreshes: the rate window and the rebalance count."""

    def __init__(self, group_id: str, interval: float, top: int) -> None:
        self.group_id = group_id
        self.interval = interval
        self.top = top
        self.window = RateWindow(TREND_WINDOW)
        self.rebalances = RebalanceCounter()
        self.refreshes = 0

    def frame(self, reading: GroupReading, at: float) -> Frame:
        """Take in a reading made at ``at`` (monotonic seconds) and return what to show."""
        offsets = {tp: Offsets(p.committed, p.end, p.lag) for tp, p in reading.lag.partitions.items()}
        rows = self.window.add(at, offsets)
        self.rebalances.observe(reading.state, reading.epoch, reading.assignment)
        return self._next(
            state=reading.state,
            members=reading.members,
            share=reading.share,
            epoch=reading.epoch,
            totals=totals(rows),
            rows=tuple(top_by(rows, self.top, lambda r: r.lag)),
        )

    def read(self, admin: Any, timeout_ms: float) -> GroupReading:
        return read_group(admin, self.group_id, timeout_ms=timeout_ms)

    def failed(self, error: BaseException) -> Frame:
        """A refresh that could not read the group: its error in place of the figures."""
        return self._next(error=one_line(error))

    def _next(self, **shown: Any) -> Frame:
        self.refreshes += 1
        return Frame(
            self.group_id,
            datetime.now(UTC),
            self.refreshes,
            self.interval,
            self.window.seconds,
            rebalances=self.rebalances.seen,
            **shown,
        )

    def text(self, frame: Frame) -> str:
        return frame_text(frame)

    def json(self, frame: Frame) -> dict[str, Any]:
        return frame_json(frame)

    def rich(self, frame: Frame) -> Any:
        return _rich_frame(frame)

    def stopped(self) -> str:
        return f", {plural(self.rebalances.seen, 'rebalance')} seen"


# -- rendering -------------------------------------------------------------------------------------

COLUMNS = ["topic", "partition", "committed", "end", "lag", "lag trend", "consumed/s", "produced/s"]
NUMERIC = ["partition", "committed", "start", "end", "lag", "consumed/s", "produced/s"]


def _headline(f: Frame) -> str:
    when = f"  [{f.at:%H:%M:%S} UTC, every {f.interval:g} s]"
    if f.error is not None:  # state and members unknown this time
        return f"{f.group_id}: rebalances seen {f.rebalances}{when}"
    members = plural(f.members, "member") if f.members is not None else "members unknown"
    epoch = f", epoch {f.epoch}" if f.epoch is not None else ""
    return f"{f.group_id}: {f.state or '-'}, {members}{epoch}; rebalances seen {f.rebalances}{when}"


def _summary(f: Frame) -> str:
    t = f.totals
    assert t is not None
    if t.partitions == 0:
        return "no committed offsets, so no lag to show"
    over = f"over the last {f.window_s:.0f} s" if f.window_s > 0 else "rates from the next refresh"
    shown = f"top {len(f.rows)} of {t.partitions:,} partitions by lag" if len(f.rows) < t.partitions else ""
    return "; ".join(
        part
        for part in (
            f"total lag {t.lag:,} ({trend_text(t.lag_per_s)})",
            f"consumed {format_rate(t.consumed_per_s)}/s, produced {format_rate(t.produced_per_s)}/s {over}",
            shown,
        )
        if part
    )


def _cells(f: Frame) -> tuple[list[str], list[list[Any]]]:
    columns = [("start" if f.share and c == "committed" else c) for c in COLUMNS]
    rows = [
        [
            r.topic,
            r.partition,
            r.committed,
            r.end,
            r.lag,
            trend_text(r.lag_per_s),
            format_rate(r.consumed_per_s),
            format_rate(r.produced_per_s),
        ]
        for r in f.rows
    ]
    return columns, rows


def frame_text(f: Frame) -> str:
    """One refresh as plain text: the headline, the totals, the table (no escape codes)."""
    if f.error is not None:
        return f"{_headline(f)}\nrefresh failed: {f.error}"
    lines = [_headline(f), _summary(f)]
    if f.rows:
        columns, rows = _cells(f)
        lines.append(plain_table(columns, rows, numeric=NUMERIC))
    return "\n".join(lines)


def frame_json(f: Frame) -> dict[str, Any]:
    """One refresh for scripts: rates in records/s, None where not measurable yet."""
    out: dict[str, Any] = {
        "group_id": f.group_id,
        "time": f.at.isoformat(timespec="seconds"),
        "refresh": f.refresh,
        "window_s": round(f.window_s, 3),
        "state": f.state,
        "members": f.members,
        "epoch": f.epoch,
        "rebalances": f.rebalances,
        "error": f.error,
    }
    if f.totals is not None:
        t = f.totals
        out["partition_count"] = t.partitions
        out["total"] = {
            "lag": t.lag,
            "lag_per_s": t.lag_per_s,
            "consumed_per_s": t.consumed_per_s,
            "produced_per_s": t.produced_per_s,
        }
        out["partitions"] = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed": r.committed,
                "end": r.end,
                "lag": r.lag,
                "lag_per_s": r.lag_per_s,
                "consumed_per_s": r.consumed_per_s,
                "produced_per_s": r.produced_per_s,
            }
            for r in f.rows
        ]
    return out


def _rich_frame(f: Frame) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if f.error is not None:
        return Group(Text(_headline(f)), Text(f"refresh failed: {f.error}", style="red"))
    parts: list[Any] = [Text(_headline(f), style="bold"), Text(_summary(f))]
    if f.rows:
        columns, rows = _cells(f)
        table = Table(header_style="bold")
        for name in columns:
            table.add_column(name, justify="right" if name in NUMERIC else "left", no_wrap=True)
        for row in rows:
            trend = str(row[5])
            style = "red" if trend.startswith("rising") else "green" if trend.startswith("falling") else ""
            cells = ["-" if v is None else str(v) for v in row]
            table.add_row(*cells[:5], Text(trend, style=style), *cells[6:])
        parts.append(table)
    parts.append(Text("Ctrl-C to stop", style="dim"))
    return Group(*parts)


def watch_lag(args: argparse.Namespace, out: Output) -> int:
    watch = LagWatch(args.group_id, args.interval or DEFAULT_INTERVAL, args.top or DEFAULT_TOP)
    return run_watch(args, out, watch, "kafka-core groups lag")
