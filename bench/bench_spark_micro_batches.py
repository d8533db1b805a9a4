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
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import machine_summary
from bench.micro_batches_report import CONNECTOR_VERSION, METHODS, Run, table


def _options(method: str) -> tuple[str, dict[str, str]]:
    if method == "kafka_core-per-partition":
        return "kafka_core", {"minRecordsPerPartition": "1"}
    return method, {}


def run_stream(
    spark: Any, bootstrap: str, topic: str, method: str, limit: int, tmp: Path, *, size: int, round_no: int
) -> Run:
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
        round=round_no,
        partitions=size,
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", default="4,1000", help="comma list of topic sizes")
    p.add_argument("--per-batch", type=int, default=0, help="records per partition per micro-batch")
    p.add_argument("--batches", type=int, default=0, help="micro-batches per query")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--rounds", type=int, default=2, help="rounds on a narrow topic (a wide one gets one)")
    p.add_argument(
        "--broker",
        default="kafka",
        choices=("kafka", "tansu"),
        help="the embedded broker, unless KAFKA_BOOTSTRAP_SERVERS names one (KAFKA_CORE_BENCH_BROKER)",
    )
    p.add_argument("--json", type=Path, help="write the runs here")
    p.add_argument("--save", action="store_true", help="keep the figures in bench/results.json")
    args = p.parse_args(argv)

    from bench.brokers import bench_broker, broker_description
    from kafka_core.devtools.brokers.spark_connector import connector_jars
    from kafka_core.devtools.pipeline.job import prepare_topic, start_spark

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    runs: list[Run] = []
    os.environ["KAFKA_CORE_BENCH_BROKER"] = args.broker
    load = machine_summary()["load"]
    with tempfile.TemporaryDirectory() as name, bench_broker() as bootstrap:
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
                        run = run_stream(
                            spark,
                            bootstrap,
                            topic,
                            method,
                            size * per_batch,
                            where,
                            size=size,
                            round_no=round_no,
                        )
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
                "broker": broker_description(),
                "pyspark": pyspark.__version__,
                "command": "python -m bench.bench_spark_micro_batches " + " ".join(argv or sys.argv[1:]),
                "runs": [asdict(r) for r in runs],
            },
        )
        print("saved as bench/results.json's micro_batches section")
    return 0


if __name__ == "__main__":
    sys.exit(main())
