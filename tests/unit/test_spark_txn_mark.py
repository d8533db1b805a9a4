"""kafka_core.spark.txn_mark.mark_exists against a scripted client: the answers a task acts on."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

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
    return asyncio.run(mark_exists(client, "p-aborted-w", timeout))


def test_the_mark_exists_or_not() -> None:
    assert run(Scripted(NONE)) is True
    client = Scripted(NOT_FOUND)
    assert run(client) is False
    assert client.asked == [["p-aborted-w"]]


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
