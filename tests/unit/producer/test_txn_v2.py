"""Transactions v2 (KIP-890 part 2) through the in-memory broker (tests/fakes/txn_v2_broker.py):
chosen only where the cluster finalized ``transaction.version`` 2 and offers the versions; then
no AddPartitionsToTxn / AddOffsetsToTxn, every EndTxn bumps the epoch and the next transaction
runs under the id and epoch it answered (a lost answer retried, an exhausted epoch a new id), an
abort after lost sequence numbers needs no InitProducerId, and an older epoch is fenced. Anything
less keeps v1 (Produce capped at v11, partitions and groups added first)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fakes.txn_producer import call_names, run_txn, txn_producer
from fakes.txn_v2_broker import TxnV2Broker

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata
from kafka_core.errors import KafkaProducerFencedError, KafkaTransactionError
from kafka_core.producer import AsyncKafkaProducer
from kafka_core.producer.transactions.prepared import complete_transaction
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode


async def _one_transaction(
    p: AsyncKafkaProducer, value: bytes, *, commit: bool = True, partition: int = 0
) -> None:
    p.begin_transaction()
    f = await p.send("t", value, partition=partition)
    await p.flush(5)
    assert f.exception() is None
    await (p.commit_transaction() if commit else p.abort_transaction())


def test_v2_adds_partitions_and_the_group_by_producing_and_committing() -> None:
    broker = TxnV2Broker(3)
    group = ConsumerGroupMetadata("g", 3, "member-1", None)

    async def body(p: AsyncKafkaProducer) -> dict[str, Any]:
        assert p.transaction_version == 0  # not known before init_transactions
        await p.init_transactions()
        assert p.transaction_version == 2
        p.begin_transaction()
        futures = [await p.send("t", b"v%d" % i, partition=i % 2) for i in range(6)]
        await p.send_offsets_to_transaction({TopicPartition("in", 0): 42}, group)
        await p.commit_transaction()
        assert all(f.result().offset >= 0 for f in futures)
        return p.metrics()["producer"]["transactions"]

    metrics = run_txn(broker, body)
    names = call_names(broker)
    assert "AddPartitionsToTxn" not in names and "AddOffsetsToTxn" not in names
    assert broker.unadded == []
    assert broker.ended == [(True, [("t", 0), ("t", 1)])]
    assert broker.committed_offsets == {("g", "in", 0): 42}
    assert set(broker.used("PRODUCE")) == {12}
    assert broker.used("TXN_OFFSET_COMMIT") == [5] and broker.used("END_TXN") == [5]
    assert metrics["transaction_version"] == 2
    assert (metrics["producer_id"], metrics["producer_epoch"]) == (1000, 1)


def test_every_end_txn_bumps_the_epoch_and_the_next_transaction_uses_it() -> None:
    broker = TxnV2Broker()

    async def body(p: AsyncKafkaProducer) -> list[tuple[int, int]]:
        await p.init_transactions()
        seen = [p.producer_id_and_epoch]
        for i, commit in enumerate((True, False, True, True)):
            await _one_transaction(p, b"r%d" % i, commit=commit)
            seen.append(p.producer_id_and_epoch)
        return seen

    seen = run_txn(broker, body)
    assert seen == [(1000, e) for e in range(5)]
    assert broker.init_calls == [(-1, -1)]  # the bumps came from EndTxn alone
    assert [c for c in broker.ended] == [
        (True, [("t", 0)]),
        (False, [("t", 0)]),
        (True, [("t", 0)]),
        (True, [("t", 0)]),
    ]
    # Each transaction's batch was taken under its own epoch from sequence 0.
    assert broker.logs[0] == [b"r0", b"r1", b"r2", b"r3"]


def test_an_empty_transaction_sends_no_end_txn_and_keeps_the_epoch() -> None:
    broker = TxnV2Broker()

    async def body(p: AsyncKafkaProducer) -> tuple[int, int]:
        await p.init_transactions()
        p.begin_transaction()
        await p.commit_transaction()
        p.begin_transaction()
        await p.abort_transaction()
        return p.producer_id_and_epoch

    assert run_txn(broker, body) == (1000, 0)
    assert "EndTxn" not in call_names(broker)


def test_a_lost_end_txn_answer_is_retried_and_answered_the_bumped_epoch() -> None:
    broker = TxnV2Broker()
    broker.lose_end_txn = 1

    async def body(p: AsyncKafkaProducer) -> tuple[int, int]:
        await p.init_transactions()
        await _one_transaction(p, b"a")
        await _one_transaction(p, b"b")
        return p.producer_id_and_epoch

    assert run_txn(broker, body) == (1000, 2)
    assert call_names(broker).count("EndTxn") == 3  # the first one twice: its answer was lost
    assert broker.logs[0] == [b"a", b"b"]


def test_an_exhausted_epoch_gives_a_new_producer_id_the_next_transaction_uses() -> None:
    broker = TxnV2Broker(max_epoch=4)

    async def body(p: AsyncKafkaProducer) -> list[tuple[int, int]]:
        await p.init_transactions()
        seen = []
        for i in range(4):
            await _one_transaction(p, b"x%d" % i)
            seen.append(p.producer_id_and_epoch)
        return seen

    assert run_txn(broker, body) == [(1000, 1), (1000, 2), (1001, 0), (1001, 1)]
    assert broker.logs[0] == [b"x0", b"x1", b"x2", b"x3"]


def test_lost_sequence_numbers_are_renumbered_by_the_abort_without_init_producer_id() -> None:
    broker = TxnV2Broker()

    async def body(p: AsyncKafkaProducer) -> tuple[int, int]:
        await p.init_transactions()
        p.begin_transaction()
        await (await p.send("t", b"a"))
        broker.forget_producers()  # the broker lost the producer's state: UNKNOWN_PRODUCER_ID
        f = await p.send("t", b"b")
        await p.flush(5)
        assert f.exception() is not None
        with pytest.raises(KafkaTransactionError, match="UNKNOWN_PRODUCER_ID") as info:
            await p.commit_transaction()
        assert info.value.abortable
        await p.abort_transaction()
        await _one_transaction(p, b"c")
        return p.producer_id_and_epoch

    assert run_txn(broker, body) == (1000, 2)
    assert broker.init_calls == [(-1, -1)]  # v1 would bump with InitProducerId here
    assert [committed for committed, _ in broker.ended] == [False, True]
    assert broker.logs[0] == [b"a", b"c"]


def test_transaction_abortable_on_produce_lets_the_application_abort_and_go_on() -> None:
    broker = TxnV2Broker(
        faults=lambda n, where, p: (
            str(int(ErrorCode.TRANSACTION_ABORTABLE)) if n == 0 and where == "partition" else None
        )
    )

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        f = await p.send("t", b"refused")
        await p.flush(5)
        assert f.exception() is not None
        with pytest.raises(KafkaTransactionError, match="TRANSACTION_ABORTABLE") as info:
            await p.commit_transaction()
        assert info.value.abortable and not info.value.fatal
        await p.abort_transaction()
        await _one_transaction(p, b"ok")

    run_txn(broker, body)
    assert [committed for committed, _ in broker.ended] == [False, True]
    assert broker.logs[0] == [b"ok"]


def test_a_zombie_with_the_older_epoch_is_fenced() -> None:
    broker = TxnV2Broker()

    async def main() -> None:
        zombie = txn_producer(broker)
        successor = txn_producer(broker)
        try:
            await zombie.init_transactions()
            await _one_transaction(zombie, b"z1")
            await successor.init_transactions()  # takes the transactional id over
            assert successor.producer_id_and_epoch[1] > zombie.producer_id_and_epoch[1]
            zombie.begin_transaction()
            late = await zombie.send("t", b"late")
            await zombie.flush(5)
            assert late.exception() is not None
            assert zombie.transaction_state == "fatal_error"
            with pytest.raises(KafkaProducerFencedError):
                await zombie.commit_transaction()
            await _one_transaction(successor, b"s1")
        finally:
            await zombie.close(timeout=5)
            await successor.close(timeout=5)

    asyncio.run(main())
    assert broker.logs[0] == [b"z1", b"s1"]


def test_a_prepared_v2_transaction_is_completed_with_end_txn_v5() -> None:
    broker = TxnV2Broker()

    async def body(p: AsyncKafkaProducer) -> Any:
        await p.init_transactions()
        p.begin_transaction()
        await p.send("t", b"two-phase")
        return await p.prepare_transaction()

    prepared = run_txn(broker, body)
    asyncio.run(complete_transaction(prepared, commit=True, client=broker))  # type: ignore[arg-type]
    assert broker.used("END_TXN") == [5]
    assert broker.ended == [(True, [("t", 0)])]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda b: b.finalized.clear(), id="feature-not-finalized"),
        pytest.param(lambda b: b.finalized.update({"transaction.version": 1}), id="feature-level-1"),
        pytest.param(lambda b: b.versions.update({ApiKey.END_TXN: 4}), id="no-end-txn-v5"),
        pytest.param(lambda b: b.versions.update({ApiKey.PRODUCE: 11}), id="no-produce-v12"),
    ],
)
def test_v1_where_the_cluster_does_not_offer_v2(change: Callable[[TxnV2Broker], None]) -> None:
    broker = TxnV2Broker()
    change(broker)

    async def body(p: AsyncKafkaProducer) -> tuple[int, tuple[int, int]]:
        await p.init_transactions()
        for i in range(2):
            await _one_transaction(p, b"v%d" % i)
        return p.transaction_version, p.producer_id_and_epoch

    version, ident = run_txn(broker, body)
    assert version == 1
    assert ident == (1000, 0)  # v1: the epoch stays
    assert call_names(broker).count("AddPartitionsToTxn") == 2
    assert broker.unadded == []
    assert set(broker.used("PRODUCE")) == {11}  # v12 would ask the broker to add partitions
    assert set(broker.used("END_TXN")) <= {4}
