"""The benchmark figures quoted in README.md and docs/, rendered from bench/results.json.

A figure in a guide stands between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` (on one
line, or around whole paragraphs): ``python -m bench.report`` rewrites what is between from the
results, and ``check_all`` (tests/unit/project/test_bench_figures.py) fails when the text there differs
from them, or when a ratio (``1.23x``) stands outside such a block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bench.common import REPO_DIR, RunResult, fmt_num, fmt_rate, fmt_ratio
from bench.main_job_report import main_job_block
from bench.micro_batches_report import micro_batches_block
from bench.report import CodecFigures, broker_entries, broker_name, spark_table

DOC_FILES = ("README.md", "docs/*.md")
_BLOCK = re.compile(r"<!-- bench:([\w-]+) -->(.*?)<!-- /bench:\1 -->", re.S)
_RATIO = re.compile(r"(?<![\w.])\d+\.\d+ ?[x\u00d7](?!\w)")  # 1.23x, or with the multiplication sign
# Ratios a guide may quote outside a block: measured by hand while a design was chosen, not
# benchmark results (bench/results_notes.md has them with their date).
EXEMPT = {
    "docs/codec.md": {
        "1.6x": "the CRC/scan overlap's design measurement (results_notes.md, Codec design measurements)",
        "1.25x": "the same design measurement",
        "1.3x": "the same design measurement",
        "2.3x": "the same design measurement",
    },
    "docs/spark.md": {
        "1.5x": "issue 41's target for the stream, not a result",
        "1.3x": "issue 41's target for the whole job, not a result",
    },
}
ANCHOR = "confluent-kafka"


def _results(data: dict[str, Any], section: str, broker: str) -> dict[str, RunResult]:
    sec = dict(broker_entries(data["sections"].get(section, {}))).get(broker, {})
    return {r["client"]: RunResult(**r) for r in sec.get("results", [])}


def _section(data: dict[str, Any], section: str, broker: str) -> dict[str, Any]:
    entries = dict(broker_entries(data["sections"].get(section, {})))
    return dict(entries.get(broker, {}))


def _ratio(data: dict[str, Any], section: str, broker: str, client: str) -> str:
    results = _results(data, section, broker)
    ours, base = results.get(client), results.get(ANCHOR)
    return fmt_ratio(ours.rate, base.rate) if ours and base else "-"


def _cpu(data: dict[str, Any], section: str, broker: str, client: str) -> str:
    r = _results(data, section, broker).get(client)
    return fmt_num(r.cpu_per_million) if r else "-"


# (README's label, tuning.md's label, section, client)
E2E_PATHS = (
    ("`KafkaProducer.send`, acks=all", "`KafkaProducer.send`", "producer", "kafka_core"),
    (
        "`KafkaProducer.send_batch` (pyarrow)",
        "`KafkaProducer.send_batch` (pyarrow, 10,000 rows per call)",
        "producer",
        "kafka_core-send_batch",
    ),
    ("`KafkaConsumer.poll`", "`KafkaConsumer.poll`", "consumer", "kafka_core"),
    (
        "`KafkaConsumer.poll_columns` (pyarrow)",
        "`KafkaConsumer.poll_columns` (a `RecordBatch` per poll)",
        "consumer",
        "kafka_core-poll_columns",
    ),
)


def _e2e_when(data: dict[str, Any], brokers: tuple[str, ...] = ("kafka", "tansu")) -> str:
    """Which broker, when, under what load: the producer's run of each broker."""
    parts = []
    for key in brokers:
        sec = _section(data, "producer", key)
        if sec:
            broker = sec.get("broker", broker_name(key)).split(" (")[0]
            load = str(sec.get("load", "?")).split(",")[0]
            parts.append(f"{broker} on {sec.get('date', '?')} at load average {load}")
    return "; ".join(parts)


def readme_e2e(data: dict[str, Any]) -> str:
    records = _section(data, "producer", "kafka").get("records", 0)
    rows = []
    for label, _, section, client in E2E_PATHS:
        cells = [label]
        for key in ("kafka", "tansu"):
            cells += [
                _ratio(data, section, key, client),
                f"{_cpu(data, section, key, client)} ({_cpu(data, section, key, ANCHOR)})",
            ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(
        [
            f"Measured by `bench.run_all` on a shared 2-core machine ({records:,} records of 100 B, 3",
            "partitions, medians of three rounds; `bench/RESULTS.md` has every round and the command):",
            f"{_e2e_when(data)}.",
            "",
            "| path | Apache Kafka: vs confluent-kafka, same run | CPU s per million records (confluent-kafka) "
            "| Tansu: vs confluent-kafka | CPU s per million (confluent-kafka) |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )


def tuning_e2e(data: dict[str, Any]) -> str:
    records = _section(data, "producer", "kafka").get("records", 0)
    rows = []
    for _, label, section, client in E2E_PATHS:
        r = _results(data, section, "kafka").get(client)
        rows.append(
            f"| {label} | {fmt_rate(r.rate) if r else '-'} | {_ratio(data, section, 'kafka', client)} "
            f"| {_cpu(data, section, 'kafka', client)} | {_cpu(data, section, 'kafka', ANCHOR)} |"
        )
    return "\n".join(
        [
            f"From `bench/results.json` (`bash ci/bench.sh`; a shared 2-core machine; {records:,} records",
            "of 100 B, 3 partitions; each client in its own process, median of three rounds;",
            f'{_e2e_when(data, ("kafka",))}). Producer: `acks="all"`, `linger_ms=5`, `batch_size=1_048_576`, from the first',
            "send to the end of `flush`. Consumer: partitions assigned without a group, up to 10,000 records per",
            "poll, steady state from the first poll that returned records. On Apache Kafka:",
            "",
            "| path | msg/s | vs confluent-kafka, same run | CPU s per million records | confluent-kafka CPU s per million |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )


def columnar_ratios(data: dict[str, Any]) -> str:
    send, send_batch = (_ratio(data, "producer", "kafka", c) for c in ("kafka_core", "kafka_core-send_batch"))
    poll, columns = (_ratio(data, "consumer", "kafka", c) for c in ("kafka_core", "kafka_core-poll_columns"))
    date = _section(data, "producer", "kafka").get("date", "?")
    return (
        f"{send_batch} confluent-kafka for `send_batch` and {columns} for `poll_columns`, against {send} "
        f"and {poll} for `send` and `poll` (Apache Kafka, {date}"
    )


def spread(data: dict[str, Any]) -> str:
    r = _results(data, "consumer", "kafka").get("kafka_core-poll_columns")
    runs = sorted(r.extra.get("runs", [])) if r else []
    if not runs:
        return "-"
    return f"`poll_columns` on Apache Kafka: {fmt_rate(runs[0])} to {fmt_rate(runs[-1])} msg/s"


def codec_ratios(data: dict[str, Any]) -> str:
    figs = CodecFigures(data["sections"].get("codec", {}).get("entries", []))

    def ratio(op: str, peer_op: str) -> str:
        return fmt_ratio(figs.rate(op, 100, figs.ours), figs.rate(peer_op, 100, "aiokafka"))

    date = data["sections"].get("codec", {}).get("date", "?")
    return (
        f"columnar decode {ratio('decode-columns', 'decode')}, encode {ratio('encode', 'encode')}, "
        f"decode to records {ratio('decode', 'decode')}, columnar encode {ratio('encode-columns', 'encode')} "
        f"(medians, {date})"
    )


def compression(data: dict[str, Any]) -> str:
    figs = CodecFigures(data["sections"].get("codec", {}).get("entries", []))
    rates = [(c, figs.rate("encode", 100, figs.ours, c)) for c in ("lz4", "snappy", "zstd", "gzip")]
    first, *rest = rates
    return f"{first[0]} {fmt_rate(first[1])} records/s, " + ", ".join(f"{c} {fmt_rate(r)}" for c, r in rest)


def crc(data: dict[str, Any]) -> str:
    figs = CodecFigures(data["sections"].get("codec", {}).get("entries", []))
    return f"{min(figs.gbps('crc32c', size, figs.ours) for size in (100, 1000)):.1f} GB/s"


# --------------------------------------------------------------------------- Spark


def spark_cells(section: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A broker's Spark table as headers and rows of cells: carried over, or rendered from results."""
    if "table" in section:
        return list(section["table"]["headers"]), [list(r) for r in section["table"]["rows"]]
    lines = spark_table([RunResult(**r) for r in section.get("results", [])]).splitlines()
    cells = [[c.strip() for c in line.strip()[1:-1].split(" | ")] for line in lines]
    return cells[0], cells[2:]


class SparkFigures:
    """Cells of one broker's Spark table, by method and column."""

    def __init__(self, data: dict[str, Any], broker: str = "kafka") -> None:
        self.section = _section(data, "spark", broker)
        self.headers, self.rows = spark_cells(self.section)

    def cell(self, method: str, column: str) -> str:
        index = next((i for i, h in enumerate(self.headers) if h.startswith(column)), None)
        row = next((r for r in self.rows if r[1].split(" (")[0] == method), None)
        return row[index] if row is not None and index is not None else "-"

    def first_ratio(self, method: str) -> str:
        match = re.search(r"\(([\d.]+x)\)", self.cell(method, "first job rows/s"))
        return match.group(1) if match else "-"

    def when(self) -> str:
        s = self.section
        broker = str(s.get("broker", "?")).split(" (")[0]
        return f"{s.get('rounds', 'medians of the rounds')} on {broker}, measured {s.get('date', '?')} at load average {s.get('load', '?')}"


def _spark_figures(data: dict[str, Any]) -> dict[str, str]:
    f = SparkFigures(data)
    return {
        "w_conn": f.cell("kafka_core-write", "vs connector"),
        "w_first": f.first_ratio("kafka_core-write"),
        "w_peer": f.cell("kafka_core-write", "vs peer"),
        "w_cpu": f.cell("kafka_core-write", "CPU s / M rows"),
        "w_conn_cpu": f.cell("kafka-connector-write", "CPU s / M rows"),
        "r_conn": f.cell("kafka_core-read", "vs connector"),
        "r_first": f.first_ratio("kafka_core-read"),
        "r_ceil": f.cell("kafka_core-read", "of ceiling"),
        "r_cpu": f.cell("kafka_core-read", "CPU s / M rows"),
        "r_conn_cpu": f.cell("kafka-connector-read", "CPU s / M rows"),
        "records": f"{f.section.get('records', 0):,}",
        "when": f.when(),
    }


def readme_spark(data: dict[str, Any]) -> str:
    return (
        "Spark ({records} rows of 16 + 100 B, local[2], 4-partition topic, `bench/RESULTS.md`;\n"
        "{when}):\n"
        '`df.write.format("kafka_core")` {w_conn} Spark\'s own connector `format("kafka")` warm and {w_first}\n'
        "on its first job, {w_peer} `df.foreachPartition` with a confluent-kafka producer, at {w_cpu} CPU s\n"
        'per million rows against the connector\'s {w_conn_cpu}; `spark.read.format("kafka_core")` {r_conn}\n'
        "the connector warm and {r_first} on its first job, at {r_ceil} of what a source of prebuilt Arrow\n"
        "batches reaches in the same run, {r_cpu} CPU s per million rows against {r_conn_cpu}."
    ).format(**_spark_figures(data))


def spark_guide(data: dict[str, Any]) -> str:
    return (
        "Speed, measured beside the connector in the same Spark session ({records} rows of 16 + 100 B,\n"
        "local[2], a 4-partition topic, pyspark 4.2.0 with the connector's 4.2.0 jar, a shared 2-core\n"
        "machine; every round in `bench/RESULTS.md`; {when}):\n"
        "\n"
        "| | warm job | first job of the session | CPU s per million rows, kafka_core / connector |\n"
        "|---|---|---|---|\n"
        "| write | {w_conn} the connector | {w_first} | {w_cpu} / {w_conn_cpu} |\n"
        "| read (count and sums over key and value) | {r_conn} the connector | {r_first} | {r_cpu} / {r_conn_cpu} |\n"
        "\n"
        "The read reaches {r_ceil} of what a Python data source yielding prebuilt Arrow batches reaches in\n"
        "the same run (the median rounds): past that point the Spark/Python boundary, not the client, is\n"
        "the limit. The write is {w_peer} `df.foreachPartition` with a confluent-kafka producer per partition."
    ).format(**_spark_figures(data))


def avro_rows(data: dict[str, Any]) -> str:
    """docs/schema-registry.md's figure: Avro decode through poll against confluent-kafka's deserializer."""
    sec = data["sections"].get("avro")
    medians = (sec or {}).get("medians", {})
    ours, theirs = medians.get("kafka_core"), medians.get(ANCHOR)
    if not sec or not ours or not theirs:
        return "not measured yet (`python -m bench.bench_avro --save`)"
    return (
        f"{fmt_ratio(ours['rate'], theirs['rate'])} confluent-kafka's records per second, "
        f"{fmt_num(ours['cpu_s_per_million'])} CPU s per million records against "
        f"{fmt_num(theirs['cpu_s_per_million'])} ({sec['records']:,} order events, {sec['broker'].split(' (')[0]}, "
        f"{sec['date']}, load average {sec['load'].split(',')[0]} before, "
        f"{sec.get('load_after', '?').split(',')[0]} after)"
    )


def wide(data: dict[str, Any]) -> str:
    """README's and docs/tuning.md's wide-topic table: kafka_core against confluent-kafka by partitions."""
    sec = data["sections"].get("wide")
    rows = (sec or {}).get("by_partitions", {})
    if not rows:
        return "not measured yet (`python -m bench.bench_wide --save`)"
    lines = [
        f"Wide topics ({sec['records']:,} keyed records of 100 B over every partition, one Apache Kafka node,"
        f" medians of {sec['repeat']} rounds, {sec['date']}; every round in `bench/RESULTS.md`):",
        "",
        "| partitions | produce vs confluent-kafka | consume vs confluent-kafka"
        " | consume CPU s per million (confluent) | idle CPU, share of a core (confluent) |",
        "|---|---|---|---|---|",
    ]
    for count, clients in sorted(rows.items(), key=lambda kv: int(kv[0])):
        ours, theirs = clients.get("kafka_core", {}), clients.get(ANCHOR, {})
        if "error" in ours or "error" in theirs or not ours or not theirs:
            continue
        lines.append(
            f"| {int(count):,} | {fmt_ratio(ours['produce_rate'], theirs['produce_rate'])}"
            f" | {fmt_ratio(ours['consume_rate'], theirs['consume_rate'])}"
            f" | {fmt_num(ours['consume_cpu_per_m'])} ({fmt_num(theirs['consume_cpu_per_m'])})"
            f" | {100 * ours['idle_cpu_share']:.2f}% ({100 * theirs['idle_cpu_share']:.2f}%) |"
        )
    return "\n".join(lines)


def main_job(data: dict[str, Any]) -> str:
    """README's and docs/spark.md's table of the main job beside Spark's connector."""
    return main_job_block(data["sections"].get("main_job"))


def micro_batches(data: dict[str, Any]) -> str:
    """docs/spark.md's table of small micro-batches beside Spark's connector."""
    return micro_batches_block(data["sections"].get("micro_batches"))


BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "wide": wide,
    "main-job": main_job,
    "micro-batches": micro_batches,
    "avro-rows": avro_rows,
    "readme-e2e": readme_e2e,
    "readme-spark": readme_spark,
    "spread": spread,
    "codec-ratios": codec_ratios,
    "tuning-e2e": tuning_e2e,
    "compression": compression,
    "crc": crc,
    "columnar-ratios": columnar_ratios,
    "spark-guide": spark_guide,
}


# --------------------------------------------------------------------------- files


def _render_block(name: str, body: str, data: dict[str, Any]) -> str:
    text = BLOCKS[name](data)
    return f"\n{text}\n" if body.startswith("\n") else text  # a block around paragraphs keeps its lines


def update(text: str, data: dict[str, Any]) -> str:
    """``text`` with every known block's figures rendered from ``data``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in BLOCKS:
            return m.group(0)
        return f"<!-- bench:{m.group(1)} -->{_render_block(m.group(1), m.group(2), data)}<!-- /bench:{m.group(1)} -->"

    return _BLOCK.sub(sub, text)


def check(name: str, text: str, data: dict[str, Any]) -> list[str]:
    """What in ``text`` (the file ``name``) differs from the results or stands outside a block."""
    problems = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(1) not in BLOCKS:
            problems.append(f"{name}:{line}: unknown block bench:{m.group(1)}")
        elif m.group(2) != _render_block(m.group(1), m.group(2), data):
            problems.append(f"{name}:{line}: bench:{m.group(1)} differs from bench/results.json")
    outside = _BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    exempt = EXEMPT.get(name, {})
    for m in _RATIO.finditer(outside):
        if m.group(0).replace(" ", "") not in exempt:
            line = outside.count("\n", 0, m.start()) + 1
            problems.append(f"{name}:{line}: {m.group(0)} outside a bench block (no results file says it)")
    return problems


def doc_paths() -> list[str]:
    return sorted({str(p.relative_to(REPO_DIR)) for pattern in DOC_FILES for p in REPO_DIR.glob(pattern)})


def check_all(data: dict[str, Any]) -> list[str]:
    return [problem for name in doc_paths() for problem in check(name, (REPO_DIR / name).read_text(), data)]


def update_all(data: dict[str, Any]) -> list[str]:
    """Rewrite the blocks of every guide; the names of the files that changed."""
    changed = []
    for name in doc_paths():
        path = REPO_DIR / name
        text = path.read_text()
        new = update(text, data)
        if new != text:
            path.write_text(new)
            changed.append(name)
    return changed
