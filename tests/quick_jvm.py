"""The JVMs the suites start (Kafka nodes, Spark drivers, executors and daemons) run with C1 only
and the serial collector.

A suite starts them by the dozen and gives each little to do, so most of a JVM's CPU goes to C2
compiling its start-up path: measured on 2 cores, a local Spark session with one small query took
29 s of CPU with the JVM's defaults and 15 s with these options; a Kafka node (start, 50k records,
stop) 14 s and 8. On a CI machine of two cores that CPU is the run's length. Nothing a test checks
depends on the JIT. The bench keeps the defaults (it measures clients against a full-speed broker).

:func:`use_quick_jvms` sets the environment once per test process (an explicit setting wins);
:func:`write_spark_defaults` writes the options into a Spark conf folder of a test's own.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kafka_core.devtools.brokers.common import QUICK_JVM_OPTIONS

OPTIONS = " ".join(QUICK_JVM_OPTIONS)


def write_spark_defaults(conf_dir: Path) -> None:
    """spark-defaults.conf in ``conf_dir``: the options for drivers and executors. They are Spark's
    ``defaultJavaOptions``, which a job's own ``extraJavaOptions`` add to rather than replace."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.driver.defaultJavaOptions {OPTIONS}\nspark.executor.defaultJavaOptions {OPTIONS}\n"
    )


def use_quick_jvms() -> None:
    """The dev broker's quick profile (KafkaCluster(jit=...)) and a Spark conf folder with the
    options, for this process and what it starts; standalone daemons get them through
    SPARK_DAEMON_JAVA_OPTS."""
    os.environ.setdefault("KAFKA_CORE_DEV_JVM", "quick")
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", OPTIONS)
    if "SPARK_CONF_DIR" not in os.environ:
        # one folder for every process of the run (the same content whoever writes it)
        conf_dir = Path(tempfile.gettempdir()) / f"kafka-core-spark-conf-{os.getuid()}"
        write_spark_defaults(conf_dir)
        os.environ["SPARK_CONF_DIR"] = str(conf_dir)
