"""Render bench/results.json as bench/RESULTS.md: figures, ratios vs peers, CPU per million records.

    python -m bench.report            # RESULTS.md and the figures in README.md and docs/ (bench.docs_figures)
    python -m bench.report --check    # exit 1 when RESULTS.md or a figure in the docs differs from the results

bench/results.json is written by the bench scripts (bench.run_all; bench.bench_share --save), each
section with its date, machine, load and command. Notes by hand live in bench/results_notes.md,
rendered after the section of the same title; RESULTS.md itself is never edited by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.bench_wide_report import WIDE_TITLE, wide_tables
from bench.common import (
    BENCH_DIR,
    OK,
    RunResult,
    e2e_table,
    fmt_num,
    fmt_rate,
    fmt_ratio,
    markdown_table,
    status_cell,
)
from bench.main_job_report import MAIN_JOB_TITLE, main_job_lines
from bench.micro_batches_report import MICRO_BATCHES_TITLE, micro_batches_lines
from bench.spark_report import SECTION_TEXT as SPARK_SECTION_TEXT
from bench.spark_report import spark_headline, spark_table
from bench.tracing_report import TRACING_TITLE, tracing_lines

# op, peer op used as the baseline (the peers have no columnar path), target ratio vs aiokafka
ROW_OPS: tuple[tuple[str, str, float | None], ...] = (
    ("encode", "encode", 2.0),
    ("decode", "decode", 1.5),
    ("decode-nocrc", "decode-nocrc", None),
    ("encode-columns", "encode", 5.0),
    ("decode-columns", "decode", 10.0),
    ("decode-columns-helper", "decode", None),
)
TARGET_SIZE = 100  # the targets of issue #3 are stated for 100-byte values
# The end-to-end sections kept per broker (results.json: ``{"brokers": {key: section}}``), in
# the order their columns appear: Apache Kafka, the broker users run, first.
BROKER_NAMES = {"kafka": "Apache Kafka", "tansu": "Tansu", "external": "external cluster"}
SIZES = (100, 1000)
COMPRESSIONS = ("gzip", "snappy", "lz4", "zstd")


class CodecFigures:
    """Lookup of pytest-benchmark medians by (op, value size, compression, contender)."""

    def __init__(self, entries: Sequence[dict[str, Any]]) -> None:
        self.by_key: dict[tuple[str, int, str, str], dict[str, Any]] = {}
        for e in entries:
            if "op" not in e or not e.get("min"):
                continue  # a benchmark whose test failed before labelling it
            self.by_key[(e["op"], int(e["value_size"]), e.get("compression", "none"), self.label(e))] = e
        labels = {k[3] for k in self.by_key}
        self.ours = "ours:cython" if "ours:cython" in labels else "ours:python"
        self.twin = "ours:python" if self.ours == "ours:cython" and "ours:python" in labels else None

    @staticmethod
    def label(entry: dict[str, Any]) -> str:
        if entry.get("impl") == "ours":
            return f"ours:{entry.get('implementation', '?')}"
        return str(entry.get("impl"))

    def get(self, op: str, size: int, who: str, compression: str = "none") -> dict[str, Any] | None:
        return self.by_key.get((op, size, compression, who))

    def rate(self, op: str, size: int, who: str | None, compression: str = "none") -> float:
        """Records per second from the median round (0 when not measured): a target is met on
        medians, not on the fastest round."""
        e = self.get(op, size, who, compression) if who else None
        return e["records"] / _median_s(e) if e and _median_s(e) > 0 else 0.0

    def fastest_rate(self, op: str, size: int, who: str | None, compression: str = "none") -> float:
        """Records per second from the fastest round, shown beside the median."""
        e = self.get(op, size, who, compression) if who else None
        return e["records"] / e["min"] if e and e["min"] > 0 else 0.0

    def cpu_per_record(self, op: str, size: int, who: str | None) -> float | None:
        """CPU seconds per record where the benchmark measured it (else CPU = wall)."""
        e = self.get(op, size, who) if who else None
        cpu = e.get("cpu_per_call") if e else None
        return cpu / e["records"] if cpu and e else None

    def gbps(self, op: str, size: int, who: str) -> float:
        e = self.get(op, size, who)
        return e["nbytes"] / _median_s(e) / 1e9 if e and _median_s(e) > 0 else 0.0


def _median_s(entry: dict[str, Any]) -> float:
    """A benchmark's median round in seconds (its fastest in results written before medians were)."""
    return float(entry.get("median") or entry.get("min") or 0.0)


def ratio_cell(ours: float, theirs: float, ours_fastest: float, theirs_fastest: float) -> str:
    """The ratio of medians, the ratio of fastest rounds beside it."""
    median = fmt_ratio(ours, theirs)
    fastest = fmt_ratio(ours_fastest, theirs_fastest)
    return median if fastest in ("-", median) else f"{median} (fastest {fastest})"


def rate_cell(rate: float, cpu_per_record: float | None = None) -> str:
    """M records/s with CPU seconds per million beside it (measured, or = wall when single-threaded)."""
    if rate <= 0:
        return "-"
    cpu = cpu_per_record * 1e6 if cpu_per_record else 1e6 / rate
    return f"{rate / 1e6:.2f} M/s · {cpu:.3f} s/M"


def target_cell(ratio: float, target: float | None, size: int) -> str:
    if target is None or size != TARGET_SIZE:
        return ""
    if ratio <= 0:
        return f"≥{target:g}x (not measured)"
    return f"≥{target:g}x {'met' if ratio >= target else 'NOT met'}"


def codec_tables(section: dict[str, Any]) -> str:
    figs = CodecFigures(section.get("entries", []))
    ours_name = f"kafka_core ({figs.ours.split(':')[1]})"
    parts = []
    headers = [
        "workload (1000 records, key 16 B)",
        ours_name,
        "aiokafka (Cython)",
        "kafka-python",
        "kafka_core / aiokafka",
        "target",
    ]
    if figs.twin:
        headers += ["kafka_core (pure-Python twin)", "twin / kafka-python"]
    rows = []
    for op, peer_op, target in ROW_OPS:
        for size in SIZES:
            ours = figs.rate(op, size, figs.ours)
            aio = figs.rate(peer_op, size, "aiokafka")
            kp = figs.rate(peer_op, size, "kafka-python")
            ratio = ours / aio if ours and aio else 0.0
            peer_note = " (row path)" if op != peer_op else ""
            row = [
                f"{op}, value {size} B",
                rate_cell(ours, figs.cpu_per_record(op, size, figs.ours)),
                rate_cell(aio) + (peer_note if aio else ""),
                rate_cell(kp) + (peer_note if kp else ""),
                ratio_cell(
                    ours,
                    aio,
                    figs.fastest_rate(op, size, figs.ours),
                    figs.fastest_rate(peer_op, size, "aiokafka"),
                ),
                target_cell(ratio, target, size),
            ]
            if figs.twin:
                twin = figs.rate(op, size, figs.twin)
                row += [rate_cell(twin), fmt_ratio(twin, kp)]
            rows.append(row)
    parts.append(markdown_table(headers, rows))

    crc_rows = []
    for size in SIZES:
        memcpy = figs.gbps("crc32c", size, "memcpy")
        nbytes = (figs.get("crc32c", size, "aiokafka") or figs.get("crc32c", size, "memcpy") or {}).get(
            "nbytes", 0
        )
        ours_crc = figs.gbps("crc32c", size, figs.ours)
        aio_crc = figs.gbps("crc32c", size, "aiokafka")
        enc = figs.gbps("encode-columns", size, figs.ours)
        dec = figs.gbps("decode-columns", size, figs.ours)
        crc_rows.append(
            [
                f"value {size} B ({nbytes:,} B batch)",
                _gb(ours_crc),
                _gb(aio_crc),
                fmt_ratio(ours_crc, aio_crc),
                _gb(memcpy),
                _gb(enc) + _share(enc, memcpy),
                _gb(dec) + _share(dec, memcpy),
            ]
        )
    parts.append(
        markdown_table(
            [
                "data",
                "kafka_core crc32c GB/s",
                "aiokafka crc32c GB/s",
                "ratio",
                "memory copy GB/s",
                "columnar encode GB/s (of copy)",
                "columnar decode GB/s (of copy)",
            ],
            crc_rows,
        )
    )

    comp_rows = []
    for comp in COMPRESSIONS:
        ref = figs.get("encode", 100, "aiokafka", comp) or {}
        rates = {
            (op, who): figs.rate(op, 100, who, comp)
            for op in ("encode", "decode")
            for who in (figs.ours, "aiokafka")
        }
        comp_rows.append(
            [
                comp,
                f"{ref.get('nbytes', 0):,} B" if ref else "-",
                rate_cell(rates["encode", figs.ours]),
                rate_cell(rates["encode", "aiokafka"]),
                fmt_ratio(rates["encode", figs.ours], rates["encode", "aiokafka"]),
                rate_cell(rates["decode", figs.ours]),
                rate_cell(rates["decode", "aiokafka"]),
                fmt_ratio(rates["decode", figs.ours], rates["decode", "aiokafka"]),
            ]
        )
    parts.append(
        markdown_table(
            [
                "compression (value 100 B)",
                "batch size (aiokafka)",
                f"encode {ours_name}",
                "encode aiokafka",
                "ratio",
                f"decode {ours_name}",
                "decode aiokafka",
                "ratio",
            ],
            comp_rows,
        )
    )
    failures = section.get("failures", [])
    if failures:
        parts.append("Failed checks in this run:\n\n" + "\n".join(f"- `{f}`" for f in failures))
    return "\n\n".join(parts)


def _gb(value: float) -> str:
    return f"{value:.2f}" if value > 0 else "-"


def _share(value: float, reference: float) -> str:
    return f" ({value / reference:.0%})" if value > 0 and reference > 0 else ""


def _results(section: dict[str, Any]) -> list[RunResult]:
    return [RunResult(**r) for r in section.get("results", [])]


def _stamp(section: dict[str, Any]) -> str:
    return (
        f"_Measured {section.get('date', '?')}, {section.get('mode', '?')} mode, load average "
        f"{section.get('load', '?')}._{_provenance(section)}"
    )


def _provenance(section: dict[str, Any]) -> str:
    """The command and machine a section's figures came from, and whether they were carried over
    from a table typed by hand (figures older than the results file kept them)."""
    parts = []
    if section.get("command"):
        parts.append(f"Command: `{section['command']}`.")
    machine = section.get("machine")
    if machine:
        parts.append(
            f"Machine: {machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}), Python {machine.get('python', '?')}."
        )
    if section.get("carried_over"):
        parts.append(f"Carried over: {section['carried_over']}.")
    return (" " + " ".join(parts)) if parts else ""


def broker_entries(section: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """A section's figures per broker, Apache Kafka first; a flat section (one run, written
    before the figures were kept per broker) is one entry of no named broker."""
    if "brokers" not in section:
        return [(None, section)]
    order = list(BROKER_NAMES)
    keys = sorted(section["brokers"], key=lambda k: (order.index(k) if k in order else len(order), k))
    return [(k, section["brokers"][k]) for k in keys]


def broker_name(key: str | None) -> str:
    return BROKER_NAMES.get(key, key) if key else ""


def _broker_stamp(key: str | None, section: dict[str, Any]) -> str:
    """Which broker, when, and the load average before and after (the machine is shared)."""
    if key is None:
        return _stamp(section)
    after = f"; after {section['load_after']}" if section.get("load_after") else ""
    return (
        f"_{section.get('broker') or broker_name(key)}: measured {section.get('date', '?')}, "
        f"{section.get('mode', '?')} mode, load average {'' if section.get('carried_over') else 'before '}"
        f"{section.get('load', '?')}{after}._" + _provenance(section)
    )


def _run_note(r: RunResult) -> str:
    note = r.extra.get("note", "")
    runs = r.extra.get("runs")
    if runs and len(runs) > 1:
        note = (note + "; " if note else "") + "runs: " + ", ".join(fmt_rate(x) for x in runs)
    return note


def side_by_side_table(entries: Sequence[tuple[str | None, dict[str, Any]]], anchor: str, unit: str) -> str:
    """One row per client, each broker's figures in its own columns; every ratio is against the
    anchor measured on the same broker in the same run."""
    by_broker = [(key, {r.client: r for r in _results(sec)}) for key, sec in entries]
    clients: list[str] = []
    for _, results in by_broker:
        clients += [c for c in results if c not in clients]
    headers = ["client"]
    for key, _ in by_broker:
        name = broker_name(key)
        headers += [f"{name} {unit}", f"{name}: vs {anchor}", f"{name}: CPU s / M", f"{name}: RSS MB"]
    headers.append("notes")
    rows = []
    for client in clients:
        row, notes = [client], []
        parts = [_run_note(r).split("; ") for _, results in by_broker if (r := results.get(client))]
        common = [p for p in parts[0] if p and all(p in other for other in parts[1:])] if parts else []
        for key, results in by_broker:
            r = results.get(client)
            base = results.get(anchor)
            if r is None or r.status != OK:
                row += ["-", "-", "-", "-"]
                note = status_cell(r) if r is not None else "not run"
            else:
                ok_base = base is not None and base.status == OK
                row += [
                    fmt_rate(r.rate),
                    fmt_ratio(r.rate, base.rate) if ok_base and base else "-",
                    fmt_num(r.cpu_per_million),
                    f"{r.rss_mb:.0f}",
                ]
                note = "; ".join(p for p in _run_note(r).split("; ") if p not in common)
            if note:
                notes.append(f"{broker_name(key)}: {note}")
        rows.append([*row, "; ".join([*common, " — ".join(notes)])])
    return markdown_table(headers, rows)


def headline(sections: dict[str, Any]) -> str:
    """One line per target: where kafka_core stands against the peer it is measured against."""
    rows = []
    if "codec" in sections:
        figs = CodecFigures(sections["codec"].get("entries", []))
        for op, peer_op, target in ROW_OPS:
            if target is None:
                continue
            ours = figs.rate(op, TARGET_SIZE, figs.ours)
            aio = figs.rate(peer_op, TARGET_SIZE, "aiokafka")
            ratio = ours / aio if ours and aio else 0.0
            rows.append(
                [
                    f"codec {op} (value {TARGET_SIZE} B)",
                    "aiokafka" + (" row path" if op != peer_op else ""),
                    ratio_cell(
                        ours,
                        aio,
                        figs.fastest_rate(op, TARGET_SIZE, figs.ours),
                        figs.fastest_rate(peer_op, TARGET_SIZE, "aiokafka"),
                    ),
                    target_cell(ratio, target, TARGET_SIZE),
                ]
            )
    for key, anchor in (
        ("producer", "confluent-kafka"),
        ("consumer", "confluent-kafka"),
        ("transactions", "confluent-kafka"),
    ):
        by_broker = [
            (broker, {r.client: r for r in _results(sec)})
            for broker, sec in broker_entries(sections.get(key, {}))
        ]
        clients = [c for _, results in by_broker for c in results if c.startswith("kafka_core")]
        for name in dict.fromkeys(clients):
            for broker, results in by_broker:
                r, base = results.get(name), results.get(anchor)
                if r is None:
                    continue
                if r.status != "ok" or base is None or base.status != "ok":
                    cell = "not yet implemented" if r.status == "not_implemented" else "error (see below)"
                else:
                    cell = fmt_ratio(r.rate, base.rate)
                against = f"{anchor} on {broker_name(broker)}" if broker else anchor
                rows.append([f"{key}: {name}", against, cell, ""])
    for broker, sec in broker_entries(sections.get("spark", {})):  # a peer and a target per operation
        if "summary" in sec:  # carried over: the rows as they were typed
            rows += [list(row) for row in sec["summary"]]
            continue
        on = f" on {broker_name(broker)}" if broker else ""
        rows += [[path, against + on, *rest] for path, against, *rest in spark_headline(_results(sec))]
    if not rows:
        return ""
    return markdown_table(["kafka_core path", "measured against", "ratio", "target"], rows)


def _brokers_line(env: dict[str, Any], sections: dict[str, Any]) -> str:
    """The brokers the figures come from: each broker section names its own."""
    described = [
        f"{broker_name(key)}: {sec['broker']}"
        for section in sections.values()
        if "brokers" in section
        for key, sec in broker_entries(section)
        if sec.get("broker")
    ]
    unique = list(dict.fromkeys(described))
    if len(unique) > 1:
        return "Brokers (each end-to-end section names its own): " + "; ".join(unique) + "."
    return f"Broker: {env.get('broker', '?')}."


def render(data: dict[str, Any], notes: str = "") -> str:
    """RESULTS.md: every section of ``data`` (bench/results.json), each with the notes by hand of
    the same title after it; the other notes last."""
    env = data.get("environment", {})
    sections = data.get("sections", {})
    machine = env.get("machine", {})
    by_title = split_notes(notes)
    out = [
        "# kafka_core benchmark results",
        "",
        "Rendered by `python -m bench.report` from bench/results.json, which the bench scripts write",
        "(`python -m bench.run_all`, `python -m bench.bench_share --save`; see bench/README.md), and",
        "from the notes by hand in bench/results_notes.md: edit those, not this file. Performance is",
        "reported as ratios against peers measured in the same run on the same data; absolute figures",
        "on this shared machine vary by ±30% between runs.",
        "",
        f"Machine: {machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}), Python {machine.get('python', '?')}, "
        f"{machine.get('platform', '?')}. {_brokers_line(env, sections)}",
        "",
        # Ours first, then the peers by name: the same line whether the versions come from a run
        # in memory or from results.json (written with sorted keys).
        "Versions: "
        + ", ".join(
            f"{k} {v}"
            for k, v in sorted(env.get("versions", {}).items(), key=lambda kv: (kv[0] != "kafka_core", kv[0]))
        )
        + ".",
    ]
    summary = headline(sections)
    if summary:
        out += ["", "## Summary", "", summary]
    if "codec" in sections:
        sec = sections["codec"]
        out += [
            "",
            "## Codec (issue #3): one RecordBatch v2 of 1000 records, 16-byte keys",
            "",
            _stamp(sec),
            "",
            f"Median pytest-benchmark round: of the {sec.get('processes', 1)} fresh process(es) run, the one",
            "whose median is the middle one (a target is met on medians in one run, not on the fastest",
            "round; the ratio of fastest rounds is shown beside). Each cell is",
            "M records/s · CPU seconds per million records. `decode-columns-helper` is the columnar",
            "decode with `set_decode_helper(True)`: a helper thread scans the records of a batch of",
            "256 KiB or more while the CRC is checked (two cores; here the 1000-byte-value batch, not",
            "the 126 KB one). For both decode-columns rows CPU is measured (process time of every",
            "thread, the helper's idle spinning included) as the least over 0.1 s spans: an average",
            "over many calls, where the rate is the median round's, so on one thread it can come",
            "out below 1/rate. For every other row, all on one thread, CPU = 1/rate.",
            "Row decoders touch key and value of every",
            "record; `decode` checks the CRC (aiokafka via `validate_crc()`, as its consumer does),",
            "`decode-nocrc` does not. The batch decoded is written by aiokafka. Columnar input is",
            "pyarrow binary arrays; the peers have no columnar path, so their row path is the baseline.",
            "The pure-Python twin (when the Cython codec is built) is measured in a second pytest run",
            "right after the first (`KAFKA_CORE_PURE_PYTHON=1`).",
            "",
            codec_tables(sec),
        ]
    titles = {
        "producer": (
            "Producer (issue #5)",
            "confluent-kafka",
            "msg/s",
            "{records:,} records of 100 B to a 3-partition topic, acks=all, linger 5 ms, batch 1 MB; from "
            "the first send to the end of flush. CPU is process time (all threads) over that span; "
            "peak RSS of the whole process (includes the input data it holds). Median of the rounds.",
        ),
        "consumer": (
            "Consumer (issue #6)",
            "confluent-kafka",
            "msg/s",
            "{records:,} records of 100 B from a 3-partition topic, partitions assigned (no group), "
            "fetch wait 100 ms for every client, confluent-kafka with queued.min.messages=1000000; "
            "rate and CPU from the first poll that returned records to the last record (steady state); "
            "the client's start (connect, metadata, first fetch: wall / CPU) is in the notes. "
            "Median of the rounds.",
        ),
        "transactions": (
            "Transactional produce",
            "confluent-kafka",
            "msg/s",
            "{records:,} records of 100 B to a 3-partition topic, 1000 records per transaction "
            "(begin, send each, commit), linger 5 ms, batch 1 MB; from the end of init_transactions "
            "to the end of the last commit; every record is counted back. CPU is process time (all "
            "threads) over that span. Median of the rounds.",
        ),
        "spark": ("Spark write and read", "", "rows/s", SPARK_SECTION_TEXT),
    }
    for key, (title, anchor, unit, text) in titles.items():
        if key not in sections:
            continue
        entries = broker_entries(sections[key])
        sec = entries[0][1]
        out += ["", f"## {title}", ""]
        out += [line for broker, s in entries for line in (_broker_stamp(broker, s), "")]
        out.append(text.format(records=max(s.get("records", 0) for _, s in entries)))
        failed = [
            f"**The section failed{' on ' + broker_name(b) if b else ''}:** `{s['failed']}`"
            for b, s in entries
            if s.get("failed")
        ]
        out += [line for text in failed for line in ("", text)]
        if key == "spark":
            out += [line for broker, s in entries for line in _spark_tables(broker, s, len(entries))]
        elif len(entries) > 1:
            out += ["", side_by_side_table(entries, anchor, unit)]
        elif not failed:
            out += ["", e2e_table(_results(sec), anchor, unit)]
        out += _note(by_title, title)
    if "share" in sections:
        share = sections["share"]
        out += ["", f"## {SHARE_TITLE}", "", _stamp_share(share), ""]
        out += [SHARE_TEXT.format(records=share.get("records", 0)), "", share_table(share)]
        out += _note(by_title, SHARE_TITLE)
    if "avro" in sections:
        avro = sections["avro"]
        out += ["", f"## {AVRO_TITLE}", "", _stamp_share(avro), ""]
        out += [AVRO_TEXT.format(records=avro.get("records", 0), partitions=avro.get("partitions", "?")), ""]
        out += [avro_table(avro)]
        out += _note(by_title, AVRO_TITLE)
    if "avro_columns" in sections:
        columns = sections["avro_columns"]
        out += ["", f"## {AVRO_COLUMNS_TITLE}", "", _stamp_share(columns), ""]
        out += [AVRO_COLUMNS_TEXT.format(records=columns.get("records", 0))]
        out += avro_columns_tables(columns)
        out += _note(by_title, AVRO_COLUMNS_TITLE)
    if "spark_avro" in sections:
        spark_avro = sections["spark_avro"]
        out += ["", f"## {SPARK_AVRO_TITLE}", "", _stamp_share(spark_avro), ""]
        out += [
            SPARK_AVRO_TEXT.format(
                rows=spark_avro.get("rows", 0),
                pyspark=spark_avro.get("pyspark", "?"),
                mode=SPARK_AVRO_MODES.get(spark_avro.get("mode", ""), ""),
            )
        ]
        out += ["", spark_avro_table(spark_avro)]
        out += _note(by_title, SPARK_AVRO_TITLE)
    if "wide" in sections:
        out += ["", f"## {WIDE_TITLE}"]
        out += [line for block in wide_tables(sections["wide"]) for line in ("", block)]
        out += _note(by_title, WIDE_TITLE)
    if "tracing" in sections:
        out += ["", f"## {TRACING_TITLE}", *tracing_lines(sections["tracing"])]
        out += _note(by_title, TRACING_TITLE)
    if "main_job" in sections:
        out += ["", f"## {MAIN_JOB_TITLE}", *main_job_lines(sections["main_job"])]
        out += _note(by_title, MAIN_JOB_TITLE)
    if "micro_batches" in sections:
        out += ["", f"## {MICRO_BATCHES_TITLE}", *micro_batches_lines(sections["micro_batches"])]
        out += _note(by_title, MICRO_BATCHES_TITLE)
    out += [
        "",
        "## Notes",
        "",
        "- Each end-to-end client runs in its own fresh process, sequentially, against its own",
        "  fresh topic holding the same data; rounds go round-robin over the clients.",
        "- The brokers run on the same 2 cores: Tansu (memory storage) and Apache Kafka (one KRaft",
        "  node, a JVM, its log on local disk). Their CPU is not counted in the client figures, but",
        "  they compete with the clients for the cores. Each broker's columns come from their own",
        "  run (date and load average above each table): compare ratios within one broker's columns.",
        "- Rows marked “not yet implemented” light up by themselves when the kafka_core piece lands;",
        "  a piece that exists but fails (import or run) is an error row with its message.",
        "- Producer figures count only if every record landed: after each run the topic is read",
        "  back with confluent-kafka and a shortfall turns the row into an error. Topic metadata is",
        "  fetched before timing where the client has a call for it (confluent-kafka `list_topics`,",
        "  aiokafka and kafka-python `partitions_for`; kafka_core's `partitions_for` if present).",
        f"- The last `run_all` invocation ({', '.join(data.get('ran', [])) or '?'}) took {data.get('elapsed_s', '?')} s.",
    ]
    for title, text in by_title.items():
        if title not in RENDERED_TITLES:
            out += ["", f"## {title}", "", text]
    return "\n".join(out) + "\n"


SHARE_TITLE = "Share groups (issue 24)"
SHARE_TEXT = (
    "{records:,} records of 100 B on one partition, Apache Kafka, each client in its own fresh process "
    "reading the preloaded topic as a fresh share group, implicit acknowledgement unless said; rate and "
    "CPU from the first non-empty poll to the commit of the last record; confluent-kafka's ShareConsumer "
    "in the same run; the ceiling is a raw ShareFetch loop (acks piggybacked, nothing decoded). Medians "
    "of the rounds. Details: bench/bench_share.py."
)
SHARE_NAMES = {
    "confluent-kafka": "confluent-kafka ShareConsumer",
    "kafka_core": "kafka_core, poll + implicit accept",
    "kafka_core-poll_columns": "kafka_core, `poll_columns` (implicit)",
    "kafka_core-columns+ack_batch": "kafka_core, `poll_columns` + `acknowledge_batch` (explicit)",
    "raw-sharefetch": "ceiling: a raw ShareFetch loop (acks piggybacked, nothing decoded)",
}
SHARE_HEADERS = ["client", "records/s", "vs confluent", "CPU s per M records", "of ceiling"]
# The titles render() gives sections; a note of another title comes after them all.
RENDERED_TITLES = {
    "Codec (issue #3): one RecordBatch v2 of 1000 records, 16-byte keys",
    "Producer (issue #5)",
    "Consumer (issue #6)",
    "Transactional produce",
    "Spark write and read",
    SHARE_TITLE,
    "Schema Registry: Avro through poll (issue 34)",
    "Schema Registry: Avro as Arrow columns (issue 34)",
    "Spark and Schema Registry Avro (issue 34)",
    WIDE_TITLE,
    TRACING_TITLE,
    MAIN_JOB_TITLE,
}


def _stamp_share(section: dict[str, Any]) -> str:
    load = section.get("load", "?")
    after = f" before, {section['load_after']} after" if section.get("load_after") else ""
    return (
        f"_{section.get('broker', '?')}: measured {section.get('date', '?')}, load average {load}{after}._"
        + _provenance(section)
    )


def share_rows(section: dict[str, Any]) -> list[list[str]]:
    """The share bench's rows: carried over as typed, or from the medians bench_share saved."""
    if "table" in section:
        return [list(row) for row in section["table"]["rows"]]
    medians = section.get("medians", {})
    anchor, ceiling = medians.get("confluent-kafka"), medians.get("raw-sharefetch")
    rows = []
    for client, m in medians.items():
        rows.append(
            [
                SHARE_NAMES.get(client, client),
                fmt_rate(m["rate"]),
                fmt_ratio(m["rate"], anchor["rate"]) if anchor else "-",
                fmt_num(m["cpu_s_per_million"]),
                f"{m['rate'] / ceiling['rate']:.0%}" if ceiling else "-",
            ]
        )
    return rows


AVRO_TITLE = "Schema Registry: Avro through poll (issue 34)"
AVRO_TEXT = (
    "{records:,} Avro order events (bench/avro_order.py: 12 fields, a nested record, an array of records, "
    "nullables, an enum, a timestamp; about 120 B each) on {partitions} partitions, Confluent framing, the "
    "dev registry; each client in its own fresh process reads the topic by assignment and sums a decoded "
    "field of every record (checked); rate and CPU from the first non-empty poll to the last record. "
    "confluent-kafka: its Consumer and its `AvroDeserializer` per message; kafka_core: `poll` with "
    "`AvroDeserializer` as `value_deserializer`. Medians of the rounds. Details: bench/bench_avro.py."
)
AVRO_NAMES = {
    "confluent-kafka": "confluent-kafka Consumer + AvroDeserializer",
    "kafka_core": "kafka_core `poll` + AvroDeserializer",
    "kafka_core-bytes": "kafka_core `poll`, bytes only (no decode)",
}
AVRO_HEADERS = ["client", "records/s", "vs confluent", "CPU s per M records", "CPU vs confluent"]


def avro_table(section: dict[str, Any]) -> str:
    """The Avro bench's rows from the medians bench_avro saved (a client that failed: its error)."""
    medians = section.get("medians", {})
    anchor = medians.get("confluent-kafka")
    rows = [
        [
            AVRO_NAMES.get(client, client),
            fmt_rate(m["rate"]),
            fmt_ratio(m["rate"], anchor["rate"]) if anchor else "-",
            fmt_num(m["cpu_s_per_million"]),
            fmt_ratio(m["cpu_s_per_million"], anchor["cpu_s_per_million"]) if anchor else "-",
        ]
        for client, m in medians.items()
    ]
    rows += [
        [AVRO_NAMES.get(c, c), f"error: {e}", "-", "-", "-"] for c, e in section.get("errors", {}).items()
    ]
    return markdown_table(AVRO_HEADERS, rows)


AVRO_COLUMNS_TITLE = "Schema Registry: Avro as Arrow columns (issue 34)"
AVRO_COLUMNS_TEXT = (
    "{records:,} Avro order events (bench/avro_order.py), Confluent framing, the dev registry. With a "
    "broker: each client in its own fresh process reads the topic and decodes every value "
    "(confluent-kafka's Consumer and `AvroDeserializer` per message; kafka_core's `poll` with "
    "`AvroDeserializer`; kafka_core's `poll_columns` with `AvroColumnDeserializer`, typed Arrow "
    "columns), medians of the rounds. The codec alone, in one process, best of the rounds: the decode "
    "(fastavro's `schemaless_reader` per value against `AvroColumnDecoder.decode`) and the encode "
    "(fastavro's `schemaless_writer` per row against `AvroColumnEncoder.encode` of one Arrow column). "
    "Details: bench/bench_avro_columns.py."
)
AVRO_COLUMNS_ANCHOR = "confluent-kafka+AvroDeserializer"


def avro_columns_tables(section: dict[str, Any]) -> list[str]:
    """The end-to-end table (when a broker run was saved), then one table per codec direction."""
    out: list[str] = []
    results = _results(section)
    if results:
        out += ["", e2e_table(results, AVRO_COLUMNS_ANCHOR, unit="records/s")]
    for what, runs in section.get("codec", {}).items():
        codec = [RunResult(**r) for r in runs]
        if codec:
            out += [
                "",
                f"The {what} alone, no broker:",
                "",
                e2e_table(codec, codec[0].client, unit="records/s"),
            ]
    return out


SPARK_AVRO_TITLE = "Spark and Schema Registry Avro (issue 34)"
SPARK_AVRO_TEXT = (
    "pyspark {pyspark}. Read: {rows:,} Avro order events into typed columns and "
    'aggregated, `format("kafka_core")` with `valueFormat=avro` against Spark\'s `format("kafka")` + '
    "spark-avro's `from_avro` (the header cut with `substring`, the schema given by hand). Write: "
    "{rows:,} flat readings encoded to framed Avro, ours a struct column with `valueSchema` against "
    '`concat(header, to_avro(...))` + `format("kafka")`. {mode} Wall time and CPU of the whole process '
    "tree (driver JVM, Python workers); the first job of each method and the last (warm), medians over "
    "the rounds, each ratio against the peer of the same round. Details: bench/bench_spark_avro.py."
)
SPARK_AVRO_MODES = {
    "fresh": "Each method in a fresh process (driver, JVM, Python workers) per round, the order "
    "alternated round by round.",
    "shared": "The methods of a round in one session, their order rotated pass by pass.",
    "": "One local session, the connector first in every pass.",
}
SPARK_AVRO_HEADERS = [
    "method",
    "first s",
    "warm s",
    "vs peer (first / warm)",
    "rounds (first / warm)",
    "CPU s per M rows (warm)",
    "first job CPU s, JVM / Python",
]


def _spark_avro_rounds(runs: list[Any]) -> list[list[dict[str, float]]]:
    """A method's passes per round (sections saved before rounds were one list of passes)."""
    return [runs] if runs and isinstance(runs[0], dict) else runs


def _first_job_cpu(rounds: list[list[dict[str, float]]]) -> str:
    """Median CPU seconds of the first job in the driver's JVM and in Python processes (the
    workers; the driver's Python waits on the JVM), when the run recorded them."""
    if not all("cpu_jvm_s" in r[0] for r in rounds):
        return ""
    jvm = statistics.median(r[0]["cpu_jvm_s"] for r in rounds)
    python = statistics.median(r[0]["cpu_s"] - r[0]["cpu_jvm_s"] for r in rounds)
    return f"{jvm:.1f} / {python:.1f}"


def spark_avro_table(section: dict[str, Any]) -> str:
    runs = {name: _spark_avro_rounds(r) for name, r in section.get("runs", {}).items()}
    peers: dict[str, str] = section.get("peers", {})
    rows = section.get("rows", 0) or 1
    table = []
    for name, mine in runs.items():
        if not mine:
            continue
        peer = runs.get(peers.get(name, name)) or mine
        pairs = list(zip(peer, mine, strict=False))
        first = [p[0]["wall_s"] / m[0]["wall_s"] for p, m in pairs]
        warm = [p[-1]["wall_s"] / m[-1]["wall_s"] for p, m in pairs]
        each = ", ".join(f"{a:.2f}x / {b:.2f}x" for a, b in zip(first, warm, strict=True))
        table.append(
            [
                name,
                fmt_num(statistics.median(m[0]["wall_s"] for m in mine), 1),
                fmt_num(statistics.median(m[-1]["wall_s"] for m in mine), 1),
                f"{statistics.median(first):.2f}x / {statistics.median(warm):.2f}x",
                each if len(pairs) > 1 else "",
                fmt_num(statistics.median(m[-1]["cpu_s"] for m in mine) * 1e6 / rows),
                _first_job_cpu(mine),
            ]
        )
    out = markdown_table(SPARK_AVRO_HEADERS, table)
    read = {
        name: sorted({p["rows"] for r in mine for p in r if p.get("rows") is not None})
        for name, mine in runs.items()
        if name.startswith("read")
    }
    if any(read.values()):
        counts = "; ".join(f"{name}: {', '.join(f'{c:,}' for c in cs)}" for name, cs in read.items() if cs)
        out += (
            f"\n\nRows read per pass ({section.get('rows', 0):,} written): {counts}. The broker's listed end "
            f"offsets (ListOffsets latest) add up to {section.get('listed_end_offsets', 0):,}: Spark's "
            "connector stops there; ours checks the last batch for the true end."
        )
    return out


def share_table(section: dict[str, Any]) -> str:
    return markdown_table(SHARE_HEADERS, share_rows(section))


def _spark_tables(broker: str | None, section: dict[str, Any], brokers: int) -> list[str]:
    """A broker's Spark table: computed from its results, or carried over as it was typed."""
    if section.get("failed"):
        return []
    if "table" in section:
        table = section["table"]
        title = (
            f"### {section.get('broker', broker_name(broker)).split(' (')[0]}: {section.get('rounds', '')}"
        )
        return ["", title, "", markdown_table(table["headers"], table["rows"])]
    lines = ["", f"### {broker_name(broker)}"] if broker and brokers > 1 else []
    return [*lines, "", spark_table(_results(section))]


def split_notes(notes: str) -> dict[str, str]:
    """bench/results_notes.md's ``## title`` sections (the text before the first is its preface)."""
    parts = ("\n" + notes).split("\n## ")[1:]
    return {
        part.split("\n", 1)[0].strip(): part.split("\n", 1)[1].strip() if "\n" in part else ""
        for part in parts
    }


def _note(by_title: dict[str, str], title: str) -> list[str]:
    text = by_title.get(title)
    return ["", text] if text else []


RESULTS_JSON = BENCH_DIR / "results.json"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
NOTES_MD = BENCH_DIR / "results_notes.md"


def render_files(raw: Path = RESULTS_JSON, notes: Path = NOTES_MD) -> str:
    return render(json.loads(raw.read_text()), notes.read_text() if notes.exists() else "")


def save_section(name: str, section: dict[str, Any]) -> None:
    """Keep ``section`` as bench/results.json's ``name`` (the other sections as they were), then
    render RESULTS.md and the guides' figures from it: for the bench scripts outside run_all."""
    from bench import docs_figures

    data = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"sections": {}}
    data.setdefault("sections", {})[name] = section
    RESULTS_JSON.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    RESULTS_MD.write_text(render_files())
    docs_figures.update_all(data)


def main(argv: Sequence[str] | None = None) -> int:
    from bench import docs_figures

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on any drift")
    args = parser.parse_args(argv)
    data = json.loads(RESULTS_JSON.read_text())
    results_md = render_files()
    if args.check:
        problems = docs_figures.check_all(data)
        if RESULTS_MD.read_text() != results_md:
            problems.append(f"{RESULTS_MD}: differs from what bench/results.json renders")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    RESULTS_MD.write_text(results_md)
    changed = docs_figures.update_all(data)
    print(f"wrote {RESULTS_MD}" + (f" and {', '.join(changed)}" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
