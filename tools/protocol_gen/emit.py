"""Python source for one message: a reader and a writer per distinct wire layout, and the classes.

Versions whose layout is identical share code. Readers and writers are straight-line code:
fixed-width runs are packed by one precompiled ``struct.Struct`` each, and nested structs call the
child function for the same version directly, so no version is dispatched below the message level.
"""

from __future__ import annotations

from .spec import (
    ELEM_CODE,
    FIXED,
    FIXED_ARRAY_CODES,
    FIXED_SIZE,
    PY_TYPES,
    Field,
    MessageDef,
    StructDef,
    vrange,
)


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
                body.append("tins: list")  # one declaration for the per-field lists below
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
                params.append(f"{f.attr}: {ann} = MISSING")
                assigns.append(f"self.{f.attr} = {d} if {f.attr} is MISSING else {f.attr}")
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
    """The parameter's type (a string: the generated modules use postponed annotations)."""
    elem = f.struct.qualname if f.struct is not None else PY_TYPES[f.type]
    ann = f"list[{elem}]" if f.is_array else elem
    if not f.nullable.empty or f.default == "None":
        ann += " | None"
    return ann
