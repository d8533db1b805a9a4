#!/usr/bin/env python3
"""Generate the kafka_core/protocol/messages/ package from Apache Kafka's JSON message definitions.

Usage: python tools/gen_protocol.py [--messages DIR | --jar JAR] [--out DIR] [--schema FILE] [--check]

The definitions are those of the kafka-clients jar of the newest Kafka the suites run, fetched
from Maven Central like the dev broker's jars (``protocol_gen/definitions.py`` says why);
``--jar`` names another kafka-clients jar, ``--messages`` a folder of definitions.

Besides the package it writes the tests' table of the field schemas (``--schema``, by default
tools/protocol_gen/schema_table.py for the repository's package, else schema_table.py beside
``--out``); ``--check`` checks both.

The work is done by the ``protocol_gen`` package next to this script; see docs/protocol.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:  # run as a script or loaded by path (the tests): find protocol_gen
    sys.path.insert(0, str(TOOLS))

from protocol_gen import TABLE, generate, load, load_all, schema_table  # noqa: E402
from protocol_gen.definitions import clients_jar, extract, kafka_version  # noqa: E402
from protocol_gen.package import BANNER  # noqa: E402

REPO = TOOLS.parent
DEFAULT_OUT = REPO / "kafka_core" / "protocol" / "messages"
DEFAULT_SCHEMA = TABLE

__all__ = [
    "DEFAULT_OUT",
    "DEFAULT_SCHEMA",
    "check",
    "clients_jar",
    "extract",
    "generate",
    "generate_from",
    "kafka_version",
    "load",
    "load_all",
    "main",
    "schema_table",
    "write",
]


def generate_from(messages: Path | None = None, jar: Path | None = None) -> tuple[dict[str, str], str]:
    """The package and the schema table generated from the folder ``messages`` if given, else
    from the kafka-clients ``jar`` (default: the one of :func:`kafka_version`, fetched if absent)."""
    if messages is not None:
        return generate(messages), schema_table(messages)
    with tempfile.TemporaryDirectory(prefix="kafka-messages-") as tmp:
        definitions = extract(jar or clients_jar(), Path(tmp))
        return generate(definitions), schema_table(definitions)


def schema_path(out: Path, schema: Path | None) -> Path:
    """Where the schema table goes: ``schema`` if given, else the repository's table for the
    repository's package, else schema_table.py beside ``out`` (never the repository's for another
    package)."""
    if schema is not None:
        return schema
    if out.resolve() == DEFAULT_OUT.resolve():
        return DEFAULT_SCHEMA
    return out.parent / DEFAULT_SCHEMA.name


def _stale(out: Path, files: dict[str, str]) -> list[Path]:
    """Generated modules in ``out`` that the definitions no longer produce."""
    if not out.is_dir():
        return []
    return [
        p for p in sorted(out.glob("*.py")) if p.name not in files and p.read_text().startswith(BANNER[0])
    ]


def check(out: Path, files: dict[str, str]) -> list[str]:
    """The names of files in ``out`` that differ from ``files`` (missing, changed or stale)."""
    bad = [
        name for name, text in files.items() if not (out / name).is_file() or (out / name).read_text() != text
    ]
    return bad + [p.name for p in _stale(out, files)]


def _write_file(target: Path, text: str) -> None:
    if target.is_file() and target.read_text() == text:
        return
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(target)


def write(out: Path, files: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        _write_file(out / name, text)
    for p in _stale(out, files):
        p.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[1])
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--messages", type=Path, default=None, help="a folder of JSON definitions")
    source.add_argument(
        "--jar",
        type=Path,
        default=None,
        help="a kafka-clients jar (default: the newest Kafka's the suites run, fetched with Maven)",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the package directory to write")
    ap.add_argument(
        "--schema",
        type=Path,
        default=None,
        help="the tests' schema table to write (default: see above)",
    )
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if --out differs from what would be generated"
    )
    args = ap.parse_args(argv)
    files, table = generate_from(args.messages, args.jar)
    schema = schema_path(args.out, args.schema)
    if args.check:
        bad = check(args.out, files)
        if not schema.is_file() or schema.read_text() != table:
            bad.append(str(schema))
        if bad:
            print(
                f"{args.out} is out of date ({', '.join(bad[:5])}); run tools/gen_protocol.py",
                file=sys.stderr,
            )
            return 1
        return 0
    write(args.out, files)
    schema.parent.mkdir(parents=True, exist_ok=True)
    _write_file(schema, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
