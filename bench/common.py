"""Shared pieces of the benchmark harness: data, measurement, broker, child-process protocol.

Every end-to-end client runs in a fresh child process (fair CPU and RSS accounting, no shared
threads); the child prints one ``BENCH_RESULT {json}`` line that the parent collects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.brokers import bench_broker
from bench.bytecode import child_env, warm_bytecode

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULT_PREFIX = "BENCH_RESULT "

OK = "ok"
NOT_IMPLEMENTED = "not_implemented"
ERROR = "error"


class NotImplementedYet(Exception):
    """Our client (or one of its methods) does not exist yet: reported as a row, not a failure."""


def our_export(name: str) -> Any:
    """``kafka_core.<name>``; NotImplementedYet only when the package does not declare it.

    A declared class whose import fails (a half-written module) is a broken client, reported
    as an error with the cause, not as "not yet implemented".
    """
    import kafka_core

    declared = set(getattr(kafka_core, "__all__", ())) | set(dir(kafka_core))
    if name not in declared:
        raise NotImplementedYet(f"kafka_core.{name} does not exist yet")
    try:
        return getattr(kafka_core, name)
    except Exception as exc:
        raise RuntimeError(f"kafka_core.{name} failed to import: {type(exc).__name__}: {exc}") from exc


def our_module(module_name: str) -> Any:
    """Import one of our modules; NotImplementedYet only when it does not exist at all."""
    import importlib
    import importlib.util

    try:
        spec = importlib.util.find_spec(module_name)
    except ImportError:
        spec = None
    if spec is None:
        raise NotImplementedYet(f"{module_name} does not exist yet")
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        raise RuntimeError(f"{module_name} failed to import: {type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- data


def make_keys(n: int, size: int = 16) -> list[bytes]:
    """Distinct, deterministic keys of exactly ``size`` bytes."""
    return [(b"k%0*d" % (size - 1, i))[-size:] for i in range(n)]


def make_values(n: int, size: int, *, seed: int = 7, compressible: bool = False) -> list[bytes]:
    """Deterministic values of exactly ``size`` bytes, the same in every process.

    ``compressible`` gives JSON-like text (roughly what an event stream carries) so that the
    compressed codec benchmarks do real work; otherwise random bytes.
    """
    rng = random.Random(seed)
    if not compressible:
        blob = rng.randbytes(n * size)
        return [blob[i * size : (i + 1) * size] for i in range(n)]
    events = (b"page_view", b"click", b"add_to_cart", b"purchase", b"search", b"logout")
    filler = b' "tags":["alpha","beta","gamma","delta"],"ok":true,"note":"lorem ipsum dolor sit amet"'
    out = []
    for i in range(n):
        head = b'{"id":%d,"user":"u%05d","event":"%s","ts":%d,"h":"%s",' % (
            i,
            rng.randrange(100_000),
            rng.choice(events),
            1_700_000_000_000 + i * 37,
            rng.randbytes(8).hex().encode(),
        )
        body = head + filler * (size // len(filler) + 1)
        out.append(body[: size - 1] + b"}")
    return out


# --------------------------------------------------------------------------- measurement


def peak_rss_mb() -> float:
    """Peak resident set size of this process image so far.

    VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child started from a big
    parent would report the parent's size at fork time.
    """
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class Span:
    """Wall and process CPU time of a section; process_time covers every thread of the process."""

    wall_start: float = 0.0
    cpu_start: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0

    def start(self) -> Span:
        self.wall_start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def stop(self) -> Span:
        self.wall = time.perf_counter() - self.wall_start
        self.cpu = time.process_time() - self.cpu_start
        return self


@dataclass
class RunResult:
    """One client's run of one end-to-end workload."""

    client: str
    status: str = OK
    detail: str = ""
    records: int = 0
    wall_s: float = 0.0  # the measured section
    cpu_s: float = 0.0  # process CPU over the measured section (all threads)
    rss_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.records / self.wall_s if self.status == OK and self.wall_s > 0 else 0.0

    @property
    def cpu_per_million(self) -> float:
        return self.cpu_s * 1e6 / self.records if self.status == OK and self.records else 0.0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def emit(result: RunResult) -> None:
    """Child side: hand the result to the parent (last line of stdout)."""
    sys.stdout.write(RESULT_PREFIX + result.to_json() + "\n")
    sys.stdout.flush()


def parse_child_output(client: str, stdout: str, stderr: str, returncode: int) -> RunResult:
    """Parent side: the child's result, or an error row carrying the tail of its stderr."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return RunResult.from_json(line[len(RESULT_PREFIX) :])
    tail = " | ".join(stderr.strip().splitlines()[-3:])[-400:]
    return RunResult(client=client, status=ERROR, detail=f"exit {returncode}: {tail or 'no output'}")


def run_child(module: str, client: str, args: Sequence[str], timeout: float) -> RunResult:
    """Run ``python -m module --child client args...`` in a fresh process and collect its result."""
    warm_bytecode()
    cmd = [sys.executable, "-m", module, "--child", client, *args]
    env = child_env()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO_DIR, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        result = parse_child_output(client, out, "", -9)
        if result.status == ERROR:
            result.detail = f"timed out after {timeout:.0f} s"
        return result
    return parse_child_output(client, proc.stdout, proc.stderr, proc.returncode)


def child_main(client: str, runners: dict[str, Callable[[], RunResult]]) -> int:
    """Child entry point: run one client, turning a missing implementation into a row."""
    runner = runners.get(client)
    if runner is None:
        emit(RunResult(client=client, status=ERROR, detail=f"unknown client {client!r}"))
        return 2
    try:
        result = runner()
    except NotImplementedYet as exc:
        result = RunResult(client=client, status=NOT_IMPLEMENTED, detail=str(exc))
    except Exception as exc:
        result = RunResult(client=client, status=ERROR, detail=f"{type(exc).__name__}: {exc}"[:400])
    result.rss_mb = round(peak_rss_mb(), 1)
    emit(result)
    return 0


def median_result(results: Sequence[RunResult]) -> RunResult:
    """The run with the median rate (runs vary by ±30% here); a failed run wins so it is seen."""
    for r in results:
        if r.status != OK:
            return r
    ordered = sorted(results, key=lambda r: r.rate)
    chosen = dataclasses.replace(ordered[(len(ordered) - 1) // 2])
    chosen.extra = dict(chosen.extra, runs=[round(r.rate) for r in results])
    return chosen


# --------------------------------------------------------------------------- broker and topics


def unique_topic(kind: str, client: str) -> str:
    return f"bench-{kind}-{client}-{uuid.uuid4().hex[:8]}".replace("_", "-")


MAX_PARTITIONS_PER_OP = 5_000


def create_topic(bootstrap: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Create through confluent-kafka's AdminClient and wait until metadata shows every partition.

    A KRaft controller refuses an operation of more than 10,000 records ("excessively large batch
    operation"), one per partition: a wider topic is created at MAX_PARTITIONS_PER_OP and grown
    in steps of it."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    first = min(partitions, MAX_PARTITIONS_PER_OP)
    futures = admin.create_topics([NewTopic(name, num_partitions=first, replication_factor=1)])
    futures[name].result(timeout)
    for total in range(
        first + MAX_PARTITIONS_PER_OP, partitions + MAX_PARTITIONS_PER_OP, MAX_PARTITIONS_PER_OP
    ):
        admin.create_partitions([NewPartitions(name, min(total, partitions))])[name].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} did not show {partitions} partitions within {timeout} s")
        time.sleep(0.1)
    _wait_hosted(admin, name, partitions, deadline)


def _wait_hosted(admin: Any, name: str, partitions: int, deadline: float) -> None:
    """Until the leaders answer ListOffsets for every partition: a broker lists new partitions
    in its metadata before its replica manager hosts them (minutes for thousands on one node),
    and a Produce meanwhile is refused NOT_LEADER_OR_FOLLOWER, which a timed run would count."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    waiting = [TopicPartition(name, p) for p in range(partitions)]
    last: BaseException | None = None
    while waiting:
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in waiting}, request_timeout=30)
        failed = []
        for tp, future in futures.items():
            try:
                future.result()
            except Exception as exc:  # the partition's error, asked again below
                failed.append(tp)
                last = exc
        waiting = failed
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(f"{len(waiting)} partitions of {name} not hosted by their leaders: {last}")
        if waiting:
            time.sleep(0.5)


def delete_topic(bootstrap: str, name: str) -> None:
    """Best effort: frees the broker's memory between runs."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    with contextlib.suppress(Exception):
        admin.delete_topics([name])[name].result(15)


def confluent_producer(config: dict[str, Any]) -> tuple[Any, list[str]]:
    """A confluent-kafka Producer with ``config``, and the list its delivery errors land in (one
    config-level callback: cheaper than one per message)."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    return Producer({**config, "on_delivery": on_delivery}), errors


def produce_each(producer: Any, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> None:
    """Queue every ``(key, value)`` with a confluent-kafka Producer, a full queue (BufferError)
    waited out by serving its callbacks."""
    produce, poll = producer.produce, producer.poll
    for key, value in records:
        while True:
            try:
                produce(topic, value, key=key)
                break
            except BufferError:
                poll(0.005)


def produce_all(
    bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]], timeout: float = 120.0
) -> None:
    """Write ``(key, value)`` records with one confluent-kafka Producer (acks=all, linger 5 ms,
    1 MB batches), flushed and checked: the peers' writer in every benchmark."""
    producer, errors = confluent_producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "delivery.report.only.error": True,
        }
    )
    produce_each(producer, topic, records)
    remaining = producer.flush(timeout)
    if remaining or errors:
        raise RuntimeError(f"writing {topic}: {remaining} undelivered, {len(errors)} errors: {errors[:3]}")


def fill_topic(bootstrap: str, topic: str, values: Sequence[bytes]) -> None:
    """Preload a topic for the consumer benchmark (confluent-kafka: the fastest writer here)."""
    produce_all(bootstrap, topic, ((None, v) for v in values), timeout=60.0)


def count_topic(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> int:
    """Records on the topic, read back with confluent-kafka: a producer's figure counts only if
    every record landed. Reads until ``expected`` are seen (then briefly on, to catch
    duplicates) or nothing new comes for a few seconds. A short count is not taken at once: a
    loaded broker (Tansu) can stall a fetch for seconds, so each partition is then read on to the
    high watermark the broker reports after the quiet period (a lower bound on Tansu, which lists
    a partition's end as its last batch's base offset + 1), up to three rounds within
    ``timeout``. A count still short is printed per partition (records read, first and next
    offset, watermarks) to stderr, so a gap in offsets can be told from a read that ended early."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-verify",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "log_level": 3,
        }
    )
    per_partition = [0] * partitions
    first = [-1] * partitions
    next_offset = [0] * partitions
    deadline = time.monotonic() + timeout

    def drain(quiet_s: float, until: list[int] | None) -> None:
        quiet_until = time.monotonic() + quiet_s
        while time.monotonic() < min(deadline, quiet_until):
            if until is not None and all(next_offset[p] >= until[p] for p in range(partitions)):
                return
            messages = consumer.consume(100_000, 0.2)
            for m in messages:
                p, offset = m.partition(), m.offset()
                if m.error() is None and p is not None and offset is not None:
                    per_partition[p] += 1
                    if first[p] < 0:
                        first[p] = offset
                    next_offset[p] = max(next_offset[p], offset + 1)
            if messages:
                done = sum(per_partition) >= expected
                quiet_until = time.monotonic() + (0.5 if done else quiet_s)

    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        drain(5.0, None)
        highs = [-1] * partitions
        for _ in range(3):
            if sum(per_partition) >= expected or time.monotonic() >= deadline:
                break
            for p in range(partitions):
                with contextlib.suppress(Exception):
                    highs[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5.0)[1]
            drain(10.0, highs)
        count = sum(per_partition)
        if count < expected:
            print(
                f"count_topic {topic}: {count} of {expected}; per partition "
                "(records, first offset, next offset, high watermark): "
                + ", ".join(
                    f"{p}:({per_partition[p]}, {first[p]}, {next_offset[p]}, {highs[p]})"
                    for p in range(partitions)
                ),
                file=sys.stderr,
                flush=True,
            )
        return count
    finally:
        consumer.close()


# --------------------------------------------------------------------------- reporting


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_summary() -> dict[str, str]:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load": load,
    }


def git_revision() -> str:
    with contextlib.suppress(Exception):
        out = subprocess.run(
            ["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_DIR), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
        return out + ("+local changes" if dirty else "")
    return "?"


def fmt_rate(value: float) -> str:
    if value <= 0:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.0f} k"
    return f"{value:.0f}"


def fmt_ratio(ours: float, theirs: float) -> str:
    if ours <= 0 or theirs <= 0:
        return "-"
    return f"{ours / theirs:.2f}x"


def fmt_num(value: float, digits: int = 2) -> str:
    return "-" if value <= 0 else f"{value:.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table; pipes in cells are escaped so a detail cannot break it."""

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def status_cell(result: RunResult) -> str:
    if result.status == NOT_IMPLEMENTED:
        return "not yet implemented"
    if result.status == ERROR:
        return f"error: {result.detail}"
    return ""


def e2e_table(results: Sequence[RunResult], anchor: str, unit: str = "msg/s") -> str:
    """Rows of figures with the ratio against the anchor client measured in the same run."""
    base = next((r for r in results if r.client == anchor and r.status == OK), None)
    rows = []
    for r in results:
        if r.status != OK:
            rows.append([r.client, "-", "-", "-", "-", status_cell(r)])
            continue
        note = r.extra.get("note", "")
        runs = r.extra.get("runs")
        if runs and len(runs) > 1:
            note = (note + "; " if note else "") + "runs: " + ", ".join(fmt_rate(x) for x in runs)
        rows.append(
            [
                r.client,
                fmt_rate(r.rate),
                fmt_ratio(r.rate, base.rate) if base else "-",
                fmt_num(r.cpu_per_million),
                f"{r.rss_mb:.0f}",
                note,
            ]
        )
    headers = ["client", unit, f"vs {anchor}", "CPU s / M records", "peak RSS MB", "notes"]
    return markdown_table(headers, rows)


# -- the produce benchmarks' shared driver (e2e_producer, bench_transactions) ---------------------


def describe_run(result: RunResult) -> str:
    """One line of a run for the progress log."""
    if result.status != OK:
        return f"{result.status} {result.detail}"
    return f"{result.rate:,.0f} msg/s, {result.cpu_per_million:.2f} CPU s/M, {result.rss_mb:.0f} MB"


def produce_rounds(
    bootstrap: str,
    *,
    module: str,
    kind: str,
    label: str,
    records: int,
    partitions: int,
    repeat: int,
    clients: Sequence[str],
    child_args: Sequence[str],
    timeout: float,
    log: Any = print,
    note: str = "",
) -> list[RunResult]:
    """Every client ``repeat`` times, round-robin (so drifting load hits all alike), each run in
    a child process of ``module`` on a fresh topic whose records are counted back; median each."""
    runs: dict[str, list[RunResult]] = {c: [] for c in clients}
    for round_no in range(repeat):
        for client in clients:
            if runs[client] and runs[client][-1].status != OK:
                continue  # not implemented / broken: once is enough
            topic = unique_topic(kind, client)
            create_topic(bootstrap, topic, partitions)
            args = ["--bootstrap", bootstrap, "--topic", topic, "--records", str(records), *child_args]
            result = run_child(module, client, args, timeout)
            if result.status == OK:
                landed = count_topic(bootstrap, topic, partitions, records)
                if landed != records:
                    result.status = ERROR
                    result.detail = f"{landed} of {records} records on the topic after the run"
                if note:
                    result.extra["note"] = note
            delete_topic(bootstrap, topic)
            runs[client].append(result)
            log(f"  {label} {client} round {round_no + 1}: {describe_run(result)}")
    return [median_result(runs[c]) for c in clients]


@dataclass(frozen=True)
class ProduceBench:
    """A produce benchmark: the module its children run, its topics' kind, the progress label,
    defaults, and a runner per client (given bootstrap, topic, values and each option by name).
    ``options``: further integer options with their defaults (``per_transaction``: the command
    line's ``--per-transaction``); ``note``: a format string over them for the table."""

    module: str
    kind: str
    label: str
    records: int
    timeout: float
    clients: Sequence[str]
    anchor: str
    runners: dict[str, Callable[..., RunResult]]
    options: dict[str, int] = field(default_factory=dict)
    note: str = ""
    doc: str = ""  # the command line's description

    def run(
        self,
        bootstrap: str,
        *,
        records: int | None = None,
        value_size: int = 100,
        partitions: int = 3,
        repeat: int = 3,
        clients: Sequence[str] | None = None,
        timeout: float | None = None,
        log: Any = print,
        **options: int,
    ) -> list[RunResult]:
        """Every client ``repeat`` times, round-robin (so drifting load hits all alike); median each."""
        unknown = set(options) - set(self.options)
        if unknown:
            raise TypeError(f"{self.module}: unknown options {sorted(unknown)}")
        chosen = {**self.options, **options}
        child_args = ["--value-size", str(value_size)]
        for name, value in chosen.items():
            child_args += [f"--{name.replace('_', '-')}", str(value)]
        return produce_rounds(
            bootstrap,
            module=self.module,
            kind=self.kind,
            label=self.label,
            records=self.records if records is None else records,
            partitions=partitions,
            repeat=repeat,
            clients=self.clients if clients is None else clients,
            child_args=child_args,
            timeout=self.timeout if timeout is None else timeout,
            log=log,
            note=self.note.format(**chosen),
        )

    def main(self, argv: Sequence[str] | None = None) -> int:
        """The command line: ``--child`` runs one client's runner, otherwise :meth:`run` runs
        them all (on ``--bootstrap`` or an embedded broker) and prints the table."""
        import argparse

        parser = argparse.ArgumentParser(description=self.doc, formatter_class=argparse.RawTextHelpFormatter)
        parser.add_argument("--child", help=argparse.SUPPRESS)
        parser.add_argument("--bootstrap", help="broker; default: KAFKA_BOOTSTRAP_SERVERS or embedded Tansu")
        parser.add_argument("--topic", help=argparse.SUPPRESS)
        parser.add_argument("--records", type=int, default=self.records)
        parser.add_argument("--value-size", type=int, default=100)
        for name, default in self.options.items():
            parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
        parser.add_argument("--partitions", type=int, default=3)
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--clients", default=",".join(self.clients))
        args = parser.parse_args(argv)
        extra = {name: getattr(args, name) for name in self.options}

        if args.child:
            values = make_values(args.records, args.value_size)
            runner = self.runners.get(args.child)
            bound = (
                {args.child: (lambda: runner(args.bootstrap, args.topic, values, **extra))} if runner else {}
            )
            return child_main(args.child, bound)

        clients = [c for c in args.clients.split(",") if c]
        kwargs = {
            "records": args.records,
            "value_size": args.value_size,
            "partitions": args.partitions,
            **extra,
        }
        if args.bootstrap:
            results = self.run(args.bootstrap, repeat=args.repeat, clients=clients, **kwargs)
        else:
            with bench_broker() as bootstrap:
                results = self.run(bootstrap, repeat=args.repeat, clients=clients, **kwargs)
        print(e2e_table(results, self.anchor))
        return 0
