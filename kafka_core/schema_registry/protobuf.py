"""Protobuf with Confluent's framing: the schema id, then the message index list (which message
of the .proto file, as zigzag varints; a single 0 for the file's first message), then the
message. Schemas are registered as confluent-kafka registers them: the base64
FileDescriptorProto, its imports registered first as references (Google's well-known types
skipped)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import DecodeError, Message

from kafka_core.errors import KafkaConfigError, SerializationError
from kafka_core.schema_registry.client import SchemaRegistryClient
from kafka_core.schema_registry.schema import Schema, SchemaReference
from kafka_core.schema_registry.serde import (
    BoundDeserializer,
    BoundSerializer,
    MessageField,
    SchemaIdResolver,
    SerializationContext,
    SerializerConfig,
    frame,
    split_frame,
)

__all__ = [
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "message_indexes",
    "message_name_at",
    "read_message_indexes",
    "reference_subject_name_strategy",
]

_KNOWN_PREFIXES = ("google/protobuf/", "google/type/")


def reference_subject_name_strategy(ctx: SerializationContext | None, file: FileDescriptor) -> str:
    """An imported .proto file's subject: its file name (confluent-kafka's default)."""
    return str(file.name)


def message_indexes(descriptor: Any) -> list[int]:
    """Where the message sits in its file: indexes from the top-level message down the nesting."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    top = list(current.file.message_types_by_name.values())
    path.append(top.index(current))
    return path[::-1]


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise SerializationError("truncated Protobuf message index list")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos


def read_message_indexes(payload: memoryview) -> tuple[list[int], int]:
    """The message index list at the start of a framed payload (``[0]`` for the single 0 that
    names the file's first message), and where the message starts."""
    count, pos = _read_varint(payload, 0)
    if count < 0 or count > 100_000:
        raise SerializationError(f"invalid Protobuf message index list length {count}")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(payload, pos)
        indexes.append(index)
    return indexes or [0], pos


def message_name_at(file: Any, indexes: list[int]) -> str:
    """The full name of the message ``indexes`` points at in a ``FileDescriptorProto``."""
    names: list[str] = [file.package] if file.package else []
    messages = file.message_type
    for index in indexes:
        if not 0 <= index < len(messages):
            raise SerializationError(f"message index list {indexes} points past the schema's messages")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)


def _schema_of(file: Any, references: list[SchemaReference]) -> Schema:
    return Schema(base64.standard_b64encode(file.serialized_pb).decode("ascii"), "PROTOBUF", references)


class ProtobufSerializer:
    """``ProtobufSerializer(msg_type, client, conf=None)``; ``conf`` as AvroSerializer's, plus
    ``skip.known.types`` (True) and ``reference.subject.name.strategy``."""

    def __init__(
        self,
        msg_type: type[Message],
        schema_registry_client: SchemaRegistryClient,
        conf: dict[str, Any] | None = None,
    ) -> None:
        extra = {
            "skip.known.types": True,
            "reference.subject.name.strategy": reference_subject_name_strategy,
            "use.deprecated.format": False,
        }
        self._config = SerializerConfig(conf, extra)
        self._skip_known = bool(self._config.rest.pop("skip.known.types"))
        self._reference_strategy: Callable[[SerializationContext | None, FileDescriptor], str] = (
            self._config.rest.pop("reference.subject.name.strategy")
        )
        if self._config.rest.pop("use.deprecated.format"):
            raise KafkaConfigError("use.deprecated.format is not supported (nor by confluent-kafka any more)")
        self._config.check_consumed()
        self._client = schema_registry_client
        self._msg_type = msg_type
        descriptor = msg_type.DESCRIPTOR
        self._full_name = descriptor.full_name
        self._indexes = _encode_indexes(message_indexes(descriptor))
        self._file = descriptor.file
        self._lock = threading.Lock()  # guards _resolvers
        self._resolvers: dict[str | None, SchemaIdResolver] = {}

    def _resolver(self, ctx: SerializationContext | None, subject: str | None) -> SchemaIdResolver:
        resolver = self._resolvers.get(subject)
        if resolver is None:
            needs_schema = self._config.use_schema_id is None and not self._config.use_latest
            schema = _schema_of(self._file, self._dependencies(ctx, self._file)) if needs_schema else None
            resolver = SchemaIdResolver(self._client, schema, self._config)
            with self._lock:
                self._resolvers[subject] = resolver
        return resolver

    def _dependencies(self, ctx: SerializationContext | None, file: Any) -> list[SchemaReference]:
        references = []
        for dependency in file.dependencies:
            if self._skip_known and dependency.name.startswith(_KNOWN_PREFIXES):
                continue
            schema = _schema_of(dependency, self._dependencies(ctx, dependency))
            subject = self._reference_strategy(ctx, dependency)
            if self._config.auto_register:
                self._client.register_schema(subject, schema)
            found = self._client.lookup_schema(subject, schema)
            references.append(SchemaReference(dependency.name, subject, int(found.version or 0)))
        return references

    def __call__(self, message: Message | None, ctx: SerializationContext | None = None) -> bytes | None:
        if message is None:
            return None
        if not isinstance(message, self._msg_type):
            raise SerializationError(
                f"message must be a {self._msg_type.__name__}, not {type(message).__name__}"
            )
        subject = self._config.strategy(ctx, self._full_name)
        registered = self._resolver(ctx, subject).resolve(subject)
        return frame(registered.schema_id, self._indexes + message.SerializeToString())

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundSerializer:
        return BoundSerializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return f"ProtobufSerializer({self._full_name})"


class ProtobufDeserializer:
    """``ProtobufDeserializer(message_type, conf=None)``: the payload parsed into ``message_type``
    (the reader's class; Protobuf's own rules carry added and removed fields)."""

    def __init__(
        self,
        message_type: type[Message],
        conf: dict[str, Any] | None = None,
        schema_registry_client: SchemaRegistryClient | None = None,
    ) -> None:
        settings = {"use.deprecated.format": False, **(conf or {})}
        if settings.pop("use.deprecated.format"):
            raise KafkaConfigError("use.deprecated.format is not supported (nor by confluent-kafka any more)")
        if settings.pop("use.latest.version", False):
            raise KafkaConfigError(
                "use.latest.version: here the message class given is the reader's schema, there is no other to choose"
            )
        settings.pop("subject.name.strategy", None)  # used by use.latest.version only, as in confluent-kafka
        if settings:
            raise KafkaConfigError(f"unknown ProtobufDeserializer settings: {sorted(settings)}")
        self._msg_type = message_type

    def __call__(self, data: Any, ctx: SerializationContext | None = None) -> Message | None:
        if data is None:
            return None
        _, view = split_frame(data)
        _, pos = read_message_indexes(view)
        try:
            return self._msg_type.FromString(bytes(view[pos:]))
        except DecodeError as exc:
            raise SerializationError(f"cannot parse a {self._msg_type.__name__}: {exc}") from exc

    def for_topic(self, topic: str, field: MessageField | str = MessageField.VALUE) -> BoundDeserializer:
        return BoundDeserializer(self, SerializationContext(topic, field))

    def __repr__(self) -> str:
        return f"ProtobufDeserializer({self._msg_type.DESCRIPTOR.full_name})"
