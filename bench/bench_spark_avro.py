"""Spark and Schema Registry Avro: ``format("kafka_core")`` with ``valueFormat=avro`` against Spark's
own ``format("kafka")`` + spark-avro's ``from_avro`` / ``to_avro`` (the header cut with
``substring``, the writer schema given by hand), on the same topic.

- read: N order events (bench/avro_order.py) into typed columns, aggregated
  (count, sum of ``total_cents``, number of items, latest ``created_at``); the first job of each
  method and a warm one (``--passes``)
- write: N rows of a flat reading (id, sensor, value, time, nullable note) encoded to framed Avro
  and written: ours the struct column with ``valueSchema``; theirs ``concat(header, to_avro(...))``

Each method runs in a fresh process of its own per round (its own driver, JVM and Python
workers: the first job is what a new application meets, for both sides), the order alternated
round by round so that neither side always runs first nor always at the same point of a load
swing; ``--shared`` runs the methods in one session per round instead, their order rotated pass
by pass. The Python workers run kafka_core from compiled bytecode, as an installed package does
(these machines set PYTHONDONTWRITEBYTECODE; the workers get a bytecode cache of their own).

Wall time and CPU of the whole process tree (driver JVM, Python workers) per method, ratios
against the peer of the same round, medians over rounds, the load average beside. Every read's
rows are checked against the rows written; a shortfall is reported with the broker's listed end
offsets (ListOffsets latest), which is where Spark's connector stops. The connector and spark-avro
run only in the pyspark of their own version, so this runs in the pinned venv:

    $(python -m kafka_core.devtools.brokers.spark_connector) -m bench.bench_spark_avro [--rows 2000000] [--passes 2] [--rounds 2] [--save]

``--save`` keeps the figures as bench/results.json's ``spark_avro`` section (date, load, machine,
command) and renders bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import RESULT_PREFIX, bench_broker, unique_topic
from bench.spark_env import cpu_between, tree_cpu

READING = {
    "type": "record",
    "name": "Reading",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
CHUNK = 100_000
READS = ("read kafka+from_avro", "read kafka_core")
WRITES = ("write to_avro+kafka", "write kafka_core")
PEERS = {"read kafka_core": "read kafka+from_avro", "write kafka_core": "write to_avro+kafka"}
CHILD_TIMEOUT_S = 1800.0
# what the Spark Python workers import, compiled into the workers' bytecode cache beforehand
WORKER_IMPORTS = (
    "pyspark.daemon, pyspark.worker, pyspark.sql.datasource, pyspark.sql.worker.create_data_source, "
    "pyspark.sql.worker.plan_data_source_read, pyspark.sql.worker.lookup_data_sources, pyarrow.compute, "
    "kafka_core.spark.source, kafka_core.spark.read, kafka_core.consumer.sync, kafka_core.sync_client, "
    "kafka_core.spark.registry, kafka_core.schema_registry, kafka_core.schema_registry.client, "
    "kafka_core.schema_registry.columnar, kafka_core.spark.write, kafka_core.producer.sync"
)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _jvm_pids(pids: Sequence[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "java":
                    out.add(pid)
        except OSError:
            continue
    return out


def _timed(name: str, job: Callable[[], Any], rows: int) -> dict[str, Any]:
    before, start = tree_cpu(os.getpid()), time.perf_counter()
    answer = job()
    wall = time.perf_counter() - start
    after = tree_cpu(os.getpid())
    cpu = cpu_between(before, after)
    jvm = _jvm_pids(list(after))
    cpu_jvm = cpu_between(
        {p: c for p, c in before.items() if p in jvm}, {p: c for p, c in after.items() if p in jvm}
    )
    print(
        f"  {name}: {wall:.1f} s, {rows / wall:,.0f} rows/s, {cpu * 1e6 / rows:.2f} CPU s/M "
        f"(JVM {cpu_jvm:.1f} CPU s, Python {cpu - cpu_jvm:.1f}) (load {_load()})",
        flush=True,
    )
    return {
        "name": name,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_jvm_s": cpu_jvm,
        "answer": answer,
        "load": _load(),
    }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Our admin: the pinned venv has no confluent-kafka."""
    from kafka_core import KafkaAdmin, NewTopic

    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, -1)])[topic].result()


def delete_topic(bootstrap: str, topic: str) -> None:
    from kafka_core import KafkaAdmin

    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.delete_topics([topic])


def _fill(bootstrap: str, topic: str, rows: int, schema_id: int) -> None:
    from bench.avro_order import encode_orders, make_orders
    from kafka_core import KafkaProducer

    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for seed in range(0, rows, CHUNK):
            values = encode_orders(make_orders(min(CHUNK, rows - seed), seed=seed + 1), schema_id)
            producer.send_batch(topic, values).result(300)


def listed_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The broker's own answer to ListOffsets latest, per partition: where a reader that trusts it
    (Spark's connector) stops. Apache Kafka answers the log end; Tansu the base offset of the
    partition's last batch + 1, inside that batch."""
    from kafka_core.client.metadata import TopicPartition
    from kafka_core.sync_client import KafkaClient

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        found = client.list_offsets(
            {TopicPartition(topic, p): -1 for p in range(partitions)}, timeout_ms=30_000
        )
    return {tp.partition: listed.offset for tp, listed in found.items()}


def workers_bytecode() -> dict[str, str]:
    """The environment of the children (and so of their Spark Python workers): kafka_core from a
    bytecode cache filled here, as an installed package runs, rather than compiled afresh in each
    worker under PYTHONDONTWRITEBYTECODE (which the connector, on the JVM, never pays)."""
    from bench.bytecode import BENCH_DIR, REPO_DIR, child_env

    env = child_env()
    if "PYTHONPYCACHEPREFIX" in env:
        for cmd in (
            [sys.executable, "-m", "compileall", "-q", str(REPO_DIR / "kafka_core"), str(BENCH_DIR)],
            [sys.executable, "-c", f"import {WORKER_IMPORTS}"],
        ):
            subprocess.run(cmd, env=env, cwd=REPO_DIR, capture_output=True, check=False, timeout=600)
        # and PySpark's modules, which the workers import from pyspark.zip through the launcher's
        # cache (kafka_core.spark.launcher), as a pip install compiles an installed package's
        fill = "from kafka_core.spark.zip_bytecode import compile_archives; compile_archives()"
        subprocess.run(
            [sys.executable, "-c", fill], env=env, cwd=REPO_DIR, capture_output=True, check=False, timeout=600
        )
    return env


def _answer(value: Any) -> list[Any]:
    return [v.isoformat() if isinstance(v, datetime.datetime) else v for v in value]


def child(args: argparse.Namespace) -> int:
    """One Spark application: ``--methods`` in one session, ``--passes`` jobs each, the order
    rotated pass by pass (by ``--rotate`` more at the start); one result line per method."""
    from bench.avro_order import ORDER_SCHEMA_STR
    from kafka_core.devtools.brokers.spark_connector import connector_session
    from kafka_core.schema_registry import Schema, SchemaRegistryClient
    from kafka_core.spark import register

    bootstrap, registry_url, topic = args.bootstrap, args.registry, args.topic
    methods = [m for m in args.child.split(",") if m]
    spark = connector_session(
        "bench-spark-avro",
        conf={
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    def aggregate(df: Any) -> Any:
        return tuple(
            df.agg(
                F.count("*"),
                F.sum("value.total_cents"),
                F.sum(F.size("value.items")),
                F.max("value.created_at"),
            ).collect()[0]
        )

    def read_ours() -> Any:
        df = (
            spark.read.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("valueFormat", "avro")
            .option("schema.registry.url", registry_url)
            .load()
        )
        return aggregate(df)

    def read_theirs() -> Any:
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
            .select(
                from_avro(F.expr("substring(value, 6, length(value) - 5)"), ORDER_SCHEMA_STR).alias("value")
            )
        )
        return aggregate(df)

    frame = spark.range(args.rows).select(
        F.col("id"),
        F.concat(F.lit("sensor-"), (F.col("id") % 100).cast("string")).alias("sensor"),
        (F.col("id") / 7).alias("value"),
        F.timestamp_micros(F.lit(1_767_225_600_000_000) + F.col("id")).alias("at"),
        F.when(F.col("id") % 5 == 0, F.lit("check")).alias("note"),
    )
    value = F.struct("id", "sensor", "value", "at", "note")
    reading = json.dumps(READING)
    client = SchemaRegistryClient({"url": registry_url})

    def write_pass(name: str, label: str) -> dict[str, Any]:
        """A write to a fresh topic of its own, made (and for theirs, its schema registered)
        outside the timed job."""
        ours = name == "write kafka_core"
        out = unique_topic("spark-avro", "w-ours" if ours else "w-theirs")
        create_topic(bootstrap, out, args.partitions)
        try:
            if ours:

                def job() -> None:
                    (
                        frame.select(value.alias("value"))
                        .write.format("kafka_core")
                        .option("kafka.bootstrap.servers", bootstrap)
                        .option("topic", out)
                        .option("valueFormat", "avro")
                        .option("schema.registry.url", registry_url)
                        .option("valueSchema", reading)
                        .mode("append")
                        .save()
                    )

            else:
                header = struct.pack(
                    ">bI", 0, client.register_schema(f"{out}-value", Schema(reading, "AVRO"))
                )

                def job() -> None:
                    (
                        frame.select(
                            F.concat(F.lit(bytearray(header)), to_avro(value, reading)).alias("value")
                        )
                        .write.format("kafka")
                        .option("kafka.bootstrap.servers", bootstrap)
                        .option("topic", out)
                        .mode("append")
                        .save()
                    )

            return _timed(label, job, args.rows)
        finally:
            delete_topic(bootstrap, out)

    reads: dict[str, Callable[[], Any]] = {"read kafka_core": read_ours, "read kafka+from_avro": read_theirs}
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for n in range(args.passes):
        shift = (n + args.rotate) % len(methods)
        for name in methods[shift:] + methods[:shift]:
            label = f"{name} pass {n + 1}"
            if name in reads:
                results[name].append(_timed(label, reads[name], args.rows))
            else:
                results[name].append(write_pass(name, label))
    spark.stop()
    for name, runs in results.items():
        passes = [
            {
                "wall_s": r["wall_s"],
                "cpu_s": r["cpu_s"],
                "cpu_jvm_s": r["cpu_jvm_s"],
                "answer": _answer(r["answer"] or ()),
                "load": r["load"],
            }
            for r in runs
        ]
        print(RESULT_PREFIX + json.dumps({"method": name, "passes": passes}), flush=True)
    return 0


def _run_child(
    env: dict[str, str], methods: Sequence[str], args: argparse.Namespace, where: dict[str, str], rotate: int
) -> dict[str, list[dict[str, Any]]]:
    """One fresh process (driver, JVM, Python workers) running ``methods``; its passes per method."""
    cmd = [
        sys.executable, "-m", "bench.bench_spark_avro", "--child", ",".join(methods),
        "--bootstrap", where["bootstrap"], "--registry", where["registry"], "--topic", where["topic"],
        "--rows", str(args.rows), "--passes", str(args.passes), "--partitions", str(args.partitions),
        "--rotate", str(rotate),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    found: dict[str, list[dict[str, Any]]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
            found[result["method"]] = result["passes"]
        else:
            print(line, flush=True)
    missing = [m for m in methods if m not in found]
    if missing:
        raise SystemExit(f"{', '.join(missing)}: no result (exit {proc.returncode}): {proc.stderr[-3000:]}")
    return found


def check_reads(
    rows: int, listed: dict[int, int], results: dict[str, list[list[dict[str, Any]]]]
) -> list[str]:
    """Every read's row count against the rows written. A reader short by exactly what the
    broker's listed end offsets leave out stopped where the broker told it to (Spark's connector
    on Tansu); any other difference is an error of the bench or of a reader."""
    problems, notes = [], []
    listed_total = sum(listed.values())
    for name in READS:
        counts = sorted({p["answer"][0] for rnd in results.get(name, []) for p in rnd})
        if not counts:
            continue
        if counts == [rows]:
            notes.append(f"{name}: every pass read all {rows:,} rows")
        elif counts == [listed_total] and name != "read kafka_core":
            notes.append(
                f"{name}: read {listed_total:,} of {rows:,} rows in every pass, {rows - listed_total:,} short: "
                f"it stops at the broker's listed end offsets (ListOffsets latest: {listed}), which this "
                "broker answers below the log end (the base offset of each partition's last batch + 1); "
                "its rate is over the rows it returned"
            )
        else:
            problems.append(
                f"{name}: read {counts} rows, {rows:,} written, listed ends {listed} ({listed_total:,})"
            )
    for line in notes + problems:
        print(("ERROR " if line in problems else "rows: ") + line, flush=True)
    return problems


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="fresh-process rounds, order alternated")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--shared", action="store_true", help="the methods of a round in one session")
    parser.add_argument("--writes-only", action="store_true", help="only the writes (no topic to fill)")
    parser.add_argument("--reads-only", action="store_true", help="only the reads")
    parser.add_argument(
        "--save", action="store_true", help="keep the figures in bench/results.json (spark_avro)"
    )
    for internal in ("--child", "--bootstrap", "--registry", "--topic"):
        parser.add_argument(internal, default="", help=argparse.SUPPRESS)
    parser.add_argument("--rotate", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    started = datetime.datetime.now(datetime.UTC)
    load_before = _load()

    from bench.avro_order import ORDER_SCHEMA_STR
    from kafka_core.devtools.registry import RegistryServer
    from kafka_core.schema_registry import Schema, SchemaRegistryClient

    print(f"load average before: {load_before}", flush=True)
    operations = [ops for ops, skip in ((READS, args.writes_only), (WRITES, args.reads_only)) if not skip]
    results: dict[str, list[list[dict[str, Any]]]] = {m: [] for ops in operations for m in ops}
    listed: dict[int, int] = {}
    with RegistryServer() as registry, bench_broker() as bootstrap:
        topic = unique_topic("spark-avro", "read")
        if not args.writes_only:
            create_topic(bootstrap, topic, args.partitions)
            client = SchemaRegistryClient({"url": registry.url})
            schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_SCHEMA_STR, "AVRO"))
            _fill(bootstrap, topic, args.rows, schema_id)
            listed = listed_ends(bootstrap, topic, args.partitions)
            print(
                f"  filled {topic}: {args.rows:,} order events; the broker lists end offsets {listed} "
                f"({sum(listed.values()):,}) (load {_load()})",
                flush=True,
            )
        env = workers_bytecode()
        where = {"bootstrap": bootstrap, "registry": registry.url, "topic": topic}
        for rnd in range(args.rounds):
            for ops in operations:
                # round 1: the connector first; round 2: ours first; ...
                order = list(ops) if rnd % 2 == 0 else list(reversed(ops))
                print(
                    f"round {rnd + 1}: {' then '.join(order)}{' (one session)' if args.shared else ''}",
                    flush=True,
                )
                if args.shared:
                    found = _run_child(env, order, args, where, rotate=0)
                else:
                    found = {}
                    for method in order:
                        found.update(_run_child(env, [method], args, where, rotate=0))
                for method in ops:
                    results[method].append(found[method])
        if not args.writes_only:
            delete_topic(bootstrap, topic)

    problems = check_reads(args.rows, listed, results)
    print()
    print(
        f"| {args.rows:,} rows | first s (median) | warm s (median) | vs peer, same round (first / warm) "
        "| CPU s per M rows (warm) |"
    )
    print("|---|---|---|---|---|")
    for name, rounds in results.items():
        if not rounds:
            continue
        peer = results.get(PEERS.get(name, name)) or rounds
        firsts = [r[0]["wall_s"] for r in rounds]
        warms = [r[-1]["wall_s"] for r in rounds]
        ratio_first = [p[0]["wall_s"] / r[0]["wall_s"] for p, r in zip(peer, rounds, strict=True)]
        ratio_warm = [p[-1]["wall_s"] / r[-1]["wall_s"] for p, r in zip(peer, rounds, strict=True)]
        each = ", ".join(f"{a:.2f}x/{b:.2f}x" for a, b in zip(ratio_first, ratio_warm, strict=True))
        cpu = _median([r[-1]["cpu_s"] for r in rounds]) * 1e6 / args.rows
        print(
            f"| {name} | {_median(firsts):.1f} | {_median(warms):.1f} | "
            f"{_median(ratio_first):.2f}x / {_median(ratio_warm):.2f}x (rounds: {each}) | {cpu:.2f} |"
        )
    print(f"load average after: {_load()}")
    if problems:
        print("not saved: a read returned rows it should not have" if args.save else "", flush=True)
        return 1
    if args.save:
        save(argv, started, load_before, args, results, listed)
    return 0


def save(
    argv: Sequence[str] | None,
    started: datetime.datetime,
    load_before: str,
    args: argparse.Namespace,
    results: dict[str, list[list[dict[str, Any]]]],
    listed: dict[int, int],
) -> None:
    """bench/results.json's ``spark_avro`` section: each method's passes per round (wall and CPU
    seconds, rows read), its peer, the broker's listed end offsets; RESULTS.md rendered from it."""
    import shlex

    import pyspark

    from bench.brokers import broker_description
    from bench.common import machine_summary
    from bench.report import save_section

    rest = list(sys.argv[1:] if argv is None else argv)
    save_section(
        "spark_avro",
        {
            "broker": broker_description(),
            "command": shlex.join(["python", "-m", "bench.bench_spark_avro", *rest]),
            "date": f"{started:%Y-%m-%d %H:%M} UTC",
            "load": load_before,
            "load_after": _load(),
            "machine": {k: v for k, v in machine_summary().items() if k != "load"},
            "pyspark": pyspark.__version__,
            "rows": args.rows,
            "passes": args.passes,
            "partitions": args.partitions,
            "mode": "shared" if args.shared else "fresh",
            "listed_end_offsets": sum(listed.values()),
            "runs": {
                name: [
                    [
                        {
                            "wall_s": p["wall_s"],
                            "cpu_s": p["cpu_s"],
                            "cpu_jvm_s": p["cpu_jvm_s"],
                            "rows": (p["answer"] or [None])[0],
                        }
                        for p in rnd
                    ]
                    for rnd in rounds
                ]
                for name, rounds in results.items()
                if rounds
            },
            "peers": PEERS,
        },
    )
    print("saved to bench/results.json (spark_avro) and rendered bench/RESULTS.md")


if __name__ == "__main__":
    raise SystemExit(main())
