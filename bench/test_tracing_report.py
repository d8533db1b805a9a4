"""The tracing section of run_all and RESULTS.md without a broker: the figures' summary, the table,
and a run of that section alone keeping the others' figures.

    pytest bench/test_tracing_report.py       # under a second
"""

from __future__ import annotations

from typing import Any

from bench import report
from bench.bench_tracing import summarize
from bench.run_all import merge_sections
from bench.tracing_report import TRACING_TITLE


def per_round() -> list[dict[str, Any]]:
    """Two rounds: tracing costs kafka_core 10% and confluent-kafka 20% on every case."""
    out = []
    for client, base in (("kafka_core", [1000.0, 800.0]), ("confluent-kafka", [500.0, 400.0])):
        cost = 0.9 if client == "kafka_core" else 0.8
        for case in ("send", "poll", "per-record"):
            out.append({"client": client, "case": case, "tracing": False, "rates": base})
            out.append({"client": client, "case": case, "tracing": True, "rates": [r * cost for r in base]})
    return out


def test_summary_medians_and_paired_ratios() -> None:
    rows = {(r["client"], r["case"]): r for r in summarize(per_round())}
    ours = rows[("kafka_core", "send")]
    assert ours["off"] == 900.0 and round(ours["on"], 6) == 810.0
    assert round(ours["on_over_off"], 6) == 0.9
    assert round(rows[("confluent-kafka", "poll")]["on_over_off"], 6) == 0.8
    versus = rows[("kafka_core/confluent-kafka", "per-record")]
    assert round(versus["off"], 6) == 2.0 and round(versus["on"], 6) == 2.25


def section(**extra: Any) -> dict[str, Any]:
    return {
        "records": 50_000,
        "size": 100,
        "rounds": 2,
        "rows": summarize(per_round()),
        "date": "2026-12-02 11:40 UTC",
        "load": "4.00, 3.00, 2.00",
        "load_after": "5.00, 4.00, 3.00",
        "broker": "Tansu description",
        **extra,
    }


def test_results_md_has_the_tracing_table() -> None:
    text = report.render({"sections": {"tracing": section()}})
    assert f"## {TRACING_TITLE}" in text
    assert "_Tansu description: measured 2026-12-02 11:40 UTC, load average 4.00, 3.00, 2.00 before" in text
    assert "| kafka_core | send | 900 | 810 | 0.90 |" in text
    assert "| kafka_core/confluent-kafka | per-record | 2.00x | 2.25x | - |" in text
    failed = report.render({"sections": {"tracing": section(rows=[], failed="RuntimeError: no broker")}})
    assert "Failed: RuntimeError: no broker" in failed


def test_a_tracing_run_keeps_the_other_sections() -> None:
    previous = {"wide": {"w": 1}, "codec": {"c": 2}, "tracing": {"old": True}}
    merged = merge_sections(previous, {"tracing": section()})
    assert merged["wide"] == {"w": 1} and merged["codec"] == {"c": 2}
    assert merged["tracing"]["records"] == 50_000 and "old" not in merged["tracing"]
