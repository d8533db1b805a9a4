"""PySpark integration: the ``kafka_core`` data source and executor-side producers.

``spark.read.format("kafka_core")`` takes the options of Spark's own Kafka connector, so a job
switches by changing only the format name, with no JVM connector jar to match to Spark and
Scala. The data source registers itself through the top-level ``pyspark_kafka_core`` module
(Spark 4.0+ looks such modules up, in its Python workers); :func:`register` does it explicitly,
from the driver, and checks that the workers' Python can import kafka_core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_core.spark.source import KafkaDataSource

__all__ = ["KafkaDataSource", "produce_partition", "read_schema", "register"]


def register(spark: Any, *, fast_start: bool | None = None) -> None:
    """Register the ``kafka_core`` format with a SparkSession.

    Spark runs the data source in Python workers started with ``PYSPARK_PYTHON`` (else
    ``python3`` from PATH), not with the driver's interpreter: when that interpreter cannot
    import kafka_core, a local session's workers are switched to the driver's interpreter, and
    otherwise a warning names both and the fix (see :mod:`kafka_core.spark.workers`).

    ``fast_start``: the data source's workers start through a launcher that keeps PySpark's
    compiled modules (:mod:`kafka_core.spark.launcher`); by default on a local master only,
    ``True`` on a cluster whose executors have ``kafka-core-spark-python`` beside their Python,
    ``False`` never.
    """
    from kafka_core.spark.launcher import worker_launcher
    from kafka_core.spark.registering import replacing
    from kafka_core.spark.source import KafkaDataSource
    from kafka_core.spark.workers import check_worker_python

    check_worker_python(spark)
    # with PYSPARK_PYTHON naming a Python that has kafka_core, Spark has found the source already
    with worker_launcher(spark, fast_start), replacing(spark, KafkaDataSource.name(), KafkaDataSource):
        spark.dataSource.register(KafkaDataSource)


def produce_partition(rows: Any, topic: str | None = None, **options: Any) -> int:
    """Write an RDD or DataFrame partition to Kafka (see :func:`kafka_core.spark.write.produce_partition`)."""
    from kafka_core.spark.write import produce_partition as produce

    return produce(rows, topic, **options)


def __getattr__(name: str) -> Any:
    if name in ("KafkaDataSource", "read_schema"):
        from kafka_core.spark import source

        return getattr(source, name)
    raise AttributeError(f"module 'kafka_core.spark' has no attribute {name!r}")
