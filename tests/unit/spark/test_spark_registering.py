"""Telling from the bytes Spark holds which class a registered Python data source is."""

from __future__ import annotations

import pickle

from prerequisites import need_module

need_module("pyspark")

from pyspark import cloudpickle  # noqa: E402  (the pickler PySpark sends a data source with)

from kafka_core.spark.registering import pickled_class  # noqa: E402
from kafka_core.spark.source import KafkaDataSource  # noqa: E402


def test_a_class_pickled_by_reference_is_named() -> None:
    data = cloudpickle.dumps(KafkaDataSource)
    assert pickled_class(data) == "kafka_core.spark.source.KafkaDataSource"
    assert (
        pickled_class(pickle.dumps(KafkaDataSource, protocol=2)) == "kafka_core.spark.source.KafkaDataSource"
    )


def test_anything_else_is_not_a_name_and_nothing_is_imported() -> None:
    class Local(KafkaDataSource):  # not importable by name: cloudpickle sends it by value
        pass

    assert pickled_class(cloudpickle.dumps(Local)) is None
    assert pickled_class(pickle.dumps({"a": 1})) is None
    assert pickled_class(b"") is None and pickled_class(b"not a pickle") is None
    # a reference to a module that does not exist is read as a name, never imported
    reference = b"\x80\x04\x8c\x06nosuch\x94\x8c\x05Thing\x94\x93\x94."  # protocol 4: STACK_GLOBAL
    assert pickled_class(reference) == "nosuch.Thing"
