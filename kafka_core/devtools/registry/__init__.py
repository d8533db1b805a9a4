"""A small Confluent-API Schema Registry for tests and local work (``python -m kafka_core.devtools.registry``).

Schemas live in memory (one process, gone when it stops). Avro compatibility is checked by Avro's
resolution rules; JSON Schema and Protobuf schemas are validated but only a change of schema type
counts as incompatible. Not a replacement for Confluent's registry, Karapace or Apicurio: no
Kafka-backed store, no leader election, no contexts, modes are always READWRITE, no rules or
metadata. See docs/schema-registry.md.
"""

from kafka_core.devtools.registry.server import RegistryServer
from kafka_core.devtools.registry.store import RegistryHTTPError, SchemaStore

__all__ = ["RegistryHTTPError", "RegistryServer", "SchemaStore"]
