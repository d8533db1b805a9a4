"""The main job's figures beside Spark's connector, from results.json's ``main_job`` section
(bench/bench_main_job.py): the table for RESULTS.md and the block README.md and docs/spark.md
quote."""

from __future__ import annotations

import re
import statistics
from typing import Any

from bench.common import markdown_table

MAIN_JOB_TITLE = "The main job beside Spark's connector (issue 41)"
MAIN_JOB_TEXT = (
    "`python -m kafka_core.devtools.pipeline --compare`: {events:,} order events (JSON values, four "
    "headers) generated in Spark, written to Kafka, read back in batch (fingerprint, then aggregates), "
    'then as a stream of micro-batches into Parquet, and checked; the same job on `format("kafka_core")` '
    'and on `format("kafka")` ({connector}), {rounds} rounds alternating which goes first, on '
    "pyspark {pyspark}, Spark {master}, broker {broker}. Rates are rows/s, medians of the rounds; the "
    "ratio is kafka_core's median over the connector's; the whole job is the phases summed."
)
ROWS = (
    ("write", "write"),
    ("read", "batch read + fingerprint"),
    ("aggregates", "batch aggregates"),
    ("stream", "streaming micro-batches"),
    ("stream-check", "stream check"),
    ("whole", "whole job"),
)


def _seconds(section: dict[str, Any], fmt: str, key: str) -> list[float]:
    per_phase: dict[str, list[float]] = section.get("seconds", {}).get(fmt, {})
    if key == "whole":
        return [sum(times) for times in zip(*per_phase.values(), strict=True)]
    return list(per_phase.get(key, []))


def phase_rates(section: dict[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """Per phase: its key, title, kafka_core's median rows/s, the connector's, and their ratio."""
    rows = section.get("events", 0)
    out = []
    for key, title in ROWS:
        ours, theirs = _seconds(section, "kafka_core", key), _seconds(section, "kafka", key)
        if not ours or not theirs:
            continue
        ours_rate = statistics.median(rows / s for s in ours)
        theirs_rate = statistics.median(rows / s for s in theirs)
        out.append((key, title, ours_rate, theirs_rate, ours_rate / theirs_rate))
    return out


def _rate(value: float) -> str:
    return f"{value / 1000:,.1f}k"


def _target(section: dict[str, Any], key: str, ratio: float) -> str:
    target = section.get("targets", {}).get(key)
    if target is None:
        return "-"
    return f"{target:.1f}x {'met' if ratio >= target else 'not met'}"


def main_job_table(section: dict[str, Any]) -> str:
    """Each phase: rows/s by round and median for both formats, the ratio, the issue's target."""
    rows = []
    for key, title, ours, theirs, ratio in phase_rates(section):
        by_round = {
            fmt: ", ".join(_rate(section["events"] / s) for s in _seconds(section, fmt, key))
            for fmt in ("kafka_core", "kafka")
        }
        rows.append(
            [
                title,
                f"{_rate(ours)} ({by_round['kafka_core']})",
                f"{_rate(theirs)} ({by_round['kafka']})",
                f"{ratio:.2f}x",
                _target(section, key, ratio),
            ]
        )
    headers = ["phase", "kafka_core rows/s (rounds)", "connector rows/s (rounds)", "ratio", "target"]
    return markdown_table(headers, rows)


def _stamp(section: dict[str, Any]) -> str:
    machine = section.get("machine", {})
    return (
        f"_Measured {section.get('date', '?')} on {machine.get('nproc', '?')} cores "
        f"({machine.get('cpu', '?')}), load average {section.get('load', '?')} before, "
        f"{section.get('load_after', '?')} after; every check passed: "
        f"{'yes' if section.get('passed') else 'NO'}._"
    )


def _broker(label: str) -> str:
    """``127.0.0.1:23555 (embedded Apache Kafka)`` -> ``embedded Apache Kafka``: a port of the
    run's own says nothing to a reader."""
    match = re.fullmatch(r"\S+ \((embedded .*)\)", label)
    return match.group(1) if match else label


def _text(section: dict[str, Any]) -> str:
    keys = ("connector", "rounds", "pyspark", "master")
    return MAIN_JOB_TEXT.format(
        **{k: section.get(k, "?") for k in keys},
        events=section.get("events", 0),
        broker=_broker(str(section.get("broker", "?"))),
    )


def main_job_lines(section: dict[str, Any]) -> list[str]:
    """RESULTS.md's lines after the section title."""
    out = ["", _stamp(section), ""]
    if section.get("failed"):
        return [*out, f"Failed: {section['failed']}"]
    if not phase_rates(section):
        return [*out, "No figures."]
    return [*out, _text(section), "", main_job_table(section)]


def main_job_block(section: dict[str, Any] | None) -> str:
    """The block the guides quote: the table and where it came from."""
    if not section:
        return "_No figures yet: `python -m bench.bench_main_job --save`._"
    if section.get("failed"):
        return f"_The last run ({section.get('date', '?')}) failed: see bench/RESULTS.md._"
    if not phase_rates(section):
        return "_No figures in the last run: see bench/RESULTS.md._"
    return "\n".join([_text(section), "", main_job_table(section), "", _stamp(section)])
