"""The main job: an e-commerce order stream through Kafka with Spark, verified end to end.

Generates order events in Spark (Zipf-like customer keys, late and out-of-order event times),
writes them to a Kafka topic from the executors with the ``kafka_core`` data source, reads them
back in batch and computes the business figures, then reads them again as a stream
(``trigger(availableNow=True)``, several micro-batches through ``foreachBatch`` into a Parquet
table), and checks that every event arrived exactly once on both paths (count, distinct order
ids, an order-independent checksum computed in Spark) and that batch and stream agree.

    python -m kafka_core.spark.pipeline [--events N] [--bootstrap-servers HOST:PORT] ...

Without ``--bootstrap-servers`` or ``KAFKA_BOOTSTRAP_SERVERS`` an embedded Tansu broker
(kafka_core.devbroker) runs for the duration. Exit status: 0 PASS, 1 FAIL or a failed job,
2 bad arguments or set-up (reported in one line before Spark starts).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kafka_core.devbroker import TansuBroker
    from kafka_core.spark.pipeline_data import Aggregates, Fingerprint

PROG = "python -m kafka_core.spark.pipeline"
FORMAT = "kafka_core"
_MASTER = re.compile(
    r"local|local\[(\*|[1-9]\d*)(,[1-9]\d*)?\]|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s/:,]+:\d+(,[^\s/:,]+:\d+)*|yarn|k8s://\S+"
)
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


class SetupError(Exception):
    """A bad argument or an unusable environment: one line on stderr, exit 2, no Spark started."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    p.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip() or None,
        help="Kafka brokers host:port[,...] (default $KAFKA_BOOTSTRAP_SERVERS, else an embedded Tansu)",
    )
    p.add_argument("--events", type=_positive, default=1_000_000, help="order events (default 1,000,000)")
    p.add_argument("--partitions", type=_positive, default=4, help="partitions of a new topic (default 4)")
    p.add_argument("--topic", help="topic (default: a fresh orders-<run id>, deleted afterwards)")
    p.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    p.add_argument(
        "--max-offsets-per-trigger",
        type=_positive,
        help="streaming micro-batch size limit (default: events/8, so about 8 micro-batches)",
    )
    return p.parse_args(argv)


def check_master(master: str) -> None:
    if not _MASTER.fullmatch(master):
        raise SetupError(
            f"bad Spark master URL {master!r}: expected local, local[N], local[*], "
            "local-cluster[N,C,M], spark://host:port, yarn or k8s://..."
        )
    if master.startswith("spark://"):
        hosts = [h.rsplit(":", 1) for h in master[len("spark://") :].split(",")]
        error = _tcp_error([(h, int(port)) for h, port in hosts])
        if error:
            raise SetupError(f"Spark master {master} is not reachable ({error})")


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise SetupError(
                f"bad --bootstrap-servers {text!r}: expected host:port[,host:port...], e.g. 127.0.0.1:9092"
            )
        out.append((host.strip("[]"), int(port)))
    return out


def _tcp_error(servers: list[tuple[str, int]], timeout: float = 3.0) -> str | None:
    """None when one of ``servers`` accepts a TCP connection within ``timeout``, else why not."""
    errors = []
    for host, port in servers:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return None
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    return "; ".join(errors)


def check_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").is_file()) and not shutil.which("java"):
        raise SetupError("Spark needs Java 17+: no java on PATH and JAVA_HOME is not set")


def prepare_topic(bootstrap: str, topic: str, partitions: int) -> tuple[int, bool]:
    """Check that ``bootstrap`` answers as Kafka within a few seconds; create ``topic`` if it is
    missing. Returns (its partition count, whether it was created here)."""
    from kafka_core import KafkaClient, NewTopic
    from kafka_core.errors import KafkaError

    servers = parse_bootstrap(bootstrap)
    error = _tcp_error(servers)
    if error:
        raise SetupError(f"Kafka broker {bootstrap} is not reachable ({error})")
    try:
        with KafkaClient(bootstrap, connect_timeout_ms=3000, api_timeout_ms=5000) as client:
            meta = client.metadata([topic], allow_auto_topic_creation=False).topic(topic)
            if meta is not None and not meta.error_code:
                return len(meta.partitions), False
            client.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=10_000)
            return len(client.await_topic_ready(topic, partitions, timeout_ms=10_000).partitions), True
    except KafkaError as exc:
        raise SetupError(
            f"Kafka broker {bootstrap} did not answer as a Kafka broker within 5 s: {exc}"
        ) from None


def delete_topic(bootstrap: str, topic: str) -> str:
    from kafka_core import KafkaClient

    try:
        with KafkaClient(bootstrap, api_timeout_ms=10_000) as client:
            client.delete_topics([topic], timeout_ms=10_000)
        return "deleted"
    except Exception as exc:
        return f"not deleted ({exc})"


# -- output ------------------------------------------------------------------------------------


class Console:
    """Phase lines with elapsed time; rich colours on a terminal, plain lines otherwise."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.tty = sys.stdout.isatty()
        self._rich: Any = None
        self._lock = threading.Lock()
        self.spark: SparkSession | None = None
        with contextlib.suppress(ImportError):
            from rich.console import Console as RichConsole

            self._rich = RichConsole(soft_wrap=True, highlight=False)

    def line(self, text: str, style: str = "") -> None:
        with self._lock:
            if self._rich is not None:
                from rich.markup import escape

                self._rich.print(f"[{style}]{escape(text)}[/]" if style else escape(text))
            else:
                print(text, flush=True)

    def stamp(self) -> str:
        return f"[{time.perf_counter() - self.t0:7.1f}s]"

    def _tasks(self) -> str:
        if self.spark is None:
            return ""
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done, total = done + info.numCompletedTasks, total + info.numTasks
        return f", tasks {done}/{total}" if total else ""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.line(f"{self.stamp()} ▶ {name}", "bold cyan")
        start = time.perf_counter()
        stop = threading.Event()

        def tick() -> None:  # a heartbeat, so that a long phase is visibly alive
            every = 5.0 if self.tty else 15.0
            while not stop.wait(every):
                with contextlib.suppress(Exception):
                    self.line(
                        f"{self.stamp()}   … {name}: {time.perf_counter() - start:.0f} s{self._tasks()}",
                        "dim",
                    )

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        except BaseException:
            self.line(f"{self.stamp()} ✗ {name} failed after {time.perf_counter() - start:.1f} s", "bold red")
            raise
        finally:
            stop.set()
            ticker.join()
        self.line(f"{self.stamp()} ✓ {name} ({time.perf_counter() - start:.1f} s)", "green")


# -- the job -----------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    bootstrap: str
    broker_label: str
    topic: str
    partitions: int
    run_id: str
    out: Console
    timings: dict[str, float] = field(default_factory=dict)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok, detail))
        self.out.line(f"{'  ✓' if ok else '  ✗'} {name}: {detail}", "green" if ok else "bold red")

    @contextlib.contextmanager
    def timed(self, key: str, title: str) -> Iterator[None]:
        with self.out.phase(title):
            start = time.perf_counter()
            yield
            self.timings[key] = time.perf_counter() - start


def start_spark(master: str, tmp: Path) -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = tmp / "log4j2.properties"
    log4j.write_text(
        "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = stderr\n"
        "appender.console.type = Console\nappender.console.name = stderr\n"
        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    spark = (
        SparkSession.builder.master(master)
        .appName("kafka_core pipeline")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from kafka_core.spark import register

    register(spark)
    return spark


def kafka_reader(run: Run, reader: Any) -> Any:
    return (
        reader.format(FORMAT)
        .option("kafka.bootstrap.servers", run.bootstrap)
        .option("subscribe", run.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )


def stream(
    run: Run, spark: SparkSession, tmp: Path, limit: int
) -> tuple[DataFrame, dict[int, tuple[int, dict[str, tuple[int, Decimal]]]]]:
    """The streaming leg: micro-batches parsed and appended to a Parquet table by batch id
    (a replayed batch overwrites its own directory), per-batch revenue merged on the driver."""
    from kafka_core.spark.pipeline_data import is_run, parse_orders, revenue_by_category

    silver = tmp / "silver"
    per_batch: dict[int, tuple[int, dict[str, tuple[int, Decimal]]]] = {}

    def on_batch(df: DataFrame, batch_id: int) -> None:
        start = time.perf_counter()
        path = str(silver / f"batch_id={batch_id}")
        parse_orders(df.filter(is_run(run.run_id))).write.mode("overwrite").parquet(path)
        written = spark.read.parquet(path)
        rows = written.count()
        per_batch[batch_id] = (rows, revenue_by_category(written))
        run.out.line(
            f"{run.out.stamp()}   micro-batch {batch_id}: {rows:,} rows ({time.perf_counter() - start:.1f} s)"
        )

    query = (
        kafka_reader(run, spark.readStream)
        .option("maxOffsetsPerTrigger", str(limit))
        .load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")
    return spark.read.parquet(str(silver)), per_batch


def execute(run: Run) -> bool:
    from kafka_core.spark import pipeline_data as data

    args, out = run.args, run.out
    events = args.events
    limit = args.max_offsets_per_trigger or max(1, math.ceil(events / 8))
    with tempfile.TemporaryDirectory(prefix="kafka_core-pipeline-") as tmp_name:
        tmp = Path(tmp_name)
        with run.timed("spark", f"starting Spark ({args.master})"):
            spark = start_spark(args.master, tmp)
        out.spark = spark
        try:
            slices = max(spark.sparkContext.defaultParallelism, math.ceil(events / 200_000))
            with run.timed("source", f"generating {events:,} order events (fingerprint of the source)"):
                orders = data.generate_orders(spark, events, args.seed, slices)
                records = data.kafka_columns(orders, run.run_id)
                source = data.fingerprint(records)
            out.line(f"    source: {source.describe()}")

            with run.timed("write", f"writing to Kafka topic {run.topic} ({slices} Spark tasks)"):
                (
                    records.write.format(FORMAT)
                    .option("kafka.bootstrap.servers", run.bootstrap)
                    .option("topic", run.topic)
                    .mode("append")
                    .save()
                )

            kafka = kafka_reader(run, spark.read).load()
            with run.timed("read", "batch read of the topic (count, distinct ids, checksum)"):
                batch = data.fingerprint(kafka, keep=data.is_run(run.run_id))
            skipped = f"; {batch.others:,} records of other runs skipped" if batch.others else ""
            out.line(f"    batch:  {batch.describe()}{skipped}")
            run.check("batch read == written", batch.same_records(source), _diff(source, batch))

            with run.timed("aggregates", "batch aggregates (revenue, customers, windows, lateness)"):
                orders = data.parse_orders(kafka.filter(data.is_run(run.run_id))).persist()
                agg = data.aggregates(orders, ordered=True)
                orders.unpersist()
            run.check(
                "headers and keys match payloads",
                agg.header_mismatches == 0,
                f"{agg.header_mismatches:,} mismatching records",
            )

            with run.timed("stream", f"streaming read, availableNow, maxOffsetsPerTrigger={limit:,}"):
                silver, per_batch = stream(run, spark, tmp, limit)
            with run.timed("stream-check", "streaming results (Parquet table) against the batch read"):
                streamed = data.parsed_fingerprint(silver)
                s_windows = data.window_counts(silver)
                s_types = {
                    r["event_type"]: int(r["count"]) for r in silver.groupBy("event_type").count().collect()
                }
            s_revenue = _merge_revenue(per_batch)
            run.check("stream == batch read", streamed.same_records(batch), _diff(batch, streamed))
            run.check(
                "stream aggregates == batch aggregates",
                (s_revenue, s_windows, s_types) == agg.merge_key(),
                "revenue per category, orders per window, event types"
                + ("" if (s_revenue, s_windows, s_types) == agg.merge_key() else " differ"),
            )
            batches = sum(1 for rows, _ in per_batch.values() if rows)
            run.check(
                "several micro-batches",
                batches >= min(2, math.ceil(events / limit)),
                f"{batches} non-empty of {len(per_batch)}",
            )
            summary(run, source, agg, len(per_batch), batches, limit)
        finally:
            out.spark = None
            spark.stop()
    return all(ok for _, ok, _ in run.checks)


def _diff(want: Fingerprint, got: Fingerprint) -> str:
    if got.same_records(want):
        return f"{got.rows:,} rows, each exactly once, checksums equal"
    return f"expected {want.describe()}; got {got.describe()}"


def _merge_revenue(
    per_batch: dict[int, tuple[int, dict[str, tuple[int, Decimal]]]],
) -> dict[str, tuple[int, Decimal]]:
    merged: dict[str, tuple[int, Decimal]] = {}
    for _, revenue in per_batch.values():
        for cat, (placed, amount) in revenue.items():
            old = merged.get(cat, (0, Decimal(0)))
            merged[cat] = (old[0] + placed, old[1] + amount)
    return merged


def summary(run: Run, src: Fingerprint, agg: Aggregates, batches: int, non_empty: int, limit: int) -> None:
    from kafka_core.codec import IMPLEMENTATION

    out, t, rows = run.out, run.timings, src.rows
    mb = (src.key_bytes + src.value_bytes) / 1e6

    def rate(key: str) -> str:
        return f"{rows / t[key]:>10,.0f} rows/s  ({t[key]:.1f} s)"

    out.line("")
    out.line(
        f"kafka_core pipeline — topic {run.topic} ({run.partitions} partitions), broker {run.broker_label}, "
        f"Spark {run.args.master}, codec {IMPLEMENTATION}",
        "bold",
    )
    out.line(
        f"  rows          {rows:>10,}  ({mb:,.1f} MB of keys and JSON values, avg {src.value_bytes / rows:.0f} B)"
    )
    out.line(f"  write         {rate('write')}")
    out.line(f"  batch read    {rate('read')}")
    out.line(f"  streaming     {rate('stream')}, {non_empty} micro-batches of ≤{limit:,} ({batches} run)")
    placed = sum(agg.event_types.get(k, 0) for k in ("order_placed",))
    types = ", ".join(f"{k.removeprefix('order_')} {v:,}" for k, v in sorted(agg.event_types.items()))
    out.line(f"  events        {types}; {agg.late:,} late ({agg.late / rows:.1%}, behind their partition)")
    out.line("  net revenue by category:")
    for cat, (n, revenue) in sorted(agg.revenue.items(), key=lambda kv: -kv[1][1]):
        out.line(f"    {cat:<12} {revenue:>16,.2f}  ({n:,} orders)")
    share = agg.top_customers[0][1] / rows if agg.top_customers else 0.0
    out.line(f"  top customers of {agg.customers:,} (the busiest placed {share:.1%} of all orders):")
    for cust, n, spent in agg.top_customers:
        out.line(f"    {cust}  {n:>8,} orders  {spent:>14,.2f} spent")
    counts = sorted(agg.windows.values()) or [0]
    busiest = max(agg.windows.items(), key=lambda kv: kv[1]) if agg.windows else ("-", 0)
    out.line(
        f"  orders per 1 h event-time window: {len(agg.windows)} windows, {counts[0]:,} to {counts[-1]:,} "
        f"(busiest {busiest[0]} UTC); {placed:,} placed in all"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Console()
    run_id = uuid.uuid4().hex[:12]
    topic = args.topic or f"orders-{run_id}"
    tansu: TansuBroker | None = None
    try:
        if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise SetupError(f"bad --topic {topic!r}: use 1-249 of [A-Za-z0-9._-]")
        check_master(args.master)
        check_java()
        try:
            import pyspark  # noqa: F401

            from kafka_core.spark import register  # noqa: F401
        except ImportError as exc:
            raise SetupError(
                f"the pipeline needs pyspark and pyarrow: pip install '.[spark]' ({exc})"
            ) from None
        bootstrap = args.bootstrap_servers
        if bootstrap:
            parse_bootstrap(bootstrap)
            label = bootstrap
        else:
            from kafka_core.devbroker import BrokerStartError, TansuBroker

            try:
                tansu = TansuBroker().start()
            except BrokerStartError as exc:
                raise SetupError(f"no broker: {exc}") from None
            bootstrap, label = tansu.bootstrap, f"{tansu.bootstrap} (embedded Tansu)"
        partitions, created = prepare_topic(bootstrap, topic, args.partitions)
    except SetupError as exc:
        if tansu is not None:
            tansu.close()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    out.line(
        f"{out.stamp()} kafka_core pipeline: {args.events:,} events, run {run_id}, topic {topic} "
        f"({partitions} partitions{', new' if created else ''}), broker {label}",
        "bold",
    )
    run = Run(args, bootstrap, label, topic, partitions, run_id, out)
    try:
        ok = execute(run)
    except KeyboardInterrupt:
        out.line("interrupted", "bold red")
        return 130
    except Exception as exc:
        traceback.print_exc()
        out.line(
            f"FAIL — the job stopped with {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            "bold red",
        )
        return 1
    finally:
        if tansu is not None:
            tansu.close()
        elif created and not args.topic:
            out.line(f"{out.stamp()} topic {topic} {delete_topic(bootstrap, topic)}", "dim")
    failed = [name for name, ok_, _ in run.checks if not ok_]
    out.line(
        "PASS — every event arrived exactly once; batch and stream agree"
        if ok
        else f"FAIL — {', '.join(failed)}",
        "bold green" if ok else "bold red",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
