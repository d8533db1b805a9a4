"""The KIP-714 push bench's figures without a broker: the paired derivation, the percentages and
the table (bench/bench_telemetry_push.py).

    pytest bench/test_telemetry_push_report.py       # under a second
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.bench_telemetry_push import accepted_pushes, percent, summarize, table

OK = "ok"


def run(
    client: str, push: bool, round_no: int, cpu_s: float, pushes: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "client": client,
        "push": push,
        "round": round_no,
        "status": OK,
        "wall_s": 10.0,
        "cpu_s": cpu_s,
        "pushes": pushes,
        "push_work_ms": 0.5,
        **extra,
    }


def runs() -> list[dict[str, Any]]:
    """Three rounds of the producer: the load costs 0.2 s, 0.3 s, 0.25 s of CPU over 10 s, and
    20 pushes cost 2 ms each on top. The consumer's second round failed."""
    out = []
    for round_no, base in enumerate((0.2, 0.3, 0.25)):
        out.append(run("producer", False, round_no, base))
        out.append(run("producer", True, round_no, base + 20 * 0.002, pushes=20))
    out.append(run("consumer", False, 0, 0.1))
    out.append(run("consumer", True, 0, 0.1 + 10 * 0.003, pushes=10))
    out.append(run("consumer", False, 1, 0.1))
    out.append({**run("consumer", True, 1, 9.9), "status": "error"})
    return out


def test_per_push_cost_and_shares_come_from_each_rounds_pair() -> None:
    rows = {r["client"]: r for r in summarize(runs(), interval_ms=500, default_ms=300_000)}
    producer = rows["producer"]
    assert producer["pairs"] == 3
    assert producer["per_push_ms"] == pytest.approx(2.0)
    assert producer["per_push_ms_range"] == pytest.approx([2.0, 2.0])
    assert producer["extra_share"] == pytest.approx(0.004)  # 40 ms over 10 s
    assert producer["off_share"] == pytest.approx(0.025)
    assert producer["default_share"] == pytest.approx(0.002 / 300)
    assert producer["interval_share_from_per_push"] == pytest.approx(0.004)  # 2 ms every 0.5 s
    assert producer["push_work_default_share"] == pytest.approx(0.0005 / 300)
    consumer = rows["consumer"]
    assert consumer["pairs"] == 1  # the failed run drops its round
    assert consumer["per_push_ms"] == pytest.approx(3.0)


def test_per_push_scales_off_to_the_on_windows_length() -> None:
    off = run("producer", False, 0, 0.2)
    on = {**run("producer", True, 0, 0.22 + 0.01, pushes=5), "wall_s": 11.0}  # 1 s longer: 0.02 s more load
    (row,) = summarize([off, on], interval_ms=1000, default_ms=300_000)
    assert row["per_push_ms"] == pytest.approx(2.0)


def test_no_pushes_leaves_the_per_push_figures_empty() -> None:
    (row,) = summarize([run("producer", False, 0, 0.2), run("producer", True, 0, 0.2)], 500, 300_000)
    assert math.isnan(row["per_push_ms"]) and row["per_push_ms_range"] == []
    assert percent(row["default_share"]) == "-"


def test_percent_keeps_three_significant_digits() -> None:
    assert percent(0.021) == "2.10%"
    assert percent(0.002 / 300) == "0.000667%"
    assert percent(-0.0001) == "-0.0100%"


def test_table_has_a_line_per_client() -> None:
    rows = summarize(runs(), interval_ms=500, default_ms=300_000)
    lines = table(rows, 500, 300_000)
    assert "extra CPU at 500 ms" in lines[0] and "share at 300 s" in lines[0]
    assert lines[1].startswith("producer") and "2.00 ms" in lines[1] and "0.000667%" in lines[1]
    assert "2.00..2.00" in lines[1]
    assert lines[2].startswith("consumer") and "3.00 ms" in lines[2]


def test_accepted_pushes_count_responses_without_error() -> None:
    snap = {"network": {"requests": {"PUSH_TELEMETRY": {1: {"count": 7, "errors": 1}, 2: {"count": 3}}}}}
    assert accepted_pushes(snap) == 9
    assert accepted_pushes({"network": {"requests": {}}}) == 0
