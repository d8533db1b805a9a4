"""The main job: an e-commerce order stream through Kafka with Spark, verified end to end.

Generates order events in Spark (Zipf-like customer keys, late and out-of-order event times),
writes them to a Kafka topic from the executors with the ``kafka_core`` data source, reads them
back in batch and computes the business figures, then reads them again as a stream
(``trigger(availableNow=True)``, several micro-batches through ``foreachBatch`` into a Parquet
table), and checks that every event arrived exactly once on both paths (count, distinct order
ids, an order-independent checksum computed in Spark) and that batch and stream agree.

    python -m kafka_core.devtools.pipeline [--events N] [--bootstrap-servers HOST:PORT] ...

``--format kafka`` runs the same job on Spark's own connector (spark-sql-kafka-0-10) and
``--compare`` runs both, alternating over ``--rounds``, on the same broker and generated data,
then prints each phase side by side with ratios and checks that both read the same records.
The connector is a JVM jar built for one Spark version: when Maven Central has none for the
running pyspark, the job re-runs itself under the newest connector release's pyspark (a venv in
the user cache, kafka_core.devtools.brokers.spark_connector), so both formats share one Spark.

Without ``--bootstrap-servers`` or ``KAFKA_BOOTSTRAP_SERVERS`` an embedded broker
(kafka_core.devtools.brokers) runs for the duration: Tansu, or with Spark's connector in the run
Apache Kafka (the connector's writes to Tansu 0.5 lost records here), as ``--broker`` picks. Exit status: 0 PASS, 1 FAIL or a failed job,
2 bad arguments or set-up (one line on stderr, before Spark starts), or a Spark that did not start
(one line: its JVM's reason).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
import urllib.parse
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader

    from kafka_core.devtools.brokers import KafkaCluster, TansuBroker
    from kafka_core.devtools.pipeline.data import Aggregates, Fingerprint, Revenue

PROG = "python -m kafka_core.devtools.pipeline"
FORMAT = "kafka_core"
CONNECTOR = "kafka"  # Spark's own connector, spark-sql-kafka-0-10
FORMATS = (FORMAT, CONNECTOR)
COMPARE_ROUNDS = 3
# Set by the job for the run of itself under the connector's pyspark: "<version>|<why>".
_CONNECTOR_ENV = "KAFKA_CORE_PIPELINE_CONNECTOR"
# The phases --compare times per format (the job's own, after Spark and the generated data).
PHASES = (
    ("write", "write"),
    ("read", "batch read + fingerprint"),
    ("aggregates", "batch aggregates"),
    ("stream", "streaming micro-batches"),
    ("stream-check", "stream check"),
)
_MASTER = re.compile(
    r"local|local\[(\*|[1-9]\d*)(,[1-9]\d*)?\]|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s/:,]+:\d+(,[^\s/:,]+:\d+)*|yarn|k8s://\S+"
)
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


class SetupError(Exception):
    """A bad argument or an unusable environment: one line on stderr, exit 2, no Spark started."""


class SparkStartError(SetupError):
    """Spark did not come up (its JVM exited, or the context failed): the JVM's own reason as one
    line on stderr, exit 2, no stack trace."""


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
    p.add_argument("--master", default="local[2]", metavar="URL", help="Spark master URL (default local[2])")
    p.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip() or None,
        metavar="HOST:PORT",
        help="Kafka brokers host:port[,...] (default $KAFKA_BOOTSTRAP_SERVERS, else an embedded Tansu)",
    )
    p.add_argument(
        "--events", type=_positive, metavar="N", default=1_000_000, help="order events (default 1,000,000)"
    )
    p.add_argument(
        "--partitions", type=_positive, metavar="N", default=4, help="partitions of a new topic (default 4)"
    )
    p.add_argument(
        "--topic", metavar="NAME", help="topic (default: a fresh orders-<run id>, deleted afterwards)"
    )
    p.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        help="the embedded broker without --bootstrap-servers: tansu, or kafka (Apache Kafka from Maven "
        "Central's jars); default tansu, kafka when Spark's connector runs",
    )
    p.add_argument("--seed", type=int, metavar="N", default=42, help="generator seed (default 42)")
    p.add_argument(
        "--max-offsets-per-trigger",
        type=_positive,
        metavar="N",
        help="streaming micro-batch size limit (default: events/8, so about 8 micro-batches)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="kafka_core (default) or kafka: Spark's own connector (spark-sql-kafka-0-10, from Maven)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="run the job on both formats, alternating, and print the phases side by side",
    )
    p.add_argument(
        "--rounds",
        type=_positive,
        metavar="N",
        help=f"with --compare: rounds of both formats, alternating which goes first (default {COMPARE_ROUNDS})",
    )
    p.add_argument(
        "--connector-spark",
        choices=("running", "matching"),
        default="running",
        help="when Maven Central has no connector for the running pyspark: run its newest release on "
        "the running Spark (running, the default: both formats on the same engine, every answer checked), "
        "or run the whole job again under the pyspark that release was built for (matching)",
    )
    p.add_argument(
        "--event-log",
        metavar="DIR",
        type=Path,
        help="keep Spark's event log (every task's run, CPU, GC and serialisation times) in DIR, for "
        "python -m kafka_core.devtools.pipeline.profile",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        type=Path,
        help="also write the phases' times per format and round, the ratios and the checks to FILE "
        "(bench.bench_main_job keeps them in bench/results.json)",
    )
    args = p.parse_args(argv)
    if args.compare and args.format:
        p.error("--compare runs both formats: leave out --format")
    if args.rounds and not args.compare:
        p.error("--rounds goes with --compare")
    if args.broker and args.bootstrap_servers:
        p.error(
            "--broker picks the embedded broker: leave it out with --bootstrap-servers (or KAFKA_BOOTSTRAP_SERVERS)"
        )
    args.formats = list(FORMATS) if args.compare else [args.format or FORMAT]
    args.rounds = (args.rounds or COMPARE_ROUNDS) if args.compare else 1
    args.broker = args.broker or ("kafka" if CONNECTOR in args.formats else "tansu")
    return args


def leg_topic(topic: str, fmt: str, round_no: int, compare: bool) -> str:
    """The topic one format writes in one round: ``topic`` itself, or with --compare a topic of
    its own per format and round (``<topic>-kafka_core-r1``), so every read sees only its write."""
    return f"{topic}-{fmt.replace('_', '-')}-r{round_no}"[:249] if compare else topic


@dataclass(frozen=True)
class Connector:
    """Spark's connector as the job runs it: its version, why that one, and its jars."""

    version: str
    why: str
    jars: list[Path]

    def describe(self) -> str:
        return f"spark-sql-kafka-0-10 {self.version} ({self.why})"


def connector(argv: Sequence[str], spark: str = "running") -> Connector:
    """Spark's connector for this run: its jars for the running pyspark when Maven Central has
    them. When it has none, its newest release: on the running Spark (``spark`` "running"; the
    job's checks compare every answer of both formats), or (``spark`` "matching") with the job run
    again (exec, this process ends) under that release's pyspark, from a venv made once in the user
    cache. :class:`SetupError` with the cause when Maven, Java or PyPI are not there."""
    import pyspark

    from kafka_core.devtools.brokers.common import BrokerStartError
    from kafka_core.devtools.brokers.spark_connector import (
        connector_jars,
        connector_python,
        connector_version_for,
    )

    running = pyspark.__version__
    chosen = os.environ.get(_CONNECTOR_ENV, "")
    try:
        if chosen:  # the run of ourselves under the connector's pyspark
            version, _, why = chosen.partition("|")
            if version != running:
                raise SetupError(f"re-run for Spark's connector {version} found pyspark {running}")
        else:
            version, why = connector_version_for(running)
        if version != running and spark == "running":
            why = f"{why}; built for Spark {version}, run on pyspark {running}"
        elif version != running:
            python = connector_python(version)
            print(
                f"Spark's connector: spark-sql-kafka-0-10 {version} ({why}); the job runs under "
                f"pyspark {version} ({python})",
                flush=True,
            )
            env = {
                **os.environ,
                _CONNECTOR_ENV: f"{version}|{why}",
                "PYSPARK_PYTHON": str(python),
                "PYSPARK_DRIVER_PYTHON": str(python),
            }
            sys.stderr.flush()
            os.execve(python, [str(python), "-m", "kafka_core.devtools.pipeline", *argv], env)
        return Connector(version, why, connector_jars(version))
    except BrokerStartError as exc:
        raise SetupError(f"Spark's connector: {exc}") from None


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


def check_master(master: str) -> None:
    """Refuse a master Spark could not use, before Spark starts: its launcher would fail later,
    with a Java stack trace (yarn without its configuration, a cluster that does not answer)."""
    if not _MASTER.fullmatch(master):
        raise SetupError(
            f"bad --master {master!r}: expected local, local[N], local[*], local-cluster[N,C,M], "
            "spark://host:port, yarn or k8s://..."
        )
    if master == "yarn":
        dirs = [os.environ.get(name, "") for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")]
        if not any(d and Path(d).is_dir() for d in dirs):
            raise SetupError(
                "--master yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the directory of the "
                "cluster's configuration (yarn-site.xml, core-site.xml)"
            )
    elif master.startswith("spark://"):
        hosts = [h.rsplit(":", 1) for h in master.removeprefix("spark://").split(",")]
        error = _tcp_error([(h, int(port)) for h, port in hosts])
        if error:
            raise SetupError(f"Spark master {master} is not reachable ({error})")
    elif master.startswith("k8s://"):
        api = master.removeprefix("k8s://")
        url = urllib.parse.urlsplit(api if "://" in api else f"https://{api}")
        try:
            host, port = url.hostname, url.port or (80 if url.scheme == "http" else 443)
        except ValueError:
            host = None
        if not host:
            raise SetupError(f"bad --master {master!r}: expected k8s://https://host:port")
        error = _tcp_error([(host, port)])
        if error:
            raise SetupError(f"Kubernetes API server of --master {master} is not reachable ({error})")


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise SetupError(f"bad --bootstrap-servers {text!r}: expected host:port[,host:port...]")
        out.append((host.strip("[]"), int(port)))
    return out


def check_environment() -> None:
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").is_file()) and not shutil.which("java"):
        raise SetupError("Spark needs Java 17+: no java on PATH and JAVA_HOME is not set")
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SetupError(f"the pipeline needs pyspark and pyarrow: pip install '.[spark]' ({exc})") from None


def prepare_topic(bootstrap: str, topic: str, partitions: int) -> tuple[int, bool]:
    """Check that ``bootstrap`` answers as Kafka within a few seconds and create ``topic`` if it
    is missing. Returns its partition count and whether it was created here."""
    from kafka_core import KafkaClient, NewTopic
    from kafka_core.errors import KafkaError

    error = _tcp_error(parse_bootstrap(bootstrap))
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
        raise SetupError(f"Kafka broker {bootstrap} did not answer as Kafka within 5 s: {exc}") from None


def delete_topic(bootstrap: str, topic: str) -> str:
    from kafka_core import KafkaClient

    try:
        with KafkaClient(bootstrap, api_timeout_ms=10_000) as client:
            client.delete_topics([topic], timeout_ms=10_000)
        return "deleted"
    except Exception as exc:
        return f"not deleted ({exc})"


class Console:
    """Phase lines stamped with the elapsed time, and a heartbeat (Spark task progress) while a
    phase runs; rich colours on a terminal, plain lines otherwise (CI logs)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.spark: SparkSession | None = None
        self._lock = threading.Lock()
        self._rich: Any = None
        with contextlib.suppress(ImportError):
            from rich.console import Console as RichConsole

            self._rich = RichConsole(soft_wrap=True, highlight=False)

    def line(self, text: str, style: str = "") -> None:
        with self._lock:
            if self._rich is None:
                print(text, flush=True)
            else:
                from rich.markup import escape

                self._rich.print(f"[{style}]{escape(text)}[/]" if style else escape(text))

    def stamp(self) -> str:
        return f"[{time.perf_counter() - self.t0:7.1f}s]"

    def _tasks(self) -> str:
        if self.spark is None:
            return ""
        tracker = self.spark.sparkContext.statusTracker()
        done = running = total = 0
        for info in filter(None, map(tracker.getStageInfo, tracker.getActiveStageIds())):
            done, total = done + info.numCompletedTasks, total + info.numTasks
            running += info.numActiveTasks
        # the running count too: a phase of a few long tasks shows "0 of 5 done" most of its time
        return f", Spark tasks: {running} running, {done} of {total} done" if total else ""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.line(f"{self.stamp()} ▶ {name}", "bold cyan")
        start, stop = time.perf_counter(), threading.Event()

        def heartbeat() -> None:
            while not stop.wait(15.0):  # a line a phase, and one a quarter minute while it runs
                with contextlib.suppress(Exception):
                    elapsed = time.perf_counter() - start
                    self.line(f"{self.stamp()}   … {name}: {elapsed:.0f} s{self._tasks()}", "dim")

        ticker = threading.Thread(target=heartbeat, daemon=True)
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
    checks: list[tuple[str, bool]] = field(default_factory=list)
    fmt: str = FORMAT
    connector: Connector | None = None
    legs: list[Leg] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok))
        self.out.line(f"  {'✓' if ok else '✗'} {name}: {detail}", "green" if ok else "bold red")

    @contextlib.contextmanager
    def timed(self, key: str, title: str) -> Iterator[None]:
        with self.out.phase(title):
            spark = self.out.spark
            if spark is not None:  # the event log then tells each phase's jobs apart
                spark.sparkContext.setJobGroup(f"{self.fmt}:{key}", title)
            start = time.perf_counter()
            yield
            self.timings[key] = time.perf_counter() - start

    def kafka(self, reader: DataFrameReader | DataStreamReader) -> Any:
        return (
            reader.format(self.fmt)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.topic)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
        )


_JVM_EXCEPTION = re.compile(
    r"(?:Exception in thread \S+ )?(?:Caused by: )?([\w.$]+(?:Exception|Error)): (.+)"
)


def jvm_cause(lines: Sequence[str]) -> str:
    """One line for why Spark's JVM stopped, from what it wrote on stderr: the first exception's
    message (Java's stack trace after it is left out), else its first three lines joined (the
    JVM's own refusals come as a reason, then ``Error:`` lines)."""
    for line in lines:
        found = _JVM_EXCEPTION.fullmatch(line.strip())
        if found:
            return f"{found.group(2)} ({found.group(1).rsplit('.', 1)[-1]})"
    said = [line.strip() for line in lines if line.strip() and not line.strip().startswith("at ")]
    return " / ".join(said[:3]) if said else "its JVM exited without a word on stderr"


class JvmStderr:
    """The Spark JVM's stderr through a pipe of ours: held while Spark starts (its start-up
    chatter, or the exception that stopped it, which becomes one line), passed on once it is up."""

    def __init__(self) -> None:
        read_fd, self.write_fd = os.pipe()
        self.held: list[str] = []
        self._up = False
        self._lock = threading.Lock()
        self._pump = threading.Thread(target=self._run, args=(read_fd,), name="spark-jvm-stderr", daemon=True)
        self._pump.start()

    def _run(self, read_fd: int) -> None:
        with open(read_fd, encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                with self._lock:
                    if not self._up:
                        self.held.append(line)
                        continue
                sys.stderr.write(line)
                sys.stderr.flush()

    def close_writer(self) -> None:
        """Once the JVM has its copy: the pipe then ends when the JVM does."""
        with contextlib.suppress(OSError):
            os.close(self.write_fd)

    def up(self) -> None:
        """Spark started: its start-up lines are dropped, what it writes from now on is shown."""
        with self._lock:
            self._up, self.held = True, []

    def cause(self, timeout: float = 10.0) -> str:
        """Why Spark did not start, once the JVM is gone (or ``timeout`` passed)."""
        self._pump.join(timeout)
        with self._lock:
            return jvm_cause(self.held)


def start_spark(
    master: str, tmp: Path, jars: Sequence[Path] = (), event_log: Path | None = None
) -> SparkSession:
    """A Spark session on ``master`` with kafka_core registered and ``jars`` (Spark's connector)
    on its class path; :class:`SparkStartError` with the JVM's reason when it does not come up."""
    # PySpark warns on import when pandas is 3.x; the job uses no pandas (its workers use Arrow)
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark import SparkConf, SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from kafka_core.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = tmp / "log4j2.properties"  # Spark's own INFO/WARN chatter would drown the phase lines
    log4j.write_text(
        "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = stderr\n"
        "appender.console.type = Console\nappender.console.name = stderr\n"
        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("kafka_core pipeline")
        .set("spark.driver.extraJavaOptions", java_opts)
        .set("spark.executor.extraJavaOptions", java_opts)
        .set("spark.driver.memory", "2g")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.shuffle.partitions", "8")
        .set("spark.python.worker.faulthandler.enabled", "true")
    )
    if jars:
        conf = conf.set("spark.jars", ",".join(str(j) for j in jars))
    if event_log is not None:
        event_log.mkdir(parents=True, exist_ok=True)
        conf = conf.set("spark.eventLog.enabled", "true").set(
            "spark.eventLog.dir", event_log.resolve().as_uri()
        )
    stderr = JvmStderr()
    try:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stderr": stderr.write_fd})
        finally:
            stderr.close_writer()
        SparkContext(conf=conf, gateway=gateway)
        spark = SparkSession.builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if exc.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise SparkStartError(f"Spark ({master}) did not start: {stderr.cause()}") from None
    except Exception as exc:  # the JVM is up, the context is not: its exception says why
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkStartError(f"Spark ({master}) did not start: {jvm_cause([first])}") from None
    stderr.up()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def stream(run: Run, spark: SparkSession, tmp: Path, limit: int) -> tuple[DataFrame, dict[int, Revenue]]:
    """The streaming leg: each micro-batch parsed into a Parquet table under its batch id (a
    replayed batch overwrites its own directory, so the table is exactly-once), and its revenue
    per category computed there and kept on the driver by batch id."""
    from kafka_core.devtools.pipeline.data import is_run, parse_orders, revenue_by_category

    silver = tmp / "silver"
    per_batch: dict[int, Revenue] = {}

    def on_batch(df: DataFrame, batch_id: int) -> None:
        start = time.perf_counter()
        path = str(silver / f"batch_id={batch_id}")
        parse_orders(df.filter(is_run(run.run_id))).write.mode("overwrite").parquet(path)
        per_batch[batch_id] = revenue_by_category(spark.read.parquet(path))
        rows = sum(r.events for r in per_batch[batch_id].values())
        took = time.perf_counter() - start
        run.out.line(f"{run.out.stamp()}   micro-batch {batch_id}: {rows:,} rows ({took:.1f} s)")

    query = (
        run.kafka(spark.readStream)
        .option("maxOffsetsPerTrigger", str(limit))
        .load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if not per_batch:
        raise RuntimeError("the streaming query ended without a single micro-batch")
    return spark.read.parquet(str(silver)), per_batch


@dataclass
class Leg:
    """One format's run of the job's phases in one round: its timings and what it read."""

    fmt: str
    round_no: int
    timings: dict[str, float]
    batch: Fingerprint
    streamed: Fingerprint
    agg: Aggregates
    batches: int

    @property
    def whole(self) -> float:
        return sum(self.timings[key] for key, _ in PHASES)


def run_leg(
    run: Run, spark: SparkSession, records: DataFrame, source: Fingerprint, tmp: Path, limit: int
) -> Leg:
    """The job's phases on ``run.fmt`` over ``run.topic``: write the records, read them back in
    batch (fingerprint, aggregates), then as a stream into Parquet, each checked against the
    generated data."""
    from kafka_core.devtools.pipeline import data

    out, tag = run.out, f"[{run.fmt}] " if run.args.compare else ""
    with run.timed("write", f"{tag}writing them to Kafka topic {run.topic}"):
        (
            records.write.format(run.fmt)
            .option("kafka.bootstrap.servers", run.bootstrap)
            .option("topic", run.topic)
            .mode("append")
            .save()
        )
    if not run.args.compare:
        records.unpersist()  # --compare writes them again

    kafka, ours = run.kafka(spark.read).load(), data.is_run(run.run_id)
    with run.timed("read", f"{tag}batch read of the topic: count, distinct order ids, checksum"):
        batch = data.fingerprint(kafka, keep=ours)
    skipped = f" ({batch.others:,} records of other runs skipped)" if batch.others else ""
    out.line(f"    read back: {batch.describe()}{skipped}")
    run.check(f"{tag}batch read == generated", batch.same_records(source), source.compare(batch))

    with run.timed("aggregates", f"{tag}batch aggregates: revenue, customers, windows, lateness"):
        orders = data.parse_orders(kafka.filter(ours)).persist()
        agg = data.aggregates(orders)
        orders.unpersist()
    run.check(
        f"{tag}headers and keys match payloads", agg.header_mismatches == 0, f"{agg.header_mismatches:,} bad"
    )

    with run.timed("stream", f"{tag}streaming read, availableNow, maxOffsetsPerTrigger {limit:,}"):
        silver, per_batch = stream(run, spark, tmp, limit)
    with run.timed("stream-check", f"{tag}streamed Parquet table against the batch read"):
        streamed = data.parsed_fingerprint(silver)
        stream_agg = (data.merge_revenue(per_batch.values()), *data.windows_and_types(silver))
    run.check(f"{tag}stream == batch read", streamed.same_records(batch), batch.compare(streamed))
    same = stream_agg == agg.merge_key()
    run.check(
        f"{tag}stream aggregates == batch aggregates",
        same,
        f"revenue per category, orders per window, event types {'equal' if same else 'DIFFER'}",
    )
    batches = sum(1 for revenue in per_batch.values() if revenue)
    wanted = min(2, math.ceil(source.rows / limit))
    run.check(
        f"{tag}several micro-batches", batches >= wanted, f"{batches} with data, {len(per_batch)} in all"
    )
    return Leg(run.fmt, 0, dict(run.timings), batch, streamed, agg, batches)


def execute(run: Run, tmp: Path) -> None:
    from kafka_core.devtools.pipeline import data

    args, out, events = run.args, run.out, run.args.events
    limit = args.max_offsets_per_trigger or math.ceil(events / 8)
    jars = run.connector.jars if run.connector else []
    with run.timed("spark", f"starting Spark ({args.master})"):
        spark = out.spark = start_spark(args.master, tmp, jars, args.event_log)
    try:
        slices = max(spark.sparkContext.defaultParallelism, math.ceil(events / 200_000))
        with run.timed("source", f"generating {events:,} order events in {slices} Spark partitions"):
            orders = data.generate_orders(spark, events, args.seed, slices)
            records = data.kafka_columns(orders, run.run_id).persist()  # the write then times Kafka only
            source = data.fingerprint(records)
        out.line(f"    generated: {source.describe()}")
        if not args.compare:
            leg = run_leg(run, spark, records, source, tmp, limit)
            run.legs.append(leg)
            summary(run, source, leg, limit)
            return
        legs: list[Leg] = []
        for round_no in range(1, args.rounds + 1):
            # alternate which format goes first: a round's second run has a warmer JVM and page cache
            order = args.formats if round_no % 2 else args.formats[::-1]
            legs.extend(compare_leg(run, spark, records, source, tmp, limit, f, round_no) for f in order)
        run.legs = legs
        records.unpersist()
        first = legs[0]

        def answers(leg: Leg) -> tuple[Any, ...]:  # lateness depends on the write's interleaving
            return (*leg.agg.merge_key(), leg.agg.top_customers, leg.agg.customers)

        same = all(leg.batch.same_records(first.batch) and answers(leg) == answers(first) for leg in legs)
        run.check(
            "both formats, every round: same records and same figures",
            same,
            "fingerprints, revenue, windows, event types and top customers equal"
            if same
            else "; ".join(f"{leg.fmt} round {leg.round_no}: {leg.batch.describe()}" for leg in legs),
        )
        summary(run, source, first, limit)
        comparison(run, legs, source.rows)
    finally:
        out.spark = None
        spark.stop()


def compare_leg(
    run: Run,
    spark: SparkSession,
    records: DataFrame,
    source: Fingerprint,
    tmp: Path,
    limit: int,
    fmt: str,
    round_no: int,
) -> Leg:
    """One format's leg of a --compare round, on a topic of its own (made here, deleted after
    unless --topic named the run's topics)."""
    topic = leg_topic(run.topic, fmt, round_no, True)
    partitions, _ = prepare_topic(run.bootstrap, topic, run.partitions)
    leg_run = dataclasses.replace(run, fmt=fmt, topic=topic, timings={}, partitions=partitions)
    run.out.line(f"{run.out.stamp()} round {round_no}: {fmt} on topic {topic}", "bold")
    try:
        leg = run_leg(leg_run, spark, records, source, tmp / f"{fmt}-r{round_no}", limit)
    finally:
        if not run.args.topic:  # a name of this run's own (orders-<run id>-...)
            run.out.line(f"{run.out.stamp()} topic {topic} {delete_topic(run.bootstrap, topic)}", "dim")
    return dataclasses.replace(leg, round_no=round_no)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def compare_rows(legs: Sequence[Leg], rows: int) -> list[tuple[str, list[float], list[float], float]]:
    """Per phase (and the whole job): kafka_core's rates by round, the connector's, and the ratio
    of their medians (above 1: kafka_core faster). Rates are rows/s; the whole job too."""
    table = []
    for key, title in (*PHASES, ("whole", "whole job")):
        rates = {}
        for fmt in FORMATS:
            times = [leg.whole if key == "whole" else leg.timings[key] for leg in legs if leg.fmt == fmt]
            rates[fmt] = [rows / t for t in times]
        ratio = _median(rates[FORMAT]) / _median(rates[CONNECTOR])
        table.append((title, rates[FORMAT], rates[CONNECTOR], ratio))
    return table


def comparison(run: Run, legs: Sequence[Leg], rows: int) -> None:
    """The phases side by side: rows/s per round for each format, and the ratio of the medians."""
    out = run.out
    peer = run.connector.describe() if run.connector else CONNECTOR
    out.line("")
    out.line(
        f"kafka_core vs Spark's connector ({peer}): {rows:,} events, {run.args.rounds} rounds alternating, "
        f"rows/s per round (whole job: the phases after generation, summed), ratio of medians",
        "bold",
    )

    def rates(values: list[float]) -> str:
        return ", ".join(f"{v / 1000:,.1f}k" for v in values)

    out.line(f"  {'phase':<26} {'kafka_core':<28} {'kafka (connector)':<28} ratio")
    for title, ours, theirs, ratio in compare_rows(legs, rows):
        out.line(
            f"  {title:<26} {rates(ours):<28} {rates(theirs):<28} {ratio:.2f}x",
            "bold" if title == "whole job" else "",
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    out.line(f"  load average at the end: {load} ({os.cpu_count()} CPUs)")


def figures(run: Run, rows: int) -> dict[str, Any]:
    """What --json writes: the run's set-up, each format's phase times by round (seconds), the
    rates and ratios the comparison prints, and the checks."""
    import pyspark

    from kafka_core.codec import IMPLEMENTATION

    seconds = {
        fmt: {key: [leg.timings[key] for leg in run.legs if leg.fmt == fmt] for key, _ in PHASES}
        for fmt in run.args.formats
    }
    out: dict[str, Any] = {
        "events": rows,
        "partitions": run.partitions,
        "rounds": run.args.rounds,
        "master": run.args.master,
        "broker": run.broker_label,
        "pyspark": pyspark.__version__,
        "codec": IMPLEMENTATION,
        "connector": run.connector.describe() if run.connector else None,
        "phases": [{"key": key, "title": title} for key, title in PHASES],
        "seconds": seconds,
        "startup_s": {key: run.timings[key] for key in ("spark", "source") if key in run.timings},
        "checks": [{"name": name, "ok": ok} for name, ok in run.checks],
        "passed": all(ok for _, ok in run.checks) and bool(run.legs),
    }
    if run.args.compare and run.legs:
        out["ratios"] = {title: ratio for title, _, _, ratio in compare_rows(run.legs, rows)}
    return out


def summary(run: Run, src: Fingerprint, leg: Leg, limit: int) -> None:
    from kafka_core.codec import IMPLEMENTATION

    out, t, rows, agg, batches = run.out, leg.timings, src.rows, leg.agg, leg.batches

    def rate(key: str) -> str:
        return f"{rows / t[key]:>10,.0f} rows/s  ({t[key]:.1f} s)"

    out.line("")
    out.line(
        f"kafka_core pipeline: format {leg.fmt}, topic {leg_topic(run.topic, leg.fmt, leg.round_no, run.args.compare)} "
        f"({run.partitions} partitions), broker {run.broker_label}, Spark {run.args.master}, codec {IMPLEMENTATION}",
        "bold",
    )
    mb = (src.key_bytes + src.value_bytes) / 1e6
    out.line(
        f"  rows          {rows:>10,}  ({mb:,.1f} MB of keys and JSON values, {src.value_bytes / rows:.0f} B a value)"
    )
    out.line(f"  write         {rate('write')}")
    out.line(f"  batch read    {rate('read')}")
    out.line(f"  streaming     {rate('stream')}, {batches} micro-batches of at most {limit:,}")
    types = ", ".join(f"{k.removeprefix('order_')} {v:,}" for k, v in sorted(agg.event_types.items()))
    out.line(
        f"  events        {types}; out of order {agg.out_of_order / rows:.1%}, "
        f"more than a minute late {agg.late / rows:.1%}"
    )
    out.line("  net revenue by category (placed minus refunded):")
    for cat, r in sorted(agg.revenue.items(), key=lambda kv: -kv[1].revenue)[:5]:
        out.line(f"    {cat:<12} {r.revenue:>16,.2f}  ({r.placed:,} order{'s' * (r.placed != 1)} placed)")
    if len(agg.revenue) > 5:
        out.line(f"    … and {len(agg.revenue) - 5} more categories")
    share = agg.top_customers[0][1] / rows if agg.top_customers else 0.0
    out.line(f"  top customers of {agg.customers:,} (Zipf-like: the first has {share:.1%} of all orders):")
    for cust, n, spent in agg.top_customers[:3]:
        out.line(f"    {cust}  {n:>8,} {'order ' if n == 1 else 'orders'}  {spent:>14,.2f} spent")
    counts = sorted(agg.windows.values()) or [0]
    busiest = max(agg.windows, key=lambda w: agg.windows[w], default="-")
    out.line(
        f"  orders per hour of event time: {len(agg.windows)} windows, median {counts[len(counts) // 2]:,}, "
        f"busiest {busiest} UTC with {counts[-1]:,}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    run_id = uuid.uuid4().hex[:12]
    topic = args.topic or f"orders-{run_id}"
    embedded: TansuBroker | KafkaCluster | None = None
    try:
        if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise SetupError(f"bad --topic {topic!r}: use 1 to 249 of the characters A-Z a-z 0-9 . _ -")
        check_master(args.master)
        check_environment()
        spark_connector = connector(argv, args.connector_spark) if CONNECTOR in args.formats else None
        bootstrap = label = args.bootstrap_servers
        if bootstrap:
            parse_bootstrap(bootstrap)
        else:
            from kafka_core.devtools.brokers import BrokerStartError, KafkaCluster, TansuBroker

            kind = "Apache Kafka" if args.broker == "kafka" else "Tansu"
            try:
                embedded = KafkaCluster(1) if args.broker == "kafka" else TansuBroker()
                embedded.start()
            except BrokerStartError as exc:  # closed below, as after any set-up error
                raise SetupError(f"no broker: embedded {kind}: {exc}") from None
            bootstrap, label = embedded.bootstrap, f"{embedded.bootstrap} (embedded {kind})"
        first = leg_topic(topic, args.formats[0], 1, args.compare)
        partitions, created = prepare_topic(bootstrap, first, args.partitions)
    except SetupError as exc:
        if embedded is not None:
            embedded.close()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    out = Console()
    on = "both formats (--compare)" if args.compare else f"format {args.formats[0]}"
    out.line(
        f"{out.stamp()} kafka_core pipeline: {args.events:,} order events, run {run_id}, topic {first} "
        f"({partitions} partitions{', new' if created else ''}), broker {label}, {on}",
        "bold",
    )
    if spark_connector is not None:
        import pyspark

        out.line(f"    Spark's connector: {spark_connector.describe()}, pyspark {pyspark.__version__}")
    run = Run(args, bootstrap, label, topic, partitions, run_id, out, fmt=args.formats[0])
    run.connector = spark_connector
    try:
        with tempfile.TemporaryDirectory(prefix="kafka_core-pipeline-") as tmp:
            execute(run, Path(tmp))
    except KeyboardInterrupt:
        out.line("interrupted", "bold red")
        return 130
    except SparkStartError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        out.line(f"FAIL: the job stopped with {type(exc).__name__}: {first}", "bold red")
        return 1
    finally:
        if embedded is not None:
            embedded.close()
        elif created and not args.topic and not args.compare:  # --compare's legs delete theirs
            out.line(f"{out.stamp()} topic {topic} {delete_topic(bootstrap, topic)}", "dim")
    if args.json:
        import json

        args.json.write_text(json.dumps(figures(run, args.events), indent=1) + "\n")
    failed = [name for name, ok in run.checks if not ok]
    if failed:
        out.line(f"FAIL: {', '.join(failed)}", "bold red")
        return 1
    both = ", on both formats alike" if args.compare else ""
    out.line(
        f"PASS: every event arrived exactly once, and the batch and streaming reads agree{both}", "bold green"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
