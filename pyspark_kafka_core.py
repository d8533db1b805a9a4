"""Spark 4.0+ registers the ``DefaultSource`` of every top-level ``pyspark_*`` module: with
kafka_core installed, ``spark.read.format("kafka_core")`` works with no set-up. Only PySpark's
data source API is imported here; the client and pyarrow load when a query runs."""

from kafka_core.spark.source import KafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
