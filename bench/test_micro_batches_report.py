"""The small micro-batches section of results.json without Spark or a broker: the guides' block
(each method's last round, the ratio against the connector) and RESULTS.md's section.

    pytest bench/test_micro_batches_report.py       # under a second
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench import docs_figures, report
from bench.micro_batches_report import MICRO_BATCHES_TITLE, Run, micro_batches_block


def section() -> dict[str, Any]:
    runs = [
        Run("kafka_core", 1, 4, 480, 12, 1.5, 0.300, 8.0),
        Run("kafka", 1, 4, 480, 12, 1.4, 0.090, 4.0),
        Run("kafka", 2, 4, 480, 12, 0.2, 0.080, 3.0),
        Run("kafka_core", 2, 4, 480, 12, 0.3, 0.160, 4.5),
        Run("kafka_core", 1, 1000, 12000, 4, 11.0, 3.0, 30.0),
        Run("kafka", 1, 1000, 12000, 4, 260.0, 6.0, 280.0),
    ]
    return {
        "date": "2026-12-04 23:00 UTC",
        "load": "2.00, 2.00, 2.00",
        "load_after": "2.50, 2.00, 2.00",
        "machine": {"nproc": "2"},
        "broker": "embedded Apache Kafka",
        "pyspark": "4.3.0",
        "runs": [asdict(r) for r in runs],
    }


def test_block_takes_each_methods_last_round_and_its_ratio() -> None:
    block = micro_batches_block(section())
    assert "| 4 | kafka_core | 0.30 | 0.160 | 4.5 | 0.50x |" in block  # round 2: 0.080 / 0.160
    assert "| 4 | kafka | 0.20 | 0.080 | 3.0 | - |" in block
    assert "| 1,000 | kafka_core | 11.00 | 3.000 | 30.0 | 2.00x |" in block
    assert "0.300" not in block  # round 1 of the narrow topic is in RESULTS.md only
    assert "topics of 4, 1,000 partitions" in block and "2026-12-04 23:00 UTC" in block


def test_no_section_says_how_to_get_one() -> None:
    assert "bench_spark_micro_batches --save" in micro_batches_block(None)
    assert "bench_spark_micro_batches --save" in micro_batches_block({"runs": []})


def test_rendered_into_results_and_the_guides() -> None:
    data = {"sections": {"micro_batches": section()}}
    assert docs_figures.BLOCKS["micro-batches"](data) == micro_batches_block(section())
    text = report.render(data)
    assert f"## {MICRO_BATCHES_TITLE}" in text
    assert "| 4 | 1 | kafka_core | 12 | 1.50 | 0.300 | 8.0 |" in text  # every round in RESULTS.md
