"""Transactions of our producer on the test broker (Tansu, or Apache Kafka from the environment).

What is checked, each time by reading the topic back with our consumer (read_committed and
read_uncommitted): a committed transaction is seen whole by both; an aborted one only by
read_uncommitted; a zombie (an older producer with the same transactional id) is fenced and its
open transaction aborted; offsets sent to a transaction become the group's committed offsets on
commit and not on abort; calls made in the wrong state fail at once and send nothing; the asyncio
face does the same as the blocking one.

Where Tansu differs from Apache Kafka (it delivers aborted records to read_committed consumers)
the test asserts Kafka's behaviour and is marked ``tansu_deviation``. Slow-broker timeouts need a
broker that can be slowed: they are in test_transactions_mock.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from fakes.delivery import drain

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.errors import KafkaProducerFencedError, KafkaTransactionError
from kafka_core.producer import KafkaProducer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

ABORTED_DELIVERED = "aborted records are still delivered to read_committed consumers"
TANSU_OFFSETS_KEPT = (
    "offsets sent to transactions with a plain group id (no member): only the first is stored, "
    "later transactions' offsets leave it unchanged (confluent-kafka's producer too: 5, 9, 7 "
    "read back 5)"
)


# -- helpers (also used by test_transactions_mock.py and test_exactly_once.py) -------------------


def txn_id(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def txn_producer(bootstrap: str, transactional_id: str | None = None, **kw: Any) -> KafkaProducer:
    kw.setdefault("linger_ms", 2)
    kw.setdefault("retry_backoff_ms", 50)
    kw.setdefault("reconnect_backoff_max_ms", 200)
    kw.setdefault("retry_backoff_max_ms", 200)
    return KafkaProducer(bootstrap, transactional_id=transactional_id or txn_id(), **kw)


def read_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    committed: bool,
    expected: int,
    timeout: float = 30.0,
    **kw: Any,
) -> list[Any]:
    """Every record of the topic from the start, by our consumer at the given isolation level.

    Polls until ``expected`` records came (or ``timeout``), then once more so that an extra
    record (a duplicate, or an aborted one) is caught rather than missed.
    """
    kw.setdefault("fetch_max_wait_ms", 100)
    kw.setdefault("reconnect_backoff_max_ms", 200)
    with KafkaConsumer(
        bootstrap_servers=bootstrap,
        partitions={topic: range(partitions)},
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted",
        **kw,
    ) as c:
        return drain(c, expected, timeout)


def by_partition(messages: Iterable[Any]) -> dict[int, list[bytes]]:
    """Values per partition, in the order the consumer handed them over."""
    out: dict[int, list[bytes]] = {}
    for m in messages:
        out.setdefault(m.partition, []).append(bytes(m.value))
    return out


def send_tagged(p: KafkaProducer, topic: str, tag: str, n: int, partitions: int) -> list[Any]:
    """n records ``<tag>-<i>`` spread round-robin over the partitions; their futures."""
    return [p.send(topic, b"%s-%d" % (tag.encode(), i), partition=i % partitions) for i in range(n)]


def expected_values(tags: Sequence[tuple[str, int]], partitions: int) -> dict[int, list[bytes]]:
    """What send_tagged wrote per partition for the given (tag, n) in order."""
    out: dict[int, list[bytes]] = {}
    for tag, n in tags:
        for i in range(n):
            out.setdefault(i % partitions, []).append(b"%s-%d" % (tag.encode(), i))
    return out


def assert_invalid_state(exc: BaseException) -> None:
    """The contract's 'wrong call for the state': neither abortable nor fatal."""
    assert isinstance(exc, KafkaTransactionError), repr(exc)
    assert not exc.abortable and not exc.fatal, repr(exc)


# -- commit and abort ---------------------------------------------------------------------------


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_committed_transaction_is_read_whole_at_both_isolation_levels(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    with txn_producer(bootstrap_servers) as p:
        assert str(p.transaction_state) == "uninitialized"
        p.init_transactions(30)
        assert str(p.transaction_state) == "ready"
        p.begin_transaction()
        assert str(p.transaction_state) == "in_transaction"
        futures = send_tagged(p, topic, "c", 30, 3)
        p.commit_transaction(30)
        assert str(p.transaction_state) == "ready"
        # commit flushes: every record of the transaction is acknowledged by then.
        metas = [f.result(0) for f in futures]
    want = expected_values([("c", 30)], 3)
    for committed in (True, False):
        got = read_topic(bootstrap_servers, topic, 3, committed=committed, expected=30)
        assert by_partition(got) == want, f"read_committed={committed}"
        # Each record at the offset its future reported.
        assert {(m.partition, m.offset) for m in got} == {(m.partition, m.offset) for m in metas}


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_several_transactions_in_a_row_are_each_read_once(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    with txn_producer(bootstrap_servers) as p:
        p.init_transactions(30)
        for t in range(5):
            p.begin_transaction()
            send_tagged(p, topic, f"t{t}", 12, 3)
            p.commit_transaction(30)
        counters = p.metrics()["producer"]["transactions"]
        assert (counters["commits"], counters["aborts"]) == (5, 0), counters
    want = expected_values([(f"t{t}", 12) for t in range(5)], 3)
    assert by_partition(read_topic(bootstrap_servers, topic, 3, committed=True, expected=60)) == want


def _committed_aborted_committed(bootstrap: str, topic: str) -> None:
    """Transaction A committed, B aborted (its records written to the log first), C committed."""
    with txn_producer(bootstrap) as p:
        p.init_transactions(30)
        for tag, commit in (("A", True), ("B", False), ("C", True)):
            p.begin_transaction()
            futures = send_tagged(p, topic, tag, 9, 3)
            p.flush(30)  # in the log before the outcome is decided
            assert all(f.exception(0) is None for f in futures)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
                assert str(p.transaction_state) == "ready"
        counters = p.metrics()["producer"]["transactions"]
        assert (counters["commits"], counters["aborts"]) == (2, 1), counters


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_read_uncommitted_sees_aborted_records_too(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    _committed_aborted_committed(bootstrap_servers, topic)
    got = read_topic(bootstrap_servers, topic, 3, committed=False, expected=27)
    assert by_partition(got) == expected_values([("A", 9), ("B", 9), ("C", 9)], 3)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(ABORTED_DELIVERED)
def test_read_committed_hides_aborted_records(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    _committed_aborted_committed(bootstrap_servers, topic)
    got = read_topic(bootstrap_servers, topic, 3, committed=True, expected=18)
    assert by_partition(got) == expected_values([("A", 9), ("C", 9)], 3)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_abort_fails_the_records_not_yet_sent_and_the_next_transaction_commits(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    # A long linger keeps the records in the producer's buffer: abort must not send them.
    with txn_producer(bootstrap_servers, linger_ms=60_000) as p:
        p.init_transactions(30)
        p.begin_transaction()
        doomed = send_tagged(p, topic, "unsent", 6, 3)
        p.abort_transaction(30)
        for f in doomed:
            exc = f.exception(30)
            assert isinstance(exc, KafkaTransactionError), repr(exc)
            assert not exc.abortable and not exc.fatal
            assert "abort" in str(exc).lower(), str(exc)
        p.begin_transaction()
        send_tagged(p, topic, "kept", 6, 3)
        p.commit_transaction(30)  # commit flushes whatever the linger still holds
    got = read_topic(bootstrap_servers, topic, 3, committed=False, expected=6)
    assert by_partition(got) == expected_values([("kept", 6)], 3)


# -- zombie fencing -----------------------------------------------------------------------------


TANSU_FENCED_END_TXN = (
    "EndTxn from a fenced producer is not answered: the broker logs ProducerFenced and closes the "
    "connection, so the call runs out of time instead of raising PRODUCER_FENCED (the same with "
    "confluent-kafka's producer)"
)


def _fence(bootstrap: str, topic: str, *, send_after: bool) -> None:
    """A zombie writes into an open transaction; a new instance with the same id takes over.

    ``send_after``: the zombie sends one more record before its commit (fenced on Produce);
    otherwise its commit is its next call (fenced on EndTxn).
    """
    tid = txn_id("zombie")
    zombie = txn_producer(bootstrap, tid)
    try:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        send_tagged(zombie, topic, "zombie", 6, 3)
        zombie.flush(30)
        with txn_producer(bootstrap, tid) as successor:
            successor.init_transactions(30)  # bumps the epoch: the zombie's transaction is aborted
            with pytest.raises(KafkaProducerFencedError) as info:
                if send_after:
                    zombie.send(topic, b"zombie-late", partition=0)
                zombie.commit_transaction(10)
            fenced = info.value
            assert fenced.fatal and not fenced.abortable, repr(fenced)
            assert str(zombie.transaction_state) == "fatal_error"
            # Fatal: every later call raises the same error, without touching the broker.
            for call in (
                zombie.begin_transaction,
                lambda: zombie.send(topic, b"late", partition=0),
                lambda: zombie.commit_transaction(5),
                lambda: zombie.abort_transaction(5),
            ):
                with pytest.raises(KafkaProducerFencedError) as again:
                    call()
                assert again.value.code == fenced.code
            successor.begin_transaction()
            send_tagged(successor, topic, "successor", 6, 3)
            successor.commit_transaction(30)
    finally:
        zombie.close(5)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_zombie_is_fenced_on_its_next_send_and_its_successor_commits(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    _fence(bootstrap_servers, topic, send_after=True)
    # read_uncommitted: the zombie's records are in the log, then the successor's.
    got = read_topic(bootstrap_servers, topic, 3, committed=False, expected=12)
    assert by_partition(got) == expected_values([("zombie", 6), ("successor", 6)], 3)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(TANSU_FENCED_END_TXN)
def test_zombie_is_fenced_on_its_commit(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    _fence(bootstrap_servers, new_topic(3), send_after=False)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(ABORTED_DELIVERED + " (the fenced zombie's transaction too)")
def test_fenced_zombie_records_are_not_visible(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    _fence(bootstrap_servers, topic, send_after=True)
    got = read_topic(bootstrap_servers, topic, 3, committed=True, expected=6)
    assert by_partition(got) == expected_values([("successor", 6)], 3)


# -- offsets in the transaction (KIP-98 / KIP-447) ----------------------------------------------


def _group_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )


def _join(c: KafkaConsumer, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(200)
    assert c.assignment(), "the consumer did not join its group"


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_offsets_sent_to_a_committed_transaction_are_the_group_offsets(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic, p) for p in range(3)]
    with _group_consumer(bootstrap_servers, topic, group) as c, txn_producer(bootstrap_servers) as p:
        _join(c)
        meta = c.group_metadata()
        assert meta.group_id == group and meta.generation_id >= 0 and meta.member_id  # -1: no member
        p.init_transactions(30)
        p.begin_transaction()
        send_tagged(p, topic, "out", 3, 3)
        p.send_offsets_to_transaction(
            {tps[0]: 7, tps[1]: OffsetAndMetadata(11), tps[2]: 13}, meta, timeout=30
        )
        p.commit_transaction(30)
        assert c.committed(tps) == {tps[0]: 7, tps[1]: 11, tps[2]: 13}


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(TANSU_OFFSETS_KEPT)
def test_offsets_of_each_transaction_replace_the_last_with_a_plain_group_id(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 1)
    with txn_producer(bootstrap_servers) as p:
        p.init_transactions(30)
        for offset in (5, 9):
            p.begin_transaction()
            p.send_offsets_to_transaction({tp: offset}, group, timeout=30)
            p.commit_transaction(30)
    with KafkaConsumer(bootstrap_servers=bootstrap_servers, partitions={topic: [1]}, group_id=group) as c:
        assert c.committed([tp]) == {tp: 9}


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_offsets_sent_to_an_aborted_transaction_are_not_committed(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    with txn_producer(bootstrap_servers) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 4}, group, timeout=30)
        p.commit_transaction(30)
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 8}, group, timeout=30)
        p.abort_transaction(30)
    with KafkaConsumer(bootstrap_servers=bootstrap_servers, partitions={topic: [0]}, group_id=group) as c:
        assert c.committed([tp]) == {tp: 4}


# -- wrong calls for the state ------------------------------------------------------------------


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_calls_in_the_wrong_state_fail_at_once_and_send_nothing(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    tp = TopicPartition(topic, 0)
    with txn_producer(bootstrap_servers) as p:
        # Before init_transactions: everything.
        for call in (
            p.begin_transaction,
            lambda: p.send(topic, b"x", partition=0),
            lambda: p.commit_transaction(5),
            lambda: p.abort_transaction(5),
            lambda: p.send_offsets_to_transaction({tp: 1}, "g", timeout=5),
        ):
            with pytest.raises(KafkaTransactionError) as info:
                call()
            assert_invalid_state(info.value)
        p.init_transactions(30)
        # Initialized, no transaction: send (synchronously), commit, send_offsets.
        for call in (
            lambda: p.send(topic, b"x", partition=0),
            lambda: p.commit_transaction(5),
            lambda: p.send_offsets_to_transaction({tp: 1}, "g", timeout=5),
        ):
            with pytest.raises(KafkaTransactionError) as info:
                call()
            assert_invalid_state(info.value)
        assert str(p.transaction_state) == "ready"
        p.begin_transaction()
        with pytest.raises(KafkaTransactionError) as info:
            p.begin_transaction()
        assert_invalid_state(info.value)
        # None of it broke the transaction in progress.
        first = p.send(topic, b"first", partition=0)
        p.commit_transaction(30)
        assert first.result(0).offset == 0, "a record from a refused call reached the log"
    got = read_topic(bootstrap_servers, topic, 1, committed=False, expected=1)
    assert [bytes(m.value) for m in got] == [b"first"]


# -- the asyncio face ---------------------------------------------------------------------------


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_asyncio_face_commits_and_aborts(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    from kafka_core.aio import KafkaProducer as AioProducer

    topic = new_topic(3)

    async def run() -> None:
        async with AioProducer(bootstrap_servers, transactional_id=txn_id("aio"), linger_ms=2) as p:
            await p.init_transactions(30)
            for tag, commit in (("a1", True), ("a2", False), ("a3", True)):
                p.begin_transaction()  # a plain method in both faces
                futures = [
                    await p.send(topic, b"%s-%d" % (tag.encode(), i), partition=i % 3) for i in range(6)
                ]
                await p.flush(30)
                assert all(f.exception() is None for f in futures)
                if commit:
                    await p.commit_transaction(30)
                else:
                    await p.abort_transaction(30)
            assert str(p.transaction_state) == "ready"

    asyncio.run(run())
    got = read_topic(bootstrap_servers, topic, 3, committed=False, expected=18)
    assert by_partition(got) == expected_values([("a1", 6), ("a2", 6), ("a3", 6)], 3)


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn and AddOffsetsToTxn not in ApiVersions)")
def test_from_config_maps_the_transaction_options(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    config = {
        "bootstrap.servers": bootstrap_servers,
        "transactional.id": txn_id("cfg"),
        "transaction.timeout.ms": 30_000,
        "linger.ms": 2,
    }
    with KafkaProducer.from_config(config) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"v", partition=0)
        p.commit_transaction(30)
    got = read_topic(bootstrap_servers, topic, 1, committed=True, expected=1)
    assert [bytes(m.value) for m in got] == [b"v"]
