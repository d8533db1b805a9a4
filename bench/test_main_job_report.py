"""The main job's section of results.json without Spark or a broker: its rates and ratios, the
RESULTS.md table, the guides' block, and a failed run said as such.

    pytest bench/test_main_job_report.py       # under a second
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import docs_figures, report
from bench.bench_main_job import TARGETS
from bench.main_job_report import MAIN_JOB_TITLE, main_job_block, phase_rates

KEYS = ("write", "read", "aggregates", "stream", "stream-check")


def section(**extra: Any) -> dict[str, Any]:
    """Three rounds of 1,000 events: kafka_core takes 1 s a phase but a slow first write, the
    connector 2 s a phase."""
    ours = {key: [1.0, 1.0, 1.0] for key in KEYS}
    ours["write"] = [5.0, 1.0, 0.5]
    return {
        "events": 1000,
        "rounds": 3,
        "partitions": 4,
        "master": "local[2]",
        "broker": "127.0.0.1:9092 (embedded Apache Kafka)",
        "pyspark": "4.3.0",
        "connector": "spark-sql-kafka-0-10 4.2.0 (the newest)",
        "seconds": {"kafka_core": ours, "kafka": {key: [2.0, 2.0, 2.0] for key in KEYS}},
        "passed": True,
        "targets": TARGETS,
        "date": "2026-12-04 20:00 UTC",
        "load": "2.00, 2.00, 2.00",
        "load_after": "2.50, 2.00, 2.00",
        "machine": {"nproc": "2", "cpu": "AMD EPYC"},
        **extra,
    }


def test_rates_are_medians_of_the_rounds_and_the_whole_job_sums_the_phases() -> None:
    rates = {key: (ours, theirs, ratio) for key, _, ours, theirs, ratio in phase_rates(section())}
    assert rates["write"] == (1000.0, 500.0, 2.0)  # the slow first round does not count
    assert rates["read"] == (1000.0, 500.0, 2.0)
    ours, theirs, ratio = rates["whole"]  # rounds of 9, 5 and 4.5 s against 10 s each
    assert ours == pytest.approx(200.0) and theirs == pytest.approx(100.0) and ratio == pytest.approx(2.0)


def test_results_md_has_the_table_with_rounds_and_targets() -> None:
    text = report.render({"sections": {"main_job": section()}})
    assert f"## {MAIN_JOB_TITLE}" in text
    assert "| write | 1.0k (0.2k, 1.0k, 2.0k) | 0.5k (0.5k, 0.5k, 0.5k) | 2.00x | 2.0x met |" in text
    assert "| batch aggregates | 1.0k (1.0k, 1.0k, 1.0k) | 0.5k (0.5k, 0.5k, 0.5k) | 2.00x | - |" in text
    assert "every check passed: yes" in text and "spark-sql-kafka-0-10 4.2.0" in text
    assert "broker embedded Apache Kafka." in text and "9092" not in text


def test_a_target_missed_says_so() -> None:
    slow = section()
    slow["seconds"]["kafka_core"]["stream"] = [1.5, 1.5, 1.5]
    text = report.render({"sections": {"main_job": slow}})
    assert (
        "| streaming micro-batches | 0.7k (0.7k, 0.7k, 0.7k) | 0.5k (0.5k, 0.5k, 0.5k) | 1.33x | 1.5x not met |"
        in text
    )


def test_a_failed_run_is_said_and_the_guides_point_at_results() -> None:
    failed = section(failed="the job exited 1: FAIL: stream == batch read")
    assert "Failed: the job exited 1: FAIL: stream == batch read" in report.render(
        {"sections": {"main_job": failed}}
    )
    assert "failed: see bench/RESULTS.md" in main_job_block(failed)
    assert "No figures yet" in main_job_block(None)
    empty = {"date": "then", "seconds": {}}  # a section of an older shape, or a run with no legs
    assert "No figures." in report.render({"sections": {"main_job": empty}})
    assert "No figures in the last run" in main_job_block(empty)


def test_the_guides_block_renders_from_the_section() -> None:
    text = "before\n<!-- bench:main-job -->\nold\n<!-- /bench:main-job -->\nafter\n"
    updated = docs_figures.update(text, {"sections": {"main_job": section()}})
    assert "| whole job | 0.2k (0.1k, 0.2k, 0.2k) | 0.1k (0.1k, 0.1k, 0.1k) | 2.00x | 1.3x met |" in updated
    assert docs_figures.check("README.md", updated, {"sections": {"main_job": section()}}) == []
