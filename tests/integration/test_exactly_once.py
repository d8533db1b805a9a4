"""examples/exactly_once.py holds its promise: each input record's result is in the output exactly
once, in order per partition, for a read_committed reader, across crashes and restarts.

Each scenario runs the example's Processor on N input records, stops the first instance at a bad
moment (between two transactions; in the middle of one that it then aborts; in the middle of one
that it leaves open while a new instance with the same transactional id fences it; or, on the
mock, an abortable error it must abort and rewind from), lets a second instance (or the same one)
finish, and reads the whole output back with read_committed.

Both brokers here deviate from Apache Kafka on part of this (see the marks): Tansu and the mock
deliver aborted records to read_committed readers, and the mock does not store offsets sent to a
transaction. The tests assert Kafka's behaviour; each scenario passes for real on at least one of
the two brokers except those that need aborted records hidden, which need Apache Kafka
(KAFKA_BOOTSTRAP_SERVERS, docker-compose.kafka.yml).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from file_modules import load_file_module
from test_transactions import (
    ABORTED_DELIVERED,
    by_partition,
    read_topic,
)
from test_transactions_mock import MOCK_ABORTED_DELIVERED, MOCK_NO_FENCING, MOCK_TXN_OFFSETS_DROPPED

from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaProducerFencedError
from kafka_core.producer import KafkaProducer
from kafka_core.protocol import ApiKey
from kafka_core.protocol.error_codes import ErrorCode as E

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
N = 300
PARTITIONS = 3


def load_example() -> ModuleType:
    return load_file_module("exactly_once_example", ROOT / "examples" / "exactly_once.py")


def fill_input(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """N plain (non-transactional) records; returns the expected output per partition."""
    with KafkaProducer(bootstrap, linger_ms=2) as p:
        futures = [p.send(topic, b"record-%05d" % i, partition=i % PARTITIONS) for i in range(N)]
        p.flush(60)
        for f in futures:
            f.result(0)
    out: dict[int, list[bytes]] = {}
    for i in range(N):
        out.setdefault(i % PARTITIONS, []).append(b"RECORD-%05d" % i)
    return out


class Run:
    """One scenario's topics, group and transactional id on one broker."""

    def __init__(self, bootstrap: str, make_topic: Callable[[], str], *, check_crcs: bool = True) -> None:
        self.bootstrap = bootstrap
        self.input = make_topic()
        self.output = make_topic()
        self.group = f"eos-{uuid.uuid4().hex[:8]}"
        self.tid = f"eos-{uuid.uuid4().hex[:8]}"
        self.check_crcs = check_crcs
        self.expected = fill_input(bootstrap, self.input)

    def processor(self) -> Any:
        return load_example().Processor(
            self.bootstrap,
            self.input,
            self.output,
            self.group,
            self.tid,
            max_records=25,
            consumer_options={
                "session_timeout_ms": 6_000,
                "heartbeat_interval_ms": 500,
                "fetch_max_wait_ms": 100,
                "reconnect_backoff_max_ms": 200,
            },
            producer_options={"linger_ms": 2, "retry_backoff_ms": 50, "reconnect_backoff_max_ms": 200},
        )

    def output_committed(self) -> list[Any]:
        return read_topic(
            self.bootstrap, self.output, PARTITIONS, committed=True, expected=N, check_crcs=self.check_crcs
        )


def advance(proc: Any, processed: int, timeout: float = 90.0) -> None:
    """Steps until at least ``processed`` input records went through committed transactions."""
    deadline = time.monotonic() + timeout
    while proc.processed < processed and time.monotonic() < deadline:
        proc.step(500)
    assert proc.processed >= processed, f"only {proc.processed} records processed in {timeout} s"


def finish(proc: Any, timeout: float = 120.0) -> None:
    """Steps until the instance's commits cover the whole input (input offsets are 0..n-1)."""
    deadline = time.monotonic() + timeout
    while sum(proc.committed_offsets.values()) < N and time.monotonic() < deadline:
        proc.step(500)
    assert sum(proc.committed_offsets.values()) == N, f"input not all committed: {proc.committed_offsets}"


def open_transaction(proc: Any) -> None:
    """Poll a batch and write it into a transaction (flushed to the log), then stop there."""
    deadline = time.monotonic() + 60
    batch: list[Any] = []
    while not batch and time.monotonic() < deadline:
        batch = proc.poll(500)
    assert batch, "no input left for the transaction left open"
    proc.write(batch)
    proc.producer.flush(30)


def scenario(run: Run, name: str, cluster: MockCluster | None = None) -> None:
    first = run.processor()
    first_open = True
    try:
        advance(first, N // 3)
        if name == "restart":
            first_open = False
            first.close()
            second = run.processor()
        elif name == "abort":
            open_transaction(first)
            first.producer.abort_transaction(30)
            first_open = False
            first.close()
            second = run.processor()
        elif name == "zombie":
            open_transaction(first)
            # Its group membership ends as a crashed process's would; its producer lives on.
            first_open = False
            first.consumer.close(commit=False)
            second = run.processor()  # init_transactions fences the first instance
            with pytest.raises(KafkaProducerFencedError):
                # The zombie goes on with its loop: its next write and commit are refused.
                first.producer.send(run.output, b"ZOMBIE", partition=0)
                first.producer.commit_transaction(30)
            first.producer.close()
        elif name == "abortable":
            assert cluster is not None
            # The next transaction cannot add its partitions: nothing of it reaches the log.
            cluster.push_request_errors(ApiKey.ADD_PARTITIONS_TO_TXN, E.TRANSACTION_ABORTABLE)
            second, first_open = first, False
        else:
            raise AssertionError(name)
        try:
            finish(second)
            if name == "abortable":
                assert second.aborted >= 1, "the injected error did not abort a transaction"
        finally:
            second.close()
    finally:
        if first_open:
            first.close()
    got = run.output_committed()
    assert by_partition(got) == run.expected, "output is not each input exactly once, in order"


@pytest.mark.parametrize(
    "name",
    [
        "restart",
        pytest.param("abort", marks=pytest.mark.tansu_deviation(ABORTED_DELIVERED)),
        pytest.param(
            "zombie",
            marks=pytest.mark.tansu_deviation(ABORTED_DELIVERED),
        ),
    ],
)
def test_exactly_once_on_the_broker(bootstrap_servers: str, new_topic: Callable[..., str], name: str) -> None:
    scenario(Run(bootstrap_servers, lambda: new_topic(PARTITIONS)), name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("restart", marks=pytest.mark.xfail(strict=True, reason=MOCK_TXN_OFFSETS_DROPPED)),
        pytest.param(
            "abort",
            marks=pytest.mark.xfail(
                strict=True, reason=f"{MOCK_TXN_OFFSETS_DROPPED}; {MOCK_ABORTED_DELIVERED}"
            ),
        ),
        pytest.param(
            "zombie",
            marks=pytest.mark.xfail(
                strict=True, reason=f"{MOCK_TXN_OFFSETS_DROPPED}; {MOCK_ABORTED_DELIVERED}; {MOCK_NO_FENCING}"
            ),
        ),
        "abortable",
    ],
)
def test_exactly_once_on_the_mock_cluster(mock_cluster: MockCluster, name: str) -> None:
    mock_cluster.set_group_initial_rebalance_delay_ms(0)

    def make_topic() -> str:
        return mock_cluster.create_topic(f"eos-{uuid.uuid4().hex[:10]}", PARTITIONS, 3)

    # check_crcs=False: the mock's commit/abort markers carry CRC 0 (test_transactions_mock.py).
    scenario(Run(mock_cluster.bootstrap, make_topic, check_crcs=False), name, mock_cluster)


def test_the_example_runs_as_a_program(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    import subprocess

    run = Run(bootstrap_servers, lambda: new_topic(PARTITIONS))
    cmd = [sys.executable, str(ROOT / "examples" / "exactly_once.py"), "--bootstrap", bootstrap_servers]
    cmd += ["--input", run.input, "--output", run.output, "--group", run.group]
    cmd += ["--transactional-id", run.tid, "--idle", "8"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"processed {N} records" in proc.stdout, proc.stdout
    assert by_partition(run.output_committed()) == run.expected
