"""The aborted-write mark: what keeps a late task attempt from opening a transaction after the
driver's cleanup.

Spark fails a task (and then the job) as soon as the JVM side of the task fails, without waiting
for the task's Python writer: a writer still starting (importing, connecting, in
InitProducerId) goes on after the driver aborted the write. Fencing the task's transactional id
from the driver cannot stop it: an InitProducerId that comes after the fence simply bumps the
epoch again, and that attempt writes and prepares a transaction nobody ever ends (read_committed
readers are held back until ``transactionTimeoutMs``).

So the driver's abort first creates a transactional id of its own for the write
(``{prefix}-aborted-{write id}``, by InitProducerId, answered once the coordinator wrote it),
then fences every task's id. A task, after its own InitProducerId, asks the coordinator whether
that mark exists (DescribeTransactions) and, if it does, begins nothing. Either the task's
InitProducerId came before the driver's fence of its id, and the fence aborts what it opened and
fences it for good, or it came after the fence, hence after the mark, and the task sees the mark.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka_core.errors import KafkaTimeoutError, KafkaTransactionError, KafkaUnsupportedVersionError
from kafka_core.protocol.errors import COORDINATOR_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import DescribeTransactionsRequest

__all__ = ["check_write_not_aborted", "mark_exists"]

log = logging.getLogger("kafka_core.spark")

_TRANSACTION_COORDINATOR = 1
_RETRY_BACKOFF_S = 0.1


async def mark_exists(client: Any, mark_id: str, timeout: float) -> bool | None:
    """Whether the transactional id ``mark_id`` exists on its coordinator; None when the broker
    cannot tell (no DescribeTransactions: Kafka before 3.0, some other brokers)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    refresh = False
    while True:
        left_ms = max(1.0, (deadline - loop.time()) * 1000.0)
        try:
            coordinator = await client.find_coordinator(
                mark_id, _TRANSACTION_COORDINATOR, refresh=refresh, timeout_ms=left_ms
            )
            response = await client.send(
                coordinator.node_id,
                DescribeTransactionsRequest(transactional_ids=[mark_id]),
                timeout_ms=left_ms,
            )
        except KafkaUnsupportedVersionError:
            return None
        state = response.transaction_states[0]
        code = state.error_code
        if code == ErrorCode.NONE:
            return True
        if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            return False
        if code not in COORDINATOR_CODES:
            raise error_for(code, f"DescribeTransactions of {mark_id!r}")
        refresh = code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if loop.time() + _RETRY_BACKOFF_S >= deadline:
            raise KafkaTimeoutError(
                f"DescribeTransactions of {mark_id!r}: coordinator not ready in {timeout:g} s"
            )
        await asyncio.sleep(_RETRY_BACKOFF_S)


def check_write_not_aborted(producer: Any, mark_id: str, txn_id: str, timeout: float) -> None:
    """After the task's InitProducerId, before it begins: raise if the driver already aborted
    the write (its mark exists). ``producer``: the task's blocking KafkaProducer, whose client
    and loop ask the coordinator."""
    future = asyncio.run_coroutine_threadsafe(
        mark_exists(producer.async_object.client, mark_id, timeout), producer.loop
    )
    exists = future.result()
    if exists is None:
        log.debug(
            "the broker has no DescribeTransactions: %r cannot see whether its write was aborted", txn_id
        )
        return
    if exists:
        raise KafkaTransactionError(
            f"transaction {txn_id!r} not begun: the driver already aborted this write (mark {mark_id!r} "
            "exists); this task attempt outlived its job"
        )
