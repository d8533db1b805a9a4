"""JSON Schema with Confluent's framing: the schema id, then the value as compact UTF-8 JSON
(confluent-kafka's encoding: no spaces, non-ASCII kept), validated by jsonschema on both sides
unless ``validate`` is False. The subject's record name is the schema's ``title``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

from kafka_core.errors import KafkaConfigError, SchemaRegistryError, SerializationError
from kafka_core.schema_registry.client import SchemaRegistryClient
from kafka_core.schema_registry.schema import Schema
from kafka_core.schema_registry.serde import (
    BoundDeserializer,
    BoundSerializer,
    MessageField,
    PerSchemaId,
    SchemaIdResolver,
    SerializationContext,
    SerializerConfig,
    frame,
    split_frame,
    topic_subject_name_strategy,
    writer_schema,
)

__all__ = ["JSONDeserializer", "JSONSerializer"]


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _validator(client: SchemaRegistryClient | None, schema: Schema) -> Any:
    """A jsonschema validator for ``schema``, its references (by their names) resolvable."""
    try:
        document = json.loads(schema.schema_str)
    except ValueError as exc:
        raise SerializationError(f"invalid JSON schema: {exc}") from exc
    resources: list[tuple[str, referencing.Resource[Any]]] = []
    pending, seen = list(schema.references), set()
    while pending:
        ref = pending.pop()
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        if client is None:
            raise SerializationError(
                f"schema references {ref.subject} v{ref.version}: a registry client is needed"
            )
        referenced = client.get_version(ref.subject, ref.version).schema
        pending.extend(referenced.references)
        resources.append(
            (ref.name, referencing.jsonschema.DRAFT202012.create_resource(json.loads(referenced.schema_str)))
        )
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(document)
    try:
        cls.check_schema(document)
    except jsonschema.SchemaError as exc:
        raise SerializationError(f"invalid JSON schema: {exc.message}") from exc
    return cls(document, registry=registry)


class JSONSerializer:
    """``JSONSerializer(schema_str, client, to_dict=None, conf=None)`` (confluent-kafka's order);
    ``conf`` as AvroSerializer's, plus ``validate`` (True)."""

    def __init__(
        self,
        schema_str: str | Schema | None,
        schema_registry_client: SchemaRegistryClient,
        to_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: dict[str, Any] | None = None,
    ) -> None:
        self._config = SerializerConfig(conf, {"validate": True})
        self._validate = bool(self._config.rest.pop("validate"))
        self._config.check_consumed()
        self._client = schema_registry_client
        self._schema = (
            None
            if schema_str is None
            else (schema_str if isinstance(schema_str, Schema) else Schema(schema_str, "JSON"))
        )
        self._validator = None if self._schema is None else _validator(schema_registry_client, self._schema)
        title = None if self._schema is None else json.loads(self._schema.schema_str).get("title")
        self._record_name = None if title is None else str(title)
        self._to_dict = to_dict
        self._resolver = SchemaIdResolver(schema_registry_client, self._schema, self._config)
        self._validators: PerSchemaId[Any] = PerSchemaId()

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        subject = self._config.strategy(ctx, self._record_name)
        registered = self._resolver.resolve(subject)
        value = self._to_dict(obj, ctx) if self._to_dict is not None else obj
        if self._validate:
            validator = self._validator
            if validator is None or registered.schema != self._schema:
                schema = registered.schema
                validator = self._validators.get(
                    registered.schema_id, lambda: _validator(self._client, schema)
                )
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                raise SerializationError(
                    f"the value does not match schema {registered.schema_id}: {error.message}"
                )
        try:
            return frame(registered.schema_id, _encode(value))
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"cannot encode {type(obj).__name__} as JSON: {exc}") from exc

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundSerializer:
        return BoundSerializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return f"JSONSerializer(title={self._record_name!r})"


class JSONDeserializer:
    """``JSONDeserializer(schema_str, from_dict=None, schema_registry_client=None, conf=None)``:
    the value validated against ``schema_str`` (or, with no schema given, the writer's schema
    fetched by id through the client)."""

    def __init__(
        self,
        schema_str: str | Schema | None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        schema_registry_client: SchemaRegistryClient | None = None,
        conf: dict[str, Any] | None = None,
    ) -> None:
        settings = {
            "validate": True,
            "use.latest.version": False,
            "subject.name.strategy": topic_subject_name_strategy,
            **(conf or {}),
        }
        self._validate = bool(settings.pop("validate"))
        self._use_latest = bool(settings.pop("use.latest.version"))
        self._strategy = settings.pop("subject.name.strategy")
        if self._use_latest and schema_registry_client is None:
            raise KafkaConfigError("use.latest.version needs a schema_registry_client")
        if settings:
            raise KafkaConfigError(f"unknown JSONDeserializer settings: {sorted(settings)}")
        if schema_str is None and schema_registry_client is None and self._validate:
            raise KafkaConfigError(
                "JSONDeserializer needs schema_str or a schema_registry_client to validate with"
            )
        self._client = schema_registry_client
        schema = (
            None
            if schema_str is None
            else (schema_str if isinstance(schema_str, Schema) else Schema(schema_str, "JSON"))
        )
        self._validator = (
            None if schema is None or not self._validate else _validator(schema_registry_client, schema)
        )
        self._from_dict = from_dict
        self._by_id: PerSchemaId[Any] = PerSchemaId()

    def __call__(self, data: Any, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        schema_id, payload = split_frame(data)
        try:
            value = json.loads(bytes(payload))
        except ValueError as exc:
            raise SerializationError(f"not JSON: {exc}") from exc
        if self._validate:
            if self._use_latest:
                validator = self._latest_validator(schema_id, ctx)
            else:
                validator = self._validator or self._writer_validator(schema_id)
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                raise SerializationError(f"the value does not match the schema: {error.message}")
        return self._from_dict(value, ctx) if self._from_dict is not None else value

    def _latest_validator(self, schema_id: int, ctx: SerializationContext | None) -> Any:
        """The validator of the subject's latest schema (the subject from the writer's title)."""
        assert self._client is not None
        try:
            title = json.loads(self._client.get_schema(schema_id).schema_str).get("title")
            subject = self._strategy(ctx, None if title is None else str(title))
            if subject is None:
                raise SerializationError("use.latest.version: the subject name strategy gave no subject")
            latest = self._client.get_latest_version(subject)
        except SchemaRegistryError as exc:
            raise SerializationError(
                f"cannot fetch the latest schema for writer schema {schema_id}: {exc}"
            ) from exc
        return self._writer_validator(latest.schema_id)

    def _writer_validator(self, schema_id: int) -> Any:
        client = self._client
        assert client is not None
        return self._by_id.get(schema_id, lambda: _validator(client, writer_schema(client, schema_id)))

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundDeserializer:
        return BoundDeserializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return "JSONDeserializer()"
