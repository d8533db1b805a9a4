"""Prepared transactions: two-phase commit across processes on top of KIP-98.

A producer's ``prepare_transaction()`` delivers every record of its transaction and leaves it
open at the transaction coordinator; the ``PreparedTransaction`` it returns (transactional id,
producer id, epoch) is all another process needs to end it: ``complete_transaction`` sends the
EndTxn the producer would have sent. Kafka answers NONE to an EndTxn that repeats the way the
transaction already ended, so completing twice the same way is safe (a retry after a lost
answer); a newer producer that initialised the transactional id in between bumped the epoch and
aborted the transaction, and the EndTxn is answered PRODUCER_FENCED.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from kafka_core.client import KafkaClient
from kafka_core.errors import (
    KafkaConfigError,
    KafkaProducerFencedError,
    KafkaTimeoutError,
    KafkaTransactionError,
)
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.transactions.coordinator import TxnCoordinator, code_name
from kafka_core.protocol.errors import ErrorCode

__all__ = [
    "DEFAULT_COMPLETE_TIMEOUT",
    "PreparedTransaction",
    "complete_transaction",
    "fence_transactional_id",
]

DEFAULT_COMPLETE_TIMEOUT = 60.0
_REQUEST_TIMEOUT_MS = 30_000.0
_RETRY_BACKOFF_MS = 100.0

# What an EndTxn error means for a prepared transaction (beyond its code and name).
_HINTS: dict[int, str] = {
    ErrorCode.INVALID_TXN_STATE: (
        "the coordinator has no open transaction of this producer id and epoch to end this way "
        "(it was completed the other way, or aborted when transaction_timeout_ms ran out)"
    ),
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: (
        "the coordinator no longer maps the transactional id to this producer id (it expired, or a "
        "newer producer took the id): the prepared records were aborted"
    ),
}


class PreparedTransaction(NamedTuple):
    """A transaction delivered and left open by ``prepare_transaction()``: picklable, and
    JSON-able through ``_asdict()`` (rebuild with ``PreparedTransaction(**d)``). Producer id -1:
    the transaction had nothing in it, there is nothing to complete."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def as_prepared(prepared: PreparedTransaction | Sequence[Any]) -> PreparedTransaction:
    """``prepared`` as a PreparedTransaction (a tuple or list, e.g. from JSON, is accepted)."""
    try:
        txn_id, pid, epoch = prepared
    except (TypeError, ValueError):
        raise KafkaConfigError(
            f"expected a PreparedTransaction (transactional_id, producer_id, producer_epoch), not {prepared!r}"
        ) from None
    if not isinstance(txn_id, str) or not txn_id:
        raise KafkaConfigError(
            f"PreparedTransaction.transactional_id must be a non-empty str, not {txn_id!r}"
        )
    for name, value in (("producer_id", pid), ("producer_epoch", epoch)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise KafkaConfigError(f"PreparedTransaction.{name} must be an int, not {value!r}")
    return PreparedTransaction(txn_id, pid, epoch)


async def complete_transaction(
    prepared: PreparedTransaction | Sequence[Any],
    *,
    commit: bool,
    bootstrap_servers: str | Sequence[str] = "localhost:9092",
    client: KafkaClient | None = None,
    timeout: float | None = None,
    **client_options: Any,
) -> None:
    """Commit (``commit=True``) or abort a prepared transaction from any process: EndTxn to the
    transaction coordinator of its transactional id, retried through coordinator moves and
    CONCURRENT_TRANSACTIONS for up to ``timeout`` s (default 60), then KafkaTimeoutError with the
    last cause. A newer producer that took the transactional id raises KafkaProducerFencedError
    (the prepared records were aborted); other answers raise KafkaTransactionError with the
    Kafka error code and name. ``client``: a KafkaClient to use (on this loop, left open);
    otherwise one is built from ``bootstrap_servers`` and ``client_options`` and closed."""
    txn = as_prepared(prepared)
    if txn.producer_id < 0:
        return  # nothing was written in it: the coordinator has nothing to end
    limit = DEFAULT_COMPLETE_TIMEOUT if timeout is None else timeout
    request_timeout_ms = float(client_options.get("request_timeout_ms", _REQUEST_TIMEOUT_MS))
    own = client is None
    kafka = client if client is not None else KafkaClient(bootstrap_servers, **client_options)
    idem = IdempotenceState()
    idem.producer_id, idem.producer_epoch = txn.producer_id, txn.producer_epoch
    coord = TxnCoordinator(
        kafka,
        txn.transactional_id,
        idem,
        transaction_timeout_ms=0,  # not used by EndTxn
        request_timeout_ms=min(request_timeout_ms, max(limit, 0.001) * 1000.0),
        retry_backoff_ms=_RETRY_BACKOFF_MS,
    )
    what = (
        f"{'committing' if commit else 'aborting'} prepared transaction {txn.transactional_id!r} "
        f"(producer id {txn.producer_id}, epoch {txn.producer_epoch})"
    )
    try:
        await _within(
            coord.end_txn(commit), limit, coord, what, "; it is safe to call complete_transaction again"
        )
    except KafkaProducerFencedError as exc:
        raise KafkaProducerFencedError(
            f"{what} failed: [Error {exc.code}] {code_name(exc.code or 0)}: a newer producer took "
            "the transactional id: the prepared records were aborted",
            code=exc.code,
        ) from exc
    except KafkaTransactionError as exc:
        name = f"[Error {exc.code}] {code_name(exc.code)}" if exc.code is not None else str(exc)
        hint = _HINTS.get(exc.code) if exc.code is not None else None
        raise KafkaTransactionError(
            f"{what} failed: {name}" + (f": {hint}" if hint else ""), code=exc.code
        ) from exc
    finally:
        if own:
            await kafka.close()


async def _within(coro: Any, limit: float, coord: TxnCoordinator, what: str, advice: str = "") -> Any:
    """``coro``'s result, or KafkaTimeoutError after ``limit`` s naming the last retried cause."""
    task = asyncio.get_running_loop().create_task(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=limit)
        if not done:
            last = coord.last_cause
            raise KafkaTimeoutError(
                f"{what} did not finish within {limit:g}s"
                + (f"; last error: {last}" if last is not None else "")
                + advice
            )
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def fence_transactional_id(
    transactional_id: str,
    *,
    transaction_timeout_ms: int = 60_000,
    bootstrap_servers: str | Sequence[str] = "localhost:9092",
    client: KafkaClient | None = None,
    timeout: float | None = None,
    **client_options: Any,
) -> tuple[int, int]:
    """End whatever transaction ``transactional_id`` has open, from any process, as a new
    producer with that id would: InitProducerId, after which the coordinator has aborted the open
    transaction (read_committed readers move past it at once instead of after its timeout) and
    bumped the epoch, so a producer still holding the id is fenced. For work whose producers died
    without a word (a killed task). Returns the producer id and epoch the id now has.
    ``timeout`` (default 60 s) and ``client`` as in ``complete_transaction``."""
    if not isinstance(transactional_id, str) or not transactional_id:
        raise KafkaConfigError(f"transactional_id must be a non-empty str, not {transactional_id!r}")
    limit = DEFAULT_COMPLETE_TIMEOUT if timeout is None else timeout
    request_timeout_ms = float(client_options.get("request_timeout_ms", _REQUEST_TIMEOUT_MS))
    own = client is None
    kafka = client if client is not None else KafkaClient(bootstrap_servers, **client_options)
    coord = TxnCoordinator(
        kafka,
        transactional_id,
        IdempotenceState(),
        transaction_timeout_ms=transaction_timeout_ms,
        request_timeout_ms=min(request_timeout_ms, max(limit, 0.001) * 1000.0),
        retry_backoff_ms=_RETRY_BACKOFF_MS,
    )
    try:
        return await _within(
            coord.init_producer_id(bump=False, cause=None),
            limit,
            coord,
            f"fencing transactional id {transactional_id!r}",
        )
    finally:
        if own:
            await kafka.close()
