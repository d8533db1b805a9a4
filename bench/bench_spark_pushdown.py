"""Filter pushdown and subset read schemas of the ``kafka_core`` Spark source, beside Spark's own
connector (issue 41), in one Spark session on one Apache Kafka node:

- ``where timestamp > now() - interval 10 minutes`` (now as of the produce) over a topic whose records span
  ``--span-hours`` hours of CreateTime (so about 10 minutes' worth are in the tail): kafka_core with
  ``spark.sql.python.filterPushdown.enabled`` on (only the tail is fetched), off, and the
  connector (which reads the whole range and filters in Spark);
- an aggregate over three of the seven columns (value, timestamp, offset): kafka_core with the
  source's schema (every column built and shipped: a Python source cannot prune), with a user
  schema naming those three, and the connector (the JVM prunes).

Rounds alternate the methods; each figure is wall seconds of the action (count or aggregate).
Runs in the connector's pinned venv (``kafka_core.devtools.brokers.spark_connector``)::

    python -m bench.bench_spark_pushdown --records 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

FMT = "kafka_core"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def produce(bootstrap: str, topic: str, records: int, span_ms: int, now_ms: int) -> None:
    """``records`` of 100 B over 4 partitions, CreateTime rising evenly to ``now_ms``."""
    from kafka_core import KafkaProducer

    value = b"x" * 100
    step = span_ms / records
    chunk = 50_000
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        for first in range(0, records, chunk):
            n = min(chunk, records - first)
            stamps = [int(now_ms - span_ms + (first + i) * step) for i in range(n)]
            p.send_batch(topic, [value] * n, timestamps=stamps)
        p.flush()


def timed(action: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = action()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--span-hours", type=float, default=1000 / 60)  # 10 min = 1% of the span
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", default=None, help="an Apache Kafka broker (default: a dev node)")
    parser.add_argument(
        "--only", choices=("tail", "columns"), default=None, help="one of the two measurements"
    )
    args = parser.parse_args()

    from kafka_core.devtools.brokers.kafka import KafkaCluster
    from kafka_core.devtools.brokers.spark_connector import connector_session

    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = KafkaCluster(1).start()
        bootstrap = cluster.bootstrap
    try:
        from kafka_core import KafkaAdmin, NewTopic

        topic = f"pushdown-bench-{os.getpid()}"
        with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 4, 1)])[topic].result()
        now_ms = int(time.time() * 1000)
        took, _ = timed(
            lambda: produce(bootstrap, topic, args.records, int(args.span_hours * 3_600_000), now_ms)
        )
        print(f"produced {args.records} records in {took:.1f} s", file=sys.stderr)

        spark = connector_session(
            "kafka_core-pushdown-bench",
            conf={
                "spark.sql.session.timeZone": "UTC",
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.driver.memory": "2g",
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        from kafka_core.spark import register

        register(spark)

        def read(fmt: str, schema: str | None = None) -> Any:
            r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            if schema is not None:
                r = r.schema(schema)
            return r.load()

        # now() - interval 10 minutes as of the produce: Spark folds now() into such a literal
        # before it pushes the filter, and a fixed one keeps every round's answer the same
        cut = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((now_ms - 600_000) / 1000))
        recent = f"timestamp > timestamp'{cut}'"

        def tail(fmt: str, pushdown: bool) -> Any:
            spark.conf.set(PUSHDOWN, "true" if pushdown else "false")
            return read(fmt).where(recent).count()

        agg = "sum(length(value)) as bytes, max(timestamp) as newest, count(offset) as n"

        def columns(fmt: str, schema: str | None) -> Any:
            spark.conf.set(PUSHDOWN, "false")
            return tuple(read(fmt, schema).selectExpr(*agg.split(", ")).collect()[0])

        methods = {
            "tail: kafka_core, pushdown on": lambda: tail(FMT, True),
            "tail: kafka_core, pushdown off": lambda: tail(FMT, False),
            "tail: connector": lambda: tail("kafka", False),
            "3 of 7 columns: kafka_core, source schema": lambda: columns(FMT, None),
            "3 of 7 columns: kafka_core, user schema": lambda: columns(
                FMT, "value binary, timestamp timestamp, offset long"
            ),
            "3 of 7 columns: connector": lambda: columns("kafka", None),
        }
        if args.only is not None:
            keep = "tail" if args.only == "tail" else "3 of 7"
            methods = {name: action for name, action in methods.items() if name.startswith(keep)}
        for name, action in methods.items():  # warm-up: the first job of each kind
            print(f"warm-up {name}: {action()}", file=sys.stderr)
        times: dict[str, list[float]] = {name: [] for name in methods}
        answers: dict[str, Any] = {}
        loads = []
        for _ in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for name, action in methods.items():
                took, answers[name] = timed(action)
                times[name].append(took)
                print(f"{name}: {took:.2f} s -> {answers[name]}", file=sys.stderr)
        tails = {answers[n] for n in methods if n.startswith("tail")}
        assert len(tails) <= 1, f"the tail counts differ: {answers}"
        cols = {answers[n][0] for n in methods if n.startswith("3 of 7")}
        assert len(cols) <= 1, f"the aggregates differ: {answers}"
        medians = {name: statistics.median(t) for name, t in times.items()}
        pairs = {
            "tail: connector / pushdown on": ("tail: connector", "tail: kafka_core, pushdown on"),
            "tail: pushdown off / on": ("tail: kafka_core, pushdown off", "tail: kafka_core, pushdown on"),
            "columns: source schema / user schema": (
                "3 of 7 columns: kafka_core, source schema",
                "3 of 7 columns: kafka_core, user schema",
            ),
            "columns: connector / user schema": (
                "3 of 7 columns: connector",
                "3 of 7 columns: kafka_core, user schema",
            ),
        }
        result = {
            "records": args.records,
            "tail_records": next(iter(tails), None),
            "rounds": args.rounds,
            "load_1min": loads,
            "pyspark": spark.version,
            "seconds": times,
            "median_s": medians,
            "ratios": {
                k: medians[a] / medians[b] for k, (a, b) in pairs.items() if a in medians and b in medians
            },
            "head": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip(),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        print(json.dumps(result, indent=2))
        spark.stop()
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
