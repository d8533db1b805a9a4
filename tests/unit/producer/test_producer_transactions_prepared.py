"""Prepared transactions (two-phase commit) through the in-memory broker: prepare delivers and
keeps the transaction open, close leaves it open, complete_transaction ends it from another
client, retries are safe, a newer producer fences it, and every wait is bounded."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker

from kafka_core.errors import (
    KafkaConfigError,
    KafkaProducerFencedError,
    KafkaTimeoutError,
    KafkaTransactionError,
)
from kafka_core.producer import AsyncKafkaProducer, PreparedTransaction
from kafka_core.producer.transactions.prepared import complete_transaction
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode


def _producer(broker: ProduceBroker, txn_id: str = "tx-p", **options: Any) -> AsyncKafkaProducer:
    kw: dict[str, Any] = {
        "client": broker,
        "transactional_id": txn_id,
        "linger_ms": 0,
        "retry_backoff_ms": 1,
        "request_timeout_ms": 10_000,
        "max_block_ms": 5_000,
    }
    kw.update(options)
    return AsyncKafkaProducer(**kw)


async def _prepared(broker: ProduceBroker, *values: bytes, txn_id: str = "tx-p") -> PreparedTransaction:
    """A producer sends ``values``, prepares, and closes (leaving the transaction open)."""
    p = _producer(broker, txn_id)
    try:
        await p.init_transactions()
        p.begin_transaction()
        for v in values:
            await p.send("t", v)
        return await p.prepare_transaction()
    finally:
        await p.close(timeout=5)


def _end_txns(broker: ProduceBroker) -> list[Any]:
    return [c for c in broker.calls if c[0] == "EndTxn"]


def test_prepare_delivers_and_close_leaves_the_transaction_open_for_another_client() -> None:
    broker = ProduceBroker()

    async def main() -> PreparedTransaction:
        prepared = await _prepared(broker, b"a", b"b")
        assert broker.in_txn == {"tx-p": {("t", 0)}}  # still open after close
        assert _end_txns(broker) == []
        assert [v for v in broker.logs[0]] == [b"a", b"b"]
        await complete_transaction(prepared, commit=True, client=broker, timeout=5)
        return prepared

    prepared = asyncio.run(main())
    pid = broker.txn_ids["tx-p"]
    assert prepared == PreparedTransaction("tx-p", pid, broker.epochs[pid])
    assert broker.ended == [(True, [("t", 0)])]


def test_completing_again_the_same_way_succeeds_the_other_way_is_typed() -> None:
    broker = ProduceBroker()

    async def main() -> None:
        prepared = await _prepared(broker, b"a")
        await complete_transaction(prepared, commit=False, client=broker, timeout=5)
        await complete_transaction(prepared, commit=False, client=broker, timeout=5)  # a retry
        with pytest.raises(KafkaTransactionError, match=r"\[Error 48\] INVALID_TXN_STATE") as info:
            await complete_transaction(prepared, commit=True, client=broker, timeout=5)
        assert info.value.code == ErrorCode.INVALID_TXN_STATE
        assert not isinstance(info.value, KafkaProducerFencedError)

    asyncio.run(main())
    assert broker.ended == [(False, [("t", 0)])]


def test_after_prepare_only_commit_or_abort_are_allowed_and_both_work() -> None:
    broker = ProduceBroker()

    async def main() -> None:
        p = _producer(broker)
        try:
            await p.init_transactions()
            for commit in (True, False):
                p.begin_transaction()
                await p.send("t", b"v")
                await p.prepare_transaction()
                assert p.transaction_state == "prepared"
                for call in (
                    lambda: p.send("t", b"late"),
                    p.begin_transaction,
                    lambda: p.send_offsets_to_transaction({("in", 0): 1}, "g"),
                    p.prepare_transaction,
                ):
                    with pytest.raises(KafkaTransactionError, match="prepared") as info:
                        result = call()
                        if asyncio.iscoroutine(result):
                            await result
                    assert not info.value.abortable and not info.value.fatal
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
                assert p.transaction_state == "ready"
        finally:
            await p.close(timeout=5)

    asyncio.run(main())
    assert broker.ended == [(True, [("t", 0)]), (False, [("t", 0)])]
    assert broker.logs[0] == [b"v", b"v"]


def test_a_failed_record_fails_prepare_as_abortable() -> None:
    broker = ProduceBroker()
    broker.faults = lambda n, where, p: (
        str(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) if n == 0 and where == "partition" else None
    )

    async def main() -> None:
        p = _producer(broker, delivery_timeout_ms=20_000)
        try:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"v")
            with pytest.raises(KafkaTransactionError, match="TOPIC_AUTHORIZATION_FAILED") as info:
                await p.prepare_transaction()
            assert info.value.abortable
            assert p.transaction_state == "abortable_error"
            await p.abort_transaction()
            assert p.transaction_state == "ready"
        finally:
            await p.close(timeout=5)

    asyncio.run(main())
    assert _end_txns(broker) == [("EndTxn", False)]


def test_a_newer_producer_fences_the_prepared_transaction() -> None:
    broker = ProduceBroker()

    async def main() -> None:
        prepared = await _prepared(broker, b"a")
        newer = _producer(broker)
        try:
            await newer.init_transactions()  # bumps the epoch and aborts the open transaction
        finally:
            await newer.close(timeout=5)
        with pytest.raises(KafkaProducerFencedError, match="prepared records were aborted") as info:
            await complete_transaction(prepared, commit=True, client=broker, timeout=5)
        assert info.value.code == ErrorCode.PRODUCER_FENCED
        assert "PRODUCER_FENCED" in str(info.value)

    asyncio.run(main())
    assert broker.ended == [(False, [])]  # the fencing InitProducerId aborted it


def test_complete_retries_coordinator_errors_and_concurrent_transactions() -> None:
    broker = ProduceBroker()
    broker.txn_errors[ApiKey.END_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR]

    async def main() -> None:
        prepared = await _prepared(broker, b"a")
        broker.lookups.clear()
        await complete_transaction(prepared, commit=True, client=broker, timeout=5)

    asyncio.run(main())
    assert _end_txns(broker) == [("EndTxn", True)] * 3
    assert broker.ended == [(True, [("t", 0)])]
    assert ("tx-p", 1, True) in broker.lookups  # looked up again after NOT_COORDINATOR


def test_complete_gives_up_at_its_timeout_naming_the_last_error_and_can_be_called_again() -> None:
    broker = ProduceBroker()

    async def main() -> None:
        prepared = await _prepared(broker, b"a")
        broker.txn_errors[ApiKey.END_TXN] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 1000
        with pytest.raises(KafkaTimeoutError, match="COORDINATOR_LOAD_IN_PROGRESS"):
            await complete_transaction(prepared, commit=True, client=broker, timeout=0.2)
        assert broker.in_txn == {"tx-p": {("t", 0)}}
        broker.txn_errors[ApiKey.END_TXN] = []
        await complete_transaction(prepared, commit=True, client=broker, timeout=5)

    asyncio.run(main())
    assert broker.ended == [(True, [("t", 0)])]


def test_a_timed_out_prepare_goes_on_and_calling_it_again_waits() -> None:
    broker = ProduceBroker(delay=lambda n: 0.4)

    async def main() -> PreparedTransaction:
        p = _producer(broker)
        try:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"v")
            with pytest.raises(KafkaTimeoutError, match=r"prepare_transaction.*delivering"):
                await p.prepare_transaction(timeout=0.05)
            assert p.transaction_state == "preparing"
            with pytest.raises(KafkaTransactionError, match="prepare_transaction"):
                await p.commit_transaction()
            prepared = await p.prepare_transaction(timeout=5)
            assert p.transaction_state == "prepared"
            return prepared
        finally:
            await p.close(timeout=5)

    prepared = asyncio.run(main())
    assert prepared.producer_id == broker.txn_ids["tx-p"]
    assert broker.ended == []


def test_an_empty_prepared_transaction_has_nothing_to_complete() -> None:
    broker = ProduceBroker()

    async def main() -> PreparedTransaction:
        prepared = await _prepared(broker)
        await complete_transaction(prepared, commit=True, client=broker, timeout=5)
        return prepared

    assert asyncio.run(main()) == PreparedTransaction("tx-p", -1, -1)
    assert _end_txns(broker) == []


def test_prepared_transaction_travels_by_pickle_and_json_and_bad_ones_are_refused() -> None:
    prepared = PreparedTransaction("tx", 7, 3)
    assert pickle.loads(pickle.dumps(prepared)) == prepared
    assert PreparedTransaction(**json.loads(json.dumps(prepared._asdict()))) == prepared
    broker = ProduceBroker()

    async def main() -> None:
        for bad in (("tx", "7", 3), ("", 7, 3), ("tx", 7), None):
            with pytest.raises(KafkaConfigError, match="PreparedTransaction"):
                await complete_transaction(bad, commit=True, client=broker)  # type: ignore[arg-type]

    asyncio.run(main())
    assert broker.calls == []


def test_the_blocking_face_prepares_and_the_blocking_complete_refuses_an_asyncio_client() -> None:
    from kafka_core import KafkaProducer
    from kafka_core.producer import complete_transaction as complete_blocking

    broker = ProduceBroker()
    p = KafkaProducer(client=broker, transactional_id="tx-sync", linger_ms=0, retry_backoff_ms=1)
    try:
        p.init_transactions(5)
        p.begin_transaction()
        f = p.send("t", b"v")
        prepared = p.prepare_transaction(5)
        assert f.result(1).offset == 0
        assert p.transaction_state == "prepared"
    finally:
        p.close()
    assert isinstance(prepared, PreparedTransaction)
    assert broker.in_txn == {"tx-sync": {("t", 0)}}
    with pytest.raises(KafkaConfigError, match="blocking"):
        complete_blocking(prepared, commit=True, client=broker)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, "no longer maps the transactional id"),
    ],
)
def test_other_end_txn_errors_are_raised_typed_with_code_and_name(code: int, words: str) -> None:
    broker = ProduceBroker()

    async def main() -> None:
        prepared = await _prepared(broker, b"a")
        broker.txn_errors[ApiKey.END_TXN] = [code]
        with pytest.raises(KafkaTransactionError, match=rf"\[Error {int(code)}\]") as info:
            await complete_transaction(prepared, commit=True, client=broker, timeout=5)
        assert words in str(info.value)
        assert info.value.code == code and not isinstance(info.value, KafkaProducerFencedError)

    asyncio.run(main())
    assert broker.in_txn == {"tx-p": {("t", 0)}}  # not ended
