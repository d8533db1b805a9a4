"""Exactly-once consume-transform-produce on Apache Kafka with the application SIGKILLed in the
middle of its transactions (the ``real_kafka`` fixture).

The application is a child process (tests/fakes/eos_worker.py): it consumes an input topic
read_committed, writes each record upper-cased to an output topic and commits the input offsets in
the same transaction. It is killed with SIGKILL several times, each at another point of a
transaction (half its records sent; all sent and in the log; its offsets sent too; at a random
moment while it runs at full speed), and restarted each time with the same transactional id,
whose init_transactions aborts what the dead one left open. At the end a read_committed reader of
the output finds each input record's transform exactly once, in the input's order per partition,
while a read_uncommitted reader also finds the aborted leftovers of the kills (the kills did
land inside transactions). On Kafka 4.x this runs under transactions v2 (KIP-890 part 2), on 3.9
under v1; the child reports which and the test checks it is the cluster's.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from fakes.topics import wait_writable
from test_transactions import by_partition, read_topic

from kafka_core.devbroker import KafkaCluster
from kafka_core.producer import KafkaProducer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "fakes" / "eos_worker.py"
N = 180
PARTITIONS = 3
# (phase, transaction of the child's life it stops in); "random": killed at a random moment
# after its first commit, whatever it is doing then.
KILLS = [
    ("after-send", 1),
    ("after-offsets", 2),
    ("mid-send", 2),
    ("random", 0),
    ("after-offsets", 1),
    ("random", 0),
]


def expected_protocol(kafka: KafkaCluster) -> int:
    """Transactions v2 on Kafka 4.0+ (transaction.version 2 finalized at format), v1 before."""
    major = int(kafka.version.split(".")[0])
    return 2 if major >= 4 else 1


class Child:
    """One run of the worker: its stdout lines, read on a thread; stderr kept in a file."""

    def __init__(self, args: list[str]) -> None:
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by kill)
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            cwd=str(ROOT),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float = 180.0) -> str:
        """The next line starting with ``prefix`` (others are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {prefix!r} from the worker in {timeout:g}s; {self.report()}"
                ) from None
            if line is None:
                raise AssertionError(f"the worker ended before {prefix!r}: {self.report()}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        self.kill()
        self.err.close()

    def report(self) -> str:
        self.err.seek(0)
        return f"exit {self.proc.poll()}, stdout {self.seen[-8:]}, stderr {self.err.read()[-3000:]}"


def _fill(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    with KafkaProducer(bootstrap, linger_ms=2) as p:
        futures = [p.send(topic, b"record-%04d" % i, partition=i % PARTITIONS) for i in range(N)]
        p.flush(60)
        for f in futures:
            f.result(0)
    want: dict[int, list[bytes]] = {}
    for i in range(N):
        want.setdefault(i % PARTITIONS, []).append(b"RECORD-%04d" % i)
    return want


def test_sigkilled_mid_transaction_the_output_holds_each_input_exactly_once(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    source, sink = (f"{what}-{uuid.uuid4().hex[:10]}" for what in ("kill-in", "kill-out"))
    for topic in (source, sink):
        real_kafka.create_topic(topic, PARTITIONS)
        wait_writable(bootstrap, topic, PARTITIONS)
    want = _fill(bootstrap, source)
    base = ["--bootstrap", bootstrap, "--input", source, "--output", sink]
    base += ["--group", f"kill-g-{uuid.uuid4().hex[:8]}", "--tid", f"kill-t-{uuid.uuid4().hex[:8]}"]
    base += ["--partitions", str(PARTITIONS), "--total", str(N)]
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    protocol = expected_protocol(real_kafka)
    killed = []
    for phase, txn in KILLS:
        # A random kill paces the worker (3 records and 40 ms a transaction, the rest of 180 take
        # seconds): unpaced, a fast machine could finish every transaction before the kill came.
        if phase == "random":
            extra = ["--max-records", "3", "--pace-ms", "40"]
        else:
            extra = ["--pause-at", phase, "--pause-txn", str(txn)]
        child = Child(base + extra)
        try:
            assert child.expect("PROTOCOL") == f"PROTOCOL {protocol}", child.report()
            if phase == "random":
                child.expect("COMMITTED")
                time.sleep(rng.uniform(0.0, 0.5))
            else:
                child.expect(f"PAUSED {phase}")
            child.kill()
            assert child.proc.returncode == -signal.SIGKILL, f"seed {seed}, not killed: {child.report()}"
            killed.append((phase, [s for s in child.seen if s.startswith("COMMITTED")][-1:]))
        finally:
            child.close()
    last = Child(base)
    try:
        assert last.expect("PROTOCOL") == f"PROTOCOL {protocol}"
        last.expect("DONE", timeout=300)
        assert last.proc.wait(60) == 0, last.report()
    finally:
        last.close()
    got = read_topic(bootstrap, sink, PARTITIONS, committed=True, expected=N, timeout=60)
    assert by_partition(got) == want, f"seed {seed}, kills {killed}: not each input exactly once"
    everything = read_topic(bootstrap, sink, PARTITIONS, committed=False, expected=N + 1, timeout=20)
    assert len(everything) > N, "no kill left aborted records behind: none landed inside a transaction"
