"""The Spark bench's tables: each method against its operation's peer and ceiling, and the
headline rows for bench/RESULTS.md."""

from __future__ import annotations

from collections.abc import Sequence

from bench.common import OK, RunResult, fmt_num, fmt_rate, fmt_ratio, markdown_table, status_cell
from bench.spark_methods import CEILING_TARGETS, CONNECTOR_TARGET, METHODS, OPERATIONS, TARGETS, method_role


def _first_rate(r: RunResult) -> float:
    """The rate of the first timed job of the session (the only one unless --passes > 1): the
    median over the rounds where the bench kept it, else the chosen round's."""
    if "first_rates_median" in r.extra:
        return float(r.extra["first_rates_median"])
    rates = r.extra.get("pass_rates")
    return float(rates[0]) if rates else r.rate


def _first_cpu(r: RunResult) -> float:
    if "first_cpu_per_million_median" in r.extra:
        return float(r.extra["first_cpu_per_million_median"])
    cpus = r.extra.get("pass_cpu_per_million")
    return float(cpus[0]) if cpus else r.cpu_per_million


def _group(results: Sequence[RunResult], op: str, role: str) -> RunResult | None:
    return next((r for r in results if method_role(r.client) == (op, role) and r.status == OK), None)


def _ratio(r: RunResult, other: RunResult | None, first: bool = False) -> str:
    if other is None:
        return "-"
    return fmt_ratio(_first_rate(r), _first_rate(other)) if first else fmt_ratio(r.rate, other.rate)


def spark_table(results: Sequence[RunResult]) -> str:
    """One row per method, grouped by operation: ratio against Spark's own connector and the
    jar-free peer, share of the same-run ceiling (the Python Data Source boundary with no Kafka
    work), targets for ours. With several timed jobs per session, the first job's rate, ratio
    and CPU stand beside the warm figures."""
    passes = any(len(r.extra.get("pass_rates", ())) > 1 for r in results)
    ops = [*OPERATIONS, *sorted({method_role(r.client)[0] for r in results} - set(OPERATIONS))]
    rows = []
    for op in ops:
        peer, ceiling = _group(results, op, "peer"), _group(results, op, "ceiling")
        connector = _group(results, op, "connector")
        for r in (r for r in results if method_role(r.client)[0] == op):
            role = method_role(r.client)[1]
            name = r.client + {"ceiling": " (ceiling)", "connector": " (Spark's connector)"}.get(role, "")
            if r.status != OK:
                rows.append([op, name, *["-"] * (9 if passes else 7), status_cell(r)])
                continue
            note = r.extra.get("note", "")
            if len(r.extra.get("runs", ())) > 1:
                note = (note + "; " if note else "") + "runs: " + ", ".join(map(fmt_rate, r.extra["runs"]))
            row = [
                op,
                name,
                fmt_rate(r.rate),
                _ratio(r, connector) if role != "connector" else "-",
                _ratio(r, peer),
                f"{r.rate / ceiling.rate:.0%}" if ceiling and role != "ceiling" else "-",
                _targets_cell(r, op, peer, connector, ceiling) if role == "ours" else "",
            ]
            if passes:
                first = fmt_rate(_first_rate(r))
                versus = connector if connector and role != "connector" else peer
                if versus is not None and versus is not r:
                    first += f" ({_ratio(r, versus, first=True)})"
                row += [first, fmt_num(_first_cpu(r))]
            broker = r.extra.get("broker_cpu_per_million")
            row += [
                fmt_num(r.cpu_per_million),
                "-" if broker is None else fmt_num(broker),
                f"{r.rss_mb:.0f}",
                note,
            ]
            rows.append(row)
    headers = ["operation", "method", "rows/s", "vs connector", "vs peer", "of ceiling", "target"]
    if passes:
        against = "connector" if any(method_role(r.client)[1] == "connector" for r in results) else "peer"
        headers += [f"first job rows/s (vs {against})", "first job CPU s / M rows"]
    headers += ["CPU s / M rows", "broker CPU s / M rows", "peak RSS MB", "notes"]
    return markdown_table(headers, rows)


def _targets(
    r: RunResult, op: str, peer: RunResult | None, connector: RunResult | None, ceiling: RunResult | None
) -> list[tuple[str, float, float]]:
    """(what, measured, target) for ours: the peer's target, then the connector's (warm and first
    job); where the read stays below the connector, the share of the same-run ceiling instead."""
    checks = []
    if op in TARGETS and peer is not None:
        checks.append((f"≥{TARGETS[op]:g}x peer", r.rate / peer.rate, TARGETS[op]))
    if connector is not None:
        warm = r.rate / connector.rate
        first = _first_rate(r) / _first_rate(connector)
        share_target = CEILING_TARGETS.get(op)
        for what, ratio in (("connector", warm), ("connector, first job", first)):
            if ratio < CONNECTOR_TARGET and share_target is not None and ceiling is not None:
                share = (
                    (r.rate / ceiling.rate) if what == "connector" else _first_rate(r) / _first_rate(ceiling)
                )
                checks.append((f"≥{share_target:.0%} of ceiling ({what} {ratio:.2f}x)", share, share_target))
            else:
                checks.append((f"≥{CONNECTOR_TARGET:g}x {what}", ratio, CONNECTOR_TARGET))
    return checks


def _targets_cell(
    r: RunResult, op: str, peer: RunResult | None, connector: RunResult | None, ceiling: RunResult | None
) -> str:
    checks = _targets(r, op, peer, connector, ceiling)
    if not checks:
        return _target_cell(0.0, TARGETS[op]) if op in TARGETS else ""
    return "; ".join(f"{what} {'met' if got >= want else 'NOT met'}" for what, got, want in checks)


def _target_cell(ratio: float, target: float) -> str:
    if ratio <= 0:
        return f"≥{target:g}x (not measured)"
    return f"≥{target:g}x {'met' if ratio >= target else 'NOT met'}"


def spark_headline(results: Sequence[RunResult]) -> list[list[str]]:
    """Summary rows (path, measured against, ratio, target) for kafka_core's Spark methods:
    against Spark's own connector where it ran, else against the jar-free peer."""
    rows = []
    for r in results:
        op, role = method_role(r.client)
        if role != "ours":
            continue
        peer, ceiling = _group(results, op, "peer"), _group(results, op, "ceiling")
        connector = _group(results, op, "connector")
        versus = connector or peer
        versus_name = (
            versus.client
            if versus
            else next((c for c, (o, w) in METHODS.items() if (o, w) == (op, "peer")), "peer")
        )
        if r.status != OK or versus is None:
            cell = {"not_implemented": "not yet implemented", OK: "no peer figure"}.get(r.status, "")
            rows.append([f"spark {op}: {r.client}", versus_name, cell or "error (see below)", ""])
            continue
        extra = []
        if connector is not None and peer is not None:
            extra.append(f"{fmt_ratio(r.rate, peer.rate)} {peer.client}")
        if ceiling:
            extra.append(f"{r.rate / ceiling.rate:.0%} of ceiling")
        if len(r.extra.get("pass_rates", ())) > 1:
            extra.append(f"first job {fmt_ratio(_first_rate(r), _first_rate(versus))}")
        rows.append(
            [
                f"spark {op}: {r.client}",
                versus_name,
                fmt_ratio(r.rate, versus.rate) + (f" ({'; '.join(extra)})" if extra else ""),
                _targets_cell(r, op, peer, connector, ceiling),
            ]
        )
    return rows


SECTION_TEXT = (
    "{records:,} rows (key 16 B, value 100 B), local[2], 4-partition topic. Write: a DataFrame from "
    "spark.range, to a fresh topic, checked by reading it back. Read: every reader reads the topic the "
    "peer wrote; the timed job is the DataFrame's construction and "
    "`agg(count(1), sum(length(value)), sum(length(key)))`, which must return exactly the rows and bytes "
    'written. Spark\'s connector: `format("kafka")` (spark-sql-kafka-0-10 from Maven Central) with the '
    "same options as ours, both with their defaults; it runs only in the pyspark of its own version, so "
    "when it is in the run every method runs in a venv pinned to that pyspark, with its jars in "
    "spark.jars. Peers (jar-free): write `df.foreachPartition` + confluent-kafka Producer per partition; "
    "read an RDD of Kafka partitions, `mapPartitions` with a confluent-kafka Consumer yielding tuples, "
    "`createDataFrame` with the Kafka schema. Ceilings (no broker, same run): a Python Data Source "
    "reader yielding prebuilt Arrow batches of the Kafka read schema, and a DataSourceArrowWriter that "
    "only counts rows; 'of ceiling' is the share of that limit reached. Session start and the first "
    "spawn of Python workers are not timed. Where a 'first job' column is shown, each method timed its "
    "job several times in its session (writes each to a fresh topic): the figures are the last, warm "
    "one and the first beside; otherwise they are that first job. With several rounds, medians (the "
    "first job's its own). CPU and RSS are summed over the process tree (driver, JVM, Python workers): "
    "approximate; the broker's CPU is its own column (it shares the 2 cores). Details: "
    "bench/e2e_spark.py."
)
