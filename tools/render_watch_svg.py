"""Render docs/img/groups-lag-watch.svg: the terminal view of ``kafka-core groups lag GROUP --watch``.

docs/metrics.md shows the live view as a picture (issue 43). So that it is the command's own
rendering and not a drawing of it, the picture goes through the command's code path from the
group's readings on: :class:`~kafka_core.cli.groupwatch.LagWatch` takes six readings of a made-up
group two seconds apart (its rates, trends and rebalance count, as each refresh of the command),
and the last frame is shown by :mod:`kafka_core.cli.watch`'s terminal view (rich's Live) on a
recording console, which rich exports as SVG. Only the reading itself (the admin requests) is
replaced, and the clock, so the picture changes only when the rendering does.
``python tools/render_watch_svg.py [OUT.svg]``; tests/unit/devtools/test_render_watch_svg.py
fails when the committed picture no longer shows what the renderer draws.
"""

from __future__ import annotations

import dataclasses
import io
import re
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from kafka_core.admin.results import GroupLag, PartitionLag
from kafka_core.cli.grouplag import GroupReading
from kafka_core.cli.groupwatch import LagWatch
from kafka_core.cli.output import Output
from kafka_core.cli.watch import DEFAULT_INTERVAL, DEFAULT_TOP, TREND_WINDOW, live_view
from kafka_core.client.metadata import TopicPartition

REPO = Path(__file__).resolve().parents[1]
SVG_PATH = REPO / "docs" / "img" / "groups-lag-watch.svg"
GROUP = "billing"
TOPIC = "orders"
TITLE = f"kafka-core groups lag {GROUP} --watch"
WIDTH = 100  # terminal columns
HEIGHT = 30  # terminal rows: Live crops a view taller than the terminal
SHOWN_AT = datetime(2025, 6, 3, 11, 42, 7, tzinfo=UTC)  # the headline's clock, fixed

# Each partition at the last refresh: committed offset, end offset, consumed/s, produced/s.
# Lag trends: partitions 2, 6, 4 and 10 rising, 0 falling, the rest steady.
PARTITIONS: dict[int, tuple[int, int, int, int]] = {
    0: (179_840, 180_301, 512, 509),
    1: (183_007, 183_117, 498, 498),
    2: (181_220, 184_902, 480, 522),
    3: (182_455, 182_512, 505, 505),
    4: (180_990, 181_870, 490, 498),
    5: (182_310, 182_388, 507, 507),
    6: (179_702, 181_944, 471, 498),
    7: (183_560, 183_601, 515, 515),
    8: (181_114, 181_190, 502, 502),
    9: (180_402, 180_497, 496, 496),
    10: (182_876, 183_450, 509, 513),
    11: (181_733, 181_801, 511, 511),
}

# The group over the refreshes: two members, a third joins (one rebalance), then three.
STATES = ["Stable", "PreparingRebalance"] + ["Stable"] * (TREND_WINDOW - 1)


def _assignment(members: int) -> frozenset[object]:
    """Each member's id with its partitions, round robin, as a GroupReading fingerprints it."""
    return frozenset(
        (
            f"{GROUP}-worker-{m + 1}",
            frozenset(TopicPartition(TOPIC, p) for p in PARTITIONS if p % members == m),
        )
        for m in range(members)
    )


def readings() -> list[tuple[float, GroupReading]]:
    """The group's readings, oldest first, with their monotonic times: one per refresh, as
    ``read_group`` returns them, over the rates' whole window (the last is "now")."""
    out = []
    count = len(STATES)
    for i, state in enumerate(STATES):
        ago = (count - 1 - i) * DEFAULT_INTERVAL  # seconds before the last refresh
        members = 2 if i == 0 else 3
        lag = {}
        for p, (committed, end, consumed, produced) in PARTITIONS.items():
            then_committed, then_end = committed - round(consumed * ago), end - round(produced * ago)
            lag[TopicPartition(TOPIC, p)] = PartitionLag(
                TOPIC, p, then_committed, then_end, then_end - then_committed
            )
        reading = GroupReading(GROUP, state, members, False, None, _assignment(members), GroupLag(GROUP, lag))
        out.append((1000.0 + i * DEFAULT_INTERVAL, reading))
    return out


def render(path: Path = SVG_PATH) -> str:
    """Write the picture to ``path`` and return the SVG."""
    watch = LagWatch(GROUP, DEFAULT_INTERVAL, DEFAULT_TOP)  # the command's defaults (watch_lag)
    frame = None
    for at, reading in readings():
        frame = watch.frame(reading, at)
    assert frame is not None
    frame = dataclasses.replace(frame, at=SHOWN_AT)
    console = Console(
        file=io.StringIO(),
        width=WIDTH,
        height=HEIGHT,
        force_terminal=True,
        color_system="truecolor",
        highlight=False,  # as Output's console
        soft_wrap=False,
        record=True,
    )
    out = Output()
    out.out = console  # a terminal: live_view shows frames with rich's Live, as on a TTY
    with live_view(out, watch) as show:
        show(frame)
        # now, while Live shows the frame (on leaving, Live draws it once more)
        svg = console.export_svg(title=TITLE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg, encoding="utf-8")
    return svg


def svg_lines(svg: str) -> list[str]:
    """The terminal's lines as text, back from an SVG of rich's ``export_svg``: to compare two
    pictures by what they show, whichever rich version drew them."""
    root = ET.fromstring(svg)
    rows: dict[float, dict[int, str]] = {}
    for el in root.iter("{http://www.w3.org/2000/svg}text"):
        if not re.search(r"-line-\d+\)$", el.get("clip-path", "")) or not el.text:
            continue  # the window's title, not the terminal's text
        cell = float(el.get("textLength", "0")) / len(el.text)
        rows.setdefault(float(el.get("y", "0")), {})[round(float(el.get("x", "0")) / cell)] = el.text
    lines = []
    for _, runs in sorted(rows.items()):
        line = ""
        for column, text in sorted(runs.items()):
            line = line.ljust(column) + text
        lines.append(line.replace("\xa0", " ").rstrip())
    return lines


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else SVG_PATH
    svg = render(path)
    print(f"wrote {path} ({len(svg.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
