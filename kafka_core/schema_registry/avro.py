"""Avro with Confluent's framing, by fastavro: ``AvroSerializer(client, schema_str)`` and
``AvroDeserializer(client)``, confluent-kafka's signatures and bytes.

The deserializer keeps, per writer schema id, the parsed writer schema and the reader schema to
resolve it to, so a record costs a dict lookup and fastavro's decode.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from kafka_core.errors import KafkaConfigError, SerializationError
from kafka_core.schema_registry.client import SchemaRegistryClient
from kafka_core.schema_registry.schema import Schema
from kafka_core.schema_registry.serde import (
    HEADER,
    MAGIC_BYTE,
    BoundDeserializer,
    BoundSerializer,
    MessageField,
    PerSchemaId,
    SchemaIdResolver,
    SerializationContext,
    SerializerConfig,
    schema_id_of,
    topic_subject_name_strategy,
    writer_schema,
)

__all__ = ["AvroDeserializer", "AvroSerializer", "avro_schema", "parse_avro_schema"]


def avro_schema(schema_str: str | Schema) -> Schema:
    """A Schema from Avro text (a bare primitive name such as ``"string"`` included), as confluent-kafka reads it."""
    if isinstance(schema_str, Schema):
        return schema_str
    text = schema_str.strip()
    if text[:1] not in ("{", "["):
        text = '{"type":' + text + "}"
    return Schema(text, "AVRO")


def parse_avro_schema(client: SchemaRegistryClient | None, schema: Schema) -> Any:
    """fastavro's parsed schema, the named types of its references (fetched from the registry) included."""
    named: dict[str, Any] = {}
    _add_references(client, schema, named, set())
    try:
        return parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except Exception as exc:  # fastavro: SchemaParseError, UnknownType, ValueError...
        raise SerializationError(f"invalid Avro schema: {type(exc).__name__}: {exc}") from exc


def _add_references(
    client: SchemaRegistryClient | None, schema: Schema, named: dict[str, Any], seen: set[tuple[str, int]]
) -> None:
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        if client is None:
            raise SerializationError(
                f"schema references {ref.subject} v{ref.version}: a registry client is needed"
            )
        referenced = client.get_version(ref.subject, ref.version).schema
        _add_references(client, referenced, named, seen)
        try:
            parse_schema(json.loads(referenced.schema_str), named_schemas=named)
        except Exception as exc:
            raise SerializationError(
                f"invalid referenced schema {ref.subject} v{ref.version}: {exc}"
            ) from exc


def _record_name(parsed: Any, schema: Schema) -> str | None:
    if isinstance(parsed, dict):
        name = parsed.get("name")
        if name is not None:
            return str(name)
        declared = json.loads(schema.schema_str)
        return str(declared.get("type")) if isinstance(declared, dict) else None
    return None


class AvroSerializer:
    """``AvroSerializer(client, schema_str, to_dict=None, conf=None)``; call it as
    ``serializer(obj, SerializationContext(topic, MessageField.VALUE))``, or give
    ``serializer.for_topic(topic)`` to a producer as ``value_serializer``.

    ``conf``: ``auto.register.schemas`` (True), ``normalize.schemas``, ``use.latest.version``
    (write with the subject's latest schema; needs ``auto.register.schemas`` False),
    ``use.schema.id`` (a fixed id), ``subject.name.strategy`` (topic, record or topic-record).
    """

    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        to_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: dict[str, Any] | None = None,
    ) -> None:
        if to_dict is not None and not callable(to_dict):
            raise KafkaConfigError("to_dict must be callable (obj, ctx) -> dict")
        self._client = schema_registry_client
        self._config = SerializerConfig(conf)
        self._config.check_consumed()
        self._schema = None if schema_str is None else avro_schema(schema_str)
        self._parsed = (
            None if self._schema is None else parse_avro_schema(schema_registry_client, self._schema)
        )
        self._record_name = None if self._schema is None else _record_name(self._parsed, self._schema)
        self._to_dict = to_dict
        self._resolver = SchemaIdResolver(schema_registry_client, self._schema, self._config)
        self._parsed_by_id: PerSchemaId[Any] = PerSchemaId()

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        subject = self._config.strategy(ctx, self._record_name)
        registered = self._resolver.resolve(subject)
        parsed = self._writer_schema(registered.schema_id, registered.schema)
        value = self._to_dict(obj, ctx) if self._to_dict is not None else obj
        out = io.BytesIO()
        out.write(HEADER.pack(MAGIC_BYTE, registered.schema_id))
        try:
            schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(
                f"cannot write {type(obj).__name__} with schema {registered.schema_id}: {exc}"
            ) from exc
        return out.getvalue()

    def _writer_schema(self, schema_id: int, schema: Schema) -> Any:
        if self._schema is not None and schema == self._schema:
            return self._parsed
        return self._parsed_by_id.get(schema_id, lambda: parse_avro_schema(self._client, schema))

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundSerializer:
        """This serializer as a producer's ``value_serializer`` (or ``key_serializer``) for ``topic``."""
        return BoundSerializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return f"AvroSerializer(record={self._record_name!r})"


class AvroDeserializer:
    """``AvroDeserializer(client, schema_str=None, from_dict=None, return_record_name=False, conf=None)``.

    Each record is decoded with its writer schema (from the id in its frame) and, when a reader
    schema is given (``schema_str``, or ``conf={"use.latest.version": True}``: the subject's
    latest), resolved to it by Avro's rules. Usable as is as a consumer's ``value_deserializer``
    (``fn(bytes)``); ``for_topic(topic)`` when the subject needs the topic.
    """

    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        return_record_name: bool = False,
        conf: dict[str, Any] | None = None,
    ) -> None:
        if from_dict is not None and not callable(from_dict):
            raise KafkaConfigError("from_dict must be callable (dict, ctx) -> object")
        settings = {
            "use.latest.version": False,
            "subject.name.strategy": topic_subject_name_strategy,
            **(conf or {}),
        }
        self._use_latest = settings.pop("use.latest.version")
        self._strategy = settings.pop("subject.name.strategy")
        if settings:
            raise KafkaConfigError(f"unknown AvroDeserializer settings: {sorted(settings)}")
        self._client = schema_registry_client
        self._schema = None if schema_str is None else avro_schema(schema_str)
        self._reader = (
            None if self._schema is None else parse_avro_schema(schema_registry_client, self._schema)
        )
        self._from_dict = from_dict
        self._return_record_name = return_record_name
        self._by_id: PerSchemaId[tuple[Any, Any]] = PerSchemaId()  # writer id -> (writer, reader or None)
        self._parsed_by_id: PerSchemaId[Any] = PerSchemaId()

    def __call__(self, data: Any, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        schema_id = schema_id_of(data)
        if self._use_latest:
            schemas = self._latest_schemas(schema_id, ctx)
        else:
            schemas = self._by_id.get(schema_id, lambda: self._schemas(schema_id))
        buffer = io.BytesIO(data)
        buffer.seek(5)
        try:
            obj = schemaless_reader(buffer, schemas[0], schemas[1], self._return_record_name)
        except Exception as exc:  # fastavro: EOFError, SchemaResolutionError, UnicodeDecodeError...
            raise SerializationError(
                f"cannot read a record of schema {schema_id}: {type(exc).__name__}: {exc}"
            ) from exc
        if self._from_dict is not None:
            return self._from_dict(obj, ctx)
        return obj

    def _parsed(self, schema_id: int) -> Any:
        return self._parsed_by_id.get(
            schema_id, lambda: parse_avro_schema(self._client, writer_schema(self._client, schema_id))
        )

    def _schemas(self, schema_id: int) -> tuple[Any, Any]:
        """The writer's schema and the reader's (None: the writer's own), for records of ``schema_id``."""
        writer = self._parsed(schema_id)
        reader = self._reader
        return writer, None if reader is None or _same(reader, writer) else reader

    def _latest_schemas(self, schema_id: int, ctx: SerializationContext | None) -> tuple[Any, Any]:
        """As ``_schemas``, the reader being the subject's latest (per the client's TTL, not cached here)."""
        writer = self._parsed(schema_id)
        subject = self._strategy(ctx, writer.get("name") if isinstance(writer, dict) else None)
        if subject is None:
            raise SerializationError("use.latest.version: the subject name strategy gave no subject")
        latest = self._client.get_latest_version(subject)
        if latest.schema_id == schema_id:
            return writer, None
        return writer, self._parsed(latest.schema_id)

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundDeserializer:
        return BoundDeserializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return f"AvroDeserializer(reader={'given' if self._schema else 'writer'})"


def _same(a: Any, b: Any) -> bool:
    strip = lambda s: {k: v for k, v in s.items() if k != "__named_schemas"} if isinstance(s, dict) else s  # noqa: E731
    return bool(strip(a) == strip(b))
