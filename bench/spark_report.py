"""The Spark bench's tables: each method against its operation's peer and ceiling, and the
headline rows for bench/RESULTS.md."""

from __future__ import annotations

from collections.abc import Sequence

from bench.common import OK, RunResult, fmt_num, fmt_rate, fmt_ratio, markdown_table, status_cell
from bench.spark_methods import METHODS, OPERATIONS, TARGETS, method_role


def _first_rate(r: RunResult) -> float:
    """The rate of the first timed job of the session (the only one unless --passes > 1)."""
    rates = r.extra.get("pass_rates")
    return float(rates[0]) if rates else r.rate


def _group(results: Sequence[RunResult], op: str, role: str) -> RunResult | None:
    return next((r for r in results if method_role(r.client) == (op, role) and r.status == OK), None)


def spark_table(results: Sequence[RunResult]) -> str:
    """One row per method, grouped by operation: ratio against that operation's peer, share of
    its ceiling (the Python Data Source boundary with no Kafka work), target for ours. With
    several timed jobs per session, the first job's rate and ratio stand beside (cold JIT)."""
    passes = any(len(r.extra.get("pass_rates", ())) > 1 for r in results)
    ops = [*OPERATIONS, *sorted({method_role(r.client)[0] for r in results} - set(OPERATIONS))]
    rows = []
    for op in ops:
        peer, ceiling = _group(results, op, "peer"), _group(results, op, "ceiling")
        for r in (r for r in results if method_role(r.client)[0] == op):
            role = method_role(r.client)[1]
            name = r.client + (" (ceiling)" if role == "ceiling" else "")
            if r.status != OK:
                rows.append([op, name, *["-"] * (7 if passes else 6), status_cell(r)])
                continue
            target = TARGETS.get(op) if role == "ours" else None
            note = r.extra.get("note", "")
            if len(r.extra.get("runs", ())) > 1:
                note = (note + "; " if note else "") + "runs: " + ", ".join(map(fmt_rate, r.extra["runs"]))
            row = [
                op,
                name,
                fmt_rate(r.rate),
                fmt_ratio(r.rate, peer.rate) if peer else "-",
                f"{r.rate / ceiling.rate:.0%}" if ceiling and role != "ceiling" else "-",
                _target_cell(r.rate / peer.rate if peer else 0.0, target) if target else "",
            ]
            if passes:
                first = _first_rate(r)
                row.append(fmt_rate(first) + (f" ({fmt_ratio(first, _first_rate(peer))})" if peer else ""))
            rows.append([*row, fmt_num(r.cpu_per_million), f"{r.rss_mb:.0f}", note])
    headers = ["operation", "method", "rows/s", "vs peer", "of ceiling", "target"]
    if passes:
        headers.append("first job rows/s (vs peer)")
    headers += ["CPU s / M rows", "peak RSS MB", "notes"]
    return markdown_table(headers, rows)


def _target_cell(ratio: float, target: float) -> str:
    if ratio <= 0:
        return f"≥{target:g}x (not measured)"
    return f"≥{target:g}x {'met' if ratio >= target else 'NOT met'}"


def spark_headline(results: Sequence[RunResult]) -> list[list[str]]:
    """Summary rows (path, measured against, ratio, target) for kafka_core's Spark methods."""
    rows = []
    for r in results:
        op, role = method_role(r.client)
        if role != "ours":
            continue
        peer, ceiling = _group(results, op, "peer"), _group(results, op, "ceiling")
        peer_name = (
            peer.client
            if peer
            else next((c for c, (o, w) in METHODS.items() if (o, w) == (op, "peer")), "peer")
        )
        if r.status != OK or peer is None:
            cell = {"not_implemented": "not yet implemented", OK: "no peer figure"}.get(r.status, "")
            rows.append([f"spark {op}: {r.client}", peer_name, cell or "error (see below)", ""])
            continue
        extra = [f"{r.rate / ceiling.rate:.0%} of ceiling"] if ceiling else []
        if len(r.extra.get("pass_rates", ())) > 1:
            extra.append(f"first job {fmt_ratio(_first_rate(r), _first_rate(peer))}")
        rows.append(
            [
                f"spark {op}: {r.client}",
                peer_name,
                fmt_ratio(r.rate, peer.rate) + (f" ({'; '.join(extra)})" if extra else ""),
                _target_cell(r.rate / peer.rate, TARGETS[op]) if op in TARGETS else "",
            ]
        )
    return rows


SECTION_TEXT = (
    "{records:,} rows (key 16 B, value 100 B), local[2], 4-partition topic; each method in its own "
    "fresh process and Spark session. Write: a DataFrame from spark.range, to a fresh topic, checked by "
    "reading it back. Read: every reader reads the topic the peer wrote; the timed job is the "
    "DataFrame's construction and `agg(count(1), sum(length(value)), sum(length(key)))`, which must "
    "return exactly the rows and bytes written. Peers: write `df.foreachPartition` + confluent-kafka "
    "Producer per partition; read an RDD of Kafka partitions, `mapPartitions` with a confluent-kafka "
    "Consumer yielding tuples, `createDataFrame` with the Kafka schema (it reads to the listed end, "
    "then drains what is already fetched: the test broker's listed end is wrong). Ceilings (no broker): "
    "a Python Data Source reader yielding prebuilt Arrow batches of the Kafka read schema, and a "
    "DataSourceArrowWriter that only counts rows; 'of ceiling' is the share of that limit reached, "
    "'vs peer' on a ceiling row is the most any Python source could gain over the peer. Session start "
    "and the first spawn of Python workers are not timed. Where a 'first job' column is shown, each "
    "session timed its job several times (writes each to a fresh topic) and the figures are the last, "
    "warm one, the first job of the session (cold JIT, what a one-off batch job sees) beside; "
    "otherwise they are that first job. With several rounds, the median (rounds in the notes). "
    "CPU and RSS are summed over the process tree (driver, JVM, Python workers): approximate. "
    "Details: bench/e2e_spark.py."
)
