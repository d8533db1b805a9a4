"""The ``kafka_core`` Spark data source on a real Spark standalone cluster, not only ``local[n]``.

One cluster per module (tests/spark_cluster.py: a master and a worker with 2 cores, started from
the pip-installed pyspark). Most tests share one SparkSession connected to it with two executors
of one core each: separate JVMs on this machine whose Python workers run ``sys.executable``, so
kafka_core (installed in that environment) imports there as it would on a cluster where it was
pip-installed on every node. ``test_spark_submit_with_an_environment_shipped_by_archives`` checks
the other route of docs/spark-cluster.md: an environment sent with ``--archives``.

The module fails when pyspark or Java is missing (a skip only under ``KAFKA_CORE_ALLOW_SKIP=1``,
tests/prerequisites.py), and a cluster that does not start fails always, with the logs in the
message.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import time
import uuid
import venv
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kafka_core
import kafka_core.codec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from prerequisites import unavailable
from spark_cluster import HOST, SparkClusterError, SparkStandaloneCluster, log_tail

ROWS = 20_000
PARTITIONS = 3
EXECUTORS = 2
SUBMIT_TIMEOUT = 300.0


try:
    from pyspark import cloudpickle
    from pyspark.sql import DataFrame, SparkSession
except ImportError as exc:  # pragma: no cover - depends on the environment
    unavailable("pyspark (the Spark cluster tests)", f"{exc}; pip install '.[spark]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):  # pragma: no cover
    unavailable("Java 17 (the Spark cluster tests)", "no java on PATH and no JAVA_HOME")

# Executors cannot import this test module: ship the functions defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(600)


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    try:
        cluster = SparkStandaloneCluster(cores=EXECUTORS, memory="2g").start()
    except SparkClusterError as exc:
        pytest.fail(f"the Spark standalone cluster did not start:\n{exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def spark(spark_cluster: SparkStandaloneCluster) -> Iterator[SparkSession]:
    """A SparkSession on the cluster, handed out once both executors have registered."""
    from pyspark import SparkContext

    # Another module's session (local[2], say) would be what getOrCreate returns: stop it.
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("SPARK_LOCAL_IP", HOST)
        mp.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
        builder = (
            SparkSession.builder.master(spark_cluster.master_url)
            .appName("kafka_core-spark-cluster-test")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", HOST)
            .config("spark.driver.bindAddress", HOST)
            .config("spark.driver.memory", "1g")
            .config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", str(EXECUTORS))
            .config("spark.pyspark.python", sys.executable)
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.python.worker.faulthandler.enabled", "true")
            # Hold the first job until every executor is up (bounded by the waiting time).
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "60s")
        )
        try:
            session = builder.getOrCreate()
        except Exception as exc:
            pytest.fail(
                f"no SparkSession on {spark_cluster.master_url}: {exc}\n{spark_cluster.logs()}", pytrace=False
            )
        try:
            _wait_for_executors(session, spark_cluster, EXECUTORS, timeout=90)
            import kafka_core.spark
            from kafka_core.spark.launcher import launcher_for

            # The executors run this venv's Python on this machine, so the launcher's console script
            # is there for them too: the data source's workers start through it (fast_start).
            assert launcher_for(sys.executable, local=False), (
                "no kafka-core-spark-python beside sys.executable"
            )
            kafka_core.spark.register(session, fast_start=True)
            yield session
        finally:
            session.stop()


def _executor_ids(session: SparkSession) -> list[str]:
    seq = session.sparkContext._jsc.sc().getExecutorIds()
    return sorted(str(seq.apply(i)) for i in range(seq.size()))


def _wait_for_executors(
    session: SparkSession, cluster: SparkStandaloneCluster, count: int, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while len(_executor_ids(session)) < count:
        if time.monotonic() > deadline:
            pytest.fail(
                f"{count} executors did not register within {timeout:.0f} s "
                f"(have {_executor_ids(session)})\n{cluster.logs()}",
                pytrace=False,
            )
        time.sleep(0.25)


# -- data helpers --------------------------------------------------------------------------------------


def _key(i: int) -> bytes:
    return b"k%06d" % i


def _value(i: int) -> bytes:
    return b"v%d:" % i + b"x" * 80


def _rows_frame(spark: SparkSession, start: int, stop: int, slices: int = 4) -> DataFrame:
    """Keys k000000.., values v<i>:xxx.. (about 100 B), as binary columns like Spark's sink takes."""
    return spark.range(start, stop, numPartitions=slices).selectExpr(
        "CAST(CONCAT('k', LPAD(CAST(id AS STRING), 6, '0')) AS BINARY) AS key",
        "CAST(CONCAT('v', CAST(id AS STRING), ':', REPEAT('x', 80)) AS BINARY) AS value",
    )


def _write(spark: SparkSession, bootstrap: str, topic: str, start: int, stop: int) -> None:
    (
        _rows_frame(spark, start, stop)
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def _consume_all(
    bootstrap: str, topic: str, expected: int, timeout: float = 60.0, isolation: str = "read_committed"
) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, offset, key, value) of every record, read by confluent-kafka (an independent
    client; read_committed is librdkafka's default isolation level)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-cluster-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "isolation.level": isolation,
        }
    )
    out: list[tuple[int, int, bytes, bytes]] = []

    def poll(wait: float) -> None:
        msgs = consumer.consume(num_messages=10_000, timeout=wait)
        errors = [m.error() for m in msgs if m.error()]
        assert not errors, f"consumer errors: {errors[:3]}"
        out.extend((m.partition(), m.offset(), m.key(), m.value()) for m in msgs)

    try:
        # assign, not subscribe: no group to join (Tansu answers JoinGroup slowly)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            poll(0.5)
        poll(1.0)  # anything beyond what was expected (duplicates) shows up here
    finally:
        consumer.close()
    return out


def _check_exactly(records: list[tuple[int, int, bytes, bytes]], ids: range) -> None:
    """Every id's key once, with its own value; offsets per partition 0..n-1 with no hole."""
    keys = [r[2] for r in records]
    dupes = [k for k, n in collections.Counter(keys).items() if n > 1]
    assert not dupes, f"{len(dupes)} keys arrived more than once, e.g. {dupes[:5]}"
    expected = {_key(i): _value(i) for i in ids}
    got = {r[2]: r[3] for r in records}
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    assert not missing and not extra, (
        f"missing {len(missing)} (e.g. {sorted(missing)[:5]}), extra {len(extra)}"
    )
    wrong = [k for k, v in expected.items() if got[k] != v]
    assert not wrong, f"{len(wrong)} keys carry another key's value, e.g. {wrong[:5]}"


# -- where tasks run ---------------------------------------------------------------------------------


def _where_am_i(_: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """In a task: this Python worker, the executor JVM above it (from /proc), and kafka_core."""
    import os

    import kafka_core.codec

    info: dict[str, Any] = {
        "python_pid": os.getpid(),
        "cwd": os.getcwd(),
        "executable": sys.executable,
        "kafka_core": kafka_core.__file__,
        "codec": kafka_core.codec.IMPLEMENTATION,
    }
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv:
            info["jvm_pid"] = pid
            info["executor_id"] = argv[argv.index("--executor-id") + 1]
            break
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    yield info


# -- shipping an environment with --archives (docs/spark-cluster.md, route b) ----------------------

_SUBMIT_APP = """
import json, os, sys
from pyspark.sql import SparkSession

bootstrap, topic, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
spark = SparkSession.builder.appName("kafka_core-archives-check").getOrCreate()
app_id = spark.sparkContext.applicationId
# No kafka_core.spark.register(): Spark finds the pyspark_kafka_core module of the environment.
df = spark.range(rows, numPartitions=2).selectExpr(
    "CAST(CONCAT('k', LPAD(CAST(id AS STRING), 6, '0')) AS BINARY) AS key",
    "CAST(CONCAT('v', CAST(id AS STRING), ':', REPEAT('x', 80)) AS BINARY) AS value",
)
df.write.format("kafka_core").option("kafka.bootstrap.servers", bootstrap).option(
    "topic", topic).mode("append").save()
got = (spark.read.format("kafka_core").option("kafka.bootstrap.servers", bootstrap)
       .option("subscribe", topic).option("startingOffsets", "earliest").load())
keys = [bytes(r.key).decode() for r in got.select("key").collect()]


def argv_of(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\\0") if a]


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def data_source_pythons():
    # The Python daemons this application's executor JVMs started so far: only the data
    # source's write and read tasks have run, so these are the ones that ran them.
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = argv_of(entry)
            if "pyspark.daemon" not in argv:
                continue
            pid = parent_of(entry)
            while pid > 1:
                above = argv_of(pid)
                if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in above:
                    if app_id in above:
                        found.append({"argv0": argv[0], "cwd": os.readlink(f"/proc/{entry}/cwd")})
                    break
                pid = parent_of(pid)
        except OSError:
            pass
    return found


daemons = data_source_pythons()


def where(_):
    import kafka_core, kafka_core.codec
    yield {"executable": sys.executable, "cwd": os.getcwd(), "kafka_core": kafka_core.__file__,
           "codec": kafka_core.codec.IMPLEMENTATION}


executors = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
print("RESULT " + json.dumps({"keys": keys, "daemons": daemons, "executors": executors}))
spark.stop()
"""


def _pack_environment(build: Path) -> Path:
    """A virtual environment holding a copy of kafka_core (Cython extensions included), packed
    as tar.gz the way venv-pack packs one. To keep this cheap its third-party dependencies
    (pyarrow, crc32c, cramjam, pyspark) are not copied: a .pth file points at this interpreter's
    site-packages, which the worker on this machine can read. Only kafka_core travels."""
    env = build / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    rel = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)})).relative_to(env)
    site = env / rel
    package = Path(kafka_core.__file__).parent
    shutil.copytree(package, site / "kafka_core", ignore=shutil.ignore_patterns("__pycache__"))
    import pyspark_kafka_core

    shutil.copy2(pyspark_kafka_core.__file__, site / "pyspark_kafka_core.py")
    (site / "zz_kafka_core_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    archive = build / "environment.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(env, arcname=".")
    return archive


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)")
def test_tasks_run_in_separate_executor_jvms_and_python_workers(
    spark: SparkSession, spark_cluster: SparkStandaloneCluster
) -> None:
    sc = spark.sparkContext
    assert sc.master == spark_cluster.master_url
    driver_jvm_pid = int(sc._jvm.java.lang.ProcessHandle.current().pid())
    executor_ids = _executor_ids(spark)
    assert len(executor_ids) == EXECUTORS, executor_ids

    seen = sc.parallelize(range(8), 8).mapPartitions(_where_am_i).collect()

    assert len(seen) == 8
    repo = Path(kafka_core.__file__).resolve().parent
    for info in seen:
        assert "jvm_pid" in info, f"task not under an executor JVM: {info}"
        assert info["python_pid"] != os.getpid()
        assert info["jvm_pid"] not in (driver_jvm_pid, os.getpid())
        assert info["executor_id"] in executor_ids
        assert Path(info["cwd"]).is_relative_to(spark_cluster.work_dir), info["cwd"]
        assert Path(info["executable"]).resolve() == Path(sys.executable).resolve()
        assert Path(info["kafka_core"]).resolve().parent == repo  # the same install as the driver's
        assert info["codec"] == kafka_core.codec.IMPLEMENTATION
    # Both executors took tasks, each its own JVM with its own Python workers.
    jvms = {info["executor_id"]: info["jvm_pid"] for info in seen}
    assert sorted(jvms) == executor_ids
    assert len(set(jvms.values())) == EXECUTORS
    pythons = collections.defaultdict(set)
    for info in seen:
        pythons[info["executor_id"]].add(info["python_pid"])
    assert not pythons[executor_ids[0]] & pythons[executor_ids[1]]
    # The master sees this application running with both cores.
    state = spark_cluster.state()
    assert state is not None
    [app] = [a for a in state["activeapps"] if a["id"] == sc.applicationId]
    assert app["cores"] == EXECUTORS


def test_batch_write_then_read_back_every_row_exactly_once(
    spark: SparkSession, bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=PARTITIONS, prefix="spark-cluster")
    started = time.monotonic()
    _write(spark, bootstrap_servers, topic, 0, ROWS)
    wrote = time.monotonic() - started

    # What the broker holds, seen by another client: every row once, on every partition.
    stored = _consume_all(bootstrap_servers, topic, ROWS)
    _check_exactly(stored, range(ROWS))
    per_partition = collections.Counter(r[0] for r in stored)
    assert sorted(per_partition) == list(range(PARTITIONS)), per_partition

    started = time.monotonic()
    df = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert df.columns[:7] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    # Counted on the executors, then every row brought back to compare.
    assert df.count() == ROWS
    read = [
        (r.partition, r.offset, bytes(r.key), bytes(r.value))
        for r in df.select("partition", "offset", "key", "value", "topic").collect()
        if r.topic == topic
    ]
    took = time.monotonic() - started
    _check_exactly(read, range(ROWS))
    assert sorted(read) == sorted(stored)  # same partitions, offsets, keys and values
    assert collections.Counter(r[0] for r in read) == per_partition
    for p, n in per_partition.items():
        assert sorted(o for q, o, _, _ in read if q == p) == list(range(n)), f"offsets of partition {p}"
    print(f"\n{ROWS} rows: write {wrote:.1f} s, read back {took:.1f} s on {EXECUTORS} executors")


def test_registry_avro_written_and_read_on_the_executors(
    spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    """valueFormat=avro on the cluster: the executors encode (the sink registers version 1) and
    decode (each record by its id, through their own registry client, resolved to version 2, the
    latest, which the test process registered with a field added and wrote 100 records of);
    PERMISSIVE: a record under an id the registry never handed out and a truncated one are null
    values with their errors."""
    from pyspark.sql import functions as F

    from kafka_core import KafkaProducer
    from kafka_core.schema_registry import AvroSerializer, MessageField, SchemaRegistryClient

    topic = new_topic(partitions=PARTITIONS, prefix="spark-cluster-avro")
    v1 = {
        "type": "record",
        "name": "Row",
        "namespace": "cluster",
        "fields": [
            {"name": "n", "type": "long"},
            {"name": "tag", "type": ["null", "string"], "default": None},
        ],
    }
    v2 = {**v1, "fields": [*v1["fields"], {"name": "score", "type": "double", "default": -1.0}]}  # type: ignore[misc]
    registry = {"valueFormat": "avro", "schema.registry.url": schema_registry}
    (
        spark.range(ROWS, numPartitions=4)
        .select(
            F.struct(F.col("id").alias("n"), F.when(F.col("id") % 2 == 0, F.lit("even")).alias("tag")).alias(
                "value"
            )
        )
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .options(**registry)
        .option("valueSchema", json.dumps(v1))
        .mode("append")
        .save()
    )
    with (
        SchemaRegistryClient({"url": schema_registry}) as client,
        KafkaProducer(bootstrap_servers=bootstrap_servers) as producer,
    ):
        serialize = AvroSerializer(client, json.dumps(v2)).for_topic(topic, MessageField.VALUE)
        for i in range(ROWS, ROWS + 100):
            row = {"n": i, "tag": "even" if i % 2 == 0 else None, "score": i / 2}
            producer.send(topic, serialize(row), partition=i % PARTITIONS)
        producer.send(topic, b"\x00" + (2**31 - 3).to_bytes(4, "big") + b"\x02", partition=0)
        producer.send(topic, b"\x00\x00\x00", partition=1)
        producer.flush()
    df = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .options(**registry)
        .option("mode", "PERMISSIVE")
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == "struct<n:bigint,tag:string,score:double>"
    total = ROWS + 100
    row = df.agg(
        F.count("*"),
        F.sum("value.n"),
        F.count("value.tag"),
        F.sum(F.when(F.col("value.score") == -1.0, 1)),
        F.sum("value.score"),
        F.sort_array(F.collect_list("valueError")),
    ).collect()[0]
    assert tuple(row)[:5] == (
        total + 2,
        total * (total - 1) // 2,
        (total + 1) // 2,
        ROWS,  # version 1's records, the added field's default
        -ROWS + sum(i / 2 for i in range(ROWS, total)),
    )
    [unknown] = [e for e in row[5] if "not in the registry" in e]
    [truncated] = [e for e in row[5] if e != unknown]
    assert f"schema id {2**31 - 3}" in unknown, unknown
    assert "Schema Registry framing" in truncated, truncated


@pytest.mark.parametrize("fmt", ["json", "protobuf"])
def test_registry_json_and_protobuf_read_on_the_executors(
    fmt: str, spark: SparkSession, bootstrap_servers: str, schema_registry: str, new_topic: Callable[..., str]
) -> None:
    """valueFormat json/protobuf decoded in the executors' Python workers (the Protobuf classes
    built there from the registered descriptors), PERMISSIVE errors for an unknown id and an
    unparsable record."""
    from prerequisites import need_module

    need_module("confluent_kafka")
    from spark_registry_formats import RegistryFormat

    from kafka_core import KafkaProducer

    side = RegistryFormat(fmt, schema_registry)
    topic = new_topic(partitions=1, prefix=f"spark-cluster-{fmt}")
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for value in [side.framed(topic, i) for i in (1, 2, 3)] + side.bad(topic):
            producer.send(topic, value, partition=0)
        producer.flush()
    rows = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("valueFormat", fmt)
        .option("schema.registry.url", schema_registry)
        .option("mode", "PERMISSIVE")
        .option("minPartitions", "2")  # both executors
        .load()
        .select("value.id", "value.tags", "valueError", "offset")
        .orderBy("offset")
        .collect()
    )
    assert [(r.id, r.tags) for r in rows] == [(1, ["1"]), (2, ["2"]), (3, ["3"]), (None, None), (None, None)]
    assert [r.valueError for r in rows[:3]] == [None] * 3
    assert "not in the registry" in rows[3].valueError and side.parse_error in rows[4].valueError


def test_transactional_write_commits_what_the_executors_prepared(
    spark: SparkSession, bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """Tasks in two executor JVMs each prepare a transaction; the driver, another process,
    commits them: read_committed and read_uncommitted readers both see every row once."""
    topic = new_topic(partitions=PARTITIONS, prefix="spark-cluster-txn")
    (
        _rows_frame(spark, 0, ROWS)
        .write.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .option("transactionalIdPrefix", f"cluster-{uuid.uuid4().hex[:8]}")
        .option("transactionTimeoutMs", "60000")
        .mode("append")
        .save()
    )
    _check_exactly(_consume_all(bootstrap_servers, topic, ROWS), range(ROWS))  # librdkafka: read_committed
    _check_exactly(_consume_all(bootstrap_servers, topic, ROWS, isolation="read_uncommitted"), range(ROWS))


def test_streaming_available_now_resumes_from_its_checkpoint(
    spark: SparkSession, bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=PARTITIONS, prefix="spark-cluster-stream")
    _write(spark, bootstrap_servers, topic, 0, ROWS)
    checkpoint = tmp_path / "checkpoint"

    def run() -> tuple[list[tuple[int, int, bytes, bytes]], list[int]]:
        records: list[tuple[int, int, bytes, bytes]] = []
        sizes: list[int] = []

        def collect(batch: DataFrame, batch_id: int) -> None:  # runs in this (the driver) process
            rows = batch.select("partition", "offset", "key", "value").collect()
            sizes.append(len(rows))
            records.extend((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows)

        query = (
            spark.readStream.format("kafka_core")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(ROWS // 3 + 1))
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            finished = query.awaitTermination(180)
            assert finished, "the availableNow query did not finish in 180 s"
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
        return records, [s for s in sizes if s]

    records, sizes = run()
    _check_exactly(records, range(ROWS))
    assert len(sizes) >= 3, f"maxOffsetsPerTrigger should split the backlog, batches: {sizes}"
    assert max(sizes) <= ROWS // 3 + 1, sizes

    # Later rows, and the same query from its checkpoint: only the new ones, once each.
    more = 1_000
    _write(spark, bootstrap_servers, topic, ROWS, ROWS + more)
    records, _ = run()
    _check_exactly(records, range(ROWS, ROWS + more))

    # And nothing at all once caught up.
    records, _ = run()
    assert records == []


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)")
def test_spark_submit_with_an_environment_shipped_by_archives(
    spark_cluster: SparkStandaloneCluster,
    bootstrap_servers: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Route (b) of docs/spark-cluster.md, as Spark's "Python Package Management" page gives it for
    client mode: ``spark-submit --archives environment.tar.gz#environment`` with
    ``PYSPARK_PYTHON=./environment/bin/python``. Executors run the shipped interpreter and
    import kafka_core from the archive they unpacked. The driver JVM starts Python workers too
    (data source lookup, read planning, write commit) with that same relative path from its own
    working directory, so the archive is unpacked there as well; PYSPARK_DRIVER_PYTHON stays
    unset, because Spark gives its path to the executors of an auto-registered data source."""
    archive = _pack_environment(tmp_path / "build")
    driver_dir = tmp_path / "driver"
    (driver_dir / "environment").mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(driver_dir / "environment", filter="tar")
    app = driver_dir / "app.py"
    app.write_text(textwrap.dedent(_SUBMIT_APP))
    topic = new_topic(partitions=PARTITIONS, prefix="spark-cluster-archives")
    rows = 2_000

    # The cluster has two cores and the module's session holds both: give them back first (this
    # test comes last in the module for that reason).
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None and active.master == spark_cluster.master_url:
        active.stop()
    env = spark_cluster.env
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    env["PYSPARK_PYTHON"] = "./environment/bin/python"
    argv = [
        str(spark_cluster.home / "bin" / "spark-submit"),
        "--master",
        spark_cluster.master_url,
        "--archives",
        f"{archive}#environment",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.driver.host={HOST}",
        "--conf",
        f"spark.driver.bindAddress={HOST}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        f"spark.cores.max={EXECUTORS}",
        str(app),
        bootstrap_servers,
        topic,
        str(rows),
    ]
    log = tmp_path / "spark-submit.log"
    started = time.monotonic()
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                argv,
                cwd=driver_dir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=out,
                text=True,
                timeout=SUBMIT_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"spark-submit did not finish in {SUBMIT_TIMEOUT:.0f} s\n{log_tail(log, 60)}\n{spark_cluster.logs()}",
                pytrace=False,
            )
    took = time.monotonic() - started
    result_lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not result_lines:
        pytest.fail(
            f"spark-submit exited with {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\n"
            f"stderr (last lines):\n{log_tail(log, 80)}\n{spark_cluster.logs(20)}",
            pytrace=False,
        )
    result = json.loads(result_lines[-1][len("RESULT ") :])
    keys = result["keys"]
    assert len(keys) == rows and set(keys) == {_key(i).decode() for i in range(rows)}
    # The data source's tasks ran in the shipped interpreter, on the executors.
    assert result["daemons"], "found no Python worker under this application's executors"
    for daemon in result["daemons"]:
        assert daemon["argv0"] == "./environment/bin/python", daemon
        assert Path(daemon["cwd"]).is_relative_to(spark_cluster.work_dir), daemon
    # And kafka_core (with its compiled codec) came from the archive each executor unpacked.
    for info in result["executors"]:
        cwd = Path(info["cwd"])
        assert cwd.is_relative_to(spark_cluster.work_dir), info
        assert Path(info["executable"]) == cwd / "environment" / "bin" / "python", info
        assert Path(info["kafka_core"]).is_relative_to(cwd / "environment"), info
        assert info["codec"] == kafka_core.codec.IMPLEMENTATION, info
    print(f"\nspark-submit with --archives: {took:.1f} s")
