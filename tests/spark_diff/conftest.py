"""The differential suite: the same work through Spark's own Kafka connector (``format("kafka")``,
the JVM jar) and through ``format("kafka_core")``, on the same topics of one Apache Kafka, with
what a user sees compared: schema, rows (as multisets, with headers, timestamps and
timestampType), tasks planned, and refusals of bad options.

It runs only in the venv pinned to the connector's pyspark (the connector uses Spark internals):
``bash ci/spark_diff.sh`` makes that venv, fetches the jars and runs ``pytest tests/spark_diff``
with it. ``tests/spark_diff/pytest.ini`` makes this folder its own pytest root, so the main
suites' ``tests/conftest.py`` is not loaded; under any other pyspark (the main ``.venv``) the test
files here are not collected at all.

Fixtures for every test module here (batch, stream, sink):

- ``bootstrap`` (session): the broker: ``KAFKA_BOOTSTRAP_SERVERS`` when set, else an embedded
  Apache Kafka (:class:`kafka_core.devbroker.KafkaCluster`, the newest supported version) started
  once, with a fast log cleaner so compaction shows within seconds.
- ``admin`` (session): a kafka_core ``KafkaAdmin`` on it (create/delete topics, DeleteRecords).
- ``spark`` (session): one SparkSession, ``local[2]``, session time zone UTC, with the
  connector's jars in ``spark.jars`` and ``kafka_core`` registered. Create no other session.
- ``make_topic(partitions=1, configs=None, prefix="diff", name=None)`` (session): a new topic
  (``name``, else a unique one under ``prefix``), every partition answering ListOffsets at its leader; returns the name.
- ``produce(topic, records)`` (session): writes :class:`Rec` records, waits for every delivery;
  :func:`sample_records` makes some (null keys and values, headers, set timestamps).
- ``differ`` (session): a :class:`Differ`, which runs a batch read through both formats:
  ``differ.read(options, layout=...)`` asserts they agree and returns kafka_core's
  :class:`Outcome`; ``differ.refuse(options, *names)`` asserts both refuse before any job runs,
  each message naming one of ``names``; ``differ.fail(options, ...)`` asserts both fail;
  ``differ.error(fmt, options)`` is one format's failure message and the jobs it started.
  :func:`reader`, :func:`normalize` and :func:`multiset` are there for streams and sinks.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kafka_core.devtools.brokers.spark_connector import SPARK_CONNECTOR_VERSION

try:
    import pyspark

    PYSPARK_VERSION: str | None = pyspark.__version__
except ImportError:  # pragma: no cover - the main venv has pyspark
    PYSPARK_VERSION = None

PINNED = PYSPARK_VERSION == SPARK_CONNECTOR_VERSION
HERE = Path(__file__).resolve().parent
if not PINNED:
    # The main suites' runs (`pytest tests/...` in .venv, pyspark 4.3) walk into this folder:
    # nothing here can run there, so nothing is collected.
    collect_ignore_glob = ["test_*.py"]
else:
    # The main suites' JVM options (tests/quick_jvm.py: C1 only, the serial collector) for this
    # suite's Kafka node and Spark JVMs too: this folder is its own pytest root, so tests/conftest.py,
    # which sets them there, is not loaded. Nothing compared here depends on the JIT.
    sys.path.insert(0, str(HERE.parent))
    import quick_jvm

    quick_jvm.use_quick_jvms()

CONNECTOR = "kafka"  # Spark's own connector, from the jar
OURS = "kafka_core"
FORMATS = (CONNECTOR, OURS)
# A base for record timestamps: recent, so retention by time never deletes the test data.
T0 = (int(time.time()) // 3600 - 1) * 3600 * 1000


def pytest_configure(config: pytest.Config) -> None:
    if config.inipath is not None and Path(config.inipath).parent == HERE and not PINNED:
        raise pytest.UsageError(
            f"tests/spark_diff runs under pyspark {SPARK_CONNECTOR_VERSION} (the connector's own), not "
            f"{PYSPARK_VERSION}: run `bash ci/spark_diff.sh`, or the python that "
            "`kafka_core.devtools.brokers.spark_connector.connector_python()` returns"
        )


# -- the broker and topics --------------------------------------------------------------------


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        yield external
        return
    from kafka_core.devbroker import KafkaCluster

    # A log cleaner that looks every 200 ms, so a compacted topic shows its gaps in seconds.
    cluster = KafkaCluster(overrides={"log.cleaner.backoff.ms": "200"})
    try:
        cluster.start()
        yield cluster.bootstrap
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> Iterator[Any]:
    from kafka_core import KafkaAdmin

    client = KafkaAdmin(bootstrap_servers=bootstrap)
    try:
        yield client
    finally:
        client.close()


@dataclass(frozen=True)
class Rec:
    """One record to write: ``partition``, ``key``, ``value``, ``headers``, ``timestamp_ms``."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


def sample_records(partition: int, count: int, *, tag: str = "v") -> list[Rec]:
    """``count`` records for ``partition``: keys and values tagged, every 7th key null, one null
    value (partition 0, index 5), headers on even ones (one with a null value), timestamps
    ``T0 + i s + partition ms``."""
    return [
        Rec(
            partition=partition,
            key=None if i % 7 == 3 else f"k{partition}-{i}".encode(),
            value=None if (partition, i) == (0, 5) else f"{tag}{partition}-{i}".encode(),
            headers=(("h", str(i).encode()), ("n", None)) if i % 2 == 0 else (),
            timestamp_ms=T0 + i * 1000 + partition,
        )
        for i in range(count)
    ]


def wait_ready(admin: Any, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until every partition answers ListOffsets at its leader (Kafka names a new topic's leader a
    moment before that leader serves it)."""
    from kafka_core import TopicPartition

    deadline = time.monotonic() + timeout
    while True:
        answers = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)})
        if len(answers) == partitions and all(r.ok for r in answers.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} not ready after {timeout} s: {answers}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def make_topic(admin: Any) -> Callable[..., str]:
    from kafka_core import NewTopic

    def create(
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        prefix: str = "diff",
        name: str | None = None,
    ) -> str:
        name = name or f"{prefix}-{uuid.uuid4().hex[:10]}"
        result = admin.create_topics([NewTopic(name, partitions, -1, dict(configs or {}))])
        result[name].result()
        wait_ready(admin, name, partitions)
        return name

    return create


@pytest.fixture(scope="session")
def produce(bootstrap: str) -> Callable[[str, Sequence[Rec]], None]:
    from kafka_core import KafkaProducer

    def write(topic: str, records: Sequence[Rec]) -> None:
        # a linger longer than the sends take: what one call writes to a partition is one batch
        # (flush sends it at once), so a reader sees all of it or none
        with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000) as producer:
            futures = [
                producer.send(
                    topic,
                    r.value,
                    key=r.key,
                    partition=r.partition,
                    headers=list(r.headers) or None,
                    timestamp_ms=r.timestamp_ms,
                )
                for r in records
            ]
            producer.flush()
            for f in futures:
                f.get(30)

    return write


# -- Spark --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kafka_core.devtools.brokers.spark_connector import connector_session
    from kafka_core.spark import register
    from kafka_core.spark.zip_bytecode import compile_archives

    compile_archives()  # as tests/spark_cluster.py's warm_spark_workers: CI writes no bytecode
    session = connector_session(
        "kafka_core-spark-diff",
        conf={
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "1g",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def reader(spark: Any, fmt: str, options: Mapping[str, str], *, stream: bool = False) -> Any:
    """``spark.read`` (or ``readStream``) of ``fmt`` with ``options`` (the bootstrap included)."""
    r = (spark.readStream if stream else spark.read).format(fmt)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def normalize(value: Any) -> Any:
    """A collected value in a hashable, comparable form: bytearray -> bytes, Row/list -> tuple."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list | tuple):  # Row is a tuple
        return tuple(normalize(v) for v in value)
    return value


def multiset(rows: Sequence[Any]) -> Counter[Any]:
    return Counter(normalize(r) for r in rows)


@dataclass(repr=False)
class Outcome:
    """What one format gave for a read."""

    schema: str  # the schema as JSON (names, types, nullability)
    rows: Counter[Any]
    tasks: int  # df.rdd.getNumPartitions(): the tasks planned
    layout: Counter[Any] | None = None  # per non-empty task: (topic, partition, first, last, count)
    timestamps: set[datetime] = field(default_factory=set)

    def __repr__(self) -> str:
        return f"Outcome({self.count} rows, {self.tasks} tasks, layout {self.layout})"

    @property
    def count(self) -> int:
        return sum(self.rows.values())

    def values(self) -> list[bytes | None]:
        """The value column of every row, sorted (None first)."""
        return sorted((r[1] for r in self.rows.elements()), key=lambda v: (v is not None, v or b""))

    def offsets(self, topic: str, partition: int) -> list[int]:
        return sorted(r[4] for r in self.rows.elements() if r[2] == topic and r[3] == partition)


class Differ:
    """Runs a batch read through both formats on the same session and compares them."""

    def __init__(self, spark: Any, bootstrap: str) -> None:
        self.spark = spark
        self.bootstrap = bootstrap

    def options(self, options: Mapping[str, str | None]) -> dict[str, str]:
        """``options`` with the broker's address; a None value leaves that option out."""
        full = {"kafka.bootstrap.servers": self.bootstrap, **options}
        return {k: v for k, v in full.items() if v is not None}

    def run(self, fmt: str, options: Mapping[str, str | None], *, layout: bool = False) -> Outcome:
        from pyspark.sql import functions as F

        df = reader(self.spark, fmt, self.options(options)).load()
        tasks = df.rdd.getNumPartitions()
        rows = df.collect()
        shape = None
        if layout:
            per_task = (
                df.select(F.spark_partition_id().alias("task"), "topic", "partition", "offset")
                .groupBy("task", "topic", "partition")
                .agg(F.min("offset"), F.max("offset"), F.count("*"))
                .collect()
            )
            shape = Counter(tuple(r)[1:] for r in per_task)
        return Outcome(
            schema=df.schema.json(),
            rows=multiset(rows),
            tasks=tasks,
            layout=shape,
            timestamps={r["timestamp"] for r in rows},
        )

    def read(self, options: Mapping[str, str | None], *, layout: bool = False, tasks: bool = True) -> Outcome:
        """Both formats agree on schema, rows and (unless ``tasks=False``) the tasks planned;
        with ``layout``, on the offsets and row count of every task. Returns kafka_core's."""
        theirs = self.run(CONNECTOR, options, layout=layout)
        ours = self.run(OURS, options, layout=layout)
        assert ours.schema == theirs.schema
        if ours.rows != theirs.rows:
            only_ours = ours.rows - theirs.rows
            only_theirs = theirs.rows - ours.rows
            pytest.fail(
                f"rows differ: {ours.count} from kafka_core, {theirs.count} from Spark's connector; "
                f"only in kafka_core (first 5): {list(only_ours)[:5]}; "
                f"only in the connector (first 5): {list(only_theirs)[:5]}"
            )
        if tasks:
            assert ours.tasks == theirs.tasks, (
                f"tasks planned: kafka_core {ours.tasks}, connector {theirs.tasks}"
            )
        if layout:
            assert ours.layout == theirs.layout
        return ours

    def error(self, fmt: str, options: Mapping[str, str | None]) -> tuple[str, list[int]]:
        """The message of the failure of reading ``options`` and the jobs started meanwhile."""
        sc = self.spark.sparkContext
        group = f"diff-{uuid.uuid4().hex[:8]}"
        sc.setJobGroup(group, f"{fmt} {dict(options)}")
        try:
            df = reader(self.spark, fmt, self.options(options)).load()
            df.rdd.getNumPartitions()
            df.collect()
        except Exception as exc:  # what a user sees: Spark's own exception, or ours wrapped in it
            return str(exc), list(sc.statusTracker().getJobIdsForGroup(group))
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        pytest.fail(f"{fmt} read {dict(options)} without an error")

    def refuse(
        self, options: Mapping[str, str | None], *names: str, theirs: Sequence[str] | None = None
    ) -> tuple[str, str]:
        """Both refuse before any job (so any task) runs; each message names one of ``names``
        (case-insensitive; ``theirs`` replaces ``names`` for the connector, where its message
        names something else). Returns (the connector's message, kafka_core's)."""
        their_message, their_jobs = self.error(CONNECTOR, options)
        our_message, our_jobs = self.error(OURS, options)
        assert not their_jobs, f"the connector ran jobs {their_jobs} before refusing: {their_message[:300]}"
        assert not our_jobs, f"kafka_core ran jobs {our_jobs} before refusing: {our_message[:300]}"
        _names_one(our_message, names, "kafka_core")
        _names_one(their_message, theirs if theirs is not None else names, "the connector")
        return their_message, our_message

    def fail(
        self, options: Mapping[str, str | None], *, ours: Sequence[str], theirs: Sequence[str]
    ) -> tuple[str, str]:
        """Both fail, at planning or in a task; each message has one of its words."""
        their_message, _ = self.error(CONNECTOR, options)
        our_message, _ = self.error(OURS, options)
        _names_one(our_message, ours, "kafka_core")
        _names_one(their_message, theirs, "the connector")
        return their_message, our_message


def _names_one(message: str, words: Sequence[str], who: str) -> None:
    lowered = message.lower()
    assert any(w.lower() in lowered for w in words), (
        f"{who}'s error names none of {list(words)}: {message[:1500]}"
    )


@pytest.fixture(scope="session")
def differ(spark: Any, bootstrap: str) -> Differ:
    return Differ(spark, bootstrap)
