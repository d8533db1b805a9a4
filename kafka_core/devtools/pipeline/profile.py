"""Where the main job's time goes, per phase and format: Spark's event log and the workers' profiles.

    python -m kafka_core.devtools.pipeline --compare --event-log /tmp/ev   # Spark's task metrics
    KAFKA_CORE_SPARK_PROFILE=/tmp/prof python -m kafka_core.devtools.pipeline ...  # our Python
    python -m kafka_core.devtools.pipeline.profile --event-log /tmp/ev --python /tmp/prof

From the event log, per job group (``<format>:<phase>``, set by the job): the tasks' run time,
the JVM's CPU in them, its GC and shuffle-write time; run time minus JVM CPU is what the task
thread waited for (a Python worker, the broker, or a core on a loaded machine). From the workers'
cProfile files (:mod:`kafka_core.spark.profiling`): their time by whose code it was in (ours,
Arrow's and PySpark's serialisation, waiting on the producer's deliveries or a socket).
"""

from __future__ import annotations

import argparse
import json
import pstats
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["python_split", "task_split"]


def _events(folder: Path) -> Iterable[dict[str, Any]]:
    for path in sorted(folder.rglob("*")):  # event log v2: a folder per application
        if not path.is_file() or path.name.startswith((".", "appstatus")):
            continue
        raw = path.read_bytes()
        if path.suffix == ".zstd":  # Spark 4's default: frames flushed as the log grows
            import cramjam

            raw = bytes(cramjam.zstd.decompress(raw))
        for line in raw.decode("utf-8", errors="replace").splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:  # blank, or the last line of a log still written
                continue


def task_split(folder: Path) -> dict[str, dict[str, float]]:
    """Per job group: tasks, run s, JVM CPU s, GC s, shuffle write s, summed over the tasks."""
    stage_group: dict[int, str] = {}
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for event in _events(folder):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            group = (event.get("Properties") or {}).get("spark.jobGroup.id") or "(none)"
            for stage in event.get("Stage IDs", []):
                stage_group[stage] = group
        elif kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            row = out[stage_group.get(event.get("Stage ID", -1), "(none)")]
            row["tasks"] += 1
            row["run_s"] += metrics.get("Executor Run Time", 0) / 1e3
            row["jvm_cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
            row["gc_s"] += metrics.get("JVM GC Time", 0) / 1e3
            shuffle = metrics.get("Shuffle Write Metrics") or {}
            row["shuffle_write_s"] += shuffle.get("Shuffle Write Time", 0) / 1e9
    return {group: dict(row) for group, row in out.items()}


# Whose code a function is, by its file; first match wins.
_BUCKETS = (
    (
        "waiting (locks, futures: the producer's deliveries, the loop thread)",
        ("threading.py", "_base.py", "~"),
    ),
    ("Arrow and PySpark serialisation (JVM <-> worker)", ("pyarrow", "pyspark")),
    ("kafka_core producer and codec", ("kafka_core/producer", "kafka_core/_codec", "kafka_core/codec")),
    ("kafka_core consumer and fetch", ("kafka_core/consumer",)),
    ("kafka_core Spark glue", ("kafka_core/spark",)),
    ("kafka_core client, network", ("kafka_core/",)),
)


def _bucket(filename: str, name: str) -> str:
    if filename == "~":  # builtins: a lock's acquire is waiting, the rest is work
        return _BUCKETS[0][0] if "acquire" in name or "wait" in name else "builtins and other"
    for title, marks in _BUCKETS[1:]:
        if any(mark in filename for mark in marks):
            return title
    if filename.endswith(("threading.py", "_base.py", "selectors.py")):
        return _BUCKETS[0][0]
    return "builtins and other"


def python_split(folder: Path, kind: str) -> dict[str, Any]:
    """Summed over ``kind``'s (write or read) profiles: tasks, wall, CPU, and own time by bucket."""
    files = sorted(folder.glob(f"{kind}-*.prof"))
    total: dict[str, float] = defaultdict(float)
    figures: dict[str, float] = defaultdict(float)
    for path in files:
        with open(path.with_suffix(".json")) as f:
            for key, value in json.load(f).items():
                figures[key] += float(value)
        stats: Any = pstats.Stats(str(path))
        for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():
            total[_bucket(filename, name)] += tottime
    return {
        "tasks": len(files),
        **figures,
        "own_time_by_code": dict(sorted(total.items(), key=lambda kv: -kv[1])),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kafka_core.devtools.pipeline.profile", description=__doc__.splitlines()[0]
    )
    p.add_argument("--event-log", type=Path, metavar="DIR", help="the job's --event-log folder")
    p.add_argument("--python", type=Path, metavar="DIR", help="the workers' KAFKA_CORE_SPARK_PROFILE folder")
    args = p.parse_args(argv)
    if args.event_log:
        print("Spark tasks per job group (seconds summed over tasks; wait = run - JVM CPU):")
        print(
            f"  {'group':<28} {'tasks':>6} {'run':>8} {'JVM CPU':>8} {'wait':>8} {'GC':>6} {'shuffle w':>9}"
        )
        for group, row in sorted(task_split(args.event_log).items()):
            print(
                f"  {group:<28} {row['tasks']:>6.0f} {row['run_s']:>8.1f} {row['jvm_cpu_s']:>8.1f} "
                f"{row['run_s'] - row['jvm_cpu_s']:>8.1f} {row['gc_s']:>6.1f} {row['shuffle_write_s']:>9.1f}"
            )
    if args.python:
        for kind in ("write", "read"):
            split = python_split(args.python, kind)
            if not split["tasks"]:
                continue
            head = ", ".join(
                f"{k} {v:.1f}" for k, v in split.items() if k not in ("tasks", "own_time_by_code")
            )
            print(f"Python {kind} tasks: {split['tasks']} ({head})")
            for title, seconds in split["own_time_by_code"].items():
                print(f"  {seconds:8.2f} s  {title}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
