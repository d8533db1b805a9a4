"""docs/img/groups-lag-watch.svg (issue 43), drawn by tools/render_watch_svg.py through the command's
own terminal view: what the picture shows, and that the committed one is what the renderer draws now."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from file_modules import load_file_module
from rich.terminal_theme import SVG_EXPORT_THEME

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "tools" / "render_watch_svg.py"

# What docs/cli.md ("Watching a group") and docs/metrics.md say the table shows.
HEADERS = ["topic", "partition", "committed", "end", "lag", "lag trend", "consumed/s", "produced/s"]


tool = load_file_module("render_watch_svg", TOOL)


@pytest.fixture(scope="module")
def svg(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("svg") / "watch.svg"
    text: str = tool.render(path)
    assert path.read_text(encoding="utf-8") == text
    return text


def plain(svg: str) -> str:
    """The SVG with its escapes read (rich writes each space as a no-break space, ``&#160;``)."""
    return html.unescape(svg).replace("\xa0", " ")


def cells(line: str) -> list[str]:
    """A table line's cells, between the box's verticals."""
    return [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]


def test_the_picture_shows_the_group_the_headers_and_the_partitions(svg: str) -> None:
    assert len(svg.encode()) < 60_000
    assert ">kafka-core groups lag billing --watch</text>" in plain(svg)  # the window's title
    lines = tool.svg_lines(svg)
    assert lines[0].startswith("billing: Stable, 3 members; rebalances seen 1  [11:42:07 UTC, every 2 s]")
    assert lines[1].startswith("total lag 8,364 (rising 78/s); consumed 5,996/s, produced 6,074/s")
    assert [cells(line) for line in lines if "┃" in line] == [HEADERS]
    rows = [cells(line) for line in lines if line.startswith("│")]
    assert len(rows) == 12  # every partition: fewer than --top's default
    assert rows[0] == ["orders", "2", "181220", "184902", "3682", "rising 42/s", "480", "522"]
    assert ["orders", "0", "179840", "180301", "461", "falling 3.0/s", "512", "509"] in rows
    assert [int(r[4]) for r in rows] == sorted((int(r[4]) for r in rows), reverse=True)  # most lag first
    assert lines[-1] == "Ctrl-C to stop"


def test_rising_lag_is_red_and_falling_green(svg: str) -> None:
    fills = dict(re.findall(r"\.(terminal-\d+-r\d+) \{ fill: (#[0-9a-f]{6})", svg))
    colour = {
        text.strip(): fills[cls]
        for cls, text in re.findall(r'<text class="([^"]+)"[^>]*>([^<]+)</text>', plain(svg))
        if cls in fills  # not the window's title
    }
    assert colour["rising 42/s"] == SVG_EXPORT_THEME.ansi_colors[1].hex  # red
    assert colour["falling 3.0/s"] == SVG_EXPORT_THEME.ansi_colors[2].hex  # green


def test_the_committed_picture_is_what_the_renderer_draws(svg: str) -> None:
    committed = tool.SVG_PATH.read_text(encoding="utf-8")
    assert tool.svg_lines(committed) == tool.svg_lines(svg), (
        "docs/img/groups-lag-watch.svg is stale: run `python tools/render_watch_svg.py`"
    )
