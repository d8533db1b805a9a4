"""The step between two transactions (kafka_core/producer/transactions/epoch.py) through the in-memory
brokers: a commit or abort whose EndTxn succeeded returns success even when the epoch bump after
it (an upgrade to transactions v2, lost sequence numbers) fails or outlasts the call; the bump
stays owed and is the next transaction's first request (its records then numbered from 0 under
the new epoch); failing again there it fails that transaction with a typed error naming the
cause; a fenced bump is fatal; a retriable failure only delays it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker
from fakes.txn_producer import call_names, run_txn
from fakes.txn_v2_broker import TxnV2Broker

from kafka_core.errors import KafkaConnectionError, KafkaProducerFencedError, KafkaTransactionError
from kafka_core.producer import AsyncKafkaProducer
from kafka_core.producer.transactions import version as txn_version
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode

FAIL = ErrorCode.UNKNOWN_SERVER_ERROR  # not retriable, not fatal: the bump fails (abortable)


@pytest.fixture(autouse=True)
def refresh_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txn_version, "FEATURE_REFRESH_S", 0.0, raising=False)


class Recording:
    """A broker's appends as (producer id, epoch, first sequence, value count)."""

    def __init__(self, broker: ProduceBroker) -> None:
        self.seen: list[tuple[int, int, int]] = []
        append = broker.append

        def wrapped(p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
            self.seen.append((pid, epoch, seq))
            return append(p, data, pid, epoch, seq, count)

        broker.append = wrapped  # type: ignore[method-assign]


async def _send(p: AsyncKafkaProducer, value: bytes) -> None:
    f = await p.send("t", value, partition=0)
    await p.flush(5)
    assert f.exception() is None


def _upgrading_broker() -> TxnV2Broker:
    """A cluster at transaction.version 1 that the test raises to 2 (the next transaction is v2
    after an epoch bump, as the Java client)."""
    broker = TxnV2Broker()
    broker.finalized["transaction.version"] = 1
    return broker


async def _commit_with_an_upgrade(
    p: AsyncKafkaProducer, broker: ProduceBroker, bump_codes: list[int], timeout: float | None = None
) -> None:
    """A v1 transaction committed as the cluster goes to v2; the bump after it answered
    ``bump_codes`` first. The commit succeeds whatever they are."""
    await p.init_transactions()
    p.begin_transaction()
    await _send(p, b"a")
    broker.finalized["transaction.version"] = 2
    broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = list(bump_codes)
    await p.commit_transaction(timeout)
    assert broker.ended[-1] == (True, [("t", 0)])  # EndTxn committed it
    assert p.transaction_state == "ready"


def test_a_commit_whose_bump_fails_succeeds_and_the_next_transaction_bumps_first() -> None:
    broker = _upgrading_broker()
    appends = Recording(broker)

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _commit_with_an_upgrade(p, broker, [FAIL])
        seen: list[Any] = [p.producer_id_and_epoch, p.transaction_version]
        mark = len(broker.calls)
        p.begin_transaction()
        await _send(p, b"b")
        await p.commit_transaction()
        return [*seen, call_names(broker, mark), p.producer_id_and_epoch]

    (pid, epoch), version, calls, after = run_txn(broker, body)
    assert version == 2
    assert calls == ["InitProducerId", "Produce", "EndTxn"]  # the owed bump first
    assert broker.init_calls[-1] == (pid, epoch)  # KIP-360: a bump of ours, not a new id
    assert appends.seen == [(pid, epoch, 0), (pid, epoch + 1, 0)]  # numbered from 0 again
    assert after == (pid, epoch + 2)  # and the v2 EndTxn bumped it once more
    assert broker.logs[0] == [b"a", b"b"]


@pytest.mark.parametrize("first", ["send", "send_offsets"])
def test_a_bump_failing_again_fails_the_next_transaction_with_a_typed_error(first: str) -> None:
    broker = _upgrading_broker()

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _commit_with_an_upgrade(p, broker, [FAIL, FAIL])
        p.begin_transaction()
        if first == "send":
            f = await p.send("t", b"lost", partition=0)
            await p.flush(5)
            assert isinstance(f.exception(), KafkaTransactionError)
            with pytest.raises(KafkaTransactionError) as info:
                await p.commit_transaction()
        else:
            with pytest.raises(KafkaTransactionError) as info:
                await p.send_offsets_to_transaction({("in", 0): 5}, "g")
        seen: list[Any] = [info.value, p.transaction_state]
        await p.abort_transaction()  # nothing reached the coordinator; the bump is retried
        p.begin_transaction()
        await _send(p, b"b")
        await p.commit_transaction()
        return seen

    err, state = run_txn(broker, body)
    assert err.abortable and not err.fatal and err.code == FAIL
    assert "UNKNOWN_SERVER_ERROR" in str(err) and "owed since the last transaction" in str(err)
    assert state == "abortable_error"
    assert broker.logs[0] == [b"a", b"b"]
    assert broker.committed_offsets == {}


def test_a_fenced_bump_after_a_commit_is_fatal_but_the_commit_succeeded() -> None:
    broker = _upgrading_broker()

    async def body(p: AsyncKafkaProducer) -> None:
        await p.init_transactions()
        p.begin_transaction()
        await _send(p, b"a")
        broker.finalized["transaction.version"] = 2
        broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.PRODUCER_FENCED]
        await p.commit_transaction()
        assert p.transaction_state == "fatal_error"
        with pytest.raises(KafkaProducerFencedError, match="PRODUCER_FENCED"):
            p.begin_transaction()

    run_txn(broker, body)
    assert broker.ended == [(True, [("t", 0)])]


def test_a_fenced_bump_in_the_next_transaction_is_fatal() -> None:
    broker = _upgrading_broker()

    async def body(p: AsyncKafkaProducer) -> None:
        await _commit_with_an_upgrade(p, broker, [FAIL, ErrorCode.PRODUCER_FENCED])
        p.begin_transaction()
        await p.send("t", b"lost", partition=0)
        await p.flush(5)
        with pytest.raises(KafkaProducerFencedError, match="PRODUCER_FENCED"):
            await p.commit_transaction()
        assert p.transaction_state == "fatal_error"

    run_txn(broker, body)
    assert broker.logs[0] == [b"a"]


async def _abort_after_lost_sequences(
    p: AsyncKafkaProducer, broker: ProduceBroker, bump_codes: list[int]
) -> None:
    """A v1 transaction whose second record lost its sequence numbers, aborted with the bump
    answered ``bump_codes`` first: the abort succeeds whatever they are."""
    await p.init_transactions()
    p.begin_transaction()
    await _send(p, b"a")
    broker.forget_producers()  # UNKNOWN_PRODUCER_ID next: the epoch must be bumped
    f = await p.send("t", b"b", partition=0)
    await p.flush(5)
    assert f.exception() is not None
    broker.txn_errors[ApiKey.INIT_PRODUCER_ID] = list(bump_codes)
    await p.abort_transaction()
    assert broker.ended[-1] == (False, [("t", 0)])  # EndTxn aborted it
    assert p.transaction_state == "ready"


def test_an_abort_whose_bump_fails_succeeds_and_the_next_transaction_bumps_first() -> None:
    broker = ProduceBroker()
    appends = Recording(broker)

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _abort_after_lost_sequences(p, broker, [FAIL])
        seen: list[Any] = [p.producer_id_and_epoch]
        mark = len(broker.calls)
        p.begin_transaction()
        await _send(p, b"c")
        await p.commit_transaction()
        return [*seen, call_names(broker, mark), p.producer_id_and_epoch]

    (pid, epoch), calls, after = run_txn(broker, body)
    assert calls == ["InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn"]
    assert after == (pid, epoch + 1)
    assert appends.seen[-1] == (pid, epoch + 1, 0)
    assert broker.logs[0] == [b"a", b"c"]


def test_an_abort_whose_bump_fails_twice_fails_the_next_transaction_then_goes_on() -> None:
    broker = ProduceBroker()

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _abort_after_lost_sequences(p, broker, [FAIL, FAIL])
        p.begin_transaction()
        f = await p.send("t", b"lost", partition=0)
        await p.flush(5)
        with pytest.raises(KafkaTransactionError) as info:
            await p.commit_transaction()
        seen: list[Any] = [info.value, f.exception()]
        await p.abort_transaction()
        p.begin_transaction()
        await _send(p, b"c")
        await p.commit_transaction()
        return [*seen, p.producer_id_and_epoch]

    err, record_err, (_pid, epoch) = run_txn(broker, body)
    assert err.abortable and err.code == FAIL and "UNKNOWN_SERVER_ERROR" in str(err)
    assert record_err is err  # the record failed with the transaction's error
    assert epoch == 1
    assert broker.logs[0] == [b"a", b"c"]


def test_a_bump_retried_past_the_commits_timeout_is_waited_for_by_the_next_transaction() -> None:
    broker = _upgrading_broker()
    appends = Recording(broker)
    released = asyncio.Event()
    attempts: list[tuple[int, int]] = []
    init_producer_id = broker.init_producer_id

    async def flaky(txn_id: str | None = None, _timeout: int = 60_000, **kw: Any) -> tuple[int, int]:
        if kw.get("producer_id", -1) >= 0 and not released.is_set():
            attempts.append((kw["producer_id"], kw["producer_epoch"]))
            await asyncio.sleep(0.01)
            raise KafkaConnectionError("injected: the coordinator's connection dropped")
        return await init_producer_id(txn_id, _timeout, **kw)

    broker.init_producer_id = flaky  # type: ignore[method-assign]

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _commit_with_an_upgrade(p, broker, [], timeout=2.0)  # the bump outlasts it
        seen: list[Any] = [p.producer_id_and_epoch, len(attempts) > 0]
        p.begin_transaction()
        f = await p.send("t", b"b", partition=0)
        released.set()
        await p.flush(5)
        seen.append(f.exception())
        await p.commit_transaction()
        return seen

    (pid, epoch), tried, record_err = run_txn(broker, body)
    assert tried and record_err is None
    assert appends.seen[-1] == (pid, epoch + 1, 0)
    assert broker.logs[0] == [b"a", b"b"]


def test_an_empty_transaction_retries_an_owed_bump_at_its_end_and_commits() -> None:
    broker = _upgrading_broker()

    async def body(p: AsyncKafkaProducer) -> list[Any]:
        await _commit_with_an_upgrade(p, broker, [FAIL, FAIL])
        id1 = p.producer_id_and_epoch
        p.begin_transaction()
        await p.commit_transaction()  # nothing to end; its step fails again: still owed, no error
        seen: list[Any] = [id1, p.producer_id_and_epoch, p.transaction_state]
        mark = len(broker.calls)
        p.begin_transaction()
        await _send(p, b"b")
        await p.commit_transaction()
        return [*seen, call_names(broker, mark)]

    (pid, epoch), empty, state, calls = run_txn(broker, body)
    assert empty == (pid, epoch) and state == "ready"
    assert calls == ["InitProducerId", "Produce", "EndTxn"]
    assert broker.logs[0] == [b"a", b"b"]
