"""The tracing bench's table for RESULTS.md, from results.json's ``tracing`` section
(bench/bench_tracing.py, ``python -m bench.run_all --only tracing``)."""

from __future__ import annotations

from typing import Any

from bench.common import fmt_rate, markdown_table

TRACING_TITLE = "OpenTelemetry tracing: send and poll, off and on (issue 43)"
TRACING_TEXT = (
    "{records:,} records of {size} B per case, one partition, {rounds} round(s); each round measures every "
    "case with tracing off, then on. Tracing on: the OpenTelemetry SDK, every span sampled, a "
    "BatchSpanProcessor handing spans to an exporter that drops them; kafka_core by "
    "`KafkaCoreInstrumentor`, confluent-kafka by the contrib `ConfluentKafkaInstrumentor`. The consumed "
    "records carry a `traceparent` header. `send`: one record per call, then flush; `poll`: kafka_core's "
    "`poll` (a span per poll, linked to the records' producer spans) and confluent's `consume(500)`; "
    "`per-record`: kafka_core's iteration and confluent's `poll()`, a span per record. Rates are medians of "
    "the rounds; ratios are medians of the rounds' ratios (each pair measured in the same round). "
    "Details: bench/bench_tracing.py."
)
HEADERS = ["client", "case", "tracing off", "tracing on", "on / off"]


def _stamp(section: dict[str, Any]) -> str:
    after = f" before, {section['load_after']} after" if section.get("load_after") else ""
    return (
        f"_{section.get('broker', '?')}: measured {section.get('date', '?')}, "
        f"load average {section.get('load', '?')}{after}._"
    )


def tracing_table(section: dict[str, Any]) -> str:
    """Each client's rates off and on, then kafka_core over confluent-kafka off and on."""
    rows: list[list[str]] = []
    for row in section.get("rows", []):
        if "on_over_off" in row:
            cells = [fmt_rate(row["off"]), fmt_rate(row["on"]), f"{row['on_over_off']:.2f}"]
        else:  # kafka_core / confluent-kafka: ratios, not rates
            cells = [f"{row['off']:.2f}x", f"{row['on']:.2f}x", "-"]
        rows.append([row["client"], row["case"], *cells])
    return markdown_table(HEADERS, rows)


def tracing_lines(section: dict[str, Any]) -> list[str]:
    """The section's lines after its title: the stamp, how it was measured, the table (or why not)."""
    out = ["", _stamp(section), ""]
    if section.get("failed"):
        return [*out, f"Failed: {section['failed']}"]
    if not section.get("rows"):
        return [*out, "No figures."]
    out += [TRACING_TEXT.format(**{k: section.get(k, "?") for k in ("records", "size", "rounds")}), ""]
    return [*out, tracing_table(section)]
