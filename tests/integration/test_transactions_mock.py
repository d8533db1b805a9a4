"""Transactions of our producer on librdkafka's 3-broker mock cluster: the unhappy paths.

The transaction coordinator is pinned to one broker and then moved; injected errors per API
(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Produce) check
which the producer retries (coordinator moved or loading, CONCURRENT_TRANSACTIONS), which make
the transaction abortable (it is aborted and the next one commits) and which are fatal (fenced:
every later call raises it); a slow coordinator checks that a call that runs out of time raises
KafkaTimeoutError and that calling it again finishes the operation.

Reading back on the mock needs ``check_crcs=False``: its control batches (the commit and abort
markers) carry CRC 0 (rdkafka_mock.c, write_control_batch: "mock doesn't validate CRC"). Where the
mock differs from Apache Kafka the test asserts Kafka's behaviour, is marked xfail(strict=True)
on the mock with the reason, and runs for real on the session's Apache Kafka (mock_or_kafka).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fakes.real_broker import RealKafka, mock_or_kafka, real_or_mock
from test_transactions import by_partition, expected_values, read_topic, send_tagged, txn_id, txn_producer

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaProducerFencedError, KafkaTimeoutError, KafkaTransactionError
from kafka_core.producer import KafkaProducer
from kafka_core.protocol import ApiKey
from kafka_core.protocol.error_codes import ErrorCode as E

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
COORDINATOR = 2  # the transaction coordinator's broker id, unless a test moves it
MOCK_ABORTED_DELIVERED = (
    "librdkafka mock: read_committed gets aborted records: its Fetch answers carry no aborted "
    "transactions (#Aborted always 0) and a last stable offset equal to the end offset "
    "(rdkafka_mock_handlers.c, handle_Fetch); confluent-kafka's own read_committed consumer "
    "sees them as well"
)
MOCK_TXN_OFFSETS_DROPPED = (
    "librdkafka mock: TxnOffsetCommit is acknowledged but the offsets are not stored "
    "(rdkafka_mock_handlers.c, handle_TxnOffsetCommit reads and discards them); with "
    "confluent-kafka's producer the group's committed offset stays unset (-1001) as well"
)

MOCK_NO_FENCING = (
    "librdkafka mock: InitProducerId without a current producer id hands out a new random "
    "producer id at epoch 0 for a transactional id it already knows (rdkafka_mock_handlers.c, "
    "rd_kafka_mock_pid_new) instead of bumping the epoch, so the older producer is never fenced "
    "and its commit succeeds"
)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> MockCluster | RealKafka:
    """The mock; for the tests marked mock_or_kafka, also the session's Apache Kafka."""

    def mock() -> MockCluster:
        cluster: MockCluster = request.getfixturevalue("mock_cluster")
        cluster.set_group_initial_rebalance_delay_ms(0)
        return cluster

    return real_or_mock(request, mock)  # type: ignore[no-any-return]


@pytest.fixture
def topic(cluster: MockCluster | RealKafka) -> str:
    return cluster.create_topic(f"m-{uuid.uuid4().hex[:10]}", PARTITIONS, 3)


@pytest.fixture
def tid(cluster: MockCluster | RealKafka) -> str:
    """A transactional id whose coordinator is broker COORDINATOR (on the mock)."""
    name = txn_id("mock")
    if isinstance(cluster, MockCluster):
        cluster.coordinator_set("transaction", name, COORDINATOR)
    return name


def read_back(bootstrap: str, topic: str, *, committed: bool, expected: int) -> list[Any]:
    """The topic's records from the start (see the module docstring for check_crcs)."""
    return read_topic(bootstrap, topic, PARTITIONS, committed=committed, expected=expected, check_crcs=False)


def one_transaction(p: KafkaProducer, topic: str, tag: str, n: int = 9, *, group: str | None = None) -> None:
    p.begin_transaction()
    send_tagged(p, topic, tag, n, PARTITIONS)
    if group is not None:
        p.send_offsets_to_transaction({TopicPartition(topic, 0): n}, group, timeout=30)
    p.commit_transaction(30)


def count(cluster: MockCluster, api: int) -> int:
    return sum(1 for r in cluster.get_requests() if r.api_key == api)


# -- retried: the coordinator moves, loads, or is busy -----------------------------------------

RETRIED = [
    pytest.param(
        ApiKey.INIT_PRODUCER_ID,
        (
            E.NOT_COORDINATOR,
            E.COORDINATOR_NOT_AVAILABLE,
            E.COORDINATOR_LOAD_IN_PROGRESS,
            E.CONCURRENT_TRANSACTIONS,
        ),
        id="InitProducerId",
    ),
    pytest.param(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        (
            E.NOT_COORDINATOR,
            E.CONCURRENT_TRANSACTIONS,
            E.COORDINATOR_NOT_AVAILABLE,
            E.CONCURRENT_TRANSACTIONS,
        ),
        id="AddPartitionsToTxn",
    ),
    pytest.param(
        ApiKey.ADD_OFFSETS_TO_TXN,
        (E.COORDINATOR_NOT_AVAILABLE, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR),
        id="AddOffsetsToTxn",
    ),
    pytest.param(
        ApiKey.TXN_OFFSET_COMMIT,
        (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE),
        id="TxnOffsetCommit",
    ),
    pytest.param(
        ApiKey.END_TXN,
        (
            E.NOT_COORDINATOR,
            E.CONCURRENT_TRANSACTIONS,
            E.COORDINATOR_NOT_AVAILABLE,
            E.COORDINATOR_LOAD_IN_PROGRESS,
        ),
        id="EndTxn",
    ),
]


@pytest.mark.parametrize(("api", "codes"), RETRIED)
def test_coordinator_errors_are_retried_and_the_transaction_commits(
    cluster: MockCluster, topic: str, tid: str, api: int, codes: tuple[int, ...]
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.start_request_tracking()
    cluster.push_request_errors(api, *codes)
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        one_transaction(p, topic, "t", group=group)
        assert str(p.transaction_state) == "ready"
    assert count(cluster, api) >= len(codes) + 1, "each injected error was answered and retried"
    got = read_back(cluster.bootstrap, topic, committed=True, expected=9)
    assert by_partition(got) == expected_values([("t", 9)], PARTITIONS)


def test_the_coordinator_moves_between_transactions(cluster: MockCluster, topic: str, tid: str) -> None:
    cluster.start_request_tracking()
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        one_transaction(p, topic, "before")
        cluster.coordinator_set("transaction", tid, 3)  # broker 2 now answers NOT_COORDINATOR
        cluster.clear_requests()
        one_transaction(p, topic, "after")
        end_txn = [r.broker_id for r in cluster.get_requests() if r.api_key == ApiKey.END_TXN]
        assert end_txn and end_txn[-1] == 3, f"EndTxn went to brokers {end_txn}"
        cluster.coordinator_set("transaction", tid, 1)
        one_transaction(p, topic, "again")
    got = read_back(cluster.bootstrap, topic, committed=True, expected=27)
    assert by_partition(got) == expected_values([("before", 9), ("after", 9), ("again", 9)], PARTITIONS)


def test_the_coordinator_down_for_a_while(cluster: MockCluster, topic: str, tid: str) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        send_tagged(p, topic, "t", 9, PARTITIONS)
        p.flush(30)
        cluster.broker_down(COORDINATOR)
        cluster.coordinator_set("transaction", tid, 3)  # as Kafka elects a new coordinator
        p.commit_transaction(30)
        cluster.broker_up(COORDINATOR)
    got = read_back(cluster.bootstrap, topic, committed=True, expected=9)
    assert by_partition(got) == expected_values([("t", 9)], PARTITIONS)


# -- abortable: abort, then the next transaction commits --------------------------------------

ABORTABLE = [
    pytest.param(ApiKey.PRODUCE, E.TOPIC_AUTHORIZATION_FAILED, id="Produce-TOPIC_AUTHORIZATION_FAILED"),
    pytest.param(ApiKey.PRODUCE, E.TRANSACTION_ABORTABLE, id="Produce-TRANSACTION_ABORTABLE"),
    pytest.param(
        ApiKey.ADD_PARTITIONS_TO_TXN, E.TRANSACTION_ABORTABLE, id="AddPartitionsToTxn-TRANSACTION_ABORTABLE"
    ),
    pytest.param(
        ApiKey.ADD_OFFSETS_TO_TXN,
        E.GROUP_AUTHORIZATION_FAILED,
        id="AddOffsetsToTxn-GROUP_AUTHORIZATION_FAILED",
    ),
    pytest.param(
        ApiKey.TXN_OFFSET_COMMIT,
        E.GROUP_AUTHORIZATION_FAILED,
        id="TxnOffsetCommit-GROUP_AUTHORIZATION_FAILED",
    ),
]


@pytest.mark.parametrize(("api", "code"), ABORTABLE)
def test_an_abortable_error_is_aborted_and_the_next_transaction_commits(
    cluster: MockCluster, topic: str, tid: str, api: int, code: E
) -> None:
    tp = TopicPartition(topic, 0)
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        one_transaction(p, topic, "first")  # producer id, metadata and coordinator in place
        p.begin_transaction()
        cluster.push_request_errors(api, code)
        send_tagged(p, topic, "doomed", 3, PARTITIONS)
        p.flush(30)
        with pytest.raises(KafkaTransactionError) as info:
            # The offsets call raises the error itself when it is the one that failed.
            p.send_offsets_to_transaction({tp: 3}, f"g-{uuid.uuid4().hex[:8]}", timeout=30)
            p.commit_transaction(30)
        err = info.value
        assert err.abortable and not err.fatal, repr(err)
        assert err.code == code and code.name in str(err), str(err)
        assert str(p.transaction_state) == "abortable_error"
        # commit and send keep naming the first cause until the transaction is aborted.
        for call in (lambda: p.commit_transaction(5), lambda: p.send(topic, b"x", partition=0)):
            with pytest.raises(KafkaTransactionError) as again:
                call()
            assert again.value.abortable and again.value.code == code
        p.abort_transaction(30)
        assert str(p.transaction_state) == "ready"
        one_transaction(p, topic, "next")
    # read_uncommitted: the mock delivers aborted records anyway; the committed ones must be there.
    got = by_partition(read_back(cluster.bootstrap, topic, committed=False, expected=18))
    want = expected_values([("first", 9), ("next", 9)], PARTITIONS)
    for part, values in want.items():
        assert [v for v in got.get(part, []) if not v.startswith(b"doomed")] == values


def test_a_record_that_times_out_makes_the_transaction_abortable(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    cluster.set_leader(topic, 0, 3)  # the coordinator (broker 2) stays up; partition 0's leader goes
    with txn_producer(cluster.bootstrap, tid, delivery_timeout_ms=2_000, request_timeout_ms=1_000) as p:
        p.init_transactions(30)
        one_transaction(p, topic, "first")
        p.begin_transaction()
        cluster.broker_down(3)
        lost = p.send(topic, b"lost", partition=0)
        with pytest.raises(KafkaTransactionError) as info:
            p.commit_transaction(30)
        err = info.value
        assert err.abortable and not err.fatal, repr(err)
        assert lost.exception(0) is not None
        cluster.broker_up(3)
        p.abort_transaction(30)
        one_transaction(p, topic, "next")
    got = by_partition(read_back(cluster.bootstrap, topic, committed=False, expected=18))
    want = expected_values([("first", 9), ("next", 9)], PARTITIONS)
    for part, values in want.items():
        assert [v for v in got.get(part, []) if v != b"lost"] == values


# -- fatal: fenced ------------------------------------------------------------------------------

FENCED = [
    pytest.param(ApiKey.END_TXN, E.PRODUCER_FENCED, id="EndTxn-PRODUCER_FENCED"),
    pytest.param(ApiKey.ADD_PARTITIONS_TO_TXN, E.PRODUCER_FENCED, id="AddPartitionsToTxn-PRODUCER_FENCED"),
    pytest.param(ApiKey.END_TXN, E.INVALID_PRODUCER_EPOCH, id="EndTxn-INVALID_PRODUCER_EPOCH"),
]


@pytest.mark.parametrize(("api", "code"), FENCED)
def test_fenced_is_fatal_and_every_later_call_raises_it(
    cluster: MockCluster, topic: str, tid: str, api: int, code: E
) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        one_transaction(p, topic, "first")
        cluster.push_request_errors(api, code)
        p.begin_transaction()
        send_tagged(p, topic, "t", 3, PARTITIONS)
        with pytest.raises(KafkaProducerFencedError) as info:
            p.commit_transaction(30)
        fenced = info.value
        assert fenced.fatal and not fenced.abortable and fenced.code == code, repr(fenced)
        assert code.name in str(fenced)
        assert str(p.transaction_state) == "fatal_error"
        for call in (
            p.begin_transaction,
            lambda: p.send(topic, b"late", partition=0),
            lambda: p.commit_transaction(5),
            lambda: p.abort_transaction(5),
            lambda: p.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, "g", timeout=5),
            lambda: p.init_transactions(5),
        ):
            with pytest.raises(KafkaProducerFencedError) as again:
                call()
            assert again.value.code == code


def test_transactional_id_authorization_failed_is_fatal_but_not_fenced(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    cluster.push_request_errors(ApiKey.INIT_PRODUCER_ID, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with txn_producer(cluster.bootstrap, tid) as p:
        with pytest.raises(KafkaTransactionError) as info:
            p.init_transactions(30)
        err = info.value
        assert not isinstance(err, KafkaProducerFencedError)
        assert err.fatal and err.code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(err)
        with pytest.raises(KafkaTransactionError):
            p.begin_transaction()


@mock_or_kafka(MOCK_NO_FENCING)
def test_a_second_instance_fences_the_first(cluster: MockCluster | RealKafka, topic: str, tid: str) -> None:
    zombie = txn_producer(cluster.bootstrap, tid)
    try:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        send_tagged(zombie, topic, "zombie", 3, PARTITIONS)
        zombie.flush(30)
        with txn_producer(cluster.bootstrap, tid) as successor:
            successor.init_transactions(30)
            with pytest.raises(KafkaProducerFencedError):
                zombie.commit_transaction(30)
            one_transaction(successor, topic, "successor")
    finally:
        zombie.close(5)
    got = by_partition(read_back(cluster.bootstrap, topic, committed=False, expected=12))
    want = expected_values([("successor", 9)], PARTITIONS)
    for part, values in want.items():
        assert [v for v in got.get(part, []) if not v.startswith(b"zombie")] == values


# -- timeouts keep the producer usable ----------------------------------------------------------


def test_commit_that_runs_out_of_time_finishes_when_called_again(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        send_tagged(p, topic, "slow", 9, PARTITIONS)
        p.flush(30)
        cluster.set_rtt(COORDINATOR, 3_000)
        with pytest.raises(KafkaTimeoutError):
            p.commit_transaction(0.5)
        # Another call meanwhile is refused, naming the operation still under way.
        with pytest.raises(KafkaTransactionError) as info:
            p.abort_transaction(0.5)
        assert_names_pending(info.value, "commit")
        cluster.set_rtt(COORDINATOR, 0)
        p.commit_transaction(30)
        assert str(p.transaction_state) == "ready"
        one_transaction(p, topic, "after")
    got = read_back(cluster.bootstrap, topic, committed=True, expected=18)
    assert by_partition(got) == expected_values([("slow", 9), ("after", 9)], PARTITIONS)


def test_abort_that_runs_out_of_time_finishes_when_called_again(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        send_tagged(p, topic, "aborted", 3, PARTITIONS)
        p.flush(30)
        cluster.set_rtt(COORDINATOR, 3_000)
        with pytest.raises(KafkaTimeoutError):
            p.abort_transaction(0.5)
        with pytest.raises(KafkaTransactionError) as info:
            p.commit_transaction(0.5)
        assert_names_pending(info.value, "abort")
        cluster.set_rtt(COORDINATOR, 0)
        p.abort_transaction(30)
        one_transaction(p, topic, "after")
    got = by_partition(read_back(cluster.bootstrap, topic, committed=False, expected=12))
    want = expected_values([("after", 9)], PARTITIONS)
    for part, values in want.items():
        assert [v for v in got.get(part, []) if not v.startswith(b"aborted")] == values


def test_init_that_runs_out_of_time_finishes_when_called_again(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        cluster.set_rtt(COORDINATOR, 3_000)
        with pytest.raises(KafkaTimeoutError):
            p.init_transactions(0.5)
        with pytest.raises(KafkaTransactionError):
            p.begin_transaction()  # not initialized yet
        cluster.set_rtt(COORDINATOR, 0)
        p.init_transactions(30)
        one_transaction(p, topic, "t")
    got = read_back(cluster.bootstrap, topic, committed=True, expected=9)
    assert by_partition(got) == expected_values([("t", 9)], PARTITIONS)


def test_send_offsets_that_runs_out_of_time_finishes_when_called_again(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        send_tagged(p, topic, "t", 3, PARTITIONS)
        cluster.set_rtt(COORDINATOR, 3_000)
        with pytest.raises(KafkaTimeoutError):
            p.send_offsets_to_transaction({tp: 1}, group, timeout=0.5)
        cluster.set_rtt(COORDINATOR, 0)
        p.send_offsets_to_transaction({tp: 1}, group, timeout=30)
        p.commit_transaction(30)
    got = read_back(cluster.bootstrap, topic, committed=True, expected=3)
    assert by_partition(got) == expected_values([("t", 3)], PARTITIONS)


def test_asyncio_commit_that_runs_out_of_time_finishes_when_awaited_again(
    cluster: MockCluster, topic: str, tid: str
) -> None:
    from kafka_core.aio import KafkaProducer as AioProducer

    async def run() -> None:
        async with AioProducer(cluster.bootstrap, transactional_id=tid, linger_ms=2) as p:
            await p.init_transactions(30)
            p.begin_transaction()
            for part, value in [(i % PARTITIONS, b"slow-%d" % i) for i in range(9)]:
                await p.send(topic, value, partition=part)
            await p.flush(30)
            cluster.set_rtt(COORDINATOR, 3_000)
            with pytest.raises(KafkaTimeoutError):
                await p.commit_transaction(0.5)
            with pytest.raises(KafkaTransactionError) as info:
                await p.abort_transaction(0.5)
            assert_names_pending(info.value, "commit")
            cluster.set_rtt(COORDINATOR, 0)
            await p.commit_transaction(30)
            assert str(p.transaction_state) == "ready"

    asyncio.run(run())
    got = read_back(cluster.bootstrap, topic, committed=True, expected=9)
    assert by_partition(got) == expected_values([("slow", 9)], PARTITIONS)


def assert_names_pending(exc: KafkaTransactionError, operation: str) -> None:
    assert not exc.abortable and not exc.fatal, repr(exc)
    assert operation in str(exc).lower(), str(exc)


# -- where the mock differs from Kafka: Kafka's behaviour, asserted on both ----------------------


@mock_or_kafka(MOCK_TXN_OFFSETS_DROPPED)
def test_offsets_sent_to_a_transaction_are_committed(
    cluster: MockCluster | RealKafka, topic: str, tid: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 42}, group, timeout=30)
        p.commit_transaction(30)
    with KafkaConsumer(bootstrap_servers=cluster.bootstrap, partitions={topic: [0]}, group_id=group) as c:
        assert c.committed([tp]) == {tp: 42}


@mock_or_kafka(MOCK_ABORTED_DELIVERED)
def test_read_committed_hides_aborted_records(cluster: MockCluster | RealKafka, topic: str, tid: str) -> None:
    with txn_producer(cluster.bootstrap, tid) as p:
        p.init_transactions(30)
        for tag, commit in (("A", True), ("B", False), ("C", True)):
            p.begin_transaction()
            send_tagged(p, topic, tag, 9, PARTITIONS)
            p.flush(30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
    got = read_back(cluster.bootstrap, topic, committed=True, expected=18)
    assert by_partition(got) == expected_values([("A", 9), ("C", 9)], PARTITIONS)
