"""A small Confluent-API Schema Registry for tests and local work (``python -m kafka_core.devtools.registry``).

Schemas live in memory, or also in a Kafka topic (``--kafka``: kafka_log.KafkaSchemaLog), replayed
at start. Avro compatibility is checked by Avro's resolution rules, Protobuf's by the wire-level
differences Confluent's registry refuses; JSON Schema schemas are validated but only a change of
schema type counts as incompatible. Not a replacement
for Confluent's registry, Karapace or Apicurio: one process per topic (no leader election), no
contexts, modes are always READWRITE, no rules or metadata. See docs/schema-registry.md.
"""

from kafka_core.devtools.registry.server import RegistryServer
from kafka_core.devtools.registry.store import RegistryHTTPError, SchemaStore

__all__ = ["RegistryHTTPError", "RegistryServer", "SchemaStore"]
