"""The write's end mark: what keeps a late task attempt from opening a transaction after the
driver ended the write, by abort or by commit.

Spark does not wait for a task's Python writer: a writer still starting (importing, connecting,
in InitProducerId) goes on after its attempt was given up, whether the job then failed (the
driver aborts) or another attempt of the task succeeded and the driver committed (a retried or
speculative task). Its InitProducerId bumps the epoch past anything the driver did to the id and
fences nothing still open, so that attempt would write and prepare a transaction nobody ever
ends: read_committed readers are held back until ``transactionTimeoutMs``.

So the driver, before it ends a write, creates a transactional id of its own for it
(``{prefix}-ended-{write id}``, by InitProducerId, answered once the coordinator has written it
to its log): before fencing every task's id on abort, before the first EndTxn on commit (batch
writes; a micro-batch shares its write id with the next ones). A task, after its own
InitProducerId and before it begins, asks the mark's coordinator whether the mark exists
(DescribeTransactions) and, if it does, begins nothing and fails. Why that closes the race, for
a task attempt A of the id ``T``:

- A's InitProducerId answered after the mark's: A's DescribeTransactions comes later still and
  goes to the coordinator that wrote the mark (or to one that loaded it from the replicated log:
  a loading coordinator is waited for), so A sees it.
- A's InitProducerId answered before the mark's, hence before the driver touched ``T``. On
  abort, the driver's fence of ``T`` comes later: it aborts whatever A began and fences A for
  good. On commit, either A's InitProducerId came before the winning attempt's, which fenced A,
  or after it: then A's epoch bump aborted the winning attempt's open transaction, so the
  driver's EndTxn on ``T`` fails (fenced), the write fails, and Spark's abort fences ``T``, which
  aborts what A began. A can never leave a transaction open, nor get one committed. (One gap:
  a winner that wrote nothing has no open transaction for A to abort, so an A that does write,
  from input that changed between attempts, would stay open until the timeout.)

Without DescribeTransactions (Kafka before 3.0, Tansu) a task cannot tell and begins as before.
The cost: one InitProducerId (and FindCoordinator) by the driver per batch write before its
commit, one more per abort, one DescribeTransactions per task; each mark is an idle transactional
id the coordinator keeps until ``transactional.id.expiration.ms`` (7 days by default).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka_core.errors import KafkaTimeoutError, KafkaTransactionError, KafkaUnsupportedVersionError
from kafka_core.protocol.errors import COORDINATOR_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import DescribeTransactionsRequest

__all__ = ["check_write_not_ended", "mark_exists"]

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


def check_write_not_ended(producer: Any, mark_id: str, txn_id: str, timeout: float) -> None:
    """After the task's InitProducerId, before it begins: raise if the driver already committed
    or aborted the write (its mark exists): nothing is begun, so nothing is left open. ``producer``: the task's blocking KafkaProducer, whose client
    and loop ask the coordinator."""
    future = asyncio.run_coroutine_threadsafe(
        mark_exists(producer.async_object.client, mark_id, timeout), producer.loop
    )
    exists = future.result()
    if exists is None:
        log.debug("the broker has no DescribeTransactions: %r cannot see whether its write has ended", txn_id)
        return
    if exists:
        raise KafkaTransactionError(
            f"transaction {txn_id!r} not begun: the driver already ended this write (committed or aborted: "
            f"mark {mark_id!r} exists); this task attempt outlived its job or lost to another attempt"
        )
