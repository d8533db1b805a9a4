"""What every format's serializer shares: the context (topic, key or value), subject name
strategies, Confluent's framing (magic byte 0, a 4-byte big-endian schema id), and the adapters
that turn a serializer into the ``fn(obj) -> bytes`` / ``fn(bytes) -> obj`` hooks of our
producer and consumers."""

from __future__ import annotations

import enum
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from kafka_core.errors import KafkaConfigError, SchemaRegistryError, SerializationError
from kafka_core.schema_registry.client import SchemaRegistryClient
from kafka_core.schema_registry.schema import RegisteredSchema, Schema

__all__ = [
    "MAGIC_BYTE",
    "MessageField",
    "PerSchemaId",
    "SerializationContext",
    "SubjectNameStrategy",
    "frame",
    "record_subject_name_strategy",
    "schema_id_of",
    "split_frame",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
    "writer_schema",
]

T = TypeVar("T")

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")  # the magic byte and the schema id


class MessageField(enum.StrEnum):
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """The topic and the part of the record (key or value) a value is (de)serialized for."""

    __slots__ = ("field", "headers", "topic")

    def __init__(
        self, topic: str, field: MessageField | str, headers: Sequence[tuple[str, bytes]] | None = None
    ) -> None:
        self.topic = topic
        self.field = MessageField(field)
        self.headers = headers

    def __repr__(self) -> str:
        return f"SerializationContext({self.topic!r}, {self.field!s})"


SubjectNameStrategy = Callable[[SerializationContext | None, str | None], str | None]


def topic_subject_name_strategy(ctx: SerializationContext | None, record_name: str | None) -> str | None:
    """``<topic>-key`` / ``<topic>-value`` (the default)."""
    if ctx is None:
        raise SerializationError(
            "topic_subject_name_strategy needs a SerializationContext (pass ctx, or use "
            "serializer.for_topic(topic) as a producer's value_serializer)"
        )
    return f"{ctx.topic}-{ctx.field}"


def topic_record_subject_name_strategy(
    ctx: SerializationContext | None, record_name: str | None
) -> str | None:
    """``<topic>-<record full name>``."""
    if ctx is None:
        raise SerializationError("topic_record_subject_name_strategy needs a SerializationContext")
    return None if record_name is None else f"{ctx.topic}-{record_name}"


def record_subject_name_strategy(ctx: SerializationContext | None, record_name: str | None) -> str | None:
    """``<record full name>``: one subject per record type, whatever the topic."""
    return record_name


def frame(schema_id: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC_BYTE, schema_id) + payload


def schema_id_of(data: Any) -> int:
    """The schema id of Confluent-framed bytes; SerializationError if they are not framed."""
    try:
        magic, schema_id = HEADER.unpack_from(data)
    except struct.error:
        raise SerializationError(
            f"expected Confluent framing (5 bytes or more), got {len(data)} bytes: not written by a "
            "schema registry serializer"
        ) from None
    if magic != MAGIC_BYTE:
        raise SerializationError(f"unknown magic byte {magic}: not written by a schema registry serializer")
    return int(schema_id)


def split_frame(data: Any) -> tuple[int, memoryview]:
    """(schema id, payload) of Confluent-framed bytes; SerializationError if they are not framed."""
    view = memoryview(data)
    return schema_id_of(view), view[5:]


class SerializerConfig:
    """The settings confluent-kafka's serializers share, checked once."""

    defaults: dict[str, Any] = {
        "auto.register.schemas": True,
        "normalize.schemas": False,
        "use.schema.id": None,
        "use.latest.version": False,
        "subject.name.strategy": topic_subject_name_strategy,
    }

    def __init__(self, conf: dict[str, Any] | None, extra: dict[str, Any] | None = None) -> None:
        merged = {**self.defaults, **(extra or {}), **(conf or {})}
        self.auto_register = _bool(merged, "auto.register.schemas")
        self.normalize = _bool(merged, "normalize.schemas")
        self.use_latest = _bool(merged, "use.latest.version")
        self.use_schema_id = merged.pop("use.schema.id")
        if self.use_schema_id is not None and not isinstance(self.use_schema_id, int):
            raise KafkaConfigError("use.schema.id must be an int")
        if self.use_latest and self.auto_register:
            raise KafkaConfigError(
                "use.latest.version and auto.register.schemas exclude each other (set auto.register.schemas False)"
            )
        self.strategy: SubjectNameStrategy = merged.pop("subject.name.strategy")
        if not callable(self.strategy):
            raise KafkaConfigError("subject.name.strategy must be callable (ctx, record_name) -> subject")
        for key in ("auto.register.schemas", "normalize.schemas", "use.latest.version"):
            merged.pop(key, None)
        self.rest = merged  # the format's own keys; the format checks and pops them

    def check_consumed(self) -> None:
        if self.rest:
            raise KafkaConfigError(f"unknown serializer settings: {sorted(self.rest)}")


def _bool(conf: dict[str, Any], key: str) -> bool:
    value = conf[key]
    if not isinstance(value, bool):
        raise KafkaConfigError(f"{key} must be True or False, not {value!r}")
    return value


class SchemaIdResolver:
    """Which id a serializer writes for a subject: the fixed one, the latest, or the schema's own
    (registered or looked up). Per subject, resolved once (the latest: per the client's TTL)."""

    def __init__(self, client: SchemaRegistryClient, schema: Schema | None, config: SerializerConfig) -> None:
        self._client = client
        self._schema = schema
        self._config = config
        self._lock = threading.Lock()  # guards _known
        self._known: dict[str, RegisteredSchema] = {}

    def resolve(self, subject: str | None) -> RegisteredSchema:
        """The registration to write under (its schema is what the data is written with)."""
        config = self._config
        if config.use_schema_id is not None:
            return RegisteredSchema(
                config.use_schema_id, self._client.get_schema(config.use_schema_id, subject), subject, None
            )
        if subject is None:
            raise SerializationError("the subject name strategy gave no subject for this record")
        if config.use_latest:
            return self._client.get_latest_version(subject)
        known = self._known.get(subject)
        if known is not None:
            return known
        if self._schema is None:
            raise SerializationError(
                "a schema is needed to serialize (or set use.latest.version / use.schema.id)"
            )
        if config.auto_register:
            found = self._client.register_schema_full_response(subject, self._schema, config.normalize)
        else:
            found = self._client.lookup_schema(subject, self._schema, config.normalize)
        found = RegisteredSchema(found.schema_id, self._schema, subject, found.version, found.guid)
        with self._lock:
            self._known[subject] = found
        return found


class BoundSerializer:
    """``serializer`` bound to a topic and field: the ``fn(obj) -> bytes`` our producer takes."""

    __slots__ = ("_ctx", "_serializer")

    def __init__(
        self,
        serializer: Callable[[Any, SerializationContext | None], bytes | None],
        ctx: SerializationContext,
    ) -> None:
        self._serializer = serializer
        self._ctx = ctx

    def __call__(self, obj: Any) -> bytes | None:
        return self._serializer(obj, self._ctx)

    def __repr__(self) -> str:
        return f"{self._serializer!r}.for_topic({self._ctx.topic!r}, {self._ctx.field!s})"


class BoundDeserializer:
    """``deserializer`` bound to a topic and field: the ``fn(bytes) -> obj`` our consumers take
    (the deserializers take ``fn(bytes)`` as they are; bind one when its subject needs the topic)."""

    __slots__ = ("_ctx", "_deserializer")

    def __init__(
        self, deserializer: Callable[[Any, SerializationContext | None], Any], ctx: SerializationContext
    ) -> None:
        self._deserializer = deserializer
        self._ctx = ctx

    def __call__(self, data: Any) -> Any:
        return self._deserializer(data, self._ctx)

    def __repr__(self) -> str:
        return f"{self._deserializer!r}.for_topic({self._ctx.topic!r}, {self._ctx.field!s})"


class PerSchemaId(Generic[T]):
    """What a format derives from a registered schema (a parsed Avro schema, a JSON Schema
    validator), kept per schema id: built on first use, then read without a lock on every record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards writes to _by_id; reads are plain dict gets
        self._by_id: dict[int, T] = {}

    def get(self, schema_id: int, build: Callable[[], T]) -> T:
        found = self._by_id.get(schema_id)
        if found is None:
            found = build()
            with self._lock:
                self._by_id[schema_id] = found
        return found


def writer_schema(client: SchemaRegistryClient, schema_id: int) -> Schema:
    """The schema a record was written with, by the id in its frame; a registry failure is the
    record's SerializationError, as a deserializer reports every failure."""
    try:
        return client.get_schema(schema_id)
    except SchemaRegistryError as exc:
        raise SerializationError(f"cannot fetch writer schema {schema_id}: {exc}") from exc
