"""The registry's state: schemas by id, subjects' versions, compatibility levels; the rules of
Confluent's registry over them (same schema -> same id, soft then hard deletes, compatibility on
register). No HTTP here: the server maps these calls and their :class:`RegistryHTTPError`."""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka_core.devtools.registry.avro_compat import incompatibilities

__all__ = [
    "LEVELS",
    "Reference",
    "RegistryHTTPError",
    "SchemaStore",
    "StoredSchema",
    "SubjectVersion",
]

LEVELS = frozenset(
    {"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}
)
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class RegistryHTTPError(Exception):
    """An answer in Confluent's error shape: HTTP status, ``error_code`` and ``message``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def subject_not_found(subject: str) -> RegistryHTTPError:
    return RegistryHTTPError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryHTTPError:
    return RegistryHTTPError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryHTTPError:
    return RegistryHTTPError(404, 40403, what)


def invalid_schema(why: str) -> RegistryHTTPError:
    return RegistryHTTPError(422, 42201, f"Invalid schema: {why}")


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class StoredSchema:
    id: int
    guid: str
    schema_type: str
    schema: str
    references: tuple[Reference, ...]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_json() for r in self.references]
        body["schema"] = self.schema
        return body


@dataclass
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class _Subject:
    versions: list[SubjectVersion] = field(default_factory=list)
    compatibility: str | None = None

    def live(self) -> list[SubjectVersion]:
        return [v for v in self.versions if not v.deleted]


def _identity(
    schema_type: str, schema: str, references: tuple[Reference, ...]
) -> tuple[str, str, tuple[Reference, ...]]:
    """What makes two registrations the same schema (and so the same id): JSON schemas whatever
    their spacing and key order; Protobuf descriptors byte for byte."""
    if schema_type == "PROTOBUF":
        return (schema_type, schema, references)
    return (schema_type, json.dumps(json.loads(schema), separators=(",", ":"), sort_keys=True), references)


class SchemaStore:
    """Thread-safe: every public method holds ``_lock`` (the HTTP server runs a thread per request).

    Every change is an event (a JSON-able dict) applied by ``_apply``; with a ``journal`` (e.g.
    :class:`~kafka_core.devtools.registry.kafka_log.KafkaSchemaLog`) each event is written there
    first, under the lock, and a change whose event cannot be written fails (50001) and changes
    nothing. ``replay`` applies a journal's events at start.
    """

    def __init__(
        self, compatibility: str = "BACKWARD", journal: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self._lock = threading.Lock()  # guards everything below
        self._schemas: dict[int, StoredSchema] = {}
        self._ids_by_key: dict[tuple[str, str, tuple[Reference, ...]], int] = {}
        self._subjects: dict[str, _Subject] = {}
        self._default_compatibility = compatibility
        self._compatibility = compatibility
        self._next_id = 1
        self._journal = journal

    def replay(self, events: Iterable[dict[str, Any]]) -> int:
        """Applies a journal's events in order (at start, before serving); how many."""
        count = 0
        with self._lock:
            for event in events:
                self._apply(event)
                count += 1
        return count

    def _commit(self, event: dict[str, Any]) -> None:
        if self._journal is not None:
            try:
                self._journal(event)
            except Exception as exc:
                raise RegistryHTTPError(
                    500, 50001, f"Error while storing the change: {type(exc).__name__}: {exc}"
                ) from exc
        self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        op = event["op"]
        if op == "register":
            refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in event["references"])
            schema_id = int(event["id"])
            if schema_id not in self._schemas:
                self._schemas[schema_id] = StoredSchema(
                    schema_id, event["guid"], event["schemaType"], event["schema"], refs
                )
                self._ids_by_key[_identity(event["schemaType"], event["schema"], refs)] = schema_id
            self._next_id = max(self._next_id, schema_id + 1)
            entry = self._subjects.setdefault(event["subject"], _Subject())
            entry.versions.append(SubjectVersion(event["subject"], int(event["version"]), schema_id))
        elif op == "delete_version":
            entry = self._subjects[event["subject"]]
            found = next(v for v in entry.versions if v.version == event["version"])
            if event["permanent"]:
                entry.versions.remove(found)
                if not entry.versions and entry.compatibility is None:
                    del self._subjects[event["subject"]]
                self._forget_unused()
            else:
                found.deleted = True
        elif op == "delete_subject":
            if event["permanent"]:
                del self._subjects[event["subject"]]
                self._forget_unused()
            else:
                for v in self._subjects[event["subject"]].versions:
                    v.deleted = True
        elif op == "config":
            level = event["compatibility"]
            if event["subject"] is None:
                self._compatibility = level or self._default_compatibility
            elif level is None:
                self._subjects[event["subject"]].compatibility = None
            else:
                self._subjects.setdefault(event["subject"], _Subject()).compatibility = level
        else:
            raise ValueError(f"unknown registry event {op!r}")

    # --- schemas -------------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema_type: str,
        schema: str,
        references: list[Reference],
        *,
        schema_id: int | None = None,
    ) -> tuple[StoredSchema, SubjectVersion]:
        with self._lock:
            canonical, key = self._validate(schema_type, schema, references)
            entry = self._subjects.get(subject)
            existing_id = self._ids_by_key.get(key)
            if entry is not None and existing_id is not None:
                for version in entry.live():
                    if version.schema_id == existing_id:
                        return self._schemas[existing_id], version
            if entry is not None:
                problems = self._check(subject, entry, schema_type, canonical, references, None)
                if problems:
                    raise RegistryHTTPError(
                        409,
                        409,
                        "Schema being registered is incompatible with an earlier schema for subject "
                        f'"{subject}", details: {problems}',
                    )
            guid = str(uuid.uuid4())
            if existing_id is None:
                if schema_id is not None and schema_id in self._schemas:
                    raise RegistryHTTPError(422, 42205, f"Schema id {schema_id} is taken by another schema")
                existing_id = schema_id if schema_id is not None else self._next_id
            else:
                guid = self._schemas[existing_id].guid
            number = max((v.version for v in entry.versions), default=0) + 1 if entry is not None else 1
            self._commit(
                {
                    "op": "register",
                    "subject": subject,
                    "version": number,
                    "id": existing_id,
                    "guid": guid,
                    "schemaType": schema_type,
                    "schema": canonical,
                    "references": [r.to_json() for r in references],
                }
            )
            return self._schemas[existing_id], self._subjects[subject].versions[-1]

    def lookup(
        self,
        subject: str,
        schema_type: str,
        schema: str,
        references: list[Reference],
        *,
        deleted: bool = False,
    ) -> tuple[StoredSchema, SubjectVersion]:
        with self._lock:
            entry = self._subjects.get(subject)
            if entry is None or not (entry.versions if deleted else entry.live()):
                raise subject_not_found(subject)
            _, key = self._validate(schema_type, schema, references)
            schema_id = self._ids_by_key.get(key)
            for version in reversed(entry.versions if deleted else entry.live()):
                if version.schema_id == schema_id:
                    return self._schemas[schema_id], version
            raise schema_not_found()

    def by_id(self, schema_id: int) -> StoredSchema:
        with self._lock:
            try:
                return self._schemas[schema_id]
            except KeyError:
                raise schema_not_found() from None

    def by_guid(self, guid: str) -> StoredSchema:
        with self._lock:
            for stored in self._schemas.values():
                if stored.guid == guid:
                    return stored
            raise schema_not_found()

    def versions_of_id(self, schema_id: int, *, deleted: bool = False) -> list[SubjectVersion]:
        with self._lock:
            if schema_id not in self._schemas:
                raise schema_not_found()
            return [
                v
                for entry in self._subjects.values()
                for v in entry.versions
                if v.schema_id == schema_id and (deleted or not v.deleted)
            ]

    # --- subjects and versions -----------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(
                name
                for name, entry in self._subjects.items()
                if name.startswith(prefix) and (entry.versions if deleted else entry.live())
            )

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        with self._lock:
            entry = self._subjects.get(subject)
            found = [] if entry is None else (entry.versions if deleted else entry.live())
            if not found:
                raise subject_not_found(subject)
            return [v.version for v in found]

    def version(
        self, subject: str, version: str, *, deleted: bool = False
    ) -> tuple[StoredSchema, SubjectVersion]:
        with self._lock:
            found = self._version(subject, version, deleted=deleted)
            return self._schemas[found.schema_id], found

    def referenced_by(self, subject: str, version: str) -> list[int]:
        with self._lock:
            found = self._version(subject, version)
            return sorted(
                s.id
                for s in self._schemas.values()
                if any(r.subject == subject and r.version == found.version for r in s.references)
                and self._has_live_version(s.id)
            )

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        with self._lock:
            entry = self._subjects.get(subject)
            if entry is None or not entry.versions:
                raise subject_not_found(subject)
            if permanent:
                if entry.live():
                    raise RegistryHTTPError(
                        404,
                        40405,
                        f"Subject '{subject}' was not deleted first before being permanently deleted",
                    )
                numbers = [v.version for v in entry.versions]
                self._commit({"op": "delete_subject", "subject": subject, "permanent": True})
                return numbers
            if not entry.live():
                raise RegistryHTTPError(
                    404,
                    40404,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                )
            for v in entry.live():
                self._refuse_if_referenced(subject, v)
            numbers = [v.version for v in entry.live()]
            self._commit({"op": "delete_subject", "subject": subject, "permanent": False})
            return numbers

    def delete_version(self, subject: str, version: str, *, permanent: bool = False) -> int:
        with self._lock:
            found = self._version(subject, version, deleted=permanent)
            if permanent:
                if not found.deleted:
                    raise RegistryHTTPError(
                        404,
                        40407,
                        f"Subject '{subject}' Version {found.version} was not deleted first before being "
                        "permanently deleted",
                    )
                self._commit(
                    {"op": "delete_version", "subject": subject, "version": found.version, "permanent": True}
                )
                return found.version
            self._refuse_if_referenced(subject, found)
            self._commit(
                {"op": "delete_version", "subject": subject, "version": found.version, "permanent": False}
            )
            return found.version

    # --- compatibility -------------------------------------------------------------------------

    def global_compatibility(self) -> str:
        with self._lock:
            return self._compatibility

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        level = level.upper() if isinstance(level, str) else level
        if level not in LEVELS:
            raise RegistryHTTPError(
                422, 42203, f"Invalid compatibility level. Valid values are {sorted(LEVELS)}"
            )
        with self._lock:
            self._commit({"op": "config", "subject": subject, "compatibility": level})
            return level

    def subject_compatibility(self, subject: str, *, default_to_global: bool = False) -> str:
        with self._lock:
            entry = self._subjects.get(subject)
            if entry is not None and entry.compatibility is not None:
                return entry.compatibility
            if default_to_global:
                return self._compatibility
            raise RegistryHTTPError(
                404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
            )

    def delete_compatibility(self, subject: str | None = None) -> str:
        with self._lock:
            if subject is None:
                previous = self._compatibility
            else:
                entry = self._subjects.get(subject)
                if entry is None or entry.compatibility is None:
                    raise subject_not_found(subject)
                previous = entry.compatibility
            self._commit({"op": "config", "subject": subject, "compatibility": None})
            return previous

    def test_compatibility(
        self, subject: str, schema_type: str, schema: str, references: list[Reference], version: str | None
    ) -> list[str]:
        """The reasons ``schema`` may not join ``subject`` (against ``version``, or per the level if None)."""
        with self._lock:
            canonical, _ = self._validate(schema_type, schema, references)
            entry = self._subjects.get(subject)
            if entry is None or not entry.live():
                if version is None:
                    return []
                raise subject_not_found(subject)
            against = None if version is None else self._version(subject, version)
            return self._check(subject, entry, schema_type, canonical, references, against)

    # --- helpers (the lock is held) ------------------------------------------------------------

    def _version(self, subject: str, version: str, *, deleted: bool = False) -> SubjectVersion:
        entry = self._subjects.get(subject)
        candidates = [] if entry is None else (entry.versions if deleted else entry.live())
        if not candidates:
            raise subject_not_found(subject)
        if version in ("latest", "-1"):
            return candidates[-1]
        try:
            number = int(version)
        except ValueError:
            raise RegistryHTTPError(
                422,
                42202,
                f"The specified version '{version}' is not a valid version id. Allowed values are "
                'between [1, 2^31-1] and the string "latest"',
            ) from None
        if number < 1:
            raise RegistryHTTPError(
                422, 42202, f"The specified version '{version}' is not a valid version id."
            )
        for v in candidates:
            if v.version == number:
                return v
        raise version_not_found(number)

    def _has_live_version(self, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for e in self._subjects.values() for v in e.live())

    def _refuse_if_referenced(self, subject: str, version: SubjectVersion) -> None:
        for s in self._schemas.values():
            if any(r.subject == subject and r.version == version.version for r in s.references) and (
                self._has_live_version(s.id)
            ):
                raise RegistryHTTPError(
                    422,
                    42206,
                    f"One or more references exist to the schema {{subject={subject},version={version.version}}}",
                )

    def _forget_unused(self) -> None:
        used = {v.schema_id for e in self._subjects.values() for v in e.versions}
        for schema_id in [i for i in self._schemas if i not in used]:
            stored = self._schemas.pop(schema_id)
            self._ids_by_key = {k: i for k, i in self._ids_by_key.items() if i != stored.id}

    def _check(
        self,
        subject: str,
        entry: _Subject,
        schema_type: str,
        canonical: str,
        references: list[Reference],
        against: SubjectVersion | None,
    ) -> list[str]:
        level = entry.compatibility or self._compatibility
        live = entry.live()
        if level == "NONE" or not live:
            return []
        if against is not None:
            olds = [against]
        elif level.endswith("_TRANSITIVE"):
            olds = live
        else:
            olds = live[-1:]
        differing = [v.version for v in olds if self._schemas[v.schema_id].schema_type != schema_type]
        if differing:
            return [f"schema type differs from version {n}" for n in differing]
        if schema_type == "PROTOBUF":
            return self._check_protobuf(level, canonical, olds)
        if schema_type != "AVRO":
            return []  # JSON Schema: validated, its compatibility not checked here
        new = self._parse_avro(canonical, references)
        problems: list[str] = []
        for old_version in olds:
            stored = self._schemas[old_version.schema_id]
            old = self._parse_avro(stored.schema, list(stored.references))
            if level.startswith(("BACKWARD", "FULL")):
                problems += [
                    f"{{oldVersion: {old_version.version}, reader: new}} {p}"
                    for p in incompatibilities(new, old)
                ]
            if level.startswith(("FORWARD", "FULL")):
                problems += [
                    f"{{oldVersion: {old_version.version}, reader: old}} {p}"
                    for p in incompatibilities(old, new)
                ]
        return problems

    def _check_protobuf(self, level: str, new: str, olds: list[SubjectVersion]) -> list[str]:
        from kafka_core.devtools.registry.protobuf_compat import protobuf_incompatibilities

        problems: list[str] = []
        for old_version in olds:
            old = self._schemas[old_version.schema_id].schema
            if level.startswith(("BACKWARD", "FULL")):
                problems += [
                    f"{{oldVersion: {old_version.version}, reader: new}} {p}"
                    for p in protobuf_incompatibilities(new, old)
                ]
            if level.startswith(("FORWARD", "FULL")):
                problems += [
                    f"{{oldVersion: {old_version.version}, reader: old}} {p}"
                    for p in protobuf_incompatibilities(old, new)
                ]
        return problems

    def _validate(
        self, schema_type: str, schema: str, references: list[Reference]
    ) -> tuple[str, tuple[str, str, tuple[Reference, ...]]]:
        """The stored form of ``schema`` and its identity key; 42201 if it does not parse."""
        if schema_type not in SCHEMA_TYPES:
            raise RegistryHTTPError(
                422, 42201, f"Invalid schema type {schema_type!r}; one of {list(SCHEMA_TYPES)}"
            )
        if not isinstance(schema, str) or not schema.strip():
            raise invalid_schema("empty schema")
        for ref in references:
            self._version(ref.subject, str(ref.version))  # 40401/40402 if the reference is unknown
        if schema_type == "PROTOBUF":
            try:
                from google.protobuf import descriptor_pb2

                descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema, validate=True))
            except (binascii.Error, ValueError, ImportError) as exc:
                raise invalid_schema(
                    "this dev registry takes a Protobuf schema as a base64 FileDescriptorProto "
                    f"(what confluent-kafka's ProtobufSerializer registers), not .proto text ({exc})"
                ) from None
            except Exception as exc:  # protobuf's DecodeError
                raise invalid_schema(f"not a FileDescriptorProto: {exc}") from None
            return schema, _identity(schema_type, schema, tuple(references))
        try:
            parsed = json.loads(schema)
        except ValueError as exc:
            raise invalid_schema(f"not JSON: {exc}") from None
        canonical = json.dumps(parsed, separators=(",", ":"))
        key = _identity(schema_type, canonical, tuple(references))
        if schema_type == "AVRO":
            self._parse_avro(canonical, references)
        else:
            import jsonschema

            try:
                jsonschema.validators.validator_for(parsed).check_schema(parsed)
            except jsonschema.SchemaError as exc:
                raise invalid_schema(exc.message) from None
        return canonical, key

    def _parse_avro(
        self, schema: str, references: list[Reference], seen: frozenset[int] = frozenset()
    ) -> Any:
        import fastavro

        named: dict[str, Any] = {}
        for ref in references:
            found = self._version(ref.subject, str(ref.version), deleted=True)
            if found.schema_id in seen:
                raise invalid_schema(f"reference cycle through schema {found.schema_id}")
            stored = self._schemas[found.schema_id]
            parsed_ref = self._parse_avro(stored.schema, list(stored.references), seen | {found.schema_id})
            if isinstance(parsed_ref, dict):
                named.update(parsed_ref.get("__named_schemas", {}))
        try:
            return fastavro.parse_schema(json.loads(schema), named_schemas=named)
        except Exception as exc:  # fastavro raises SchemaParseError, UnknownType, ValueError, KeyError...
            raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
