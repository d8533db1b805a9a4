"""The transactional producer's producer id and epoch, and the step between two transactions.

After a transaction ends (EndTxn answered, or nothing to end) the next one's protocol is re-read
(``TxnCoordinator.refresh_version``: at most every FEATURE_REFRESH_S, a failed read keeping the
version) and the epoch is bumped (InitProducerId, KIP-360) when one is owed: sequence numbers
were lost, or an upgrade to transactions v2. That step is the next transaction's, not the ended
one's, as the Java client has it: the commit or abort has already happened at the coordinator,
so its call returns success whatever the step does. The call waits for the step within its own
timeout; a step still running then goes on in the background, and one that failed stays owed.
Before the next transaction's first request (its first record's partition add or Produce,
send_offsets) the step is waited for, and a failed one retried once: if it fails again, the
transaction fails with it (abortable, or fatal when the producer was fenced), naming the cause.
A fatal answer (fenced by a newer producer, a broker that cannot bump) ends the producer
whenever it comes. A retriable failure never ends the step: InitProducerId is retried (the
coordinator moving, a lost connection) until it is answered, however many calls that spans.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafka_core.errors import KafkaProtocolError, KafkaTransactionError
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.transactions.coordinator import TxnCoordinator

log = logging.getLogger("kafka_core.producer")

__all__ = ["EpochStep"]


class EpochStep:
    """The producer id and epoch of a transactional producer and its between-transactions step;
    ``on_error`` is the transaction manager's (a fatal failure, or a retry failing in a
    transaction)."""

    def __init__(
        self,
        coord: TxnCoordinator,
        idem: IdempotenceState,
        *,
        reset_sequences: Callable[[], None],
        wake: Callable[[], None],
        on_error: Callable[[KafkaTransactionError], None],
    ) -> None:
        self.coord = coord
        self.idem = idem
        self._reset_sequences = reset_sequences
        self._wake = wake
        self._on_error = on_error
        self.bump_required = False  # sequence numbers of this epoch were lost: bump it
        self.owed = False  # the step has not succeeded since the last transaction ended
        self.failure: Exception | None = None  # why its last attempt failed
        # The step failed a transaction (its retry in it failed) or the producer (fatal): no more
        # attempts until a transaction ends again.
        self.error: KafkaTransactionError | None = None
        self.phase = ""
        self._task: asyncio.Task[None] | None = None
        self._in_transaction = False  # the running attempt is a transaction's: its failure is too
        self._bump_cause: BaseException | None = None  # why the bump is owed (named if refused)

    # -- the producer id and epoch ---------------------------------------------------------------

    async def new_id(self, *, bump: bool, cause: BaseException | None = None) -> None:
        """InitProducerId: a first id, or the next epoch of ours; sequence numbers start again."""
        pid, epoch = await self.coord.init_producer_id(bump=bump, cause=cause)
        self.adopt(pid, epoch)

    def adopt(self, pid: int, epoch: int) -> None:
        """Go on under ``pid``/``epoch`` (from InitProducerId, or bumped by a v2 EndTxn): what a
        bump was owed for is done, and every partition numbers from 0."""
        self.idem.producer_id, self.idem.producer_epoch = pid, epoch
        self.idem.bump_needed = False
        self.bump_required = False
        self._reset_sequences()

    # -- the step between transactions ---------------------------------------------------------

    def start(self, cause: BaseException | None = None) -> None:
        """A transaction ended: begin the step for the next one (unless an attempt is running)."""
        self.owed = True
        if self.error is not None and self.error.fatal:
            return
        self.error = None
        self._in_transaction = False  # an attempt still running is this step's now
        if self._task is None or self._task.done():
            self._bump_cause = cause
            self._task = asyncio.get_running_loop().create_task(self._attempt())

    async def wait(self, timeout: float) -> None:
        """The ended transaction's call waits for the step at most ``timeout``; never raises (a
        step not done is owed to the next transaction)."""
        task = self._task
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout))
        if not done:
            log.info(
                "transaction %r ended; %s still runs: the next transaction waits for it",
                self.coord.transactional_id,
                self.phase or "the step between transactions",
            )

    def ready(self) -> bool:
        """Sender side (no waiting, any lock held): whether the transaction may send; starts the
        owed step's retry when none is running (its failure failing the transaction)."""
        if not self.owed:
            return True
        self._retry()
        return False

    async def settled(self) -> None:
        """Before a coordinator request of the transaction: the owed step done, retried once if
        it failed; raises its failure (already the transaction's error)."""
        while self.owed:
            task = self._retry()
            if task is None:
                raise self.error or KafkaTransactionError("the step between transactions failed")
            await asyncio.shield(task)

    def cause(self) -> BaseException | None:
        """Why the step is not done (a record timing out while it waits names this)."""
        if not self.owed:
            return None
        return self.error or self.failure or self.coord.last_cause

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _retry(self) -> asyncio.Task[None] | None:
        """The attempt running, or a retry started; None once the transaction failed with it."""
        task = self._task
        if task is not None and not task.done():
            return task
        if self.error is not None:
            return None
        self._in_transaction = True
        self._task = asyncio.get_running_loop().create_task(self._attempt())
        return self._task

    async def _attempt(self) -> None:
        """One attempt at the step; its failure is kept (and the transaction's, on a retry)."""
        try:
            self.phase = "re-reading the cluster's transaction.version (ApiVersions)"
            self.bump_required = await self.coord.refresh_version() or self.bump_required
            if self.bump_required:
                self.phase = "bumping the epoch (InitProducerId)"
                await self.new_id(bump=True, cause=self._bump_cause)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # kept, never lost in a task nobody awaits
            self._failed(exc)
        else:
            self.owed, self.failure, self.error, self.phase = False, None, None, ""
        self._wake()

    def _failed(self, exc: Exception) -> None:
        self.failure = exc
        if isinstance(exc, KafkaTransactionError) and exc.fatal:
            self.error = exc
            self._on_error(exc)
            return
        tid = self.coord.transactional_id
        if not self._in_transaction:
            log.warning(
                "transactional producer %r: %s failed after the transaction ended (%s): the next "
                "transaction retries it before it sends anything",
                tid,
                self.phase,
                exc,
            )
            return
        self.error = KafkaTransactionError(
            f"transaction {tid!r} cannot go on: {self.phase}, owed since the last transaction "
            f"ended, failed again ({exc}); abort_transaction() and start again (the next "
            "transaction retries it)",
            abortable=True,
            code=exc.code if isinstance(exc, KafkaTransactionError | KafkaProtocolError) else None,
        )
        self._on_error(self.error)
