#!/usr/bin/env python3
"""Generate kafka_core/protocol/messages.py from Apache Kafka's JSON message definitions.

Usage: python tools/gen_protocol.py [--messages DIR] [--out PATH] [--check]

Each struct gets one reader and one writer function per distinct wire layout (versions whose
layout is identical share code), written as straight-line code with fixed-width runs packed by a
single precompiled ``struct.Struct``; nested structs call the child function for the same version
directly, so no version is dispatched below the message level.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MESSAGES = REPO.parent / "shared" / "kafka-protocol" / "messages"
DEFAULT_OUT = REPO / "kafka_core" / "protocol" / "messages.py"

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
FIXED_ARRAY_CODES = set("bhHiIqd")
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "ignorable", "default",
              "flexibleVersions", "about", "entityType", "mapKey", "zeroCopy", "fields"}  # fmt: skip
MESSAGE_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions", "fields",
                "latestVersionUnstable", "deprecatedVersions", "commonStructs"}  # fmt: skip  # arrays of these get specialised helpers


# ------------------------------------------------------------------------------------------------
# model


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
    top.fields = [loader.field(f) for f in msg["fields"]]
    api_key = None if msg.get("apiKey") is None else int(msg["apiKey"])
    return MessageDef(
        name, msg["type"], api_key, Versions.parse(msg["validVersions"]),
        Versions.parse(msg.get("flexibleVersions", "none")), msg.get("listeners", []),
        bool(msg.get("latestVersionUnstable", False)), top, loader.order,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# code generation


class Gen:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.structs_fmt: dict[str, str] = {}
        self.array_fns: set[str] = set()

    def st(self, fmt: str) -> str:
        name = self.structs_fmt.get(fmt)
        if name is None:
            name = f"_ST_{fmt[1:].replace('?', 'o').replace('16s', 'U')}"
            self.structs_fmt[fmt] = name
        return name

    # -- per-version layout

    def layout(self, sd: StructDef, v: int, flex: bool) -> tuple:
        sig: list = [flex]
        for f in sd.fields:
            present = v in f.versions
            tagged = present and flex and v in f.tagged
            ffl = flex and (f.flexible is None or v in f.flexible)
            child = None
            if f.struct is not None and present:
                child = (f.struct.writers[v], f.struct.readers[v])
            sig.append(
                (present, tagged, v in f.nullable, ffl, child, None if present else (f.ignorable, f.default))
            )
        return tuple(sig)

    def gen_struct(self, sd: StructDef, m: MessageDef) -> list[str]:
        lines: list[str] = []
        seen: dict[tuple, tuple[str, str]] = {}
        k = 0
        for v in range(m.valid.lo, m.valid.hi + 1):
            flex = v in m.flexible
            sig = self.layout(sd, v, flex)
            if sig not in seen:
                wname = f"_w_{sd.pyname.lstrip('_')}_{k}"
                rname = f"_r_{sd.pyname.lstrip('_')}_{k}"
                k += 1
                seen[sig] = (wname, rname)
                lines += self.gen_writer(sd, m, v, flex, wname)
                lines += self.gen_reader(sd, m, v, flex, rname)
            sd.writers[v], sd.readers[v] = seen[sig]
        return lines

    # -- writer

    def gen_writer(self, sd: StructDef, m: MessageDef, v: int, flex: bool, fname: str) -> list[str]:
        body: list[str] = []
        run: list[tuple[str, str]] = []  # (code, expr)

        def flush() -> None:
            if run:
                fmt = ">" + "".join(c for c, _ in run)
                body.append(f"b += {self.st(fmt)}.pack({', '.join(e for _, e in run)})")
                run.clear()

        tagged: list[Field] = []
        for f in sd.fields:
            if v not in f.versions:
                if not f.ignorable:
                    flush()
                    body.append(f"if o.{f.attr} != {f.default}:")
                    body.append(f"    raise unsupported({sd.qualname!r}, {f.attr!r}, {vrange(f.versions)!r})")
                continue
            if flex and v in f.tagged:
                tagged.append(f)
                continue
            ffl = flex and (f.flexible is None or v in f.flexible)
            if not f.is_array and f.type in FIXED:
                code = FIXED[f.type]
                expr = f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}"
                run.append((code, expr))
                continue
            flush()
            body += self.write_value(f, f"o.{f.attr}", v, ffl, "b", "ins", sd)
        flush()
        if flex:
            if not tagged:
                body += [
                    "u = o.unknown_tagged_fields",
                    "if u:",
                    "    wtags(b, [], u)",
                    "else:",
                    "    b.append(0)",
                ]
            else:
                body.append("tg = []")
                for f in sorted(tagged, key=lambda x: x.tag):
                    body.append(f"if o.{f.attr} != {f.default}:")
                    body.append("    t = bytearray()")
                    body.append("    tins = []")
                    inner = self.write_value(f, f"o.{f.attr}", v, True, "t", "tins", sd, fixed_inline=True)
                    body += ["    " + x for x in inner]
                    body.append(f"    tg.append(({f.tag}, flatten(t, tins)))")
                body.append("wtags(b, tg, o.unknown_tagged_fields)")
        if not body:
            body.append("pass")
        return [f"def {fname}(o, b, ins):"] + ["    " + x for x in body] + ["", ""]

    def write_value(
        self,
        f: Field,
        expr: str,
        v: int,
        flex: bool,
        b: str,
        ins: str,
        sd: StructDef,
        fixed_inline: bool = False,
    ) -> list[str]:
        nul = v in f.nullable
        fq = f"{sd.qualname}.{f.attr}"
        if f.is_array:
            if f.struct is not None:
                w = f.struct.writers[v]
                lines = [f"a = {expr}", "if a is None:"]
                if nul:
                    lines.append(f"    {b}.append(0)" if flex else f'    {b} += b"\\xff\\xff\\xff\\xff"')
                else:
                    lines.append(f"    raise not_nullable({fq!r})")
                lines.append("else:")
                lines.append(f"    wuv({b}, len(a) + 1)" if flex else f"    {b} += I32.pack(len(a))")
                lines.append("    for e in a:")
                lines.append(f"        {w}(e, {b}, {ins})")
                return lines
            code = ELEM_CODE[f.type]
            if code in FIXED_ARRAY_CODES:
                self.array_fns.add(f"wa_{code}{'c' if flex else ''}{'n' if nul else ''}")
                return [f"wa_{code}{'c' if flex else ''}{'n' if nul else ''}({b}, {expr}, {fq!r})"]
            return [f"warr({b}, {expr}, {fq!r}, {code!r}, {flex}, {nul})"]
        if f.struct is not None:
            w = f.struct.writers[v]
            if nul:
                return [
                    f"s = {expr}",
                    "if s is None:",
                    f'    {b} += b"\\xff"',
                    "else:",
                    f"    {b}.append(1)",
                    f"    {w}(s, {b}, {ins})",
                ]
            return [f"{w}({expr}, {b}, {ins})"]
        if f.type in FIXED:
            assert fixed_inline
            code = FIXED[f.type]
            e = f"{expr}.bytes" if f.type == "uuid" else expr
            return [f"{b} += {self.st('>' + code)}.pack({e})"]
        if f.type == "string":
            fn = ("wcstr" if flex else "wstr") + ("_n" if nul else "")
            return [f"{fn}({b}, {expr}, {fq!r})"]
        if f.type == "bytes":
            return [f"wbytes({b}, {expr}, {fq!r}, {flex}, {nul})"]
        if f.type == "records":
            return [f"wrec({b}, {ins}, {expr}, {fq!r}, {flex}, {nul})"]
        raise ValueError(f.type)

    # -- reader

    def gen_reader(self, sd: StructDef, m: MessageDef, v: int, flex: bool, fname: str) -> list[str]:
        body = [f"o = new({sd.pyname})"]
        run: list[tuple[str, str, Field]] = []

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(c for c, _, _ in run)
            targets = []
            post = []
            for i, (c, attr, _f) in enumerate(run):
                if c == "16s":
                    targets.append(f"_u{i}")
                    post.append(f"o.{attr} = ruuid(_u{i})")
                else:
                    targets.append(f"o.{attr}")
            size = sum(FIXED_SIZE[c] for c, _, _ in run)
            body.append(f"{', '.join(targets)}, = {self.st(fmt)}.unpack_from(buf, pos)")
            body.append(f"pos += {size}")
            body.extend(post)
            run.clear()

        tagged: list[Field] = []
        for f in sd.fields:
            if v not in f.versions:
                flush()
                body.append(f"o.{f.attr} = {f.default}")
                continue
            if flex and v in f.tagged:
                tagged.append(f)
                continue
            ffl = flex and (f.flexible is None or v in f.flexible)
            if not f.is_array and f.type in FIXED:
                run.append((FIXED[f.type], f.attr, f))
                continue
            flush()
            body += self.read_value(f, f"o.{f.attr}", v, ffl, "pos", sd)
        flush()
        if flex:
            if not tagged:
                # the common case, an empty tagged-field section, costs no call
                body += [
                    "if buf[pos]:",
                    "    o.unknown_tagged_fields, pos = rtags0(buf, pos)",
                    "else:",
                    "    o.unknown_tagged_fields = []",
                    "    pos += 1",
                ]
            else:
                for f in tagged:
                    body.append(f"o.{f.attr} = {f.default}")
                body.append("o.unknown_tagged_fields = u = []")
                body.append("if buf[pos]:")
                body.append("    n, pos = tag_count(buf, pos)")
                body.append("    for _ in range(n):")
                body.append("        tag, pos, end = tag_header(buf, pos)")
                for i, f in enumerate(sorted(tagged, key=lambda x: x.tag)):
                    kw = "if" if i == 0 else "elif"
                    body.append(f"        {kw} tag == {f.tag}:")
                    body.append("            p = pos")
                    inner = self.read_value(f, f"o.{f.attr}", v, True, "p", sd, fixed_inline=True)
                    body += ["            " + x for x in inner]
                    body.append(f"            tag_end(p, end, {f.tag})")
                    # a sender that writes a default value explicitly (Tansu does) gets it back
                    body.append(f"            if o.{f.attr} == {f.default}:")
                    body.append("                u.append((tag, bytes(buf[pos:end])))")
                body.append("        else:")
                body.append("            u.append((tag, bytes(buf[pos:end])))")
                body.append("        pos = end")
                body.append("else:")
                body.append("    pos += 1")
        else:
            body.append("o.unknown_tagged_fields = []")
        body.append("return o, pos")
        return [f"def {fname}(buf, pos):"] + ["    " + x for x in body] + ["", ""]

    def read_value(
        self, f: Field, target: str, v: int, flex: bool, pos: str, sd: StructDef, fixed_inline: bool = False
    ) -> list[str]:
        nul = v in f.nullable
        fq = f"{sd.qualname}.{f.attr}"
        if f.is_array:
            if f.struct is not None:
                r = f.struct.readers[v]
                if flex:
                    lines = [
                        f"n = buf[{pos}]",
                        f"{pos} += 1",
                        "if n > 127:",
                        f"    n, {pos} = ruv(buf, {pos} - 1)",
                        "n -= 1",
                    ]
                else:
                    lines = [f"n, = I32.unpack_from(buf, {pos})", f"{pos} += 4"]
                lines.append("if n < 0:")
                if nul:
                    lines.append(f"    {target} = None")
                else:
                    lines.append(f"    raise not_nullable({fq!r})")
                lines.append("else:")
                lines.append(f"    if n > len(buf) - {pos}:")
                lines.append(f"        raise too_many({fq!r}, n, len(buf) - {pos})")
                lines.append(f"    {target} = a = []")
                lines.append("    for _ in range(n):")
                lines.append(f"        e, {pos} = {r}(buf, {pos})")
                lines.append("        a.append(e)")
                return lines
            code = ELEM_CODE[f.type]
            if code in FIXED_ARRAY_CODES:
                fn = f"ra_{code}{'c' if flex else ''}{'n' if nul else ''}"
                self.array_fns.add(fn)
                if not flex:
                    return [f"{target}, {pos} = {fn}(buf, {pos}, {fq!r})"]
                # short compact arrays (a one-byte count) are read inline: replica lists and the like
                size = FIXED_SIZE[code]
                return [f"n = buf[{pos}]", "if 0 < n < 33:",
                        f"    {target} = list(SMALL_ARRAYS[{code!r}][n - 1].unpack_from(buf, {pos} + 1))",
                        f"    {pos} += 1 + {size} * (n - 1)", "else:",
                        f"    {target}, {pos} = {fn}(buf, {pos}, {fq!r})"]  # fmt: skip
            return [f"{target}, {pos} = rarr(buf, {pos}, {fq!r}, {code!r}, {flex}, {nul})"]
        if f.struct is not None:
            r = f.struct.readers[v]
            if nul:
                return [
                    f"if buf[{pos}] > 127:",
                    f"    {target} = None",
                    f"    {pos} += 1",
                    "else:",
                    f"    {target}, {pos} = {r}(buf, {pos} + 1)",
                ]
            return [f"{target}, {pos} = {r}(buf, {pos})"]
        if f.type in FIXED:
            assert fixed_inline
            code = FIXED[f.type]
            if code == "16s":
                return [
                    f"_u, = {self.st('>' + code)}.unpack_from(buf, {pos})",
                    f"{target} = ruuid(_u)",
                    f"{pos} += 16",
                ]
            return [
                f"{target}, = {self.st('>' + code)}.unpack_from(buf, {pos})",
                f"{pos} += {FIXED_SIZE[code]}",
            ]
        if f.type == "string":
            fn = ("rcstr" if flex else "rstr") + ("_n" if nul else "")
            return [f"{target}, {pos} = {fn}(buf, {pos}, {fq!r})"]
        if f.type == "bytes":
            return [f"{target}, {pos} = rbytes(buf, {pos}, {fq!r}, {flex}, {nul})"]
        if f.type == "records":
            return [f"{target}, {pos} = rrec(buf, {pos}, {fq!r}, {flex}, {nul})"]
        raise ValueError(f.type)

    # -- classes

    def gen_class(self, sd: StructDef, m: MessageDef, top: bool) -> list[str]:
        attrs = [f.attr for f in sd.fields]
        lines = [f"class {sd.name if not top else sd.pyname}(Struct):"]
        lines.append(f"    __slots__ = {tuple([*attrs, 'unknown_tagged_fields'])!r}")
        lines.append(f"    _FIELDS = {tuple(attrs)!r}")
        if top:
            lines.append(f"    API_KEY = {m.api_key!r}")
        lines.append(f"    MIN_VERSION = {m.valid.lo}")
        lines.append(f"    MAX_VERSION = {m.valid.hi}")
        lines.append(f"    FLEXIBLE_MIN = {None if m.flexible.empty else m.flexible.lo!r}")
        if top:
            lines.append(f"    LATEST_VERSION_UNSTABLE = {m.unstable}")
            lines.append(f"    LISTENERS = {tuple(m.listeners)!r}")
        lines.append(f"    _IS_REQUEST = {m.kind == 'request'}")
        lines.append("")
        params = []
        assigns = []
        for f in sd.fields:
            d = f.default
            mutable = d == "[]" or d.endswith("()")
            ann = annotation(f)
            if mutable:
                params.append(f"{f.attr}: {ann} = _MISSING")
                assigns.append(f"self.{f.attr} = {d} if {f.attr} is _MISSING else {f.attr}")
            else:
                params.append(f"{f.attr}: {ann} = {d}")
                assigns.append(f"self.{f.attr} = {f.attr}")
        params.append("unknown_tagged_fields: list[tuple[int, bytes]] | None = None")
        assigns.append(
            "self.unknown_tagged_fields = [] if unknown_tagged_fields is None else unknown_tagged_fields"
        )
        sig = ", ".join(["self", "*", *params]) if params else "self"
        lines.append(f"    def __init__({sig}) -> None:")
        lines += ["        " + a for a in assigns]
        lines.append("")
        lines.append("")
        return lines


def annotation(f: Field) -> str:
    """The parameter's type (a string: messages.py uses postponed annotations)."""
    elem = f.struct.qualname if f.struct is not None else PY_TYPES[f.type]
    ann = f"list[{elem}]" if f.is_array else elem
    if not f.nullable.empty or f.default == "None":
        ann += " | None"
    return ann


def header() -> list[str]:
    return [
        "# Generated by tools/gen_protocol.py from Apache Kafka's message definitions",
        "# (clients/src/main/resources/common/message/*.json, Apache License 2.0). Do not edit.",
        "# ruff: noqa",
        "# fmt: off",
        "from __future__ import annotations",
        "",
        "import enum",
        "from typing import TYPE_CHECKING",
        "",
        "if TYPE_CHECKING:",
        "    from uuid import UUID",
        "",
        "    from kafka_core._typing import Buffer",
        "",
        "from kafka_core.protocol._base import Struct",
        "from kafka_core.protocol._runtime import (",
        "    FIXED_ARRAY_READERS, FIXED_ARRAY_WRITERS, I32, SMALL_ARRAYS, ZERO_UUID, flatten, new, not_nullable,",
        "    rarr, rbytes, rcstr, rcstr_n, rrec, rstr, rstr_n, rtags0, ruuid, ruv, tag_count, tag_end, tag_header,",
        "    too_many, unsupported, warr, wbytes, wcstr, wcstr_n, wrec, wstr, wstr_n, wtags, wuv,",
        ")",
        "from struct import Struct as _PackStruct",
        "",
        "_MISSING = object()",
        "",
    ]


def vrange(vs: Versions) -> str:
    if vs.empty:
        return "none"
    if vs.hi == MAXV:
        return f"{vs.lo}+"
    return f"{vs.lo}-{vs.hi}" if vs.hi != vs.lo else str(vs.lo)


def api_const(name: str) -> str:
    base = name[: -len("Request")]
    return snake(base).upper()


def generate(messages_dir: Path) -> str:
    files = sorted(p for p in messages_dir.glob("*.json"))
    preferred: set[str] = set()
    from43 = messages_dir / "FROM-4.3.txt"
    if from43.exists():
        preferred = {line.strip()[:-5] for line in from43.read_text().splitlines() if line.strip()}
    msgs = [load(p) for p in files]
    msgs = [m for m in msgs if m.kind in ("request", "response", "data")]
    gen = Gen()
    body: list[str] = []
    for m in msgs:
        body.append(f"# {'-' * 96}")
        body.append(f"# {m.name}")
        body.append("")
        for sd in [*m.structs, m.top]:
            body += gen.gen_struct(sd, m)
        # nested structs are real nested classes (so that type checkers see them); the module-level
        # aliases keep the generated readers to one global lookup
        nested: list[str] = []
        for sd in m.structs:
            nested += ["    " + x if x else x for x in gen.gen_class(sd, m, top=False)]
        top_lines = gen.gen_class(m.top, m, top=True)
        body += top_lines[:1] + nested + top_lines[1:]
        body += [f"{sd.pyname} = {m.name}.{sd.name}" for sd in m.structs]
        for sd in [*m.structs, m.top]:
            ws = ", ".join(f"{v}: {w}" for v, w in sd.writers.items())
            rs = ", ".join(f"{v}: {r}" for v, r in sd.readers.items())
            body.append(f"{sd.pyname}._WRITERS = {{{ws}}}")
            body.append(f"{sd.pyname}._READERS = {{{rs}}}")
        body.append("")
        body.append("")

    # registries: on a key clash the Kafka 4.3 definition wins
    reqs: dict[int, MessageDef] = {}
    resps: dict[int, MessageDef] = {}
    for m in msgs:
        table = reqs if m.kind == "request" else resps if m.kind == "response" else None
        if table is None:
            continue
        old = table.get(m.api_key)  # type: ignore[arg-type]
        if old is None or (m.name in preferred and old.name not in preferred):
            table[m.api_key] = m  # type: ignore[index]
    tail = ["", "class ApiKey(enum.IntEnum):"]
    tail += [f"    {api_const(reqs[key].name)} = {key}" for key in sorted(reqs)]
    tail += ["", ""]
    tail.append("REQUEST_CLASSES: dict[int, type] = {")
    tail += [f"    {k}: {reqs[k].name}," for k in sorted(reqs)]
    tail.append("}")
    tail.append("RESPONSE_CLASSES: dict[int, type] = {")
    tail += [f"    {k}: {resps[k].name}," for k in sorted(resps)]
    tail.append("}")
    tail.append("DATA_CLASSES: dict[str, type] = {")
    tail += [f"    {m.name!r}: {m.name}," for m in msgs if m.kind == "data"]
    tail.append("}")
    tail.append("")

    structs = [
        f"{name} = _PackStruct({fmt!r})" for fmt, name in sorted(gen.structs_fmt.items(), key=lambda x: x[1])
    ]
    fns = sorted(gen.array_fns)
    structs += [
        f"{fn} = FIXED_ARRAY_{'READERS' if fn.startswith('ra_') else 'WRITERS'}[{fn!r}]" for fn in fns
    ]
    return "\n".join(header() + structs + ["", ""] + body + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=Path, default=DEFAULT_MESSAGES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if --out differs from what would be generated"
    )
    args = ap.parse_args(argv)
    text = generate(args.messages)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date; run tools/gen_protocol.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
