"""The generator's model of Kafka's JSON message definitions, and the loader that builds it.

The loader refuses keys it does not know (on messages and on fields): a spec feature that this
generator does not implement must fail the build, not produce subtly wrong wire code.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAXV = 0x7FFF
# fmt: off
FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
         "float64": "d", "uuid": "16s"}
FIXED_SIZE = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "16s": 16}
# element codes for arrays of primitives (kafka_core.protocol._runtime.rarr / warr)
ELEM_CODE = {**{k: c for k, c in FIXED.items() if k != "uuid"}, "uuid": "u", "string": "s", "bytes": "y"}
PY_TYPES = {"bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int", "uint32": "int",
            "int64": "int", "float64": "float", "string": "str", "bytes": "bytes", "uuid": "UUID",
            "records": "Buffer | list[Buffer]"}
# fmt: on
PRIMS = set(FIXED) | {"string", "bytes", "records"}
FIXED_ARRAY_CODES = set("bhHiIqd")  # arrays of these get specialised helpers
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "ignorable", "default",
              "flexibleVersions", "about", "entityType", "mapKey", "zeroCopy", "fields"}  # fmt: skip
MESSAGE_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions", "fields",
                "latestVersionUnstable", "deprecatedVersions", "commonStructs"}  # fmt: skip


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive; lo > hi means none

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        text = (text or "none").strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAXV)
        if "-" in text:
            a, b = text.split("-")
            return cls(int(a), int(b))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


@dataclass
class Field:
    name: str
    attr: str
    type: str  # element type for arrays
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    ignorable: bool
    default: Any
    flexible: Versions | None
    struct: StructDef | None = None


@dataclass
class StructDef:
    name: str  # JSON type name (or message name for the top level)
    pyname: str  # module-level class name
    qualname: str
    fields: list[Field] = field(default_factory=list)
    # filled by the code generator
    writers: dict[int, str] = field(default_factory=dict)
    readers: dict[int, str] = field(default_factory=dict)


@dataclass
class MessageDef:
    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    listeners: list[str]
    unstable: bool
    top: StructDef
    structs: list[StructDef]  # children first (post-order), excluding top


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        # the definitions have no "//" inside strings except in URLs; be careful anyway
        i = 0
        in_str = False
        while i < len(line):
            c = line[i]
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                in_str = not in_str
            elif not in_str and line.startswith("//", i):
                line = line[:i]
                break
            i += 1
        out.append(line)
    return "\n".join(out)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or s in ("unknown_tagged_fields",):
        s += "_"
    return s


def parse_default(ftype: str, is_array: bool, raw: Any, is_struct: bool) -> str | None:
    """The field's default as a Python expression (None: the struct's constructor)."""
    if raw == "null" and (is_array or is_struct or ftype in ("string", "bytes")):
        return "None"
    if is_array:
        return "[]"
    if is_struct:
        return None
    if ftype == "bool":
        return "True" if str(raw).lower() == "true" else "False"
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return repr(int(str(raw), 0)) if raw not in (None, "") else "0"
    if ftype == "float64":
        return repr(float(raw)) if raw is not None else "0.0"
    if ftype == "string":
        return repr(raw if raw is not None else "")
    return {"bytes": 'b""', "records": "None", "uuid": "ZERO_UUID"}[ftype]


class Loader:
    def __init__(self, msg: dict[str, Any]) -> None:
        self.msg = msg
        self.name = msg["name"]
        self.common: dict[str, dict[str, Any]] = {c["name"]: c for c in msg.get("commonStructs", [])}
        self.structs: dict[str, StructDef] = {}
        self.order: list[StructDef] = []

    def struct_for(self, type_name: str, fields_json: list[dict[str, Any]] | None) -> StructDef:
        if type_name in self.structs:
            return self.structs[type_name]
        if fields_json is None:
            if type_name not in self.common:
                raise ValueError(f"{self.name}: unknown struct type {type_name}")
            fields_json = self.common[type_name]["fields"]
        sd = StructDef(type_name, f"_s_{self.name}_{type_name}", f"{self.name}.{type_name}")
        self.structs[type_name] = sd
        sd.fields = [self.field(f) for f in fields_json]
        self.order.append(sd)
        return sd

    def field(self, f: dict[str, Any]) -> Field:
        unknown = set(f) - FIELD_KEYS
        if unknown:  # a spec feature this generator does not implement must not pass silently
            raise ValueError(f"{self.name}.{f.get('name')}: unsupported field keys {sorted(unknown)}")
        t = f["type"]
        is_array = t.startswith("[]")
        et = t[2:] if is_array else t
        sd = None
        if et not in PRIMS:
            sd = self.struct_for(et, f.get("fields"))
        default = parse_default(et, is_array, f.get("default"), sd is not None)
        flexible = Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None
        tag = None if f.get("tag") is None else int(f["tag"])  # some files spell it "0"
        return Field(
            f["name"], snake(f["name"]), et, is_array, Versions.parse(f.get("versions")),
            Versions.parse(f.get("nullableVersions")), Versions.parse(f.get("taggedVersions")), tag,
            bool(f.get("ignorable", False)), default if default is not None else f"{sd.pyname}()",  # type: ignore[union-attr]
            flexible, sd,
        )  # fmt: skip


def load(path: Path) -> MessageDef:
    msg = json.loads(strip_comments(path.read_text()))
    unknown = set(msg) - MESSAGE_KEYS
    if unknown:
        raise ValueError(f"{path.name}: unsupported keys {sorted(unknown)}")
    loader = Loader(msg)
    name = msg["name"]
    top = StructDef(name, name, name)
    valid = Versions.parse(msg["validVersions"])
    if "fields" in msg or not valid.empty:  # an API Kafka removed keeps only its name and key
        top.fields = [loader.field(f) for f in msg["fields"]]
    api_key = None if msg.get("apiKey") is None else int(msg["apiKey"])
    return MessageDef(
        name, msg["type"], api_key, valid,
        Versions.parse(msg.get("flexibleVersions", "none")), msg.get("listeners", []),
        bool(msg.get("latestVersionUnstable", False)), top, loader.order,
    )  # fmt: skip


def load_all(messages_dir: Path) -> list[MessageDef]:
    """The requests, responses and data messages of a definitions folder, by file name; an API
    Kafka removed (``"validVersions": "none"``, as LeaderAndIsr since 4.0) has no classes."""
    msgs = (load(p) for p in sorted(messages_dir.glob("*.json")))
    return [m for m in msgs if m.kind in ("request", "response", "data") and not m.valid.empty]


def vrange(vs: Versions) -> str:
    if vs.empty:
        return "none"
    if vs.hi == MAXV:
        return f"{vs.lo}+"
    return f"{vs.lo}-{vs.hi}" if vs.hi != vs.lo else str(vs.lo)
