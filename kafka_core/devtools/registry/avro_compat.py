"""Avro schema resolution as compatibility: can a reader schema read what a writer schema wrote?

The rules are the Avro specification's "Schema Resolution" (the ones Java's SchemaCompatibility
applies for Confluent's registry): numeric promotion, string/bytes, unions branch by branch,
record fields matched by name or alias with defaults for fields the writer lacks, enum symbols,
fixed sizes. Schemas come parsed by fastavro (full names, named types referenced by name).
"""

from __future__ import annotations

from typing import Any

__all__ = ["incompatibilities"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> reader types that can read it (besides itself)
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can). Both parsed by fastavro."""
    return _Checker(_names_of(reader), _names_of(writer)).check(reader, writer, "/")


def _names_of(schema: Any) -> dict[str, Any]:
    return dict(schema.get("__named_schemas", {})) if isinstance(schema, dict) else {}


class _Checker:
    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self._reader_names = reader_names
        self._writer_names = writer_names
        # pairs of named types being checked: a recursive type is compatible with itself unless
        # another part says otherwise
        self._in_progress: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema["type"]  # a primitive with a logical type reads as its primitive
        if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            return self._resolve(schema["type"], names)
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self._reader_names)
        writer = self._resolve(writer, self._writer_names)
        if isinstance(writer, list):
            problems: list[str] = []
            for index, branch in enumerate(writer):
                problems += self.check(reader, branch, f"{path}writer union branch {index}/")
            return problems
        if isinstance(reader, list):
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [
                f"{path}: reader union {_describe(reader)} has no branch for writer type {_describe(writer)}"
            ]
        rtype = reader if isinstance(reader, str) else reader.get("type")
        wtype = writer if isinstance(writer, str) else writer.get("type")
        if rtype in _PRIMITIVES or wtype in _PRIMITIVES:
            if rtype == wtype or rtype in _PROMOTIONS.get(str(wtype), frozenset()):
                return []
            return [f"{path}: reader type {rtype} cannot read writer type {wtype}"]
        if rtype != wtype:
            return [f"{path}: reader type {rtype} cannot read writer type {wtype}"]
        if rtype == "array":
            return self.check(reader["items"], writer["items"], f"{path}items/")
        if rtype == "map":
            return self.check(reader["values"], writer["values"], f"{path}values/")
        if not _names_match(reader, writer):
            return [f"{path}: reader {rtype} {reader['name']} cannot read writer {rtype} {writer['name']}"]
        if rtype == "fixed":
            if reader["size"] != writer["size"]:
                return [
                    f"{path}: fixed {reader['name']} size {reader['size']} vs writer size {writer['size']}"
                ]
            return []
        if rtype == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                return [f"{path}: reader enum {reader['name']} lacks writer symbols {missing}"]
            return []
        if rtype in ("record", "error"):
            return self._record(reader, writer, path)
        return [f"{path}: unknown type {rtype}"]

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        key = (reader["name"], writer["name"])
        if key in self._in_progress:
            return []
        self._in_progress.add(key)
        try:
            writer_fields = {f["name"]: f for f in writer["fields"]}
            problems: list[str] = []
            for field in reader["fields"]:
                written = writer_fields.get(field["name"])
                if written is None:
                    written = next(
                        (writer_fields[a] for a in field.get("aliases", ()) if a in writer_fields), None
                    )
                if written is None:
                    if "default" not in field:
                        problems.append(
                            f"{path}{field['name']}: reader field has no default and the writer lacks it"
                        )
                    continue
                problems += self.check(field["type"], written["type"], f"{path}{field['name']}/")
            return problems
        finally:
            self._in_progress.discard(key)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    if _short(reader["name"]) == _short(writer["name"]):
        return True
    return writer["name"] in reader.get("aliases", ()) or _short(writer["name"]) in {
        _short(a) for a in reader.get("aliases", ())
    }


def _describe(schema: Any) -> str:
    if isinstance(schema, list):
        return "[" + ", ".join(_describe(s) for s in schema) + "]"
    if isinstance(schema, dict):
        return str(schema.get("name", schema.get("type")))
    return str(schema)
