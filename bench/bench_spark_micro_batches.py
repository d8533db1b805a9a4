"""Small micro-batches: what a streaming query pays per micro-batch, beside Spark's connector.

A topic of P partitions holds ``per_batch * batches`` records per partition (100 B values); a
query reads it with ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger`` = P * ``per_batch``,
so each micro-batch has a few records of every partition, as a low-latency stream does. Each
micro-batch's ``foreachBatch`` counts its rows. Timed: the first micro-batch apart (consumers and
workers are built there), then the median of the others, and the whole query.

Methods, one after another in one Spark session (local[2]) on the same topic, each query with a
checkpoint of its own; on a narrow topic in ``--rounds`` rounds (2 by default: the first
warms the session's workers and classes for all, the order alternating), on a wide one in one
(a per-partition plan takes minutes there):

- ``kafka_core``: ``readStream.format("kafka_core")``, defaults (small ranges share a task,
  ``minRecordsPerPartition`` 10,000).
- ``kafka_core-per-partition``: the same with ``minRecordsPerPartition`` 1, a task per Kafka
  partition (what kafka_core planned before 2026-12-04, and what the connector plans).
- ``kafka``: Spark's connector (``spark-sql-kafka-0-10``, the newest Maven Central serves, on the
  running pyspark).

Every method must count every record once (P * per_batch * batches); a run that does not fails.

    python -m bench.bench_spark_micro_batches --partitions 4,1000 [--broker kafka] [--save]

``--save`` keeps the runs as bench/results.json's ``micro_batches`` section, rendered into
RESULTS.md and the ``bench:micro-batches`` block of docs/spark.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


def _options(method: str) -> tuple[str, dict[str, str]]:
    if method == "kafka_core-per-partition":
        return "kafka_core", {"minRecordsPerPartition": "1"}
    return method, {}


def run_stream(spark: Any, bootstrap: str, topic: str, method: str, limit: int, tmp: Path) -> Run:
    fmt, extra = _options(method)
    times: list[float] = []
    counts: list[int] = []

    def on_batch(df: Any, batch_id: int) -> None:
        start = time.perf_counter()
        counts.append(df.count())
        times.append(time.perf_counter() - start)

    start = time.perf_counter()
    query = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(limit))
        .options(**extra)
        .load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp / f"checkpoint-{method}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    whole = time.perf_counter() - start
    data = [t for t, n in zip(times, counts, strict=True) if n]
    return Run(
        method=method,
        round=0,
        partitions=0,
        records=sum(counts),
        batches=len(data),
        first_s=data[0] if data else 0.0,
        median_s=statistics.median(data[1:]) if len(data) > 1 else 0.0,
        whole_s=whole,
    )


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    from kafka_core.producer.sync import KafkaProducer

    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(partitions * per_partition):
            producer.send(topic, b"v" * 100, key=b"k%d" % i, partition=i % partitions)
        producer.flush()


def table(runs: Sequence[Run]) -> str:
    from bench.common import markdown_table

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
    from bench.common import fmt_ratio, markdown_table

    if not section or not section.get("runs"):
        return "No figures: run `python -m bench.bench_spark_micro_batches --save`."
    runs = [Run(**r) for r in section["runs"]]
    last: dict[tuple[int, str], Run] = {}
    for r in runs:
        if r.round >= last.get((r.partitions, r.method), r).round:
            last[(r.partitions, r.method)] = r
    rows = []
    for size in sorted({r.partitions for r in runs}):
        theirs = last.get((size, "kafka"))
        for method in METHODS:
            r = last.get((size, method))
            if r is None:
                continue
            ratio = "-" if theirs is None or method == "kafka" else fmt_ratio(theirs.median_s, r.median_s)
            cells = (f"{size:,}", method, f"{r.first_s:.2f}", f"{r.median_s:.3f}", f"{r.whole_s:.1f}", ratio)
            rows.append(cells)
    head = (
        f"`python -m bench.bench_spark_micro_batches`: topics of {', '.join(f'{p:,}' for p in sorted({r.partitions for r in runs}))} "
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", default="4,1000", help="comma list of topic sizes")
    p.add_argument("--per-batch", type=int, default=0, help="records per partition per micro-batch")
    p.add_argument("--batches", type=int, default=0, help="micro-batches per query")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--rounds", type=int, default=2, help="rounds on a narrow topic (a wide one gets one)")
    p.add_argument("--broker", default="kafka", choices=("kafka", "tansu"))
    p.add_argument("--json", type=Path, help="write the runs here")
    p.add_argument("--save", action="store_true", help="keep the figures in bench/results.json")
    args = p.parse_args(argv)

    from kafka_core.devtools.brokers.spark_connector import connector_jars
    from kafka_core.devtools.pipeline.job import prepare_topic, start_spark

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    runs: list[Run] = []
    from bench.common import machine_summary

    load = machine_summary()["load"]
    with tempfile.TemporaryDirectory() as name, _broker(args.broker) as bootstrap:
        tmp = Path(name)
        jars = connector_jars(CONNECTOR_VERSION) if "kafka" in methods else []
        spark = start_spark("local[2]", tmp, jars)
        try:
            for size in (int(x) for x in args.partitions.split(",")):
                per_batch = args.per_batch or (10 if size < 100 else 3)
                batches = args.batches or (12 if size < 100 else 4)
                topic = f"micro-{size}-{int(time.time())}"
                prepare_topic(bootstrap, topic, size)
                fill(bootstrap, topic, size, per_batch * batches)
                rounds = args.rounds if size < 100 else 1
                for round_no in range(1, rounds + 1):
                    for method in methods if round_no % 2 else methods[::-1]:
                        where = tmp / topic / f"r{round_no}"
                        run = run_stream(spark, bootstrap, topic, method, size * per_batch, where)
                        run.partitions, run.round = size, round_no
                        runs.append(run)
                        print(
                            f"{size:>6} partitions  round {round_no}  {method:<26} {run.batches} micro-batches  "
                            f"first {run.first_s:.2f} s  then {run.median_s:.3f} s each  whole {run.whole_s:.1f} s",
                            flush=True,
                        )
                        if run.records != size * per_batch * batches:
                            print(
                                f"{method} counted {run.records:,} records of {size * per_batch * batches:,}"
                            )
                            return 1
        finally:
            spark.stop()
    print(table(runs))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")
    if args.save:
        import pyspark

        from bench.report import save_section

        machine = machine_summary()
        save_section(
            "micro_batches",
            {
                "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                "load": load,
                "load_after": machine.pop("load"),
                "machine": machine,
                "broker": {"kafka": "embedded Apache Kafka", "tansu": "embedded Tansu"}[args.broker],
                "pyspark": pyspark.__version__,
                "command": "python -m bench.bench_spark_micro_batches " + " ".join(argv or sys.argv[1:]),
                "runs": [asdict(r) for r in runs],
            },
        )
        print("saved as bench/results.json's micro_batches section")
    return 0


class _broker:
    """The broker the bench reads: embedded Apache Kafka (the default) or Tansu, on a port of its own."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.server: Any = None

    def __enter__(self) -> str:
        if self.kind == "kafka":
            from kafka_core.devbroker import KafkaCluster

            self.server = KafkaCluster(1)
        else:
            from kafka_core.devbroker import TansuBroker

            self.server = TansuBroker()
        self.server.start()
        return str(self.server.bootstrap)

    def __exit__(self, *exc: object) -> None:
        self.server.close()


if __name__ == "__main__":
    sys.exit(main())
