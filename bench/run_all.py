"""Run every benchmark and write bench/RESULTS.md (figures, ratios vs peers of the same run).

    python -m bench.run_all                  # everything, about 5-8 minutes on 2 cores (and 25-40 for wide)
    python -m bench.run_all --quick          # smoke version, under 2 minutes (and about 2 for wide)
    python -m bench.run_all --no-spark       # skip the (slow) Spark section
    python -m bench.run_all --only wide      # wide topics: 10 to 3,000 partitions, groups, metadata
    python -m bench.run_all --only tracing   # send and poll with OpenTelemetry tracing off and on
    python -m bench.run_all --only main_job  # the Spark main job beside Spark's connector (about 8 minutes)
    python -m bench.run_all --only codec     # re-run some sections, keep the others' last figures
    python -m bench.run_all --render-only    # rewrite RESULTS.md from results.json
    KAFKA_CORE_BENCH_BROKER=kafka python -m bench.run_all --only producer,consumer,transactions

Raw figures go to bench/results.json, each section with its date, load, machine and command, so
``--only`` can refresh one section and keep the others' last figures; RESULTS.md and the figures
in README.md and docs/ are then rendered from it (bench.report, bench.docs_figures). The producer,
consumer, transactions and Spark sections keep one entry per broker (``brokers``: tansu, kafka,
external), so a run on Apache Kafka and one on Tansu stand side by side in the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import docs_figures, report
from bench.brokers import bench_broker, broker_description, broker_key
from bench.common import (
    BENCH_DIR,
    REPO_DIR,
    RunResult,
    git_revision,
    machine_summary,
    version_of,
)

SECTIONS = ("codec", "producer", "consumer", "transactions", "spark", "wide", "tracing", "main_job")
# Sections whose figures depend on the broker: kept per broker, shown side by side.
BROKER_SECTIONS = ("producer", "consumer", "transactions", "spark")
RESULTS_MD = report.RESULTS_MD
RESULTS_JSON = report.RESULTS_JSON


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    codec_max_time: float  # pytest-benchmark seconds per benchmark
    codec_min_rounds: int
    python_twin: bool  # also benchmark the pure-Python codec twin
    e2e_records: int
    e2e_repeat: int
    spark_rows: int
    codec_processes: int = 1  # fresh pytest processes; the one with the middle median counts
    spark_repeat: int = 1  # rounds of every Spark method (fresh processes); the median counts
    spark_passes: int = 1  # timed jobs per Spark session; the last (warm) one counts, the first beside
    txn_records: int = 100_000  # transactional produce: 1000 records per transaction
    wide_partitions: tuple[int, ...] = (10, 100, 1_000, 3_000)  # the wide bench's topics (issue 40)
    wide_records: int = 600_000
    wide_idle_s: float = 15.0  # polling with nothing to read
    tracing_records: int = 50_000  # per case and round, tracing off and on (bench.bench_tracing)
    main_job_events: int = 1_000_000  # the main job beside Spark's connector (bench.bench_main_job)
    main_job_rounds: int = 3


FULL = Mode("full", 0.5, 5, True, 300_000, 3, 2_000_000, codec_processes=3)
QUICK = Mode(
    "quick",
    0.05,
    3,
    False,
    30_000,
    1,
    100_000,
    txn_records=10_000,
    wide_partitions=(10, 100),
    wide_records=20_000,
    wide_idle_s=2.0,
    tracing_records=5_000,
    main_job_events=50_000,
    main_job_rounds=1,
)


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# --------------------------------------------------------------------------- codec


def _pytest_codec(mode: Mode, *, pure_python: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """One pytest-benchmark run; returns the benchmark entries and any failed checks."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "codec.json"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(BENCH_DIR / "test_codec_bench.py"),
            "-p",
            "no:cacheprovider",
            "-q",
            "-rf",
            "-W",
            "ignore::DeprecationWarning",
            f"--benchmark-json={out}",
            f"--benchmark-max-time={mode.codec_max_time}",
            f"--benchmark-min-rounds={mode.codec_min_rounds}",
            "--benchmark-columns=median,ops,rounds",
        ]
        env = dict(os.environ)
        env.pop("KAFKA_CORE_PURE_PYTHON", None)
        if pure_python:
            cmd += ["-k", "ours or columns"]
            env["KAFKA_CORE_PURE_PYTHON"] = "1"
        proc = subprocess.run(cmd, cwd=REPO_DIR, env=env, capture_output=True, text=True, check=False)
        failures = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        if proc.returncode not in (0, 1):
            failures.append(f"pytest exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        if not out.exists():
            return [], failures or [f"no benchmark output: {proc.stdout[-300:]}"]
        raw = json.loads(out.read_text())
    entries = []
    for bench in raw.get("benchmarks", []):
        info = dict(bench.get("extra_info", {}))
        info["median"] = bench["stats"]["median"]
        info["min"] = bench["stats"]["min"]
        info["rounds"] = bench["stats"]["rounds"]
        info["name"] = bench["name"]
        entries.append(info)
    return entries, failures


def run_codec(mode: Mode) -> dict[str, Any]:
    """The codec benchmarks in ``codec_processes`` fresh processes (the same Cython loop runs up
    to ±30% apart from one process to the next here). Each benchmark keeps the process whose
    median round is the middle one (``medians``: every process's), and the fastest round of all
    (``min``): the report's figures are medians."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    failures: list[str] = []
    for pure_python in (False, True):
        for n in range(mode.codec_processes):
            implementations = {
                e.get("implementation") for es in runs.values() for e in es if e.get("impl") == "ours"
            }
            if pure_python and not (mode.python_twin and "cython" in implementations):
                break
            what = "pure-Python twin" if pure_python else "default implementation and peers"
            log(f"codec: pytest-benchmark, {what} ({n + 1}/{mode.codec_processes})")
            entries, errors = _pytest_codec(mode, pure_python=pure_python)
            failures += [e for e in errors if e not in failures]
            for entry in entries:
                runs.setdefault((entry["name"], str(entry.get("implementation"))), []).append(entry)
    best = {key: middle_run(entries) for key, entries in runs.items()}
    if not any(e.get("impl") == "ours" for e in best.values()):
        failures.append("kafka_core codec not importable: only the peers were measured")
    for line in failures:
        log(f"  {line}")
    return {"entries": list(best.values()), "failures": failures, "processes": mode.codec_processes}


def middle_run(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """One benchmark over several processes: the entry of the process whose median is the
    middle one (the lower middle of an even count), with the fastest round of all and every
    process's median beside."""
    ordered = sorted(entries, key=lambda e: e.get("median") or float("inf"))
    kept = dict(ordered[(len(ordered) - 1) // 2])
    mins = [e["min"] for e in entries if e.get("min")]
    if mins:
        kept["min"] = min(mins)
    kept["medians"] = [e.get("median") for e in entries]
    return kept


# --------------------------------------------------------------------------- end to end


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def section_stamp(mode: Mode) -> dict[str, Any]:
    """When, where, how and under what load a section ran (other work on the machine skews
    absolute figures)."""
    return {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "mode": mode.name,
        "load": _load(),
        "machine": {k: v for k, v in machine_summary().items() if k != "load"},
        "command": command_line(),
    }


def command_line() -> str:
    """The command that ran, as one could type it again (the broker variable included)."""
    broker = os.environ.get("KAFKA_CORE_BENCH_BROKER")
    env = f"KAFKA_CORE_BENCH_BROKER={broker} " if broker else ""
    return env + shlex.join(["python", "-m", __spec__.name if __spec__ else "bench.run_all", *sys.argv[1:]])


def run_e2e(mode: Mode, sections: Sequence[str]) -> dict[str, Any]:
    """The broker-backed sections; one that blows up is recorded as failed, the others still run."""
    from bench.bench_transactions import run_transactions_bench
    from bench.e2e_consumer import run_consumer_bench
    from bench.e2e_producer import run_producer_bench
    from bench.e2e_spark import run_spark_bench

    plans: dict[str, tuple[str, Callable[[str], list[RunResult]], int]] = {
        "producer": (
            f"{mode.e2e_records} records x {mode.e2e_repeat} rounds",
            lambda b: run_producer_bench(b, records=mode.e2e_records, repeat=mode.e2e_repeat, log=log),
            mode.e2e_records,
        ),
        "consumer": (
            f"{mode.e2e_records} records x {mode.e2e_repeat} rounds",
            lambda b: run_consumer_bench(b, records=mode.e2e_records, repeat=mode.e2e_repeat, log=log),
            mode.e2e_records,
        ),
        "transactions": (
            f"{mode.txn_records} records x {mode.e2e_repeat} rounds",
            lambda b: run_transactions_bench(b, records=mode.txn_records, repeat=mode.e2e_repeat, log=log),
            mode.txn_records,
        ),
        "spark": (
            f"{mode.spark_rows} rows x {mode.spark_repeat} rounds x {mode.spark_passes} passes",
            lambda b: run_spark_bench(
                b, rows=mode.spark_rows, repeat=mode.spark_repeat, passes=mode.spark_passes, log=log
            ),
            mode.spark_rows,
        ),
    }
    out: dict[str, Any] = {}
    broker = {"broker": broker_description()}
    with bench_broker() as bootstrap:
        log(f"broker at {bootstrap}: {broker['broker']}")
        for name, (what, run, records) in plans.items():
            if name not in sections:
                continue
            stamp = {**section_stamp(mode), **broker}
            log(f"{name}: {what} (load average {stamp['load']})")
            try:
                out[name] = _pack(run(bootstrap), stamp, records=records)
            except Exception as exc:
                log(f"  {name} failed: {type(exc).__name__}: {exc}")
                out[name] = {"results": [], "failed": f"{type(exc).__name__}: {exc}", **stamp}
            out[name]["load_after"] = _load()
            log(f"  {name} done (load average {out[name]['load_after']})")
    key = broker_key()
    return {n: {"brokers": {key: s}} if n in BROKER_SECTIONS else s for n, s in out.items()}


def run_wide_section(mode: Mode) -> dict[str, Any]:
    """The wide bench (bench.bench_wide, then bench.bench_wide_groups) on its own Apache Kafka
    node, whatever KAFKA_CORE_BENCH_BROKER says: the figures issue 40 asks for are Kafka's."""
    from bench.bench_wide import run_wide

    log(f"wide: partitions {', '.join(map(str, mode.wide_partitions))}, {mode.wide_records} records")
    return run_wide(
        quick=mode.name == "quick",
        partitions=mode.wide_partitions,
        records=mode.wide_records,
        repeat=mode.e2e_repeat,
        idle_s=mode.wide_idle_s,
        log=log,
        command=command_line(),
    )


def run_tracing_section(mode: Mode) -> dict[str, Any]:
    """bench.bench_tracing on the bench broker: send and poll with tracing off and on, kafka_core
    beside confluent-kafka under its contrib instrumentation, ``e2e_repeat`` rounds."""
    from bench.bench_tracing import run_tracing

    stamp = {**section_stamp(mode), "broker": broker_description()}
    log(f"tracing: {mode.tracing_records} records x {mode.e2e_repeat} rounds (load average {stamp['load']})")
    try:
        with bench_broker() as bootstrap:
            section = {
                **run_tracing(bootstrap, records=mode.tracing_records, rounds=mode.e2e_repeat, log=log),
                **stamp,
            }
    except Exception as exc:
        log(f"  tracing failed: {type(exc).__name__}: {exc}")
        section = {"rows": [], "failed": f"{type(exc).__name__}: {exc}", **stamp}
    section["load_after"] = _load()
    log(f"  tracing done (load average {section['load_after']})")
    return section


def run_main_job_section(mode: Mode) -> dict[str, Any]:
    """bench.bench_main_job: the pipeline on both formats, ``main_job_rounds`` rounds alternating."""
    from bench.bench_main_job import section

    result = section(mode.main_job_events, mode.main_job_rounds, log=log)
    result["command"] = command_line()
    log(f"  main job {'failed: ' + result['failed'] if result.get('failed') else 'done'}")
    return result


def merge_sections(previous: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """``fresh`` over ``previous``; a broker section replaces only the brokers it ran on, so a
    run on Apache Kafka keeps the last Tansu figures beside it (and the other way round)."""
    merged = {**previous, **fresh}
    for name in BROKER_SECTIONS:
        if name in fresh and name in previous:
            merged[name] = {"brokers": {**per_broker(previous[name]), **per_broker(fresh[name])}}
    return merged


def per_broker(section: dict[str, Any]) -> dict[str, Any]:
    """A broker section's entries by broker key; a section written before they were kept per
    broker (one flat entry) was measured on Tansu, the only broker the bench could start then."""
    if "brokers" in section:
        return dict(section["brokers"])
    return {"tansu": section}


def _pack(results: Sequence[RunResult], stamp: dict[str, str], **params: Any) -> dict[str, Any]:
    return {"results": [dataclasses.asdict(r) for r in results], **stamp, **params}


# --------------------------------------------------------------------------- main


def environment() -> dict[str, Any]:
    librdkafka = "?"
    try:
        import confluent_kafka

        librdkafka = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    versions = {
        "kafka_core": f"{version_of('kafka-core')} ({git_revision()})",
        "aiokafka": version_of("aiokafka"),
        "kafka-python": version_of("kafka-python"),
        "confluent-kafka": f"{version_of('confluent-kafka')} (librdkafka {librdkafka})",
        "pyarrow": version_of("pyarrow"),
        "pyspark": version_of("pyspark"),
        "pytest-benchmark": version_of("pytest-benchmark"),
    }
    return {"machine": machine_summary(), "versions": versions, "broker": broker_description()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer records, short timings")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark sections (spark, main_job)")
    parser.add_argument("--only", help=f"comma list of sections to re-run ({','.join(SECTIONS)})")
    parser.add_argument("--output", type=Path, default=RESULTS_MD)
    parser.add_argument("--raw", type=Path, default=RESULTS_JSON, help="raw figures (JSON)")
    parser.add_argument("--records", type=int, help="producer/consumer records (default 300000)")
    parser.add_argument("--repeat", type=int, help="producer/consumer/transactions rounds (default 3)")
    parser.add_argument("--txn-records", type=int, help="transactions records (default 100000)")
    parser.add_argument("--spark-rows", type=int, help="Spark rows (default 2000000)")
    parser.add_argument("--spark-repeat", type=int, help="Spark rounds per method (default 1)")
    parser.add_argument("--spark-passes", type=int, help="Spark timed jobs per session (default 1)")
    parser.add_argument("--wide-partitions", help="wide bench partition counts (default 10,100,1000,3000)")
    parser.add_argument("--wide-records", type=int, help="wide bench records (default 600000)")
    parser.add_argument("--tracing-records", type=int, help="tracing bench records per case (default 50000)")
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite the table from --raw, run nothing"
    )
    args = parser.parse_args(argv)

    if args.render_only:
        data = json.loads(args.raw.read_text())
        _write_results(args.output, data, docs=args.raw.resolve() == RESULTS_JSON.resolve())
        log(f"wrote {args.output} from {args.raw}")
        return 0

    mode = QUICK if args.quick else FULL
    overrides = {
        "e2e_records": args.records,
        "e2e_repeat": args.repeat,
        "spark_rows": args.spark_rows,
        "spark_repeat": args.spark_repeat,
        "spark_passes": args.spark_passes,
        "txn_records": args.txn_records,
        "wide_records": args.wide_records,
        "tracing_records": args.tracing_records,
        "wide_partitions": tuple(int(p) for p in args.wide_partitions.split(","))
        if args.wide_partitions
        else None,
    }
    mode = dataclasses.replace(mode, **{k: v for k, v in overrides.items() if v})
    sections = [s for s in (args.only.split(",") if args.only else SECTIONS) if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.no_spark:
        sections = [s for s in sections if s not in ("spark", "main_job")]

    started = time.monotonic()
    env = environment()
    fresh: dict[str, Any] = {}
    if "codec" in sections:
        stamp = section_stamp(mode)
        fresh["codec"] = {**run_codec(mode), **stamp}
    e2e = [s for s in sections if s not in ("codec", "wide", "tracing", "main_job")]
    if e2e:
        fresh.update(run_e2e(mode, e2e))
    if "wide" in sections:
        fresh["wide"] = run_wide_section(mode)
    if "tracing" in sections:
        fresh["tracing"] = run_tracing_section(mode)
    if "main_job" in sections:
        fresh["main_job"] = run_main_job_section(mode)

    # Read at the end, not the start: another section may have been re-run meanwhile.
    # A run covers one broker: the broker sections keep the other brokers' last figures.
    previous: dict[str, Any] = (
        json.loads(args.raw.read_text()).get("sections", {}) if args.raw.exists() else {}
    )
    merged = merge_sections(previous, fresh)
    data = {
        "environment": env,
        "sections": merged,
        "ran": [*fresh],
        "elapsed_s": round(time.monotonic() - started),
    }
    args.raw.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    _write_results(args.output, data, docs=args.raw.resolve() == RESULTS_JSON.resolve())
    log(f"wrote {args.output} and {args.raw} in {data['elapsed_s']} s")
    return 0


def _write_results(path: Path, data: dict[str, Any], *, docs: bool) -> None:
    """RESULTS.md from ``data`` and the notes by hand; with ``docs`` (the results are the
    repository's own), the figures the guides quote too."""
    notes = report.NOTES_MD.read_text() if report.NOTES_MD.exists() else ""
    path.write_text(report.render(data, notes))
    changed = docs_figures.update_all(data) if docs else []
    if changed:
        log(f"updated the figures in {', '.join(changed)}")


if __name__ == "__main__":
    sys.exit(main())
