"""Spark and Schema Registry Avro: ``format("kafka_core")`` with ``valueFormat=avro`` against Spark's
own ``format("kafka")`` + spark-avro's ``from_avro`` / ``to_avro`` (the header cut with
``substring``, the writer schema given by hand), in one session, on the same topic.

- read: N order events (bench/avro_order.py) into typed columns, aggregated
  (count, sum of ``total_cents``, number of items, latest ``created_at``; checked equal); the
  first job of each method and a warm one (``--passes``)
- write: N rows of a flat reading (id, sensor, value, time, nullable note) encoded to framed Avro
  and written: ours the struct column with ``valueSchema``; theirs ``concat(header, to_avro(...))``

Wall time and CPU of the whole process tree (driver JVM, Python workers) per method, ratios
against the peer, the load average beside. The connector and spark-avro run only in the pyspark of
their own version, so this runs in the pinned venv:

    $(python -m kafka_core.devtools.brokers.spark_connector) -m bench.bench_spark_avro [--rows 2000000] [--passes 2] [--save]

``--save`` keeps the figures as bench/results.json's ``spark_avro`` section (date, load, machine,
command) and renders bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import bench_broker, unique_topic
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


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(name: str, job: Callable[[], Any], rows: int) -> dict[str, Any]:
    before, start = tree_cpu(os.getpid()), time.perf_counter()
    answer = job()
    wall = time.perf_counter() - start
    cpu = cpu_between(before, tree_cpu(os.getpid()))
    print(
        f"  {name}: {wall:.1f} s, {rows / wall:,.0f} rows/s, {cpu * 1e6 / rows:.2f} CPU s/M (load {_load()})",
        flush=True,
    )
    return {"name": name, "wall_s": wall, "cpu_s": cpu, "answer": answer}


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--writes-only", action="store_true", help="only the writes (no topic to fill)")
    parser.add_argument(
        "--save", action="store_true", help="keep the figures in bench/results.json (spark_avro)"
    )
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    load_before = _load()

    from bench.avro_order import ORDER_SCHEMA_STR
    from kafka_core.devtools.brokers.spark_connector import connector_session
    from kafka_core.devtools.registry import RegistryServer
    from kafka_core.schema_registry import Schema, SchemaRegistryClient
    from kafka_core.spark import register

    print(f"load average before: {load_before}", flush=True)
    with RegistryServer() as registry, bench_broker() as bootstrap:
        client = SchemaRegistryClient({"url": registry.url})
        topic = unique_topic("spark-avro", "read")
        if not args.writes_only:
            create_topic(bootstrap, topic, args.partitions)
            schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_SCHEMA_STR, "AVRO"))
            _fill(bootstrap, topic, args.rows, schema_id)
            print(f"  filled {topic}: {args.rows:,} order events (load {_load()})", flush=True)

        spark = connector_session(
            "bench-spark-avro",
            conf={
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.shuffle.partitions": "2",
                "spark.ui.enabled": "false",
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

        def ours() -> Any:
            df = (
                spark.read.format("kafka_core")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("valueFormat", "avro")
                .option("schema.registry.url", registry.url)
                .load()
            )
            return aggregate(df)

        def theirs() -> Any:
            df = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load()
                .select(
                    from_avro(F.expr("substring(value, 6, length(value) - 5)"), ORDER_SCHEMA_STR).alias(
                        "value"
                    )
                )
            )
            return aggregate(df)

        results: dict[str, list[dict[str, Any]]] = {"read kafka_core": [], "read kafka+from_avro": []}
        for n in range(0 if args.writes_only else args.passes):
            for name, job in (("read kafka+from_avro", theirs), ("read kafka_core", ours)):
                results[name].append(_timed(f"{name} pass {n + 1}", job, args.rows))
        answers = {r["answer"] for rs in results.values() for r in rs}
        if len(answers) > 1:
            each = {name: [r["answer"] for r in rs] for name, rs in results.items()}
            raise SystemExit(f"the reads disagree: {each}")

        # writes: a flat reading, N rows generated in Spark
        frame = spark.range(args.rows).select(
            F.col("id"),
            F.concat(F.lit("sensor-"), (F.col("id") % 100).cast("string")).alias("sensor"),
            (F.col("id") / 7).alias("value"),
            F.timestamp_micros(F.lit(1_767_225_600_000_000) + F.col("id")).alias("at"),
            F.when(F.col("id") % 5 == 0, F.lit("check")).alias("note"),
        )
        value = F.struct("id", "sensor", "value", "at", "note")
        reading = json.dumps(READING)
        for n in range(args.passes):
            out_ours, out_theirs = (
                unique_topic("spark-avro", "w-ours"),
                unique_topic("spark-avro", "w-theirs"),
            )
            for t in (out_ours, out_theirs):
                create_topic(bootstrap, t, args.partitions)
            reading_id = client.register_schema(f"{out_theirs}-value", Schema(reading, "AVRO"))
            header = struct.pack(">bI", 0, reading_id)

            def write_ours(t: str = out_ours) -> None:
                (
                    frame.select(value.alias("value"))
                    .write.format("kafka_core")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", t)
                    .option("valueFormat", "avro")
                    .option("schema.registry.url", registry.url)
                    .option("valueSchema", reading)
                    .mode("append")
                    .save()
                )

            def write_theirs(t: str = out_theirs, h: bytes = header) -> None:
                (
                    frame.select(F.concat(F.lit(bytearray(h)), to_avro(value, reading)).alias("value"))
                    .write.format("kafka")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", t)
                    .mode("append")
                    .save()
                )

            results.setdefault("write to_avro+kafka", []).append(
                _timed(f"write to_avro+kafka pass {n + 1}", write_theirs, args.rows)
            )
            results.setdefault("write kafka_core", []).append(
                _timed(f"write kafka_core pass {n + 1}", write_ours, args.rows)
            )
            for t in (out_ours, out_theirs):
                delete_topic(bootstrap, t)
        spark.stop()
        if not args.writes_only:
            delete_topic(bootstrap, topic)

    print()
    print(f"| {args.rows:,} rows | first s | warm s | vs peer (first / warm) | CPU s per M rows (warm) |")
    print("|---|---|---|---|---|")
    pairs = {"read kafka_core": "read kafka+from_avro", "write kafka_core": "write to_avro+kafka"}
    for name, runs in results.items():
        if not runs:
            continue
        peer = results.get(pairs.get(name, name)) or runs
        first, warm = runs[0]["wall_s"], runs[-1]["wall_s"]
        ratio = f"{peer[0]['wall_s'] / first:.2f}x / {peer[-1]['wall_s'] / warm:.2f}x"
        print(f"| {name} | {first:.1f} | {warm:.1f} | {ratio} | {runs[-1]['cpu_s'] * 1e6 / args.rows:.2f} |")
    print(f"load average after: {_load()}")
    if args.save:
        save(argv, started, load_before, args, results, pairs)
    return 0


def save(
    argv: Sequence[str] | None,
    started: datetime.datetime,
    load_before: str,
    args: argparse.Namespace,
    results: dict[str, list[dict[str, Any]]],
    pairs: dict[str, str],
) -> None:
    """bench/results.json's ``spark_avro`` section: each method's runs (wall and CPU seconds, first
    and warm), its peer, RESULTS.md rendered from it."""
    import shlex
    import sys

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
            "runs": {
                name: [{"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]} for r in runs]
                for name, runs in results.items()
            },
            "peers": pairs,
        },
    )
    print("saved to bench/results.json (spark_avro) and rendered bench/RESULTS.md")


if __name__ == "__main__":
    raise SystemExit(main())
