"""Render the measured server table of docs/compatibility.md from the compatibility runs.

Each run of the compatibility subset with ``KAFKA_CORE_COMPAT_REPORT=FILE`` (ci/test.sh writes
build/compat/*.json) records every test's outcome; this prints, per capability and server, how
many of its tests passed, and how many assert Kafka's behaviour that the server lacks (strict
expected failures). ``python tools/compat_table.py build/compat/*.json``.

Columns come in a fixed order whatever the files' order: Apache Kafka newest first (the
reference), then Tansu, the SeaweedFS gateway, then any other server (an external cluster, named
by its address) in the order given. Runs that name the same server are counted together.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

_KNOWN = ("Tansu", "SeaweedFS gateway")  # the names tests/conftest.py gives, after Apache Kafka


def _column_key(broker: str, first_seen: int) -> tuple[int, tuple[int, ...], int]:
    """Apache Kafka (newest version first), then the known servers, then the rest as given."""
    if broker.startswith("Apache Kafka "):
        version = tuple(int(p) for p in broker.removeprefix("Apache Kafka ").split(".") if p.isdigit())
        return (0, tuple(-p for p in version), first_seen)
    if broker in _KNOWN:
        return (1, (_KNOWN.index(broker),), first_seen)
    return (2, (), first_seen)


def table(paths: list[Path]) -> str:
    runs = [json.loads(path.read_text()) for path in paths]
    seen = list(dict.fromkeys(run["broker"] for run in runs))
    brokers = sorted(seen, key=lambda b: _column_key(b, seen.index(b)))
    counts: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for run in runs:
        for nodeid, outcome in run["results"].items():
            counts[run["capabilities"][nodeid]][run["broker"]][outcome] += 1
    lines = [
        "| capability | " + " | ".join(brokers) + " |",
        "|---|" + "---|" * len(brokers),
    ]
    for capability in sorted(c for c in counts if c != "other"):  # the subset only
        cells = []
        for broker in brokers:
            c = counts[capability][broker]
            total = sum(c.values())
            if not total:
                cells.append("not run")
                continue
            cell = f"{c['passed']}/{total} pass"
            if c["xfailed"]:
                cell += f", {c['xfailed']} lacking"
            if c["failed"]:
                cell += f", **{c['failed']} failed**"
            if c["skipped"]:
                cell += f", {c['skipped']} skipped"
            cells.append(cell)
        lines.append(f"| {capability} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(table([Path(arg) for arg in argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
