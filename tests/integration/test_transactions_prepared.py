"""Prepared transactions (two-phase commit across processes) on the session's broker (Tansu or
Apache Kafka) and librdkafka's mock; where the mock deviates, the ..._on_the_broker test is the
one that passes on Kafka.

A producer in a subprocess (or a producer object, closed) prepares a transaction; another client
completes it with ``complete_transaction``. What the brokers wrote is read back twice: the
records (read_uncommitted) and the batch headers, where the transaction's end is a control batch
of the prepared producer id (COMMIT or ABORT marker, ``a Fetch of the batch headers), so
the outcome is checked even where read_committed deviates (Tansu and the mock deliver aborted
records to it; those marks live in test_transactions*.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_transactions import TANSU_FENCED_END_TXN, read_topic, txn_id, txn_producer

from kafka_core.client.cluster import KafkaClient as AsyncKafkaClient
from kafka_core.devtools.chaos.evidence import whole_log
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import (
    KafkaConfigError,
    KafkaProducerFencedError,
    KafkaTimeoutError,
    KafkaTransactionError,
)
from kafka_core.producer import PreparedTransaction, complete_transaction, fence_transactional_id
from kafka_core.producer.transactions.prepared import complete_transaction as complete_async
from kafka_core.producer.transactions.prepared import fence_transactional_id as fence_async
from kafka_core.protocol import ApiKey
from kafka_core.protocol.error_codes import ErrorCode as E
from kafka_core.sync_client import KafkaClient

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3
COMMIT, ABORT = 1, 0  # control_type of the markers
REPO = Path(__file__).resolve().parents[2]

MOCK_NO_FENCING = (
    "librdkafka mock: InitProducerId without a current producer id hands out a new random "
    "producer id at epoch 0 for a transactional id it already knows (rdkafka_mock_handlers.c, "
    "rd_kafka_mock_pid_new) instead of bumping the epoch and aborting the open transaction, so "
    "the prepared transaction is neither fenced nor aborted and its commit succeeds"
)

# The other process: prepares a transaction of ``n`` records and prints it as JSON.
PREPARE = """
import json, sys
from kafka_core.producer import KafkaProducer
bootstrap, topic, tid, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = KafkaProducer(bootstrap, transactional_id=tid, linger_ms=2, retry_backoff_ms=50,
                  reconnect_backoff_max_ms=200)
p.init_transactions(60)
p.begin_transaction()
for i in range(n):
    p.send(topic, f"{tid}-{i}".encode(), partition=i % 3)
prepared = p.prepare_transaction(60)
assert p.transaction_state == "prepared", p.transaction_state
p.close(30)
print(json.dumps(prepared._asdict()))
"""


class Broker:
    """One of the two brokers: its bootstrap address and a fresh topic."""

    def __init__(self, name: str, bootstrap: str, make_topic: Callable[[], str]) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.make_topic = make_topic


@pytest.fixture(params=["broker", "mock"])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    if request.param == "broker":
        new_topic = request.getfixturevalue("new_topic")
        yield Broker("broker", request.getfixturevalue("bootstrap_servers"), lambda: new_topic(PARTITIONS))
        return
    yield _mock(request.getfixturevalue("mock_cluster"))


def prepare_elsewhere(bootstrap: str, topic: str, tid: str, n: int) -> PreparedTransaction:
    """A transaction prepared by a producer in another process, which then exits."""
    done = subprocess.run(
        [sys.executable, "-c", PREPARE, bootstrap, topic, tid, str(n)],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return PreparedTransaction(**json.loads(done.stdout.strip().splitlines()[-1]))


def prepare_here(bootstrap: str, topic: str, tid: str, n: int) -> PreparedTransaction:
    """A transaction prepared by a producer object of this process, closed afterwards."""
    with txn_producer(bootstrap, tid) as p:
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(n):
            p.send(topic, f"{tid}-{i}".encode(), partition=i % PARTITIONS)
        prepared = p.prepare_transaction(60)
    return prepared


def batches(bootstrap: str, topic: str) -> list[tuple[int, Any]]:
    """(partition, batch header) of every batch in the topic, control batches included."""
    with KafkaClient(bootstrap) as client:
        return [(p, b) for p in range(PARTITIONS) for b, _ in whole_log(client, topic, p)]


def markers(bootstrap: str, topic: str, producer_id: int) -> dict[int, list[int]]:
    """Partition -> control types (1 COMMIT, 0 ABORT) of ``producer_id``'s markers."""
    out: dict[int, list[int]] = {}
    for partition, b in batches(bootstrap, topic):
        if b.is_control and b.producer_id == producer_id:
            out.setdefault(partition, []).append(b.control_type)
    return out


def data_producers(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    """(producer id, epoch) of the data batches in the topic."""
    return {(b.producer_id, b.producer_epoch) for _, b in batches(bootstrap, topic) if not b.is_control}


def values(bootstrap: str, topic: str, *, committed: bool, expected: int) -> list[bytes]:
    got = read_topic(bootstrap, topic, PARTITIONS, committed=committed, expected=expected, check_crcs=False)
    return sorted(bytes(m.value) for m in got)


def test_a_transaction_prepared_in_another_process_is_committed_from_here(broker: Broker) -> None:
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_elsewhere(broker.bootstrap, topic, tid, 6)
    assert prepared.transactional_id == tid and prepared.producer_id >= 0
    assert data_producers(broker.bootstrap, topic) == {(prepared.producer_id, prepared.producer_epoch)}
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {}  # still open
    complete_transaction(prepared, commit=True, bootstrap_servers=broker.bootstrap, timeout=60)
    complete_transaction(prepared, commit=True, bootstrap_servers=broker.bootstrap, timeout=60)  # a retry
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {p: [COMMIT] for p in range(PARTITIONS)}
    want = sorted(f"{tid}-{i}".encode() for i in range(6))
    assert values(broker.bootstrap, topic, committed=False, expected=6) == want
    assert values(broker.bootstrap, topic, committed=True, expected=6) == want


def test_a_prepared_transaction_is_aborted_from_another_client_it_reuses(broker: Broker) -> None:
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_elsewhere(broker.bootstrap, topic, tid, 4)
    with KafkaClient(broker.bootstrap) as client:
        complete_transaction(prepared, commit=False, client=client, timeout=60)
        complete_transaction(prepared, commit=False, client=client, timeout=60)  # a retry
        assert client.metadata([topic]).topics  # the caller's client is left open
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {p: [ABORT] for p in range(PARTITIONS)}
    # The id goes on: the next producer with it commits (its records after the ABORT markers).
    with txn_producer(broker.bootstrap, tid) as p:
        p.init_transactions(60)
        p.begin_transaction()
        p.send(topic, b"next", partition=0)
        p.commit_transaction(60)
    want = sorted([b"next", *(f"{tid}-{i}".encode() for i in range(4))])
    assert values(broker.bootstrap, topic, committed=False, expected=5) == want


def test_the_asyncio_complete_commits_a_transaction_prepared_by_a_closed_producer(broker: Broker) -> None:
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_here(broker.bootstrap, topic, tid, 3)

    async def main() -> None:
        client = AsyncKafkaClient(broker.bootstrap)
        try:
            await complete_async(prepared, commit=True, client=client, timeout=60)
        finally:
            await client.close()

    asyncio.run(main())
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {p: [COMMIT] for p in range(PARTITIONS)}


def _taken_over(broker: Broker) -> PreparedTransaction:
    """A prepared transaction whose transactional id a newer producer then initialised."""
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_here(broker.bootstrap, topic, tid, 3)
    with txn_producer(broker.bootstrap, tid) as newer:
        newer.init_transactions(60)  # takes the id over: the prepared transaction is aborted
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {p: [ABORT] for p in range(PARTITIONS)}
    return prepared


def _fenced(broker: Broker) -> None:
    prepared = _taken_over(broker)
    with pytest.raises(KafkaProducerFencedError, match="prepared records were aborted") as info:
        complete_transaction(prepared, commit=True, bootstrap_servers=broker.bootstrap, timeout=10)
    assert info.value.code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH)


def _mock(cluster: MockCluster) -> Broker:
    return Broker(
        "mock", cluster.bootstrap, lambda: cluster.create_topic(f"m-{uuid.uuid4().hex[:10]}", PARTITIONS, 3)
    )


def test_a_newer_producer_aborts_a_prepared_transaction_on_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    _taken_over(Broker("broker", bootstrap_servers, lambda: new_topic(PARTITIONS)))


@pytest.mark.tansu_deviation(TANSU_FENCED_END_TXN)
def test_a_newer_producer_fences_a_prepared_transaction_on_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    _fenced(Broker("broker", bootstrap_servers, lambda: new_topic(PARTITIONS)))


@pytest.mark.xfail(strict=True, reason=MOCK_NO_FENCING)
def test_a_newer_producer_fences_a_prepared_transaction_on_the_mock(mock_cluster: MockCluster) -> None:
    _fenced(_mock(mock_cluster))


def _fence_what_a_dead_producer_left(broker: Broker) -> None:
    """A producer in another process wrote and prepared, then exited without a word (as a killed
    Spark task does): fencing its transactional id from here aborts the open transaction at once,
    and the id goes on."""
    topic, tid = broker.make_topic(), txn_id("fence")
    left_open = prepare_elsewhere(broker.bootstrap, topic, tid, 6)
    assert markers(broker.bootstrap, topic, left_open.producer_id) == {}  # open
    producer_id, epoch = fence_transactional_id(tid, bootstrap_servers=broker.bootstrap, timeout=60)
    assert (producer_id, epoch) > (left_open.producer_id, left_open.producer_epoch)
    assert markers(broker.bootstrap, topic, left_open.producer_id) == {p: [ABORT] for p in range(PARTITIONS)}
    with txn_producer(broker.bootstrap, tid) as p:  # the id's next producer commits
        p.init_transactions(60)
        p.begin_transaction()
        p.send(topic, b"next", partition=0)
        p.commit_transaction(60)
    assert markers(broker.bootstrap, topic, left_open.producer_id)[0][-1] == COMMIT


def test_fence_transactional_id_aborts_what_a_dead_producer_left_open_on_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    _fence_what_a_dead_producer_left(Broker("broker", bootstrap_servers, lambda: new_topic(PARTITIONS)))


@pytest.mark.xfail(strict=True, reason=MOCK_NO_FENCING)
def test_fence_transactional_id_aborts_what_a_dead_producer_left_open_on_the_mock(
    mock_cluster: MockCluster,
) -> None:
    _fence_what_a_dead_producer_left(_mock(mock_cluster))


def test_fencing_an_id_with_nothing_open_and_the_asyncio_face(broker: Broker) -> None:
    """An id no producer used yet, then the same id again over a caller's asyncio client: each
    answer is the id's producer id and a usable epoch, nothing to abort."""
    tid = txn_id("fence")
    first = fence_transactional_id(tid, bootstrap_servers=broker.bootstrap, timeout=60)

    async def again() -> tuple[int, int]:
        client = AsyncKafkaClient(broker.bootstrap)
        try:
            return await fence_async(tid, client=client, timeout=60)
        finally:
            await client.close()

    second = asyncio.run(again())
    assert first[0] >= 0 and first[1] >= 0 and second[0] >= 0 and second[1] >= 0
    with pytest.raises(KafkaConfigError, match="transactional_id must be a non-empty str"):
        fence_transactional_id("", bootstrap_servers=broker.bootstrap)


def test_complete_retries_a_busy_or_moved_coordinator_and_gives_up_at_its_timeout(
    mock_cluster: MockCluster,
) -> None:
    topic = mock_cluster.create_topic(f"m-{uuid.uuid4().hex[:10]}", PARTITIONS, 3)
    tid = txn_id("prep")
    mock_cluster.coordinator_set("transaction", tid, 2)
    prepared = prepare_here(mock_cluster.bootstrap, topic, tid, 3)
    mock_cluster.push_request_errors(ApiKey.END_TXN, *[E.COORDINATOR_LOAD_IN_PROGRESS] * 500)
    with pytest.raises(KafkaTimeoutError, match="COORDINATOR_LOAD_IN_PROGRESS"):
        complete_transaction(prepared, commit=True, bootstrap_servers=mock_cluster.bootstrap, timeout=1)
    mock_cluster.clear_request_errors(ApiKey.END_TXN)
    assert markers(mock_cluster.bootstrap, topic, prepared.producer_id) == {}
    mock_cluster.coordinator_set("transaction", tid, 3)  # moved: the cached coordinator says NOT_COORDINATOR
    mock_cluster.push_request_errors(ApiKey.END_TXN, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR)
    mock_cluster.start_request_tracking()
    with KafkaClient(mock_cluster.bootstrap) as client:
        client.find_coordinator(tid, 1)
        complete_transaction(prepared, commit=True, client=client, timeout=60)
    ends = [r for r in mock_cluster.get_requests() if r.api_key == ApiKey.END_TXN]
    assert len(ends) >= 3, ends
    assert markers(mock_cluster.bootstrap, topic, prepared.producer_id) == {
        p: [COMMIT] for p in range(PARTITIONS)
    }


MOCK_END_TXN_ANY_WAY = (
    "librdkafka mock: an EndTxn with no transaction ongoing is answered NONE whichever way it "
    "asks (rdkafka_mock_handlers.c, handle_EndTxn: 'No active transaction' goes straight to the "
    "response), where Kafka answers INVALID_TXN_STATE to the way it did not end"
)


def _the_other_way(broker: Broker) -> None:
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_here(broker.bootstrap, topic, tid, 3)
    complete_transaction(prepared, commit=True, bootstrap_servers=broker.bootstrap, timeout=60)
    with pytest.raises(KafkaTransactionError, match="INVALID_TXN_STATE") as info:
        complete_transaction(prepared, commit=False, bootstrap_servers=broker.bootstrap, timeout=10)
    assert info.value.code == E.INVALID_TXN_STATE
    assert markers(broker.bootstrap, topic, prepared.producer_id) == {p: [COMMIT] for p in range(PARTITIONS)}


@pytest.mark.tansu_deviation(
    "an EndTxn(abort) after the transaction committed is answered NONE, where Kafka answers "
    "INVALID_TXN_STATE to the way it did not end (the COMMIT markers stay)"
)
def test_completing_the_other_way_is_refused_on_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    _the_other_way(Broker("broker", bootstrap_servers, lambda: new_topic(PARTITIONS)))


@pytest.mark.xfail(strict=True, reason=MOCK_END_TXN_ANY_WAY)
def test_completing_the_other_way_is_refused_on_the_mock(mock_cluster: MockCluster) -> None:
    _the_other_way(_mock(mock_cluster))


MOCK_OPEN_VISIBLE = (
    "librdkafka mock: read_committed reads records of an open transaction: its Fetch answers give "
    "a last stable offset equal to the end offset (rdkafka_mock_handlers.c, handle_Fetch)"
)


def _invisible_until_completed(broker: Broker) -> None:
    topic, tid = broker.make_topic(), txn_id("prep")
    prepared = prepare_elsewhere(broker.bootstrap, topic, tid, 6)
    # Given the time to arrive, none does: the transaction is open (the last stable offset stays).
    hidden = read_topic(
        broker.bootstrap, topic, PARTITIONS, committed=True, expected=6, timeout=5, check_crcs=False
    )
    assert hidden == []
    complete_transaction(prepared, commit=True, bootstrap_servers=broker.bootstrap, timeout=60)
    assert len(values(broker.bootstrap, topic, committed=True, expected=6)) == 6


def test_a_prepared_transaction_is_invisible_to_read_committed_until_completed_on_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    _invisible_until_completed(Broker("broker", bootstrap_servers, lambda: new_topic(PARTITIONS)))


@pytest.mark.xfail(strict=True, reason=MOCK_OPEN_VISIBLE)
def test_a_prepared_transaction_is_invisible_to_read_committed_until_completed_on_the_mock(
    mock_cluster: MockCluster,
) -> None:
    _invisible_until_completed(_mock(mock_cluster))
