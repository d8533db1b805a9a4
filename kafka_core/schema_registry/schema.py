"""What the registry stores and answers: schemas, their references, registered versions; and its
error codes by name. Shapes and names are confluent-kafka's, so moving over is a change of import."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RegisteredSchema", "RegistryErrorCode", "Schema", "SchemaReference", "SchemaVersion"]


class RegistryErrorCode(enum.IntEnum):
    """Confluent's ``error_code`` values (the registry's REST API reference)."""

    UNKNOWN = -1
    UNAUTHORIZED = 40101
    FORBIDDEN = 40301
    NOT_FOUND = 404
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    SCHEMA_VERSION_SOFT_DELETED = 40406
    SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
    SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
    INCOMPATIBLE_SCHEMA = 409
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    REFERENCE_EXISTS = 42206
    STORE_ERROR = 50001
    OPERATION_TIMEOUT = 50002
    FORWARDING_ERROR = 50003

    @classmethod
    def of(cls, code: int) -> RegistryErrorCode | int:
        """The named code, or the bare number for one this client does not know."""
        try:
            return cls(code)
        except ValueError:
            return code


@dataclass(frozen=True)
class SchemaReference:
    """Another subject's version that a schema names (an Avro named type, a Protobuf import)."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SchemaReference:
        return cls(str(d["name"]), str(d["subject"]), int(d["version"]))


@dataclass(frozen=True, init=False)
class Schema:
    """A schema's text, type (``AVRO``, ``PROTOBUF``, ``JSON``) and references; hashable, so it
    keys the client's caches. ``references`` may be given as a list."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default=())

    def __init__(
        self, schema_str: str, schema_type: str = "AVRO", references: Iterable[SchemaReference] | None = None
    ) -> None:
        object.__setattr__(self, "schema_str", schema_str)
        object.__setattr__(self, "schema_type", (schema_type or "AVRO").upper())
        object.__setattr__(self, "references", tuple(references or ()))

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_dict() for r in self.references]
        return body

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schema:
        return cls(
            str(d["schema"]),
            str(d.get("schemaType") or "AVRO"),
            [SchemaReference.from_dict(r) for r in d.get("references") or ()],
        )


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered under a subject: its id, the subject and the version."""

    schema_id: int
    schema: Schema
    subject: str | None
    version: int | None
    guid: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, subject: str | None = None) -> RegisteredSchema:
        return cls(
            schema_id=int(d["id"]),
            schema=Schema.from_dict(d),
            subject=d.get("subject", subject),
            version=d.get("version"),
            guid=d.get("guid"),
        )


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
