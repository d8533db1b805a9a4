"""The main job beside Spark's own connector (issue 41): ``kafka_core.devtools.pipeline
--compare`` (the job users run, on ``format("kafka_core")`` and on ``format("kafka")``, rounds
alternating which goes first, every answer of both checked), its phases kept in
bench/results.json's ``main_job`` section and rendered into RESULTS.md, README.md and
docs/spark.md.

    python -m bench.bench_main_job [--events 1000000] [--rounds 3] [--save]
    python -m bench.run_all --only main_job

The job starts its own Apache Kafka node (the connector's writes to Tansu lost records) unless
KAFKA_BOOTSTRAP_SERVERS names a cluster. Spark's connector: its jar from Maven Central for the
running pyspark, or its newest release run on the running Spark (the pipeline says which).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO_DIR, machine_summary

# What issue 41 asks of each phase (kafka_core's rows/s over the connector's, medians of rounds).
TARGETS = {"write": 2.0, "read": 2.0, "stream": 1.5, "whole": 1.3}


def run_main_job(
    events: int, rounds: int, *, log: Callable[[str], None] = print, timeout: float = 5400.0
) -> dict[str, Any]:
    """One ``--compare`` run of the pipeline in a process of its own; its --json figures, or
    ``failed`` with the cause (the job's last lines) when it did not pass."""
    with tempfile.TemporaryDirectory(prefix="bench-main-job-") as tmp:
        out = Path(tmp) / "job.json"
        cmd = [
            sys.executable,
            "-m",
            "kafka_core.devtools.pipeline",
            "--compare",
            "--rounds",
            str(rounds),
            "--events",
            str(events),
            "--json",
            str(out),
        ]
        log(
            f"main job: {events:,} events, {rounds} rounds of both formats (load average {machine_summary()['load']})"
        )
        try:
            proc = subprocess.run(
                cmd, cwd=REPO_DIR, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return {"failed": f"the job took over {timeout:.0f} s"}
        lines = proc.stdout.splitlines()
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join([*lines[-12:], *proc.stderr.strip().splitlines()[-8:]])
            return {"failed": f"the job exited {proc.returncode}: {tail}"}
        figures: dict[str, Any] = json.loads(out.read_text())
    return figures


def section(events: int, rounds: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The ``main_job`` section: the job's figures with when, where and under what load."""
    machine = machine_summary()
    stamp = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "load": machine.pop("load"),
        "machine": machine,
        "command": f"python -m bench.bench_main_job --events {events} --rounds {rounds}",
    }
    figures = run_main_job(events, rounds, log=log)
    return {**figures, **stamp, "load_after": machine_summary()["load"], "targets": TARGETS}


def main(argv: Sequence[str] | None = None) -> int:
    from bench.main_job_report import main_job_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save", action="store_true", help="keep the figures in bench/results.json")
    args = parser.parse_args(argv)
    result = section(args.events, args.rounds)
    if result.get("failed"):
        print(f"failed: {result['failed']}", file=sys.stderr)
        return 1
    print(main_job_table(result))
    if args.save:
        from bench.report import save_section

        save_section("main_job", result)
        print("saved as bench/results.json's main_job section")
    return 0 if result.get("passed") else 1


if __name__ == "__main__":
    raise SystemExit(main())
