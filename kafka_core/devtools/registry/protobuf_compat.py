"""Protobuf compatibility as Confluent's registry judges it (its SchemaDiff): what breaks a reader
of the other version on the wire. Schemas are base64 FileDescriptorProtos (what confluent-kafka
registers); the checked differences are a changed package, a removed message, a field whose kind
(scalar, message, enum) or scalar wire group or named type changed, a required field added or
removed, and several existing fields moved into one oneof. Fields added or removed otherwise, renames and
enum values are compatible, as there."""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2

__all__ = ["protobuf_incompatibilities"]

F = descriptor_pb2.FieldDescriptorProto
# scalar types that read each other's wire values (Protobuf's language guide, "Updating A Message Type")
_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
]
_NAMED = {F.TYPE_MESSAGE, F.TYPE_GROUP, F.TYPE_ENUM}


def _messages(file: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(prefix: str, messages: Any) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            found[name] = message
            walk(name, message.nested_type)

    walk(file.package, file.message_type)
    return found


def _same_group(a: int, b: int) -> bool:
    return a == b or any(a in group and b in group for group in _GROUPS)


def protobuf_incompatibilities(reader_b64: str, writer_b64: str) -> list[str]:
    """Why data written with the writer's file cannot be read with the reader's (empty: it can)."""
    reader = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(reader_b64))
    writer = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(writer_b64))
    problems = []
    if reader.package != writer.package:
        return [f"package changed: {writer.package!r} -> {reader.package!r}"]
    readers = _messages(reader)
    for name, written in _messages(writer).items():
        read = readers.get(name)
        if read is None:
            problems.append(f"{name}: message removed")
            continue
        fields = {f.number: f for f in read.field}
        moved_into: dict[int, int] = {}
        for old in written.field:
            new = fields.get(old.number)
            if new is None:
                if old.label == F.LABEL_REQUIRED:
                    problems.append(f"{name}.{old.name}: required field removed")
                continue
            where = f"{name}.{old.name} (field {old.number})"
            if (old.type in _NAMED) != (new.type in _NAMED) or (
                old.type in _NAMED and (old.type == F.TYPE_ENUM) != (new.type == F.TYPE_ENUM)
            ):
                problems.append(f"{where}: kind changed")
            elif old.type in _NAMED and old.type_name != new.type_name:
                problems.append(f"{where}: type {old.type_name} -> {new.type_name}")
            elif old.type not in _NAMED and not _same_group(old.type, new.type):
                problems.append(f"{where}: scalar type {F.Type.Name(old.type)} -> {F.Type.Name(new.type)}")
            if new.HasField("oneof_index") and not old.HasField("oneof_index"):
                moved_into[new.oneof_index] = moved_into.get(new.oneof_index, 0) + 1
        problems += [
            f"{name}: {n} existing fields moved into one oneof" for n in moved_into.values() if n > 1
        ]
        written_numbers = {f.number for f in written.field}
        problems += [
            f"{name}.{f.name}: required field added"
            for f in read.field
            if f.number not in written_numbers and f.label == F.LABEL_REQUIRED
        ]
    return problems
