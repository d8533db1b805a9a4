"""On a real local Spark: the workers of a data source registered through the launcher (as
register() registers kafka_core's) import PySpark through the zip bytecode cache, in the planner
and in the tasks, and fill the cache; a plain function of the same session keeps Spark's
interpreter. A job of its own, so that its JVM and workers get this test's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prerequisites import need_module

need_module("pyspark")

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]

JOB = textwrap.dedent(
    """
    import json
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from kafka_core.spark.launcher import worker_launcher


    def through_cache():
        import pyspark
        from kafka_core.spark.zip_bytecode import loaded_through_cache

        return loaded_through_cache(pyspark)


    def preloaded():  # what the worker had from the daemon it was forked from, before any task import
        import sys

        return all(m in sys.modules for m in ("pyarrow", "kafka_core.spark.write", "kafka_core.spark.read"))


    class Probe(DataSource):
        @classmethod
        def name(cls):
            return "launcher_probe"

        def schema(self):  # runs in a planner worker: its answer shows in the column's name
            return f"planner_{int(through_cache())} boolean, preloaded boolean"

        def reader(self, schema):
            return Reader()


    class Reader(DataSourceReader):
        def read(self, partition):
            yield (through_cache(), preloaded())


    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    python = spark.sparkContext.pythonExec
    with worker_launcher(spark, None) as used:
        spark.dataSource.register(Probe)
    df = spark.read.format("launcher_probe").load()
    task, task_preloaded = df.collect()[0]
    plain, plain_preloaded = spark.sparkContext.parallelize([0], 1).map(lambda _: (through_cache(), preloaded())).collect()[0]
    print("RESULT " + json.dumps({
        "used": used, "columns": df.columns, "task": task, "plain": plain,
        "task_preloaded": task_preloaded, "plain_preloaded": plain_preloaded,
        "restored": spark.sparkContext.pythonExec == python,
    }))
    spark.stop()
    """
)


def test_the_data_sources_workers_start_through_the_launcher(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYSPARK_DRIVER_PYTHON")
    }
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")])),
    )
    done = subprocess.run(
        [sys.executable, str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["used"] and result["used"].startswith(str(tmp_path / "cache"))
    assert result["columns"] == ["planner_1", "preloaded"], (
        "the planner did not import PySpark through the cache"
    )
    assert result["task"] is True, "the task's worker did not import PySpark through the cache"
    # the daemon imported what the data source's tasks need before forking the task's worker
    assert result["task_preloaded"] is True, "the task's worker did not inherit the task modules"
    assert result["plain"] is False, "a plain function of the session got the launcher too"
    assert result["plain_preloaded"] is False, "a plain function's workers got the preload too"
    assert result["restored"]
    cached = list((tmp_path / "cache" / "kafka_core" / "zip-bytecode").glob("pyspark.*.bin"))
    assert len(cached) > 50, cached
