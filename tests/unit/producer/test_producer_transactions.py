"""Transactions through the in-memory broker (its own transaction coordinator): the state
machine, the order of the coordinator requests, the abortable/fatal split and timeouts that keep
the producer usable (KIP-98, KIP-447, KIP-890 part 1's TRANSACTION_ABORTABLE)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker
from fakes.txn_producer import call_names, run_txn, txn_producer

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata
from kafka_core.errors import (
    KafkaConfigError,
    KafkaProducerFencedError,
    KafkaTimeoutError,
    KafkaTransactionError,
)
from kafka_core.producer import AsyncKafkaProducer
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode

# -- configuration ------------------------------------------------------------------------------


def test_transactional_id_needs_idempotence_and_acks_all() -> None:
    with pytest.raises(KafkaConfigError, match="idempotent=False") as e1:
        AsyncKafkaProducer(client=ProduceBroker(), transactional_id="x", idempotent=False)
    assert "transactional_id" in str(e1.value)
    with pytest.raises(KafkaConfigError, match="acks") as e2:
        AsyncKafkaProducer(client=ProduceBroker(), transactional_id="x", acks=1)
    assert "transactional_id" in str(e2.value)
    with pytest.raises(KafkaConfigError, match="transaction_timeout_ms"):
        AsyncKafkaProducer(client=ProduceBroker(), transactional_id="x", transaction_timeout_ms=0)


def test_from_config_maps_the_java_names() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()

    async def main() -> None:
        p = AsyncKafkaProducer.from_config(
            {"transactional.id": "from-config", "transaction.timeout.ms": "12345"}, client=broker
        )
        try:
            await body(p)
        finally:
            await p.close()

    asyncio.run(main())
    assert "from-config" in broker.txn_ids


# -- calls in the wrong state: raised at once, nothing sent -----------------------------------------


def test_calls_in_the_wrong_state_raise_and_send_nothing() -> None:
    broker = ProduceBroker(2)

    async def body(p: AsyncKafkaProducer) -> None:
        assert p.transaction_state == "uninitialized"
        for call in (p.begin_transaction, lambda: p.commit_transaction(), lambda: p.send("t", b"v")):
            with pytest.raises(KafkaTransactionError, match="init_transactions") as info:
                result = call()
                if asyncio.iscoroutine(result):
                    await result
            assert not info.value.abortable and not info.value.fatal and info.value.code is None
        await p.init_transactions()
        assert p.transaction_state == "ready"
        with pytest.raises(KafkaTransactionError, match="begin_transaction"):
            await p.send("t", b"v")
        with pytest.raises(KafkaTransactionError, match="begin_transaction"):
            await p.commit_transaction()
        with pytest.raises(KafkaTransactionError, match="init_transactions"):
            await p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTransactionError, match="already in progress"):
            p.begin_transaction()
        assert p.transaction_state == "in_transaction"

    run_txn(broker, body)
    assert call_names(broker) == ["InitProducerId"]
    assert broker.requests == []


def test_a_producer_without_transactional_id_refuses_transactions() -> None:
    async def main() -> None:
        p = AsyncKafkaProducer(client=ProduceBroker())
        try:
            with pytest.raises(KafkaTransactionError, match="no transactional_id"):
                await p.init_transactions()
            assert "transactions" not in p.metrics()["producer"]
        finally:
            await p.close()

    asyncio.run(main())


# -- the happy path and the order of the requests ---------------------------------------------------


def test_commit_adds_partitions_before_producing_then_ends_the_transaction() -> None:
    broker = ProduceBroker(3)

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await p.init_transactions()
        p.begin_transaction()
        futures = [await p.send("t", b"v%d" % i, partition=i % 2) for i in range(10)]
        await p.commit_transaction()
        assert p.transaction_state == "ready"
        return [f.result() for f in futures]

    metas = run_txn(broker, body)
    assert broker.unadded == []  # every transactional Produce went to a partition added before
    names = call_names(broker)
    assert names[0] == "InitProducerId" and names[-1] == "EndTxn"
    first_produce = names.index("Produce")
    added = {
        tp for name, parts in broker.calls[:first_produce] if name == "AddPartitionsToTxn" for tp in parts
    }
    assert added == {("t", 0), ("t", 1)}
    assert all(arg[0] == "tx-1" for name, arg in broker.calls if name == "Produce")
    assert broker.ended == [(True, [("t", 0), ("t", 1)])]
    assert sorted(m.partition for m in metas) == [0] * 5 + [1] * 5
    assert broker.logs[0] == [b"v%d" % i for i in range(0, 10, 2)]


def test_an_empty_transaction_commits_without_a_coordinator_request() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> dict[str, Any]:
        await p.init_transactions()
        for _ in range(2):
            p.begin_transaction()
            await p.commit_transaction()
        return p.metrics()["producer"]["transactions"]

    counters = run_txn(broker, body)
    assert call_names(broker) == ["InitProducerId"]
    assert counters["commits"] == 2 and counters["aborts"] == 0 and counters["state"] == "ready"


def test_send_offsets_commits_them_with_the_consumers_group_metadata() -> None:
    broker = ProduceBroker()
    group = ConsumerGroupMetadata("g", 7, "member-1", "static-1")

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await p.send("t", b"out")
        offsets = {TopicPartition("in", 0): 42, TopicPartition("in", 1): OffsetAndMetadata(9, "m")}
        await p.send_offsets_to_transaction(offsets, group)
        assert broker.committed_offsets == {}  # not before the commit
        await p.commit_transaction()
        p.begin_transaction()
        await p.send_offsets_to_transaction({("in", 0): 50}, "plain-group")
        await p.abort_transaction()

    run_txn(broker, body)
    calls = [c for c in broker.calls if c[0] in ("AddOffsetsToTxn", "TxnOffsetCommit")]
    assert calls[0] == ("AddOffsetsToTxn", "g")
    assert calls[1] == ("TxnOffsetCommit", (("g", 7, "member-1", "static-1"), {("in", 0): 42, ("in", 1): 9}))
    assert calls[3] == ("TxnOffsetCommit", (("plain-group", -1, "", None), {("in", 0): 50}))
    assert broker.committed_offsets == {("g", "in", 0): 42, ("g", "in", 1): 9}  # the aborted one is not


def test_group_metadata_an_old_broker_cannot_carry_is_refused_not_dropped() -> None:
    broker = ProduceBroker()
    broker.versions[ApiKey.TXN_OFFSET_COMMIT] = 2  # before KIP-447

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTransactionError, match="KIP-447") as info:
            await p.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g", 3, "m", None))
        assert info.value.abortable
        await p.abort_transaction()
        p.begin_transaction()
        await p.send_offsets_to_transaction({("in", 0): 1}, "g")  # the group id alone still works
        await p.commit_transaction()

    run_txn(broker, body)
    assert broker.committed_offsets == {("g", "in", 0): 1}
    assert [c[1][0] for c in broker.calls if c[0] == "TxnOffsetCommit"] == [("g", -1, "", None)]


def test_concurrent_transactions_and_a_moved_coordinator_are_retried() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 3
    broker.txn_errors[ApiKey.END_TXN] = [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        f = await p.send("t", b"v")
        await p.commit_transaction()
        assert (await f).offset == 0

    run_txn(broker, body)
    assert call_names(broker).count("AddPartitionsToTxn") == 4
    assert call_names(broker).count("EndTxn") == 3
    assert ("tx-1", 1, True) in broker.lookups  # the coordinator was looked up again after it moved
    assert broker.ended == [(True, [("t", 0)])]


# -- abortable errors ------------------------------------------------------------------------------


def test_a_failed_record_makes_the_transaction_abortable_and_abort_goes_on() -> None:
    broker = ProduceBroker()
    broker.faults = lambda n, where, p: (
        str(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) if n == 0 and where == "partition" else None
    )

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        f = await p.send("t", b"lost")
        await p.flush(5)
        assert f.exception() is not None
        assert p.transaction_state == "abortable_error"
        for call in (p.commit_transaction, lambda: p.send("t", b"x")):
            with pytest.raises(KafkaTransactionError, match="TOPIC_AUTHORIZATION_FAILED") as info:
                await call()
            assert info.value.abortable and not info.value.fatal
        with pytest.raises(KafkaTransactionError, match="TOPIC_AUTHORIZATION_FAILED"):
            p.begin_transaction()
        await p.abort_transaction()
        assert p.transaction_state == "ready"
        p.begin_transaction()
        ok = await p.send("t", b"kept")
        await p.commit_transaction()
        assert (await ok).offset >= 0
        counters = p.metrics()["producer"]["transactions"]
        assert counters["aborts"] == 1 and counters["commits"] == 1

    run_txn(broker, body)
    assert broker.ended == [(False, [("t", 0)]), (True, [("t", 0)])]
    assert broker.logs[0] == [b"kept"]


def test_transaction_abortable_on_commit_lets_the_application_abort() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.END_TXN] = [ErrorCode.TRANSACTION_ABORTABLE]

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await p.send("t", b"v")
        with pytest.raises(KafkaTransactionError, match="TRANSACTION_ABORTABLE") as info:
            await p.commit_transaction()
        assert info.value.abortable and info.value.code == ErrorCode.TRANSACTION_ABORTABLE
        assert p.transaction_state == "abortable_error"
        await p.abort_transaction()
        assert p.transaction_state == "ready"

    run_txn(broker, body)
    assert [c for c in broker.calls if c[0] == "EndTxn"] == [("EndTxn", True), ("EndTxn", False)]
    assert broker.init_calls == [(-1, -1)]  # no epoch bump needed for this one


def test_group_authorization_failed_on_the_offsets_is_abortable() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.TXN_OFFSET_COMMIT] = [ErrorCode.GROUP_AUTHORIZATION_FAILED]

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTransactionError, match="GROUP_AUTHORIZATION_FAILED") as info:
            await p.send_offsets_to_transaction({("in", 0): 1}, "g")
        assert info.value.abortable
        await p.abort_transaction()
        p.begin_transaction()

    run_txn(broker, body)


def test_unknown_producer_id_in_a_transaction_bumps_the_epoch_on_abort() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        pid, epoch = p.producer_id_and_epoch
        p.begin_transaction()
        await (await p.send("t", b"a"))
        broker.forget_producers()  # the broker lost the producer's state: UNKNOWN_PRODUCER_ID next
        f = await p.send("t", b"b")
        await p.flush(5)
        assert f.exception() is not None
        with pytest.raises(KafkaTransactionError, match="UNKNOWN_PRODUCER_ID") as info:
            await p.commit_transaction()
        assert info.value.abortable
        await p.abort_transaction()
        assert p.producer_id_and_epoch == (pid, epoch + 1)
        p.begin_transaction()
        ok = await p.send("t", b"c")
        await p.commit_transaction()
        assert (await ok).offset >= 0

    run_txn(broker, body)
    assert broker.init_calls[1] == (1000, 0)  # KIP-360: the bump names the current id and epoch
    assert broker.logs[0] == [b"a", b"c"]  # the new epoch numbered from 0 again


def test_a_record_timing_out_before_its_partition_is_added_is_abortable() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 10_000

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        f = await p.send("t", b"late")
        await p.flush(5)
        assert isinstance(f.exception(), KafkaTimeoutError)
        with pytest.raises(KafkaTransactionError, match="delivery_timeout_ms") as info:
            await p.commit_transaction()
        assert info.value.abortable and "CONCURRENT_TRANSACTIONS" in str(info.value)
        await p.abort_transaction()
        assert p.transaction_state == "ready"

    run_txn(broker, body, request_timeout_ms=100, delivery_timeout_ms=300)
    assert "EndTxn" not in call_names(broker)  # nothing was added: the coordinator has no transaction
    assert broker.init_calls == [(-1, -1)]  # nothing was numbered: no epoch bump


def test_an_older_epoch_on_produce_is_fatal_fencing() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await (await p.send("t", b"a"))
        pid = p.producer_id_and_epoch[0]
        broker.epochs[pid] += 1
        broker.state[(pid, 0)] = (broker.epochs[pid], 0, [])  # the partition saw the newer epoch
        f = await p.send("t", b"b")
        await p.flush(5)
        assert f.exception() is not None
        assert p.transaction_state == "fatal_error"
        with pytest.raises(KafkaProducerFencedError, match="INVALID_PRODUCER_EPOCH"):
            await p.abort_transaction()

    run_txn(broker, body)


def test_a_lost_producer_id_mapping_skips_end_txn_and_initialises_afresh() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
    broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = [0, ErrorCode.INVALID_PRODUCER_ID_MAPPING]

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        f = await p.send("t", b"v")
        await p.flush(5)
        assert f.exception() is not None
        with pytest.raises(KafkaTransactionError, match="INVALID_PRODUCER_ID_MAPPING") as info:
            await p.commit_transaction()
        assert info.value.abortable
        await p.abort_transaction()
        assert p.producer_id_and_epoch == (1000, 1)
        p.begin_transaction()
        await p.send("t", b"w")
        await p.commit_transaction()

    run_txn(broker, body)
    assert broker.init_calls == [(-1, -1), (1000, 0), (-1, -1)]  # the bump refused: afresh
    assert [c for c in broker.calls if c[0] == "EndTxn"] == [("EndTxn", True)]  # none for the abort
    assert broker.logs[0] == [b"w"]


def test_records_unsent_at_abort_fail_as_aborted() -> None:
    broker = ProduceBroker(2)
    broker.txn_delay[ApiKey.ADD_PARTITIONS_TO_TXN] = 0.3  # the partition is not added yet

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        futures = [await p.send("t", b"v%d" % i, partition=0) for i in range(5)]
        await p.abort_transaction()
        for f in futures:
            exc = f.exception()
            assert isinstance(exc, KafkaTransactionError) and "transaction aborted" in str(exc)
            assert not exc.abortable and not exc.fatal
        assert p.transaction_state == "ready"
        p.begin_transaction()
        ok = await p.send("t", b"next", partition=0)
        await p.commit_transaction()
        assert (await ok).offset == 0

    run_txn(broker, body)
    assert broker.logs[0] == [b"next"]


# -- fatal errors -----------------------------------------------------------------------------------


def test_fenced_by_a_newer_producer_is_fatal_and_sticks() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        newer = txn_producer(broker)
        try:
            await newer.init_transactions()  # same transactional id: bumps the epoch
        finally:
            await newer.close()
        p.begin_transaction()
        await p.send("t", b"zombie")
        with pytest.raises(KafkaProducerFencedError, match="PRODUCER_FENCED") as info:
            await p.commit_transaction()
        fenced = info.value
        assert fenced.fatal and not fenced.abortable and fenced.code == ErrorCode.PRODUCER_FENCED
        assert p.transaction_state == "fatal_error"
        for call in (
            p.abort_transaction,
            p.commit_transaction,
            lambda: p.send("t", b"x"),
            p.init_transactions,
        ):
            with pytest.raises(KafkaProducerFencedError) as again:
                await call()
            assert again.value is fenced
        with pytest.raises(KafkaProducerFencedError):
            p.begin_transaction()

    run_txn(broker, body)
    assert broker.logs[0] == []


def test_transactional_id_authorization_failed_is_fatal_but_not_fenced() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]

    async def body(p: AsyncKafkaProducer) -> None:
        with pytest.raises(KafkaTransactionError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED") as info:
            await p.init_transactions()
        assert info.value.fatal and not isinstance(info.value, KafkaProducerFencedError)
        assert p.transaction_state == "fatal_error"
        with pytest.raises(KafkaTransactionError) as again:
            p.begin_transaction()
        assert again.value is info.value

    run_txn(broker, body)


def test_a_bump_the_broker_cannot_do_is_fatal() -> None:
    broker = ProduceBroker()
    broker.versions[ApiKey.INIT_PRODUCER_ID] = 2  # no KIP-360 epoch bump

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await (await p.send("t", b"a"))
        broker.forget_producers()
        await p.send("t", b"b")
        await p.flush(5)
        await p.abort_transaction()  # EndTxn aborted it: the bump after it never fails the abort
        assert p.transaction_state == "fatal_error"
        with pytest.raises(KafkaTransactionError, match="v3") as info:
            p.begin_transaction()
        assert info.value.fatal

    run_txn(broker, body)


# -- timeouts keep the producer usable ----------------------------------------------------------------


def test_a_timed_out_commit_goes_on_and_the_same_call_waits_for_it() -> None:
    broker = ProduceBroker()
    broker.txn_delay[ApiKey.END_TXN] = 0.5

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        # delivered first: what times out must be EndTxn (on a loaded machine 0.05 s did not
        # even cover the record's delivery, and the message named that stage instead)
        await (await p.send("t", b"v"))
        with pytest.raises(KafkaTimeoutError, match=r"commit_transaction.*still ending the transaction"):
            await p.commit_transaction(timeout=0.05)
        assert p.transaction_state == "committing"
        with pytest.raises(KafkaTransactionError, match="commit_transaction") as info:
            await p.abort_transaction()
        assert not info.value.abortable and not info.value.fatal
        with pytest.raises(KafkaTransactionError, match="commit_transaction"):
            p.begin_transaction()
        await p.commit_transaction(timeout=5)
        assert p.transaction_state == "ready"
        p.begin_transaction()

    run_txn(broker, body)
    assert [c for c in broker.calls if c[0] == "EndTxn"] == [("EndTxn", True)]


def test_while_an_operation_is_pending_other_calls_name_it() -> None:
    broker = ProduceBroker()
    broker.txn_delay[ApiKey.TXN_OFFSET_COMMIT] = 0.4

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTimeoutError, match="send_offsets_to_transaction"):
            await p.send_offsets_to_transaction({("in", 0): 3}, "g", timeout=0.05)
        for call in (lambda: p.send("t", b"v"), p.commit_transaction):
            with pytest.raises(KafkaTransactionError, match="send_offsets_to_transaction"):
                await call()
        await asyncio.sleep(0.6)  # it finishes in the background; the next call goes on
        await (await p.send("t", b"v"))
        await p.commit_transaction()

    run_txn(broker, body)
    assert broker.committed_offsets == {("g", "in", 0): 3}
    assert [name for name in call_names(broker) if name == "TxnOffsetCommit"] == ["TxnOffsetCommit"]


def test_a_timed_out_init_names_the_cause_and_can_be_waited_for() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 3
    broker.txn_delay[ApiKey.INIT_PRODUCER_ID] = 0.1

    async def body(p: AsyncKafkaProducer) -> None:
        with pytest.raises(KafkaTimeoutError, match="init_transactions"):
            await p.init_transactions(timeout=0.15)
        await p.init_transactions(timeout=5)
        assert p.transaction_state == "ready"

    run_txn(broker, body)
    assert broker.init_calls == [(-1, -1)] * 4


def test_close_aborts_an_open_transaction() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await (await p.send("t", b"v"))

    run_txn(broker, body)
    assert broker.ended == [(False, [("t", 0)])]


# -- the blocking face ------------------------------------------------------------------------------


def test_the_blocking_face_runs_transactions_and_checks_send_synchronously() -> None:
    from kafka_core import KafkaProducer

    broker = ProduceBroker()
    p = KafkaProducer(client=broker, transactional_id="tx-sync", linger_ms=0, retry_backoff_ms=1)
    try:
        with pytest.raises(KafkaTransactionError, match="init_transactions"):
            p.send("t", b"early")
        p.init_transactions(5)
        assert p.transaction_state == "ready"
        p.begin_transaction()
        f = p.send("t", b"v")
        p.commit_transaction(5)
        assert f.result(1).offset == 0
        with pytest.raises(KafkaTransactionError, match="begin_transaction"):
            p.send("t", b"outside")
        p.begin_transaction()
        g = p.send("t", b"w")
        p.flush(5)
        assert g.result(1).offset == 1  # written, and aborted below
        p.abort_transaction(5)
        assert p.metrics()["producer"]["transactions"]["aborts"] == 1
    finally:
        p.close()
    assert broker.ended == [(True, [("t", 0)]), (False, [("t", 0)])]
    assert broker.logs[0][0] == b"v"


# -- a send racing with the end of its transaction -------------------------------------------------


@pytest.mark.parametrize("end", ["commit", "abort", "prepare"])
def test_a_send_still_waiting_when_its_transaction_ends_is_refused_never_held_over(end: str) -> None:
    """The send waits before its append (the first record of a topic waits for its metadata,
    held here); meanwhile the transaction ends. As with the Java client, whose send checks the
    state after its metadata wait, the record is refused with the reason, never appended to the
    ended transaction nor held over to the next one."""
    import threading

    from kafka_core import KafkaProducer

    broker = ProduceBroker()
    hold = broker.metadata_hold["slow"] = threading.Event()
    p = KafkaProducer(client=broker, transactional_id="tx-race", linger_ms=0, retry_backoff_ms=1)
    try:
        p.init_transactions(5)
        p.begin_transaction()
        outcome: list[Any] = []

        def send() -> None:
            try:
                outcome.append(p.send("slow", b"raced"))
            except KafkaTransactionError as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        _wait_for(lambda: "slow" in broker.metadata_asked)  # waiting for metadata, not appended
        ending = threading.Thread(target=getattr(p, f"{end}_transaction"), args=(5,))
        ending.start()
        _wait_for(lambda: p.transaction_state != "in_transaction")
        hold.set()
        sender.join(5)
        ending.join(5)
        (refused,) = outcome
        assert isinstance(refused, KafkaTransactionError), refused
        assert "send() is not allowed now" in str(refused)
        if end == "prepare":
            assert p.transaction_state == "prepared"
            p.commit_transaction(5)
        assert broker.ended == []  # nothing was in the transaction: no EndTxn
        p.begin_transaction()
        p.send("slow", b"next")
        p.commit_transaction(5)
    finally:
        p.close(5)
    assert broker.logs[0] == [b"next"]
    assert broker.ended == [(True, [("slow", 0)])]


def test_records_appended_before_the_end_are_in_the_transaction_and_later_ones_refused() -> None:
    """Records from another thread right up to commit_transaction: each one either is in the
    committed transaction (delivered) or was refused with the reason; none lands after it."""
    import threading

    from kafka_core import KafkaProducer

    broker = ProduceBroker()
    p = KafkaProducer(client=broker, transactional_id="tx-stream", linger_ms=1, retry_backoff_ms=1)
    try:
        p.init_transactions(5)
        p.partitions_for("t")
        p.begin_transaction()
        sent: list[Any] = []
        refused: list[KafkaTransactionError] = []
        stop = threading.Event()

        def stream() -> None:
            i = 0
            while not stop.is_set():
                try:
                    sent.append(p.send("t", b"r%d" % i))
                except KafkaTransactionError as exc:
                    refused.append(exc)
                    return
                i += 1

        sender = threading.Thread(target=stream)
        sender.start()
        _wait_for(lambda: len(sent) > 200)
        p.commit_transaction(5)
        sender.join(5)
        stop.set()
        assert refused and "send() is not allowed now" in str(refused[0])
        assert [f.result(1).offset for f in sent] == list(range(len(sent)))
    finally:
        p.close(5)
    assert broker.logs[0] == [b"r%d" % i for i in range(len(sent))]
    assert broker.ended == [(True, [("t", 0)])]


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.005)
