"""A job run as ``/path/to/venv/bin/python job.py`` with the venv not activated: Spark starts its
Python workers with ``python3`` from PATH, which cannot import kafka_core. ``register(spark)``
switches a local session's workers to the driver's interpreter, and says so."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prerequisites import need_module, unavailable

need_module("pyspark")

pytestmark = pytest.mark.timeout(300)

JOB = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    from kafka_core.spark import register

    bootstrap, topic = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    rows = spark.createDataFrame([(f"v{i}",) for i in range(3)], "value string")
    rows.write.format("kafka_core").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()
    df = (
        spark.read.format("kafka_core")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    print("COUNT", df.count())
    spark.stop()
    """
)


def test_unactivated_venv_job_works_and_says_why(
    tmp_path: Path, bootstrap_servers: str, new_topic: object
) -> None:
    base = Path(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if not base.exists() or Path(sys.base_prefix) == Path(sys.prefix):
        unavailable(
            "a virtualenv over a base Python (as ci/bootstrap.sh makes)", f"sys.prefix is {sys.prefix}"
        )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"  # the python3 an unactivated shell finds: no kafka_core, no pyarrow
    fake.write_text(f'#!/bin/sh\nexec "{base}" "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    venv_bin = str(Path(sys.executable).parent)
    path = [str(bin_dir)] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(PATH=os.pathsep.join(path), VIRTUAL_ENV="")
    job = tmp_path / "job.py"
    job.write_text(JOB)
    topic = new_topic(partitions=1)  # type: ignore[operator]

    done = subprocess.run(
        [sys.executable, str(job), bootstrap_servers, topic],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )

    # Spark's Java stack frames say nothing: show the Python side and the error lines
    output = "\n".join(
        line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("\tat ")
    )
    assert done.returncode == 0 and "COUNT 3" in done.stdout, output[-6000:]
    assert f"python3 ({fake})" in done.stderr and "cannot import kafka_core" in done.stderr, output[-6000:]
    assert f"now run the driver's interpreter {sys.executable}" in done.stderr


REGISTER_AGAIN = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource
    from kafka_core.spark import register

    def mark(text):
        print(f"MARK {text}", file=sys.stderr, flush=True)

    class Impostor(DataSource):
        @classmethod
        def name(cls):
            return "kafka_core"

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    mark("first")
    register(spark)  # Spark found pyspark_kafka_core in PYSPARK_PYTHON: the same class
    mark("second")
    register(spark)  # registered before, by us
    mark("impostor")
    spark.dataSource.register(Impostor)
    mark("third")
    register(spark)  # a different class was there: said
    mark("end")
    spark.stop()
    """
)


def test_register_is_quiet_when_spark_already_has_the_source(tmp_path: Path) -> None:
    """With PYSPARK_PYTHON naming a Python that has kafka_core, Spark registers the source from
    pyspark_kafka_core by itself; register() then replaces it with the very same class and
    Spark's "replaced a statically registered data source" WARN is held back. Only a different
    class under the name is warned about."""
    job = tmp_path / "register_again.py"
    job.write_text(REGISTER_AGAIN)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    err = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("\tat "))
    assert done.returncode == 0, err[-6000:]
    # mark name -> what was logged after it
    parts = {name: rest for name, _, rest in (chunk.partition("\n") for chunk in err.split("MARK ")[1:])}
    assert set(parts) == {"first", "second", "impostor", "third", "end"}, err[-6000:]
    for quiet in ("first", "second"):
        assert "replaced a" not in parts[quiet] and "WARN" not in parts[quiet], parts[quiet]
    assert "replaced a previously registered data source" in parts["impostor"]  # Spark's own, kept
    third = parts["third"]
    assert "replaced a previously registered data source" in third, third
    assert "format('kafka_core') was registered by a class pickled by value" in third, third
