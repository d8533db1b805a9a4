"""``python -m kafka_core.devtools.chaos run --mode short --out artifacts/ [--scenario X]
[--broker kafka]``: run, write, summarise. ``--broker kafka`` runs the three-node Apache Kafka set
instead of Tansu's.

Exit status 0 when every capability run is PASS, 1 when one FAILs, 2 when one is BLOCKED (and
none failed), 3 when the run was stopped part-way (SIGINT or SIGTERM: the cycle under way ends,
its books and artifact are written, later capabilities do not run): CI can tell a broken client
from a machine that lacks a prerequisite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafka_core.devtools.chaos.artifacts import BLOCKED, FAIL, INCOMPLETE, Outcome, write_artifact
from kafka_core.devtools.chaos.scenarios import (
    CAPABILITIES,
    KAFKA_CAPABILITIES,
    SCALES,
    Settings,
    run_capability,
)
from kafka_core.devtools.chaos.stopping import graceful_stop, stop_requested

__all__ = ["main", "summary_rows"]

ALIASES = {"broker-restart": ["broker-restart-sigterm", "broker-restart-sigkill"]}
SETS = {"tansu": list(CAPABILITIES), "kafka": list(KAFKA_CAPABILITIES)}
COLUMNS = (
    "capability",
    "verdict",
    "passes",
    "acked",
    "delivered",
    "lost",
    "broker_lost",
    "dup",
    "recovery s (max)",
    "time s",
)


def summary_rows(outcomes: list[Outcome]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for o in outcomes:
        rec = [t for times in o.recovery_times().values() for t in times]
        rows.append(
            (
                o.capability,
                o.verdict,
                f"{o.pass_count}/{len(o.cycles)}",
                str(o.tally.acknowledged),
                str(o.tally.delivered),
                str(o.tally.lost),
                str(o.tally.broker_lost),
                str(o.tally.duplicated),
                f"{max(rec):.1f}" if rec else "-",
                f"{o.duration_s:.0f}",
            )
        )
    return rows


def _print_summary(outcomes: list[Outcome]) -> None:
    rows = summary_rows(outcomes)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
        for line in (COLUMNS, *rows):
            print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)))
    else:
        table = Table(title="kafka_core chaos")
        for c in COLUMNS:
            table.add_column(c)
        for r in rows:
            table.add_row(*r)
        Console(width=max(Console().width, 130)).print(table)
    for o in outcomes:
        if o.reason:
            print(f"{o.capability}: {o.verdict}: {o.reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_core.devtools.chaos", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run chaos scenarios and write one JSON artifact per capability")
    run.add_argument("--mode", choices=sorted(SCALES), default="short")
    run.add_argument("--out", type=Path, default=Path("artifacts"))
    run.add_argument("--seed", type=int, default=13)
    run.add_argument(
        "--cycles",
        type=int,
        help="cycles of each cycle-counted capability instead of the mode's (the artifact keeps both)",
    )
    run.add_argument(
        "--scenario",
        action="append",
        choices=[*CAPABILITIES, *KAFKA_CAPABILITIES, *ALIASES],
        help="a capability to run (repeatable); all of --broker's set when omitted",
    )
    run.add_argument(
        "--broker",
        choices=sorted(SETS),
        default="tansu",
        help="the set run without --scenario: tansu (Tansu and the mock cluster) or kafka "
        "(a three-node Apache Kafka cluster, replication factor 3)",
    )
    args = parser.parse_args(argv)
    chosen = [c for name in (args.scenario or SETS[args.broker]) for c in ALIASES.get(name, [name])]
    settings = Settings(args.mode, args.seed, args.cycles)
    outcomes = []
    with graceful_stop():
        for capability in dict.fromkeys(chosen):
            if stop_requested() is not None:
                print(f"not running {capability}: the run was asked to stop", flush=True)
                continue
            print(f"running {capability} ({args.mode}, seed {args.seed}) ...", flush=True)
            outcome = run_capability(capability, settings)
            path = write_artifact(outcome, args.out)
            print(f"  {outcome.verdict} in {outcome.duration_s:.0f}s -> {path}", flush=True)
            outcomes.append(outcome)
    _print_summary(outcomes)
    verdicts = {o.verdict for o in outcomes}
    return 1 if FAIL in verdicts else 2 if BLOCKED in verdicts else 3 if INCOMPLETE in verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
