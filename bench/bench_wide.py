"""Wide topics (issue 40): produce, consume and idle over 10 to 3,000 partitions, kafka_core beside
confluent-kafka in the same run, the broker's CPU beside both.

Per partition count, per round, per client (round-robin over the clients): a fresh topic of P
partitions; a child process produces N keyed records of 100 B (distinct keys, so they spread over
every partition; linger 5 ms, acks=all) and flushes; a second child reads the topic twice with
a static assignment of every partition (a fresh consumer per read, at most 10,000 records a
poll, every record and value byte counted), then polls the second consumer for 15 s with
nothing to read. CPU is the child process's own user+system time (getrusage: every thread,
librdkafka's included) over each phase; the broker's is its process's /proc stat over the same
phase. Figures are medians of the rounds.

Each round first waits (up to 2 minutes) for the broker to settle: its CPU under a fifth of a
core over 2 s. A deleted topic of thousands of partitions keeps a broker busy a while (the dev
broker removes its files after 1 s, ``file.delete.delay.ms``, not Kafka's default minute), and
that work went into the next rounds' figures (a third round's broker at 33% of a core idle).

    python -m bench.bench_wide                                  # 10,100,1000,3000 partitions, 3 rounds
    python -m bench.bench_wide --quick                          # 10,100 partitions, 20,000 records, 1 round
    python -m bench.bench_wide --partitions 10,1000 --repeat 1 --save   # keep as results.json's ``wide``

Without ``--bootstrap`` (or KAFKA_BOOTSTRAP_SERVERS) it starts one Apache Kafka node
(kafka_core.devbroker, heap sized for the widest topic).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import (
    OK,
    RunResult,
    child_main,
    confluent_producer,
    create_topic,
    delete_topic,
    git_revision,
    machine_summary,
    make_keys,
    make_values,
    our_export,
    produce_each,
    run_child,
    unique_topic,
)

MODULE = "bench.bench_wide"
CLIENTS = ("confluent-kafka", "kafka_core")
ANCHOR = "confluent-kafka"
PARTITIONS = (10, 100, 1_000, 3_000)
QUICK_PARTITIONS = (10, 100)
RECORDS = 600_000
QUICK_RECORDS = 20_000
VALUE_SIZE = 100
KEY_SIZE = 16
MAX_RECORDS = 10_000  # per poll, both clients
LINGER_MS = 5
FETCH_WAIT_MS = 500  # both clients' default, set so that the idle figure says what it is
IDLE_S = 15.0
QUICK_IDLE_S = 2.0
READS = 2  # reads of the whole topic per consume child
DEADLINE_S = float(os.environ.get("BENCH_WIDE_DEADLINE_S", "300"))  # one read or produce: an error row


# --------------------------------------------------------------------------- measurement


def process_cpu() -> float:
    """This process's user+system CPU seconds (every thread) from getrusage."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pid_cpu(pid: int | None) -> float | None:
    """CPU seconds (user+system) so far of process ``pid`` from /proc (None: not measurable)."""
    if pid is None:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SETTLED_SHARE = 0.2  # of a core: a broker doing no more than serving idle clients
SETTLE_WINDOW_S = 2.0
SETTLE_TIMEOUT_S = 120.0


def settle_broker(
    pid: int | None,
    *,
    share: float = SETTLED_SHARE,
    window_s: float = SETTLE_WINDOW_S,
    timeout_s: float = SETTLE_TIMEOUT_S,
) -> float | None:
    """Wait until process ``pid`` uses under ``share`` of a core over ``window_s``; the seconds
    waited, None if it did not settle within ``timeout_s`` (or 0.0 when it is not measurable)."""
    began = time.monotonic()
    before = pid_cpu(pid)
    if before is None:
        return 0.0
    while True:
        time.sleep(window_s)
        after = pid_cpu(pid)
        if after is None:
            return 0.0
        if (after - before) / window_s < share:
            return round(time.monotonic() - began, 1)
        if time.monotonic() - began > timeout_s:
            return None
        before = after


def listening_pid(bootstrap: str) -> int | None:
    """The pid of the local process listening on ``bootstrap``'s first address (a JVM or Tansu),
    found through its socket's inode; None when the broker is not a process of this machine."""
    host, _, port_text = bootstrap.split(",")[0].strip().rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"):
        return None
    port = f"{int(port_text):04X}"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[1].rsplit(":", 1)[1] == port and cols[3] == "0A":  # LISTEN
                    inodes.add(f"socket:[{cols[9]}]")
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(entry.name)
    return None


class Phase:
    """Wall, own CPU and broker CPU of one phase of a child."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.wall0 = time.perf_counter()
        self.cpu0 = process_cpu()
        self.broker0 = pid_cpu(broker_pid)

    def end(self, **extra: Any) -> dict[str, Any]:
        broker1 = pid_cpu(self.broker_pid)
        return {
            "wall_s": round(time.perf_counter() - self.wall0, 4),
            "cpu_s": round(process_cpu() - self.cpu0, 4),
            "broker_cpu_s": None
            if broker1 is None or self.broker0 is None
            else round(broker1 - self.broker0, 3),
            **extra,
        }


class Counter:
    """What one read received: records and value bytes, checked against what was written."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.nbytes = 0
        self.first_at: float | None = None
        self.deadline = time.monotonic() + DEADLINE_S

    def add(self, count: int, nbytes: int) -> None:
        if count and self.first_at is None:
            self.first_at = time.perf_counter()
        self.count += count
        self.nbytes += nbytes

    @property
    def done(self) -> bool:
        if self.count < self.expected and time.monotonic() > self.deadline:
            raise TimeoutError(f"read {self.count} of {self.expected} records in {DEADLINE_S:.0f} s")
        return self.count >= self.expected

    def check(self) -> None:
        if self.count != self.expected or self.nbytes != self.expected * VALUE_SIZE:
            raise RuntimeError(
                f"read {self.count} records / {self.nbytes} value bytes, "
                f"expected {self.expected} / {self.expected * VALUE_SIZE}"
            )


# --------------------------------------------------------------------------- the clients


def _produce_confluent(bootstrap: str, topic: str, records: int, broker_pid: int | None) -> dict[str, Any]:
    keys, values = make_keys(records, KEY_SIZE), make_values(records, VALUE_SIZE)
    producer, errors = confluent_producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "delivery.report.only.error": True,
            "log_level": 3,
        }
    )
    producer.list_topics(topic, timeout=30)
    phase = Phase(broker_pid)
    produce_each(producer, topic, zip(keys, values, strict=True))
    remaining = producer.flush(DEADLINE_S)
    figures = phase.end()
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, {len(errors)} failed: {errors[:3]}")
    return figures


def _produce_ours(bootstrap: str, topic: str, records: int, broker_pid: int | None) -> dict[str, Any]:
    keys, values = make_keys(records, KEY_SIZE), make_values(records, VALUE_SIZE)
    producer = our_export("KafkaProducer")(bootstrap_servers=bootstrap, acks="all", linger_ms=LINGER_MS)
    try:
        producer.partitions_for(topic)
        phase = Phase(broker_pid)
        send = producer.send
        futures = [send(topic, value, key) for key, value in zip(keys, values, strict=True)]
        producer.flush(DEADLINE_S)
        figures = phase.end()
        failed = [e for f in futures if (e := f.exception(0)) is not None]
    finally:
        producer.close()
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")
    return figures


def _reads_confluent(
    bootstrap: str, topic: str, partitions: int, records: int, idle_s: float, broker_pid: int | None
) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    def consumer() -> Any:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-wide-unused",  # required by the client; assign() never joins it
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": FETCH_WAIT_MS,
                "log_level": 3,
            }
        )
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        return c

    def read(c: Any, counter: Counter) -> None:
        while not counter.done:
            n = size = 0
            for msg in c.consume(MAX_RECORDS, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                size += len(msg.value())
                n += 1
            counter.add(n, size)

    def idle(c: Any) -> int:
        return len(c.consume(MAX_RECORDS, 1.0))

    return _reads(consumer, read, idle, records, idle_s, broker_pid)


def _reads_ours(
    bootstrap: str, topic: str, partitions: int, records: int, idle_s: float, broker_pid: int | None
) -> dict[str, Any]:
    cls = our_export("KafkaConsumer")

    def consumer() -> Any:
        return cls(
            bootstrap_servers=bootstrap,
            partitions={topic: range(partitions)},
            group_id=None,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_WAIT_MS,
        )

    def read(c: Any, counter: Counter) -> None:
        while not counter.done:
            got = c.poll(1000, MAX_RECORDS)
            counter.add(len(got), sum(len(r.value) for r in got))

    def idle(c: Any) -> int:
        return len(c.poll(1000, MAX_RECORDS))

    return _reads(consumer, read, idle, records, idle_s, broker_pid)


def _reads(
    make: Callable[[], Any],
    read: Callable[[Any, Counter], None],
    idle: Callable[[Any], int],
    records: int,
    idle_s: float,
    broker_pid: int | None,
) -> dict[str, Any]:
    """``READS`` reads of the whole topic, each by a fresh consumer (from its construction to the
    last record), then the last consumer polled for ``idle_s`` with nothing to read."""
    reads = []
    consumer = None
    try:
        for n in range(READS):
            phase = Phase(broker_pid)
            consumer = make()
            counter = Counter(records)
            read(consumer, counter)
            start = (counter.first_at or time.perf_counter()) - phase.wall0
            reads.append(phase.end(first_record_s=round(start, 3)))
            counter.check()
            if n < READS - 1:
                consumer.close()
                consumer = None
        assert consumer is not None
        phase = Phase(broker_pid)
        stray = 0
        while time.perf_counter() - phase.wall0 < idle_s:
            stray += idle(consumer)
        quiet = phase.end()
        if stray:
            raise RuntimeError(f"{stray} records arrived while there was nothing left to read")
    finally:
        if consumer is not None:
            consumer.close()
    return {"reads": reads, "idle": quiet}


PRODUCERS: dict[str, Callable[[str, str, int, int | None], dict[str, Any]]] = {
    "confluent-kafka": _produce_confluent,
    "kafka_core": _produce_ours,
}
READERS: dict[str, Callable[[str, str, int, int, float, int | None], dict[str, Any]]] = {
    "confluent-kafka": _reads_confluent,
    "kafka_core": _reads_ours,
}


# --------------------------------------------------------------------------- the parent


def _child_args(
    bootstrap: str, topic: str, partitions: int, records: int, idle_s: float, pid: int | None
) -> list[str]:
    args = ["--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions)]
    args += ["--records", str(records), "--idle", str(idle_s)]
    return [*args, "--broker-pid", str(pid)] if pid is not None else args


def one_run(
    bootstrap: str,
    client: str,
    partitions: int,
    records: int,
    idle_s: float,
    broker_pid: int | None,
    timeout: float,
) -> dict[str, Any]:
    """One client's produce child, then its consume child, on a fresh topic of ``partitions``:
    the phases' figures, or ``{"error": ...}``."""
    settled = settle_broker(broker_pid)  # the last round's deleted topic, gone from its disk
    topic = unique_topic(f"wide{partitions}", client)
    # one node hosts new partitions at some 20-50 a second under load: minutes at 10,000
    create_topic(bootstrap, topic, partitions, timeout=max(120.0, partitions / 10))
    try:
        args = _child_args(bootstrap, topic, partitions, records, idle_s, broker_pid)
        produced = run_child(MODULE, f"produce:{client}", args, timeout)
        if produced.status != OK:
            return {"error": f"produce: {produced.status} {produced.detail}"}
        read = run_child(MODULE, f"consume:{client}", args, timeout)
        if read.status != OK:
            return {"error": f"consume: {read.status} {read.detail}"}
        return {
            "produce": produced.extra["produce"],
            "reads": read.extra["reads"],
            "idle": read.extra["idle"],
            "rss_mb": max(produced.rss_mb, read.rss_mb),
            "broker_settled_s": settled,  # None: it was still busy after SETTLE_TIMEOUT_S
        }
    finally:
        delete_topic(bootstrap, topic)


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(runs: Sequence[dict[str, Any]], records: int) -> dict[str, Any]:
    """Medians over the rounds of one client at one partition count (a failed round: the error)."""
    failed = next((r["error"] for r in runs if "error" in r), None)
    if failed is not None or not runs:
        return {"error": failed or "no runs"}

    def per_million(seconds: float | None) -> float | None:
        return None if seconds is None else seconds * 1e6 / records

    out: dict[str, Any] = {"rounds": len(runs)}
    produce = [r["produce"] for r in runs]
    out["produce_rate"] = statistics.median(records / p["wall_s"] for p in produce)
    out["produce_rates"] = [round(records / p["wall_s"]) for p in produce]
    out["produce_cpu_per_m"] = per_million(_median([p["cpu_s"] for p in produce]))
    out["produce_broker_cpu_per_m"] = per_million(_median([p["broker_cpu_s"] for p in produce]))
    reads = [x for r in runs for x in r["reads"]]
    out["consume_rate"] = statistics.median(records / x["wall_s"] for x in reads)
    out["consume_rates"] = [round(records / x["wall_s"]) for x in reads]
    out["consume_cpu_per_m"] = per_million(_median([x["cpu_s"] for x in reads]))
    out["consume_broker_cpu_per_m"] = per_million(_median([x["broker_cpu_s"] for x in reads]))
    out["first_record_s"] = _median([x["first_record_s"] for x in reads])
    idle = [r["idle"] for r in runs]
    out["idle_cpu_share"] = statistics.median(i["cpu_s"] / i["wall_s"] for i in idle)
    broker_idle = [i["broker_cpu_s"] / i["wall_s"] for i in idle if i["broker_cpu_s"] is not None]
    out["idle_broker_cpu_share"] = statistics.median(broker_idle) if broker_idle else None
    out["rss_mb"] = max(r["rss_mb"] for r in runs)
    return out


def run_wide_bench(
    bootstrap: str,
    *,
    partitions: Sequence[int] = PARTITIONS,
    records: int = RECORDS,
    repeat: int = 3,
    idle_s: float = IDLE_S,
    clients: Sequence[str] = CLIENTS,
    broker_pid: int | None = None,
    timeout: float = 900.0,
    log: Callable[[str], None] = print,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every partition count, ``repeat`` rounds each, round-robin over the clients; the section
    results.json keeps as ``wide`` (its ``by_partitions``: each client's medians and raw runs)."""
    pid = broker_pid if broker_pid is not None else listening_pid(bootstrap)
    by_partitions: dict[str, Any] = {}
    for count in partitions:
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for round_no in range(repeat):
            for client in clients:
                if runs[client] and "error" in runs[client][-1]:
                    continue
                run = one_run(bootstrap, client, count, records, idle_s, pid, timeout)
                runs[client].append(run)
                log(f"  wide {count} partitions, {client} round {round_no + 1}: {describe(run, records)}")
        by_partitions[str(count)] = {c: {**summarize(runs[c], records), "runs": runs[c]} for c in clients}
        section = {
            "by_partitions": by_partitions,
            "records": records,
            "value_size": VALUE_SIZE,
            "idle_s": idle_s,
            "repeat": repeat,
            "broker_cpu_measured": pid is not None,
        }
        if progress is not None:
            progress(section)  # a run cut short keeps the partition counts it finished
    return section


def describe(run: dict[str, Any], records: int) -> str:
    if "error" in run:
        return f"error {run['error']}"
    reads = ", ".join(
        f"{records / x['wall_s']:,.0f}/s ({x['cpu_s'] * 1e6 / records:.2f} CPU s/M)" for x in run["reads"]
    )
    produce, idle = run["produce"], run["idle"]
    broker = idle["broker_cpu_s"] / idle["wall_s"] if idle["broker_cpu_s"] is not None else -1.0
    return (
        f"produce {records / produce['wall_s']:,.0f}/s ({produce['cpu_s'] * 1e6 / records:.2f} CPU s/M), "
        f"consume {reads}, idle {100 * idle['cpu_s'] / idle['wall_s']:.1f}% of a core "
        f"(broker {100 * broker:.1f}%)"
    )


# --------------------------------------------------------------------------- broker


@contextlib.contextmanager
def wide_broker(widest: int) -> Iterator[tuple[str, int | None, str]]:
    """(bootstrap, broker pid, description): KAFKA_BOOTSTRAP_SERVERS if set, else one Apache Kafka
    node with a heap for ``widest`` partitions (768 MB holds 3,000)."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        yield external, listening_pid(external), "external cluster (KAFKA_BOOTSTRAP_SERVERS)"
        return
    from kafka_core.devbroker import KAFKA_VERSION, KafkaCluster

    heap = 768 if widest <= 3_000 else 2_048
    # A deleted topic's files go after 1 s, not Kafka's default minute, so that the work falls
    # before the next round begins (settle_broker), not inside its figures.
    with KafkaCluster(1, heap_mb=heap, overrides={"file.delete.delay.ms": "1000"}) as cluster:
        description = f"Apache Kafka {KAFKA_VERSION} (one KRaft node, {heap} MB heap), loopback"
        yield cluster.bootstrap, cluster.nodes[0].pid, description


def log_line(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def stamp(command: str) -> dict[str, Any]:
    return {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "load": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "machine": {k: v for k, v in machine_summary().items() if k != "load"},
        "command": command,
    }


# --------------------------------------------------------------------------- command line


def _child(args: argparse.Namespace) -> int:
    phase, _, client = args.child.partition(":")
    pid = args.broker_pid

    def produce() -> RunResult:
        figures = PRODUCERS[client](args.bootstrap, args.topic, args.records, pid)
        return RunResult(args.child, records=args.records, extra={"produce": figures})

    def consume() -> RunResult:
        figures = READERS[client](
            args.bootstrap, args.topic, int(args.partitions), args.records, args.idle, pid
        )
        return RunResult(args.child, records=args.records, extra=figures)

    known = client in PRODUCERS
    runners = {"produce": produce, "consume": consume}
    return child_main(args.child, {args.child: runners[phase]} if known and phase in runners else {})


def main(argv: Sequence[str] | None = None) -> int:
    from bench import report

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--broker-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--bootstrap", help="a broker; default: KAFKA_BOOTSTRAP_SERVERS or one Apache Kafka node"
    )
    parser.add_argument("--quick", action="store_true", help="10 and 100 partitions, 20,000 records, 1 round")
    parser.add_argument("--partitions", help="comma list (default 10,100,1000,3000)")
    parser.add_argument("--records", type=int)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--idle", type=float, help="seconds of polling with nothing to read (default 15)")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--no-groups", action="store_true", help="skip the groups, assignors and metadata")
    parser.add_argument("--save", action="store_true", help="keep as bench/results.json's wide section")
    parser.add_argument(
        "--out", type=Path, help="also write the section (JSON) here, after each partition count"
    )
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)

    counts = [int(p) for p in args.partitions.split(",")] if args.partitions else None
    section = run_wide(
        quick=args.quick,
        partitions=counts,
        records=args.records,
        repeat=args.repeat,
        idle_s=args.idle,
        clients=[c for c in args.clients.split(",") if c],
        bootstrap=args.bootstrap,
        groups=not args.no_groups,
        out=args.out,
    )
    from bench.bench_wide_report import wide_tables

    print("\n\n".join(wide_tables(section)))
    if args.save:
        report.save_section("wide", section)
    return 0 if not section.get("failed") else 1


def run_wide(
    *,
    quick: bool = False,
    partitions: Sequence[int] | None = None,
    records: int | None = None,
    repeat: int | None = None,
    idle_s: float | None = None,
    clients: Sequence[str] = CLIENTS,
    bootstrap: str | None = None,
    groups: bool = True,
    log: Callable[[str], None] = log_line,
    command: str | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """The whole wide section on its own broker (or ``bootstrap``), stamped with the commit it
    measured: produce/consume/idle, then (``groups``) bench.bench_wide_groups; what run_all keeps."""
    import shlex

    from bench.bench_wide_groups import run_groups

    counts = list(partitions or (QUICK_PARTITIONS if quick else PARTITIONS))
    chosen: dict[str, Any] = {
        "partitions": counts,
        "records": records or (QUICK_RECORDS if quick else RECORDS),
        "repeat": repeat or (1 if quick else 3),
        "idle_s": idle_s if idle_s is not None else (QUICK_IDLE_S if quick else IDLE_S),
        "clients": list(clients),
    }
    command = command or shlex.join(["python", "-m", MODULE, *sys.argv[1:]])
    with contextlib.ExitStack() as stack:
        if bootstrap:
            where, pid, broker = bootstrap, listening_pid(bootstrap), f"given broker {bootstrap}"
        else:
            where, pid, broker = stack.enter_context(wide_broker(max(counts)))
        head = {
            **stamp(command),
            "broker": broker,
            "mode": "quick" if quick else "full",
            "revision": git_revision(),
        }
        log(f"wide: {chosen} on {broker} (load average {head['load']})")

        def keep(partial: dict[str, Any]) -> None:
            if out is not None:
                out.write_text(json.dumps({**head, **partial}, indent=1, sort_keys=True) + "\n")

        try:
            section = run_wide_bench(where, broker_pid=pid, log=log, progress=keep, **chosen)
        except Exception as exc:
            log(f"  wide failed: {type(exc).__name__}: {exc}")
            section = {"failed": f"{type(exc).__name__}: {exc}"}
        if groups:
            try:
                section["groups"] = run_groups(where, quick=quick, log=log)
            except Exception as exc:
                log(f"  wide groups failed: {type(exc).__name__}: {exc}")
                section["groups"] = {"failed": f"{type(exc).__name__}: {exc}"}
    whole = {**head, **section, "load_after": ", ".join(f"{x:.2f}" for x in os.getloadavg())}
    keep(whole)
    return whole


if __name__ == "__main__":
    sys.exit(main())
