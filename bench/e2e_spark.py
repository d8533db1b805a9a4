"""End-to-end Spark benchmark: write N rows (key 16 B, value 100 B) to a Kafka topic, read them back.

Every method runs in its own fresh process and Spark session (local[2]), sequentially; the
session start and the first spawn of Python workers are not timed (warm-up jobs run first: a
trivial RDD job, then for every method of an operation a 1,000-row job through the ceiling's
Python Data Source, so the data source planner and Python workers are up for all alike).
CPU is summed over the whole process tree (driver, JVM, Python workers) from /proc, so it is
approximate; the broker's CPU is not in it (it runs beside, on the same 2 cores) but is measured
per pass beside it (Tansu found by its listener URL, Apache Kafka's JVM by its listening port).

Spark's own connector (``format("kafka")``, the ``spark-sql-kafka-0-10`` jar) runs only in the
pyspark of its own version, the newest Maven Central serves (4.2.0; PyPI's newest may be newer).
When its methods are in the run (the default), every method, ours and the peers and ceilings
too, runs in the venv pinned to that pyspark (``kafka_core.devtools.brokers.spark_connector``) with the
connector's jars in ``spark.jars``: one pyspark, one JVM class path, the same data and broker.
Each format is used as a user would, with its defaults and only the options shown below.

WRITE, a DataFrame from ``spark.range`` to a fresh 4-partition topic, then read back with
confluent-kafka: a row counts only if every record landed.

- ``foreachPartition-confluent`` (peer): ``df.foreachPartition`` with one confluent-kafka
  Producer per partition (acks=all, linger 5 ms, batch 1 MB), flushed and checked at task end.
- ``kafka-connector-write`` (Spark's connector): ``df.write.format("kafka")`` with the same
  options as ours.
- ``kafka_core-write`` (ours): ``df.write.format("kafka_core").option("kafka.bootstrap.servers",
  ...).option("topic", ...).mode("append").save()``.
- ``ceiling-arrow-writer`` (no broker): a ``DataSourceArrowWriter`` that only counts the rows of
  the same DataFrame. The most any Python sink can do here.

READ, all readers read the same topic: the one the peer wrote (else ours; else one filled by a
confluent-kafka producer with the same keys and values).

- ``mapPartitions-confluent`` (peer): an RDD with one element per Kafka partition whose
  ``mapPartitions`` opens a confluent-kafka Consumer (fetch wait 100 ms, prefetching as in the
  consumer bench), assigns the partition from its earliest offset and yields
  ``(key, value, topic, partition, offset, timestamp ms, timestamp type)`` tuples;
  ``spark.createDataFrame(rdd, schema, verifySchema=False)``, then ``timestamp_millis`` and
  ``type - 1`` in SQL give Spark's Kafka schema. Where the partition ends: the test broker's
  ListOffsets "latest" is wrong (base offset of the last batch + 1, which lies inside the last
  batch), so the peer reads up to that listed end (asking ``consume`` for no more than remain
  before it, so that it never sits out its timeout) and then drains, without waiting, what is
  already fetched: the rest of the last batch arrived with the listed-end record. On Apache
  Kafka the listed end is right and the drain finds nothing. No wait is added for the peer.
- ``kafka-connector-read`` (Spark's connector): ``spark.read.format("kafka")`` with the same
  options as ours.
- ``kafka_core-read`` (ours): ``spark.read.format("kafka_core").option("kafka.bootstrap.servers",
  ...).option("subscribe", topic).option("startingOffsets", "earliest").load()``.
- ``ceiling-arrow-reader`` (no broker): a Python Data Source whose reader yields prebuilt
  ``pyarrow.RecordBatch``es of exactly the Kafka read schema (10,000 rows each, over 4 input
  partitions like the topic): no per-row work in Python at all.

What the read measures: the DataFrame's construction (``load()`` / ``createDataFrame``) and
``df.agg(count(1), sum(length(value)), sum(length(key)))``, timed together. ``count()`` alone
would do: Spark cannot push a count into a Python source (there is no column pruning either),
so the reader runs in full and its Arrow batches cross to the JVM with every column. Checked on
pyspark 4.3 with a reader of prebuilt batches: the count can only come from rows the reader
yielded, and ``count()`` of 2,000,000 rows took 0.75-0.83 s with 100-byte values but 2.5-3.1 s with
2,000-byte values it never looks at; the aggregate took the same within the noise (0.85-1.3 s,
up to about 20% more in a warm session). The aggregate is used because it also makes the JVM
read every key and value byte (a reader that someday gets column pruning could not skip them)
and proves the data: a read counts only if it returns exactly N rows, N x 100 value bytes and
N x 16 key bytes.

By default each figure is the first big job of a fresh session after a light warm-up, as a
one-off batch job sees it: the JVM is not yet warmed by a big job, and the Arrow paths suffer
from that more than the peers' (medians of 3 rounds here: our read 0.58 M rows/s on the first
job, 1.05 M on the second; the read ceiling 1.07 M then 1.48 M; the peer read 0.41 M then
0.53 M; after several big jobs the read ceiling reaches 2.3-2.6 M). ``--passes N`` times the job
N times in the session (writes each to a fresh topic, all checked) and reports the last, warmer
one, the first beside it. Each Python Data Source job also pays a fixed 0.3-0.5 s of planning
(its own Python processes) whatever its size, which is why small runs (--rows 200000) put every
Python source near its peer. With ``--repeat`` the rounds go round-robin over the methods and
each method's median is reported. The read ceiling's 10,000-row batches are its best size here
(50,000 the same, 2,000 and 200,000 slower).

``--shared`` runs the methods of an operation in one session per round (one start and warm-up,
their order rotated each round; a method's first job is then its first in that session, after
the others warmed the JVM): three rounds of 2,000,000 rows then fit on a loaded machine.
With ``--passes 2`` the first job and a warm one are both reported; with ``--repeat 3`` each is
the median of its three rounds (the first job's rate and CPU have their own medians).
``KAFKA_CORE_BENCH_BROKER=kafka`` runs on Apache Kafka instead of the embedded Tansu.

    python -m bench.e2e_spark [--rows 2000000] [--repeat 1] [--passes 1] [--clients a,b,...]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys
from collections.abc import Sequence
from typing import Any

from bench.common import (
    ERROR,
    NOT_IMPLEMENTED,
    OK,
    NotImplementedYet,
    RunResult,
    Span,
    bench_broker,
    child_main,
    create_topic,
    delete_topic,
    emit,
    median_result,
    our_module,
    unique_topic,
)
from bench.proc_tree import TreeSampler
from bench.spark_env import broker_cpu, cpu_between, run_children_in, spark_env, tree_cpu
from bench.spark_methods import (
    CEILING_SOURCE,
    CLIENTS,
    CONNECTOR_METHODS,
    KEY_SIZE,
    METHODS,
    OPERATIONS,
    PARTITIONS,
    VALUE_SIZE,
    WARM_UP_ROWS,
    kafka_schema,
    method_role,
)
from bench.spark_report import spark_table
from bench.spark_topics import check_result, pass_topic, pick_read_topic

# --------------------------------------------------------------------------- driver side


def _session(jars: Sequence[str] = ()) -> Any:
    """local[2]; ``jars`` (Spark's Kafka connector and its dependencies) in every method's session
    alike when the connector is in the run, so all share one JVM class path."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_core-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
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


def _drain(df: Any) -> tuple[int, int, int]:
    """The read's action: (rows, value bytes, key bytes), every row and byte through the JVM."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)), F.sum(F.length("value")).cast("long"), F.sum(F.length("key")).cast("long")
    ).first()
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def _warm_up(spark: Any, op: str) -> None:
    """Spawn the Python workers before timing (about 4.5 s here, not part of the job), then run a
    small job through a Python Data Source of the same operation (the planner's Python process)."""
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).count()
    if op == "write":
        (
            _frame(spark, WARM_UP_ROWS)
            .write.format(CEILING_SOURCE)
            .option("expected", str(WARM_UP_ROWS))
            .mode("append")
            .save()
        )
    else:
        _drain(spark.read.format(CEILING_SOURCE).option("rows", str(WARM_UP_ROWS)).load())


def _our_source(kind: str) -> Any:
    """Our Python Data Source class with a ``kind`` ("reader" or "writer"), and the module's
    ``register(spark)`` if it has one; or say it is not there yet (checked before Spark starts).

    Looked up in ``$BENCH_SPARK_SOURCE`` (``module`` or ``module:Class``, default
    ``kafka_core.spark``): a DataSource subclass there that defines ``kind``, the one named
    "kafka_core" first.
    """
    spec = os.environ.get("BENCH_SPARK_SOURCE", "kafka_core.spark")
    module_name, _, class_name = spec.partition(":")
    from pyspark.sql.datasource import DataSource

    module = our_module(module_name)
    members = {}
    for name in {*dir(module), *getattr(module, "__all__", ())}:  # __all__: lazy exports too
        try:
            members[name] = getattr(module, name)
        except Exception as exc:
            raise RuntimeError(f"{module_name}.{name} failed to import: {type(exc).__name__}: {exc}") from exc
    sources = [
        obj
        for name, obj in sorted(members.items())
        if inspect.isclass(obj)
        and issubclass(obj, DataSource)
        and obj is not DataSource
        and getattr(obj, kind) is not getattr(DataSource, kind)
        and (not class_name or name == class_name)
    ]
    if not sources:
        raise NotImplementedYet(f"{spec} has no DataSource with a {kind} yet")
    sources.sort(key=lambda cls: _source_name(cls) != "kafka_core")
    register = getattr(module, "register", None)
    return sources[0], register if callable(register) else None


def _source_name(cls: Any) -> str:
    try:
        return str(cls.name())
    except Exception:
        return ""


def _run(
    method: str, bootstrap: str, topic: str, rows: int, passes: int = 1, jars: Sequence[str] = ()
) -> RunResult:
    """One method in a session of its own."""
    return _run_many([method], bootstrap, [topic], rows, passes, jars)[0]


def _run_many(
    methods: Sequence[str],
    bootstrap: str,
    topics: Sequence[str],
    rows: int,
    passes: int = 1,
    jars: Sequence[str] = (),
) -> list[RunResult]:
    """Methods of one operation, one after the other in one session (after one warm-up), each
    timed ``passes`` times; a method that fails becomes an error row and the next one runs."""
    op = method_role(methods[0])[0]
    from bench import spark_methods as importable  # pickled by reference, not from __main__

    ours: tuple[Any, Any] | NotImplementedYet | None = None
    if any(method_role(m)[1] == "ours" for m in methods):
        try:
            ours = _our_source("writer" if op == "write" else "reader")
        except NotImplementedYet as exc:
            ours = exc
    spark = _session(jars)
    try:
        spark.dataSource.register(importable.ceiling_source())
        our_fmt = ""
        if isinstance(ours, tuple):
            source, register = ours
            if register is not None:
                register(spark)
            else:
                spark.dataSource.register(source)
            our_fmt = _source_name(source)
        _warm_up(spark, op)
        results = []
        for method, topic in zip(methods, topics, strict=True):
            role = method_role(method)[1]
            if role == "ours" and isinstance(ours, NotImplementedYet):
                results.append(RunResult(method, status=NOT_IMPLEMENTED, detail=str(ours)))
                continue
            if role == "connector" and not jars:
                results.append(
                    RunResult(method, status=ERROR, detail="Spark's connector needs its jars (--jars)")
                )
                continue
            fmt = {"ours": our_fmt, "connector": "kafka"}.get(role, "")
            try:
                results.append(_timed(spark, importable, method, fmt, bootstrap, topic, rows, passes))
            except Exception as exc:
                results.append(RunResult(method, status=ERROR, detail=f"{type(exc).__name__}: {exc}"[:400]))
        if len(methods) > 1:
            for r in results:
                r.extra["session"] = "shared: " + " > ".join(methods)
        return results
    finally:
        spark.stop()


def _timed(
    spark: Any, importable: Any, method: str, fmt: str, bootstrap: str, topic: str, rows: int, passes: int
) -> RunResult:
    op, role = method_role(method)
    notes: list[str] = []
    spans: list[tuple[float, float]] = []  # (wall, tree CPU) of every pass
    brokers: list[float | None] = []  # every pass's broker CPU seconds, where measurable
    short_rows: list[int] = []  # rows a read returned short of ``rows`` (the connector on Tansu)
    with TreeSampler() as sampler:
        for index in range(passes):
            cpu0 = tree_cpu(os.getpid())
            broker0 = broker_cpu(bootstrap) if role != "ceiling" else None
            span = Span().start()
            if op == "write":
                df = _frame(spark, rows)
                _write(importable, method, df, fmt, bootstrap, pass_topic(topic, index), rows)
            else:
                df = _read_frame(importable, spark, method, fmt, bootstrap, topic, rows)
                got = _drain(df)
            span.stop()
            spans.append((span.wall, cpu_between(cpu0, tree_cpu(os.getpid()))))
            broker1 = broker_cpu(bootstrap) if broker0 is not None else None
            brokers.append(broker1 - broker0 if broker0 is not None and broker1 is not None else None)
            if op == "read" and got != (want := (rows, rows * VALUE_SIZE, rows * KEY_SIZE)):
                short = got == (got[0], got[0] * VALUE_SIZE, got[0] * KEY_SIZE) and got[0] < rows
                if not (short and role == "connector"):
                    raise RuntimeError(f"read (rows, value bytes, key bytes) {got}, expected {want}")
                # Tansu lists a partition's end as the base offset of its last batch + 1: the
                # connector reads up to that listed end (the peer drains the rest, ours reads to
                # the fetched high watermark). Its rate is then taken over the rows it returned.
                short_rows.append(got[0])
    if op == "read":
        schema = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        expected = [(f.name, f.dataType.simpleString()) for f in kafka_schema().fields]
        if schema != expected:
            notes.append(f"schema differs from Spark's Kafka source: {schema}")
    wall, cpu = spans[-1]  # the last pass: with several, the session is warm
    if short_rows:
        notes.append(f"read {short_rows[-1]:,} of {rows:,} rows (to the broker's listed end offsets)")
        rows = short_rows[-1]
    result = RunResult(method, records=rows, wall_s=wall, cpu_s=cpu)
    result.extra["tree_rss_mb"] = round(sampler.peak_mb)
    result.extra["op"] = op
    result.extra["role"] = role
    if passes > 1:
        result.extra["pass_rates"] = [round(rows / w) for w, _ in spans]
        result.extra["pass_cpu_per_million"] = [round(c / rows * 1e6, 3) for _, c in spans]
    notes.insert(0, f"{df.rdd.getNumPartitions()} Spark partitions")
    if role in ("ours", "connector"):
        notes.append(f"format {fmt!r}")
    if brokers and brokers[-1] is not None:  # the broker shares the 2 cores
        result.extra["broker_cpu_per_million"] = round(brokers[-1] / rows * 1e6, 2)
        if passes > 1 and brokers[0] is not None:
            result.extra["pass_broker_cpu_per_million"] = [
                None if b is None else round(b / rows * 1e6, 3) for b in brokers
            ]
    result.extra["note"] = "; ".join(notes)
    return result


def _write(importable: Any, method: str, df: Any, fmt: str, bootstrap: str, topic: str, rows: int) -> None:
    if method == "foreachPartition-confluent":
        df.foreachPartition(
            functools.partial(importable.write_partition_confluent, bootstrap=bootstrap, topic=topic)
        )
    elif method == "ceiling-arrow-writer":
        df.write.format(CEILING_SOURCE).option("expected", str(rows)).mode("append").save()
    else:
        (
            df.write.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .mode("append")
            .save()
        )


def _read_frame(
    importable: Any, spark: Any, method: str, fmt: str, bootstrap: str, topic: str, rows: int
) -> Any:
    if method == "ceiling-arrow-reader":
        return (
            spark.read.format(CEILING_SOURCE)
            .option("rows", str(rows))
            .option("partitions", str(PARTITIONS))
            .load()
        )
    if method in ("kafka_core-read", *CONNECTOR_METHODS):
        return (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
    from confluent_kafka.admin import AdminClient
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(topic, timeout=30)
    partitions = sorted(metadata.topics[topic].partitions)
    fields = kafka_schema().fields
    fields[5] = StructField("timestamp", LongType())  # milliseconds, converted in SQL below
    rdd = spark.sparkContext.parallelize(partitions, len(partitions)).mapPartitions(
        functools.partial(importable.read_partitions_confluent, bootstrap=bootstrap, topic=topic)
    )
    df = spark.createDataFrame(rdd, StructType(fields), verifySchema=False)
    return df.select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.timestamp_millis("timestamp").alias("timestamp"),
        (F.col("timestampType") - 1).alias("timestampType"),  # librdkafka: 1 CreateTime, 2 LogAppend
    )


def run_spark_bench(
    bootstrap: str,
    *,
    rows: int = 2_000_000,
    clients: Sequence[str] = CLIENTS,
    repeat: int = 1,
    passes: int = 1,
    shared: bool = False,
    first_round: int = 0,
    timeout: float = 400.0,
    log: Any = print,
) -> list[RunResult]:
    """Writes first (each to its own fresh topic, checked by reading it back), then reads, all of
    the one topic the peer's write left (else ours', else a freshly filled one); ``repeat`` rounds
    of that, each method's median reported. With ``passes`` > 1 every method times its job that many
    times in its session (writes each to a fresh topic): the last, warm one and the first beside.
    ``shared``: the methods of an operation share one session per round (one start, one warm-up),
    their order rotated round by round (``first_round``: where the rotation starts, for a round run
    on its own later); otherwise each method has a fresh process and session."""
    env = spark_env(clients, log)
    if env.problem:
        log(f"  spark: {env.problem}")
    elif env.python != sys.executable:
        log(f"  spark: every method runs in {env.python} (pyspark {env.pyspark}) with the connector's jars")
    runs: dict[str, list[RunResult]] = {}
    written: dict[str, str] = {}  # writer -> its topic, holding exactly ``rows`` records
    read: list[str] = []  # [the topic every reader reads, who wrote it], once picked
    order = sorted(clients, key=lambda c: (*OPERATIONS, method_role(c)[0]).index(method_role(c)[0]))
    try:
        for round_ in range(first_round, first_round + repeat):
            for group in _groups(order, shared, round_):
                op = method_role(group[0])[0]
                topics = []
                for client in group:
                    topic = ""
                    if method_role(client)[1] != "ceiling" and op == "write":
                        topic = unique_topic("spark", client)
                        for index in range(passes):
                            create_topic(bootstrap, pass_topic(topic, index), PARTITIONS)
                    elif method_role(client)[1] != "ceiling":
                        if not read:
                            read.extend(pick_read_topic(bootstrap, written, rows, log))
                        topic = read[0]
                    topics.append(topic)
                args = ["--rows", str(rows), "--passes", str(passes), "--bootstrap", bootstrap]
                results = run_children_in(
                    env, "bench.e2e_spark", group, [*args, "--topic", ",".join(topics)], timeout * len(group)
                )
                for client, topic, result in zip(group, topics, results, strict=True):
                    check_result(result, bootstrap, topic, rows, passes, written, read)
                    log(f"  spark {client}: {result.status} {result.rate:,.0f} rows/s {result.detail}")
                    if jsonl := os.environ.get("BENCH_SPARK_JSONL"):  # every round kept as it ends
                        with open(jsonl, "a") as out:
                            out.write(result.to_json() + "\n")
                    runs.setdefault(client, []).append(result)
    finally:
        for topic in {*written.values(), *read[:1]} - {""}:
            delete_topic(bootstrap, topic)
    return [_median(runs[client], env) for client in order]


def _groups(order: Sequence[str], shared: bool, round_: int) -> list[list[str]]:
    """The children of one round: a method each, or (shared) the methods of each operation,
    rotated by the round so that no method is always the session's first."""
    if not shared:
        return [[client] for client in order]
    groups = []
    for op in OPERATIONS:
        group = [c for c in order if method_role(c)[0] == op]
        if group:
            shift = round_ % len(group)
            groups.append(group[shift:] + group[:shift])
    return groups


def _median(results: list[RunResult], env: Any) -> RunResult:
    """The median round by its warm rate, with the first job's own medians beside (rate, CPU and
    broker CPU per million rows over the rounds), and the pyspark every method ran on."""
    chosen = median_result(results)
    if chosen.status != OK:
        return chosen
    chosen.extra["pyspark"] = env.pyspark
    for key in ("pass_rates", "pass_cpu_per_million", "pass_broker_cpu_per_million"):
        firsts = sorted(r.extra[key][0] for r in results if r.extra.get(key) and r.extra[key][0] is not None)
        if firsts:
            chosen.extra[f"first_{key.removeprefix('pass_')}_median"] = firsts[(len(firsts) - 1) // 2]
    return chosen


def _child_many(methods: list[str], args: Any) -> int:
    """Child entry point of a shared session: one result line per method, in order."""
    jars = [j for j in args.jars.split(",") if j]
    topics = args.topic.split(",")
    try:
        results = _run_many(methods, args.bootstrap, topics, args.rows, args.passes, jars)
    except Exception as exc:
        results = [RunResult(m, status=ERROR, detail=f"{type(exc).__name__}: {exc}"[:400]) for m in methods]
    for result in results:
        emit(result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help="broker; default: KAFKA_BOOTSTRAP_SERVERS or embedded Tansu")
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--jars", default="", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma list of methods")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (fresh processes); median reported")
    parser.add_argument(
        "--passes", type=int, default=1, help="timed jobs per session; the last (warm) one is reported"
    )
    parser.add_argument(
        "--shared", action="store_true", help="the methods of an operation share one session per round"
    )
    parser.add_argument("--first-round", type=int, default=0, help="--shared: the rotation's first round")
    args = parser.parse_args(argv)

    if args.child:
        methods = args.child.split(",")
        if len(methods) == 1:
            jars = [j for j in args.jars.split(",") if j]
            run = functools.partial(
                _run, args.child, args.bootstrap, args.topic, args.rows, args.passes, jars
            )
            return child_main(args.child, {args.child: run} if args.child in METHODS else {})
        return _child_many(methods, args)

    clients = [c for c in args.clients.split(",") if c]
    unknown = [c for c in clients if c not in METHODS]
    if unknown:
        parser.error(f"unknown methods: {', '.join(unknown)} (known: {', '.join(METHODS)})")
    if args.bootstrap:
        results = run_spark_bench(
            args.bootstrap,
            rows=args.rows,
            clients=clients,
            repeat=args.repeat,
            passes=args.passes,
            shared=args.shared,
            first_round=args.first_round,
        )
    else:
        with bench_broker() as bootstrap:
            results = run_spark_bench(
                bootstrap,
                rows=args.rows,
                clients=clients,
                repeat=args.repeat,
                passes=args.passes,
                shared=args.shared,
                first_round=args.first_round,
            )
    print(spark_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
