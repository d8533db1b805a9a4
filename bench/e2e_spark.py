"""End-to-end Spark write benchmark: a DataFrame of N rows (key 16 B, value 100 B) to a Kafka topic.

Peer: ``df.foreachPartition`` with one confluent-kafka Producer per partition (the usual
workaround, anchor about 137k rows/s here). Ours: kafka_core's Python Data Source, once it exists.
Each method runs in its own fresh process and Spark session (local[2]); the session start and the
first spawn of Python workers are not timed (a warm-up job runs first). CPU is summed over the
whole process tree (driver, JVM, Python workers) from /proc, so it is approximate.

    python -m bench.e2e_spark [--rows 2000000] [--clients foreachPartition-confluent,kafka_core]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    ERROR,
    OK,
    NotImplementedYet,
    RunResult,
    Span,
    bench_broker,
    child_main,
    count_topic,
    create_topic,
    delete_topic,
    e2e_table,
    our_module,
    run_child,
    unique_topic,
)

CLIENTS = ("foreachPartition-confluent", "kafka_core")
ANCHOR = "foreachPartition-confluent"
PARTITIONS = 4
KEY_SIZE = 16
VALUE_SIZE = 100


# --------------------------------------------------------------------------- process-tree accounting


def _proc_table() -> dict[int, tuple[int, float, int]]:
    """pid -> (ppid, CPU seconds incl. reaped children, RSS bytes) for every visible process."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            raw = (entry / "stat").read_text()
            fields = raw[raw.rindex(")") + 2 :].split()
            ppid = int(fields[1])
            cpu = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
            table[int(entry.name)] = (ppid, cpu, int(fields[21]) * page)
    return table


def tree_usage(root: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of ``root`` and all its descendants right now."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu, _rss) in table.items():
        children.setdefault(ppid, []).append(pid)
    cpu = rss = 0.0
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            cpu += table[pid][1]
            rss += table[pid][2]
        stack.extend(children.get(pid, ()))
    return cpu, rss / 2**20


class TreeSampler:
    """Samples the tree's RSS while a job runs (Spark's memory lives in the JVM and workers)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_mb = max(self.peak_mb, tree_usage(os.getpid())[1])

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, tree_usage(os.getpid())[1])


# --------------------------------------------------------------------------- executor side


def write_partition_confluent(rows: Iterable[Any], bootstrap: str, topic: str) -> None:
    """Runs on an executor: one Producer per partition, flushed and checked before the task ends."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    produce, poll = producer.produce, producer.poll
    for row in rows:
        while True:
            try:
                produce(topic, row[1], key=row[0])
                break
            except BufferError:
                poll(0.005)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, {len(errors)} errors: {errors[:3]}")


# --------------------------------------------------------------------------- driver side


def _session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_core-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _frame(spark: Any, rows: int) -> Any:
    """key: 16 zero-padded digits; value: the same 16 digits plus 84 filler bytes (100 B)."""
    from pyspark.sql import functions as F

    digits = F.lpad(F.col("id").cast("string"), KEY_SIZE, "0")
    filler = F.lit("v" * (VALUE_SIZE - KEY_SIZE))
    return spark.range(0, rows).select(
        digits.cast("binary").alias("key"), F.concat(digits, filler).cast("binary").alias("value")
    )


def _warm_up(spark: Any) -> None:
    """Spawn the Python workers before timing (about 4.5 s here, not part of the write)."""
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).count()


def _our_source() -> Any:
    """Our Python Data Source class, or say it is not there yet (checked before Spark starts).

    Looked up in ``$BENCH_SPARK_SOURCE`` (``module`` or ``module:Class``, default
    ``kafka_core.spark``): the first DataSource subclass there that defines a writer.
    """
    spec = os.environ.get("BENCH_SPARK_SOURCE", "kafka_core.spark")
    module_name, _, class_name = spec.partition(":")
    from pyspark.sql.datasource import DataSource

    module = our_module(module_name)
    sources = [
        obj
        for name, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, DataSource)
        and obj is not DataSource
        and "writer" in vars(obj)
        and (not class_name or name == class_name)
    ]
    if not sources:
        raise NotImplementedYet(f"{spec} has no DataSource with a writer yet")
    return sources[0]


def _run(method: str, bootstrap: str, topic: str, rows: int) -> RunResult:
    source = _our_source() if method == "kafka_core" else None
    spark = _session()
    try:
        df = _frame(spark, rows)
        fmt = ""
        if source is not None:
            spark.dataSource.register(source)
            fmt = str(source.name())
        _warm_up(spark)
        cpu0, _ = tree_usage(os.getpid())
        with TreeSampler() as sampler:
            span = Span().start()
            if method == "kafka_core":
                (
                    df.write.format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", topic)
                    .mode("append")
                    .save()
                )
            else:
                from bench import e2e_spark as importable  # pickled by reference, not from __main__

                df.foreachPartition(
                    functools.partial(importable.write_partition_confluent, bootstrap=bootstrap, topic=topic)
                )
            span.stop()
        cpu1, _ = tree_usage(os.getpid())
        result = RunResult(method, records=rows, wall_s=span.wall, cpu_s=cpu1 - cpu0)
        result.extra["tree_rss_mb"] = round(sampler.peak_mb)
        result.extra["note"] = (
            f"{df.rdd.getNumPartitions()} Spark partitions; CPU and RSS: whole process tree"
        )
        if method == "kafka_core":
            result.extra["note"] += f"; format {fmt!r}"
        return result
    finally:
        spark.stop()


def run_spark_bench(
    bootstrap: str,
    *,
    rows: int = 2_000_000,
    clients: Sequence[str] = CLIENTS,
    timeout: float = 400.0,
    log: Any = print,
) -> list[RunResult]:
    results = []
    for client in clients:
        topic = unique_topic("spark", client)
        create_topic(bootstrap, topic, PARTITIONS)
        args = ["--bootstrap", bootstrap, "--topic", topic, "--rows", str(rows)]
        result = run_child("bench.e2e_spark", client, args, timeout)
        if result.status == OK:
            result.rss_mb = float(result.extra.get("tree_rss_mb", result.rss_mb))
            landed = count_topic(bootstrap, topic, PARTITIONS, rows)
            if landed != rows:
                result.status = ERROR
                result.detail = f"{landed} of {rows} rows on the topic after the run"
        delete_topic(bootstrap, topic)
        log(f"  spark {client}: {result.status} {result.rate:,.0f} rows/s {result.detail}")
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help="broker; default: KAFKA_BOOTSTRAP_SERVERS or embedded Tansu")
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args(argv)

    if args.child:
        run = functools.partial(_run, args.child, args.bootstrap, args.topic, args.rows)
        return child_main(args.child, {args.child: run} if args.child in CLIENTS else {})

    clients = [c for c in args.clients.split(",") if c]
    if args.bootstrap:
        results = run_spark_bench(args.bootstrap, rows=args.rows, clients=clients)
    else:
        with bench_broker() as bootstrap:
            results = run_spark_bench(bootstrap, rows=args.rows, clients=clients)
    print(e2e_table(results, ANCHOR, unit="rows/s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
