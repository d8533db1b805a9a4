"""The transactional calls of the asyncio producer (``TransactionalProducer``, a base class of
``KafkaProducer``): thin calls into its TransactionManager (manager.py), timeouts defaulting to
``max_block_ms``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.client.metadata import OffsetAndMetadata
from kafka_core.errors import KafkaClosedError, KafkaTransactionError
from kafka_core.producer.transactions.coordinator import Group
from kafka_core.producer.transactions.manager import TransactionManager, TransactionState
from kafka_core.producer.transactions.prepared import PreparedTransaction

if TYPE_CHECKING:
    from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata

__all__ = ["TransactionalProducer"]

S = TransactionState


class TransactionalProducer:
    """The transactional calls of the asyncio producer (its base class); see ``KafkaProducer``."""

    _txn: TransactionManager | None
    _max_block: float
    _closed: bool
    _task: asyncio.Task[None] | None

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        raise NotImplementedError

    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise KafkaTransactionError("this producer has no transactional_id: it cannot use transactions")
        if self._closed:
            raise KafkaClosedError("the producer is closed")
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        return self._txn

    def _timeout(self, timeout: float | None) -> float:
        return self._max_block if timeout is None else timeout

    @property
    def transaction_version(self) -> int:
        """The transaction protocol of the current transaction, or between transactions of the
        next one: 2 (KIP-890 part 2, where the cluster finalized ``transaction.version`` 2), 1
        (older brokers), 0 before init_transactions(). Re-read from the cluster at the end of each
        transaction (at most every 30 s), so a changed ``transaction.version`` takes effect at the
        next transaction; never inside one."""
        return self._txn.transaction_version if self._txn is not None else 0

    @property
    def transaction_state(self) -> TransactionState:
        """uninitialized, ready, in_transaction, committing, preparing, prepared, aborting,
        abortable_error or fatal_error."""
        return self._txn.state if self._txn is not None else S.UNINITIALIZED

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of ``transactional_id``, fencing older producers with it
        and finishing a transaction they left open. Once, before the first transaction."""
        await self._transactional().init(self._timeout(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction (no I/O): ``send`` is allowed until commit or abort."""
        self._transactional().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer's offsets (the NEXT offset to read, as ``consumer.commit``) with this
        transaction; ``group_metadata`` is ``consumer.group_metadata()`` (KIP-447 fencing of a
        zombie member) or a plain group id."""
        txn = self._transactional()
        group: Group
        if isinstance(group_metadata, str):
            group = (group_metadata, -1, "", None)
        else:
            g = group_metadata
            if not g.group_id:
                raise KafkaTransactionError("send_offsets_to_transaction: the consumer has no group_id")
            group = (g.group_id, g.generation_id, g.member_id, g.group_instance_id)
        await txn.send_offsets(offsets, group, self._timeout(timeout))

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Deliver every record of the transaction and leave it open (two-phase commit): then
        only commit_transaction()/abort_transaction() are allowed here, and close() keeps it
        open, so that ``kafka_core.producer.complete_transaction(prepared, commit=...)`` may end it
        from any process, within ``transaction_timeout_ms`` of its first record (the coordinator
        aborts it then). A failed record raises KafkaTransactionError(abortable=True) as a commit
        would. A transaction with nothing in it gives producer id -1 (complete does nothing)."""
        return PreparedTransaction(*await self._transactional().prepare(self._timeout(timeout)))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction (a prepared one: nothing left), then commit it."""
        await self._transactional().commit(self._timeout(timeout))

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail ("transaction aborted")."""
        await self._transactional().abort(self._timeout(timeout))
