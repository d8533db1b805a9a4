"""The loader's model of the definitions, written out as data (schema_table.py) and read back.

The protocol tests draw values from the field schemas (which version has a field, which versions
may be null, which are tagged). Reading them from this table instead of the JSON definitions lets
those tests run in a fresh clone; the table is a plain dump of ``spec``'s model, not of the wire
code that ``emit`` writes, so the tests still check the generated readers and writers against an
independent description, and the drift check keeps the table equal to the definitions. Only the
tests read it, so it lives here beside the code that writes and reads it, not in the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .package import BANNER
from .spec import Field, MessageDef, StructDef, Versions, load_all

# Where the table lives (``from protocol_gen.schema_table import SCHEMA`` once tools/ is on sys.path).
TABLE = Path(__file__).resolve().parent / "schema_table.py"


def _v(vs: Versions | None) -> tuple[int, int] | None:
    return None if vs is None else (vs.lo, vs.hi)


def _field_row(f: Field) -> tuple[Any, ...]:
    return (
        f.name,
        f.attr,
        f.type,
        f.is_array,
        _v(f.versions),
        _v(f.nullable),
        _v(f.tagged),
        f.tag,
        f.ignorable,
        f.default,
        _v(f.flexible),
        None if f.struct is None else f.struct.name,
    )


def schema_table(messages_dir: Path) -> str:
    """The table's source for a definitions folder."""
    return schema_module(load_all(messages_dir), BANNER)


def schema_module(msgs: list[MessageDef], banner: list[str]) -> str:
    """The source of the table: one entry per message, one line per field."""
    out = [
        *banner,
        '"""Field schemas of every message, for tests that build values without the JSON definitions.',
        "",
        "message name -> (kind, api_key, valid versions, flexible versions, latest unstable, listeners,",
        "top-level fields, {struct name: fields} children first); a field is (json name, attribute,",
        "type, is_array, versions, nullable versions, tagged versions, tag, ignorable, default,",
        "flexible versions, struct name). Versions are inclusive (lo, hi); lo > hi means none.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "SCHEMA: dict[str, tuple[Any, ...]] = {",
    ]
    for m in msgs:
        out.append(
            f"    {m.name!r}: ({m.kind!r}, {m.api_key!r}, {_v(m.valid)!r}, {_v(m.flexible)!r}, "
            f"{m.unstable!r}, {tuple(m.listeners)!r}, ("
        )
        out += [f"        {_field_row(f)!r}," for f in m.top.fields]
        out.append("    ), {")
        for sd in m.structs:
            out.append(f"        {sd.name!r}: (")
            out += [f"            {_field_row(f)!r}," for f in sd.fields]
            out.append("        ),")
        out.append("    }),")
    out += ["}", ""]
    return "\n".join(out)


def _versions(t: tuple[int, int] | None) -> Versions | None:
    return None if t is None else Versions(*t)


def from_schema(schema: dict[str, tuple[Any, ...]]) -> list[MessageDef]:
    """The model back from the table: equal to what ``spec.load`` makes of the definitions."""
    msgs = []
    for name, (kind, api_key, valid, flexible, unstable, listeners, top_rows, struct_rows) in schema.items():
        structs: dict[str, StructDef] = {}

        def fields(rows: tuple[Any, ...], structs: dict[str, StructDef] = structs) -> list[Field]:
            out = []
            for fname, attr, ftype, is_array, vs, nul, tagged, tag, ign, default, flex, sname in rows:
                out.append(
                    Field(
                        fname,
                        attr,
                        ftype,
                        is_array,
                        Versions(*vs),
                        Versions(*nul),
                        Versions(*tagged),
                        tag,
                        ign,
                        default,
                        _versions(flex),
                        None if sname is None else structs[sname],
                    )
                )
            return out

        for sname, rows in struct_rows.items():  # children first: a struct's children exist already
            sd = StructDef(sname, f"_s_{name}_{sname}", f"{name}.{sname}")
            sd.fields = fields(rows)
            structs[sname] = sd
        top = StructDef(name, name, name, fields(top_rows))
        msgs.append(
            MessageDef(
                name,
                kind,
                api_key,
                Versions(*valid),
                Versions(*flexible),
                list(listeners),
                unstable,
                top,
                list(structs.values()),
            )
        )
    return msgs
