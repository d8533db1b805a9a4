"""Small micro-batches beside Spark's connector, from results.json's ``micro_batches`` section
(bench/bench_spark_micro_batches.py): the table for RESULTS.md and the block docs/spark.md quotes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import fmt_ratio, markdown_table

METHODS = ("kafka_core", "kafka_core-per-partition", "kafka")
CONNECTOR_VERSION = "4.2.0"
MICRO_BATCHES_TITLE = "Small micro-batches beside Spark's connector"


@dataclass
class Run:
    method: str
    round: int
    partitions: int
    records: int
    batches: int
    first_s: float
    median_s: float  # the micro-batches after the first
    whole_s: float


def table(runs: Sequence[Run]) -> str:
    return markdown_table(
        (
            "partitions",
            "round",
            "method",
            "micro-batches",
            "first (s)",
            "each after (median, s)",
            "whole (s)",
        ),
        [
            (
                f"{r.partitions:,}",
                str(r.round),
                r.method,
                str(r.batches),
                f"{r.first_s:.2f}",
                f"{r.median_s:.3f}",
                f"{r.whole_s:.1f}",
            )
            for r in runs
        ],
    )


def micro_batches_block(section: dict[str, Any] | None) -> str:
    """docs/spark.md's table: per topic size, each method's last round, and the connector's time
    per micro-batch over kafka_core's (above 1: kafka_core's micro-batches are faster)."""
    if not section or not section.get("runs"):
        return "No figures: run `python -m bench.bench_spark_micro_batches --save`."
    runs = [Run(**r) for r in section["runs"]]
    last: dict[tuple[int, str], Run] = {}
    for r in runs:
        if r.round >= last.get((r.partitions, r.method), r).round:
            last[(r.partitions, r.method)] = r
    sizes = sorted({r.partitions for r in runs})
    rows = []
    for size in sizes:
        theirs = last.get((size, "kafka"))
        for method in METHODS:
            run = last.get((size, method))
            if run is None:
                continue
            ratio = "-" if theirs is None or method == "kafka" else fmt_ratio(theirs.median_s, run.median_s)
            rows.append(
                (
                    f"{size:,}",
                    method,
                    f"{run.first_s:.2f}",
                    f"{run.median_s:.3f}",
                    f"{run.whole_s:.1f}",
                    ratio,
                )
            )
    head = (
        f"`python -m bench.bench_spark_micro_batches`: topics of {', '.join(f'{p:,}' for p in sizes)} "
        "partitions, each micro-batch a few records of every partition (10 each on a narrow topic, 3 on a wide "
        f"one), `Trigger.AvailableNow`, a count per micro-batch; pyspark {section.get('pyspark', '?')}, "
        f"Spark's connector {CONNECTOR_VERSION}, local[2], broker {section.get('broker', '?')}. Seconds; the ratio "
        "is the connector's time per micro-batch over the method's (the last round of each)."
    )
    table_text = markdown_table(
        ("partitions", "method", "first micro-batch", "each after (median)", "whole query", "vs connector"),
        rows,
    )
    foot = (
        f"_Measured {section.get('date', '?')} on {section.get('machine', {}).get('nproc', '?')} cores, load average "
        f"{section.get('load', '?')} before, {section.get('load_after', '?')} after._"
    )
    return "\n\n".join((head, table_text, foot))


def micro_batches_lines(section: dict[str, Any]) -> list[str]:
    """RESULTS.md's section: the docs' table, then every round."""
    runs = [Run(**r) for r in section.get("runs", [])]
    return ["", micro_batches_block(section), *(["", table(runs)] if runs else [])]
