"""Tests of the per-broker results (Apache Kafka and Tansu side by side): merge and report.

pytest bench/test_report_brokers.py       # no broker needed, under a second
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench import report
from bench.common import ERROR, RunResult
from bench.run_all import merge_sections, per_broker


def _pack(broker: str, anchor_wall: float, ours_wall: float, **extra: Any) -> dict[str, Any]:
    results = [
        RunResult("confluent-kafka", records=100_000, wall_s=anchor_wall, cpu_s=0.1, rss_mb=90),
        RunResult(
            "kafka_core", records=100_000, wall_s=ours_wall, cpu_s=0.05, rss_mb=80, extra={"runs": [1, 2]}
        ),
    ]
    return {
        "results": [dataclasses.asdict(r) for r in results],
        "records": 100_000,
        "date": "2026-11-26 17:00 UTC",
        "mode": "full",
        "load": "3.00, 2.00, 1.00",
        "load_after": "4.00, 3.00, 2.00",
        "broker": f"{broker} description",
        **extra,
    }


def test_a_run_on_one_broker_keeps_the_other_brokers_figures() -> None:
    previous = {
        "producer": {"brokers": {"tansu": _pack("Tansu", 1.0, 0.5)}},
        "consumer": _pack("Tansu", 1.0, 1.0),  # flat: written before figures were kept per broker
        "spark": {"results": [], "mode": "old"},
    }
    fresh = {
        "producer": {"brokers": {"kafka": _pack("Kafka", 1.0, 2.0)}},
        "consumer": {"brokers": {"kafka": _pack("Kafka", 1.0, 2.0)}},
    }
    merged = merge_sections(previous, fresh)
    assert set(merged["producer"]["brokers"]) == {"tansu", "kafka"}
    assert set(merged["consumer"]["brokers"]) == {"tansu", "kafka"}
    assert merged["spark"] == previous["spark"]
    again = merge_sections(merged, {"producer": {"brokers": {"tansu": _pack("Tansu", 1.0, 0.25)}}})
    assert again["producer"]["brokers"]["tansu"]["results"][1]["wall_s"] == 0.25
    assert again["producer"]["brokers"]["kafka"] == fresh["producer"]["brokers"]["kafka"]
    assert per_broker(previous["consumer"]) == {"tansu": previous["consumer"]}


def test_both_brokers_side_by_side_with_ratios_of_their_own_run() -> None:
    sections = {
        "transactions": {
            "brokers": {"tansu": _pack("Tansu", 1.0, 0.5), "kafka": _pack("Kafka", 1.0, 2.0)},
        },
    }
    text = report.render({"environment": {"broker": "x"}, "sections": sections})
    assert "## Transactional produce" in text
    # Apache Kafka's columns first; each ratio against confluent-kafka on the same broker.
    assert "| client | Apache Kafka msg/s | Apache Kafka: vs confluent-kafka |" in text
    assert "| kafka_core | 50 k | 0.50x | 0.50 | 80 | 200 k | 2.00x | 0.50 | 80 |" in text
    assert "| transactions: kafka_core | confluent-kafka on Apache Kafka | 0.50x |" in text
    assert "| transactions: kafka_core | confluent-kafka on Tansu | 2.00x |" in text
    assert "load average before 3.00, 2.00, 1.00; after 4.00, 3.00, 2.00" in text
    assert "Apache Kafka: Kafka description; Tansu: Tansu description" in text


def test_a_failed_broker_run_is_named_and_the_other_still_shown() -> None:
    broken = _pack("Kafka", 1.0, 1.0)
    broken["results"][1] = dataclasses.asdict(RunResult("kafka_core", status=ERROR, detail="boom"))
    failed = {"results": [], "failed": "BrokerStartError: no java", "broker": "Kafka description"}
    sections = {
        "producer": {"brokers": {"kafka": broken, "tansu": _pack("Tansu", 1.0, 0.5)}},
        "consumer": {"brokers": {"kafka": failed, "tansu": _pack("Tansu", 1.0, 0.5)}},
    }
    text = report.render({"environment": {}, "sections": sections})
    assert "Apache Kafka: error: boom" in text
    assert "| producer: kafka_core | confluent-kafka on Apache Kafka | error (see below) |" in text
    assert "**The section failed on Apache Kafka:** `BrokerStartError: no java`" in text
    assert "| consumer: kafka_core | confluent-kafka on Tansu | 2.00x |" in text
