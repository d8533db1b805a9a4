"""Schema Registry data: a client for Confluent's REST API and Avro, Protobuf and JSON Schema
serializers with Confluent's framing, under confluent-kafka's names (moving over is a change of
import). Needs the ``schema-registry`` extra: ``pip install 'kafka-core[schema-registry]'``.

The serializers plug into our producer (``value_serializer=serializer.for_topic(topic)``) and
consumers (``value_deserializer=deserializer``) as well as confluent-kafka's call style
(``serializer(obj, SerializationContext(topic, MessageField.VALUE))``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kafka_core.errors import SchemaRegistryError, SchemaRegistryTimeoutError, SerializationError
from kafka_core.schema_registry.schema import (
    RegisteredSchema,
    RegistryErrorCode,
    Schema,
    SchemaReference,
    SchemaVersion,
)

if TYPE_CHECKING:
    from kafka_core.schema_registry.avro import AvroDeserializer, AvroSerializer
    from kafka_core.schema_registry.client import SchemaRegistryClient
    from kafka_core.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from kafka_core.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from kafka_core.schema_registry.serde import (
        MessageField,
        SerializationContext,
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
        topic_subject_name_strategy,
    )

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "JSONDeserializer",
    "JSONSerializer",
    "MessageField",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "RegistryErrorCode",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SchemaRegistryTimeoutError",
    "SchemaVersion",
    "SerializationContext",
    "SerializationError",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]

# each format's library is imported when its serializer is first named, and the HTTP client
# (httpx) when the registry client is: a Spark task decoding by a schema pinned on the driver
# never asks the registry
_LAZY = {
    "SchemaRegistryClient": "client",
    "MessageField": "serde",
    "SerializationContext": "serde",
    "record_subject_name_strategy": "serde",
    "topic_record_subject_name_strategy": "serde",
    "topic_subject_name_strategy": "serde",
    "AvroSerializer": "avro",
    "AvroDeserializer": "avro",
    "ProtobufSerializer": "protobuf",
    "ProtobufDeserializer": "protobuf",
    "JSONSerializer": "json_schema",
    "JSONDeserializer": "json_schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        # a library of the extra is missing (not one of ours): say which extra brings it, as the
        # other extras' messages do, instead of a bare "No module named 'fastavro'"
        if exc.name is None or exc.name.split(".")[0] == "kafka_core":
            raise
        raise ModuleNotFoundError(
            f"{name} needs {exc.name}, part of the schema-registry extra: "
            f"pip install 'kafka-core[schema-registry]'",
            name=exc.name,
        ) from exc
    return getattr(loaded, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
