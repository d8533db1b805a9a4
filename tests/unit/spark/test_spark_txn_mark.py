"""kafka_core.spark.txn_mark.mark_exists against a scripted client: the answers a task acts on."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from prerequisites import need_module

from kafka_core.errors import KafkaProtocolError, KafkaTimeoutError, KafkaUnsupportedVersionError
from kafka_core.spark.txn_mark import mark_exists

NONE, NOT_COORDINATOR, LOADING, AUTH_FAILED, NOT_FOUND = 0, 16, 14, 53, 105


class Scripted:
    """Answers DescribeTransactions with the given error codes in turn (an exception is raised)."""

    def __init__(self, *answers: int | BaseException) -> None:
        self.answers = list(answers)
        self.refreshes: list[bool] = []
        self.asked: list[list[str]] = []

    async def find_coordinator(self, key: str, key_type: int, *, refresh: bool, timeout_ms: float) -> Any:
        assert key_type == 1  # the transaction coordinator
        self.refreshes.append(refresh)
        return SimpleNamespace(node_id=3)

    async def send(self, node_id: int, body: Any, *, timeout_ms: float) -> Any:
        self.asked.append(list(body.transactional_ids))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(transaction_states=[SimpleNamespace(error_code=answer)])


def run(client: Scripted, timeout: float = 5.0) -> bool | None:
    return asyncio.run(mark_exists(client, "p-ended-w", timeout))


def test_the_mark_exists_or_not() -> None:
    assert run(Scripted(NONE)) is True
    client = Scripted(NOT_FOUND)
    assert run(client) is False
    assert client.asked == [["p-ended-w"]]


def test_a_moved_coordinator_is_looked_up_again_and_a_loading_one_kept() -> None:
    client = Scripted(NOT_COORDINATOR, LOADING, NOT_FOUND)
    assert run(client) is False
    assert client.refreshes == [False, True, False]


def test_a_broker_without_describe_transactions_cannot_tell() -> None:
    assert run(Scripted(KafkaUnsupportedVersionError("no DescribeTransactions"))) is None


def test_any_other_error_fails_the_task() -> None:
    with pytest.raises(KafkaProtocolError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        run(Scripted(AUTH_FAILED))


def test_a_coordinator_never_ready_times_out() -> None:
    with pytest.raises(KafkaTimeoutError, match="coordinator not ready"):
        run(Scripted(*([LOADING] * 100)), timeout=0.3)


def _driver_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Record, in order, the driver's InitProducerIds (fences, marks) and EndTxns, answering all."""
    import kafka_core.aio

    calls: list[tuple[str, str]] = []

    async def fence(txn_id: str, **_: Any) -> None:
        calls.append(("init", txn_id))

    async def complete(txn: Any, *, commit: bool, **_: Any) -> None:
        calls.append(("commit" if commit else "abort", txn.transactional_id))

    monkeypatch.setattr(kafka_core.aio, "fence_transactional_id", fence)
    monkeypatch.setattr(kafka_core.aio, "complete_transaction", complete)
    return calls


def _write(prefix: str = "job") -> tuple[Any, list[Any]]:
    import dataclasses

    need_module("pyspark")
    from kafka_core.producer import PreparedTransaction
    from kafka_core.spark.options import parse_sink
    from kafka_core.spark.tasks import KafkaCommitMessage

    options = parse_sink({"kafka.bootstrap.servers": "localhost:9", "transactionalIdPrefix": prefix})
    options = dataclasses.replace(options, write_id="w1")
    tasks = [
        KafkaCommitMessage(rows=1, task_partition=i, prepared=PreparedTransaction(f"{prefix}-{i}", 7 + i, 0))
        for i in range(2)
    ]
    return options, tasks


def test_a_batch_commit_marks_the_write_ended_before_any_end_txn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mark's InitProducerId is answered before the first EndTxn: a retried or speculative
    attempt whose InitProducerId comes after it sees the mark (issue 23)."""
    from kafka_core.spark.txn_driver import complete_prepared

    calls = _driver_calls(monkeypatch)
    options, tasks = _write()
    assert options.end_mark_id() == "job-ended-w1"
    complete_prepared(options, tasks, "", mark_ended=True)
    assert calls[0] == ("init", "job-ended-w1")
    assert sorted(calls[1:]) == [("commit", "job-0"), ("commit", "job-1")]


def test_a_micro_batch_commit_leaves_no_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A micro-batch shares its write id with the next ones, whose tasks must not find a mark."""
    from kafka_core.spark.txn_driver import complete_prepared

    calls = _driver_calls(monkeypatch)
    options, tasks = _write()
    complete_prepared(options, tasks, " (micro-batch 3)")
    assert sorted(calls) == [("commit", "job-0"), ("commit", "job-1")]


def test_an_abort_marks_the_write_ended_before_fencing(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_core.spark.txn_driver import abort_all

    calls = _driver_calls(monkeypatch)
    options, tasks = _write()
    abort_all(options, tasks[:1], 2, "")
    assert calls[0] == ("init", "job-ended-w1")
    assert ("abort", "job-0") in calls and {("init", "job-0"), ("init", "job-1")} <= set(calls[1:])


def test_a_task_that_finds_the_mark_begins_nothing_and_says_why() -> None:
    """check_write_not_ended on the producer's own loop: the mark's existence fails the task."""
    import threading

    from kafka_core.errors import KafkaTransactionError
    from kafka_core.spark.txn_mark import check_write_not_ended

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        for answer, fails in ((NOT_FOUND, False), (NONE, True)):
            producer = SimpleNamespace(async_object=SimpleNamespace(client=Scripted(answer)), loop=loop)
            if fails:
                with pytest.raises(KafkaTransactionError, match="already ended this write"):
                    check_write_not_ended(producer, "job-ended-w1", "job-0", 5.0)
            else:
                check_write_not_ended(producer, "job-ended-w1", "job-0", 5.0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
