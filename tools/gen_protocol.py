#!/usr/bin/env python3
"""Generate the kafka_core/protocol/messages/ package from Apache Kafka's JSON message definitions.

Usage: python tools/gen_protocol.py [--messages DIR] [--newer JAR] [--out DIR] [--check]

The share-group definitions come from the kafka-clients jar of the newest Kafka the suites run
(``protocol_gen/newer.py`` says why); ``--newer`` names another jar, else it is fetched with Maven.

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

from protocol_gen import generate, load  # noqa: E402
from protocol_gen.newer import merge, newer_jar  # noqa: E402
from protocol_gen.package import BANNER  # noqa: E402

REPO = TOOLS.parent
DEFAULT_MESSAGES = REPO.parent / "shared" / "kafka-protocol" / "messages"
DEFAULT_OUT = REPO / "kafka_core" / "protocol" / "messages"

__all__ = [
    "DEFAULT_MESSAGES",
    "DEFAULT_OUT",
    "check",
    "generate",
    "generate_merged",
    "load",
    "main",
    "write",
]


def generate_merged(messages: Path, jar: Path | None = None) -> dict[str, str]:
    """The package generated from the folder ``messages`` with the jar's newer share-group files."""
    with tempfile.TemporaryDirectory(prefix="kafka-messages-") as tmp:
        return generate(merge(messages, jar or newer_jar(), Path(tmp)))


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


def write(out: Path, files: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = out / name
        if target.is_file() and target.read_text() == text:
            continue
        tmp = target.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(target)
    for p in _stale(out, files):
        p.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[1])
    ap.add_argument("--messages", type=Path, default=DEFAULT_MESSAGES, help="the JSON definitions")
    ap.add_argument(
        "--newer", type=Path, default=None, help="the kafka-clients jar (default: fetched with Maven)"
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the package directory to write")
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if --out differs from what would be generated"
    )
    args = ap.parse_args(argv)
    files = generate_merged(args.messages, args.newer)
    if args.check:
        bad = check(args.out, files)
        if bad:
            print(
                f"{args.out} is out of date ({', '.join(bad[:5])}); run tools/gen_protocol.py",
                file=sys.stderr,
            )
            return 1
        return 0
    write(args.out, files)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
