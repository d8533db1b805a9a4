"""The same job through both connectors on a Spark standalone cluster (not only ``local[n]``).

One master and one worker (tests/spark_cluster.py, from the pinned pyspark), two executors of one
core each. The driver is a child process of this interpreter (the session fixture's ``local[2]``
session owns this process's SparkContext): it writes the same DataFrame once through Spark's own
connector (``format("kafka")``, its jars in ``spark.jars`` and so shipped to the executors) and
once through ``format("kafka_core")``, each to its own topic, then reads both topics back through
both formats. Compared: every record landed once; each key went to the same partition with both
writers (both use the murmur2 partitioner); on each topic both readers return the same rows
(partition, offset, key, value, timestamp, timestampType) and plan the same number of tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spark_cluster import HOST, SparkClusterError, SparkStandaloneCluster

ROWS = 20_000
PARTITIONS = 3
EXECUTORS = 2
FORMATS = ("kafka", "kafka_core")

pytestmark = pytest.mark.timeout(900)

_JOB = textwrap.dedent(
    """
    import hashlib, json, sys
    from pyspark.sql import SparkSession

    master, jars, bootstrap, rows, executors = sys.argv[1:6]
    topics = dict(zip(("kafka", "kafka_core"), sys.argv[6:8]))
    spark = (
        SparkSession.builder.master(master)
        .appName("kafka_core-diff-cluster")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "{host}")
        .config("spark.driver.bindAddress", "{host}")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", executors)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "60s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import kafka_core.spark
    kafka_core.spark.register(spark)

    frame = spark.range(0, int(rows), numPartitions=4).selectExpr(
        "CAST(CONCAT('k', LPAD(CAST(id AS STRING), 6, '0')) AS BINARY) AS key",
        "CAST(CONCAT('v', CAST(id AS STRING), ':', REPEAT('x', 80)) AS BINARY) AS value",
    )
    for fmt, topic in topics.items():
        frame.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode(
            "append"
        ).save()

    def digest(items):
        h = hashlib.sha256()
        for item in sorted(items):
            h.update(repr(item).encode())
        return h.hexdigest()

    out = {{}}
    for writer, topic in topics.items():
        for fmt in ("kafka", "kafka_core"):
            df = (
                spark.read.format(fmt)
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .load()
            )
            got = [
                (r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp.isoformat(), r.timestampType)
                for r in df.collect()
            ]
            out[writer + "/" + fmt] = {{
                "tasks": df.rdd.getNumPartitions(),
                "count": len(got),
                "distinct_keys": len({{g[2] for g in got}}),
                "rows": digest(got),
                "placement": digest((g[0], g[2], g[3]) for g in got),
                "schema": df.schema.simpleString(),
            }}
    spark.stop()
    print("RESULT " + json.dumps(out))
    """
).format(host=HOST)


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkStandaloneCluster]:
    try:
        started = SparkStandaloneCluster(cores=EXECUTORS, memory="2g").start()
    except SparkClusterError as exc:
        pytest.fail(f"the Spark standalone cluster did not start:\n{exc}", pytrace=False)
    try:
        yield started
    finally:
        started.stop()


def _run_job(cluster: SparkStandaloneCluster, bootstrap: str, topics: list[str]) -> dict[str, Any]:
    from kafka_core.devtools.brokers.spark_connector import connector_jars

    jars = ",".join(str(j) for j in connector_jars())
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": HOST}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-c", _JOB, cluster.master_url, jars, bootstrap, str(ROWS), str(EXECUTORS), *topics],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    pytest.fail(
        f"the job on the cluster failed (exit {done.returncode}):\n{done.stderr[-3000:]}\n{cluster.logs()}",
        pytrace=False,
    )


def test_the_same_job_through_both_connectors_on_a_standalone_cluster(
    cluster: SparkStandaloneCluster, bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topics = [make_topic(PARTITIONS, prefix=f"diff-cluster-{fmt.replace('_', '-')}") for fmt in FORMATS]
    out = _run_job(cluster, bootstrap, topics)
    assert sorted(out) == sorted(f"{w}/{r}" for w in FORMATS for r in FORMATS)
    for name, seen in out.items():
        assert seen["count"] == ROWS, f"{name}: {seen['count']} rows, expected {ROWS}"
        assert seen["distinct_keys"] == ROWS, f"{name}: a record landed twice or not at all"
    for writer in FORMATS:
        theirs, ours = out[f"{writer}/kafka"], out[f"{writer}/kafka_core"]
        assert ours["schema"] == theirs["schema"]
        assert ours["rows"] == theirs["rows"], f"the readers differ on the topic {writer} wrote"
        assert ours["tasks"] == theirs["tasks"] == PARTITIONS
    # Each key in the same partition whichever connector wrote it (murmur2 of the key in both).
    assert out["kafka/kafka"]["placement"] == out["kafka_core/kafka"]["placement"]
