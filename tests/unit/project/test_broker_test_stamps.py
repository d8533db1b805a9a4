"""Tests and documentation examples that write to a broker stamp their records within the
broker's retention.

A record stamped further back than ``retention.ms`` (7 days by default) is deleted by the
broker's next retention check (30 s after a start, then every 5 min), so a consumer that starts
after it finds the log beginning past the record: a test that reads it back passes or fails by
when the check ran (a red CI on Kafka 3.9.2 came from a 2023 stamp). Stamp with
``fakes.stamps.RECENT_MS`` or the current time instead. The codec-only interop tests never reach
a broker and may use any stamp.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NOT_TO_A_BROKER = {"test_codec_interop.py"}
# An integer literal of 13+ digits (underscores allowed): epoch milliseconds since 2001.
LITERAL = re.compile(r"(?<![\w.])(1[\d_]{12,20})(?![\w.])")
WEEK_MS = 7 * 86_400_000


def _files() -> list[Path]:
    found = [
        p
        for folder in ("tests/integration", "tests/interop", "tests/spark_diff", "tests/fakes")
        for p in sorted((ROOT / folder).glob("*.py"))
        if p.name not in NOT_TO_A_BROKER
    ]
    return [*found, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]


def stale_stamps(text: str, now_ms: float) -> list[tuple[int, str]]:
    """(line number, line) of each epoch-ms literal older than a week before ``now_ms``."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in LITERAL.finditer(line):
            value = int(m.group(1).replace("_", ""))
            if 1_000_000_000_000 <= value < now_ms - WEEK_MS:
                out.append((n, line.strip()))
    return out


def test_the_check_finds_a_stale_stamp() -> None:
    now = time.time() * 1000
    old = "p.send(topic, b'v', timestamp_ms=1_700_000_000_000 + i)\nT = 1650000000000\n"
    assert [n for n, _ in stale_stamps(old, now)] == [1, 2]
    recent = f"ts = {int(now) - 3_600_000}\nfar = 4_000_000_000_000\nn = 1_000_000\n"
    assert stale_stamps(recent, now) == []


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_record_is_stamped_older_than_retention(path: Path) -> None:
    stale = stale_stamps(path.read_text(encoding="utf-8"), time.time() * 1000)
    assert not stale, f"{path.relative_to(ROOT)}: stamps older than a week: {stale}"
