"""The transactional producer's state machine (KIP-98, KIP-447, KIP-890).

One ``TransactionManager`` per producer with a ``transactional_id``. It owns the producer id and
epoch (through the IdempotenceState the sender stamps on batches), the partitions added to the
current transaction, and the operations on the coordinators (coordinator.TxnCoordinator). It
never sees the producer: what it needs (wake the sender, wait for every queued record to settle,
renumber the partitions after an epoch bump) is passed in as callables. ``TransactionalProducer``
(face.py) is the producer's public face of it (a base class of the asyncio producer).

Errors split as the Java client's: *abortable* (a record failed, TRANSACTION_ABORTABLE, a group
or topic authorisation, a lost producer id...) lets the application abort and go on, bumping the
epoch first when sequence numbers were lost; *fatal* (fenced by a newer producer, transactional
id not authorised, invalid transaction state) ends the producer, every later call raising it.

A coordinator operation (init, send_offsets, commit, abort) runs as a task: when the caller's
time runs out it goes on, and calling the same method again waits for it, as the Java client.

The state machine and the send gate are ``TxnStateMachine`` (states.py), a base class; the
producer id and epoch, and the step between two transactions (the next one's protocol re-read,
the epoch bumped when owed), are ``EpochStep`` (epoch.py): a commit or abort whose EndTxn
succeeded returns success whatever that step does; a step not done is the next transaction's
first, before it sends anything.

Transactions v2 (KIP-890 part 2; version.py), where the cluster offers it, chosen by
init_transactions and again at the end of each transaction for the next one: no
AddPartitionsToTxn (a Produce v12 adds its partition) and no AddOffsetsToTxn (TxnOffsetCommit v5
adds the group); every EndTxn bumps the epoch and answers the producer id and epoch the next
transaction uses, so a zombie's late Produce of an ended transaction is fenced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.errors import KafkaClosedError, KafkaProtocolError, KafkaTimeoutError, KafkaTransactionError
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.transactions.coordinator import (
    BUMP_CODES,
    PRODUCE_FATAL_CODES,
    Group,
    TxnCoordinator,
    retriable,
)
from kafka_core.producer.transactions.epoch import EpochStep
from kafka_core.producer.transactions.states import GateSends, TransactionState, TxnStateMachine
from kafka_core.producer.transactions.version import PRODUCE_V1_MAX_VERSION
from kafka_core.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafka_core.producer")

__all__ = ["TransactionManager", "TransactionState"]

E = ErrorCode
S = TransactionState


class TransactionManager(TxnStateMachine):
    """See the module docstring."""

    def __init__(
        self,
        client: Any,
        idem: IdempotenceState,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        request_timeout_ms: float,
        retry_backoff_ms: float,
        wake: Callable[[], None],
        drain: Callable[[], Awaitable[None]],
        reset_sequences: Callable[[], None],
        gate_sends: GateSends | None = None,
    ) -> None:
        super().__init__(transactional_id, wake, gate_sends)
        self.idem = idem
        self.coord = TxnCoordinator(
            client,
            transactional_id,
            idem,
            transaction_timeout_ms=transaction_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._drain = drain
        self.epoch = EpochStep(
            self.coord, idem, reset_sequences=reset_sequences, wake=wake, on_error=self.enter_error
        )
        self.added: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        self.started = False  # something was added to the coordinator's transaction (EndTxn needed)
        self._adder: asyncio.Task[None] | None = None
        self._phase = ""  # what the pending operation is doing (named when it runs out of time)
        self.counters = {"commits": 0, "aborts": 0, "commit_time_ms": 0.0, "abort_time_ms": 0.0}

    @classmethod
    def for_sender(
        cls,
        sender: Any,
        transactional_id: str,
        transaction_timeout_ms: int,
        request_timeout_ms: float,
        *,
        drain: Callable[[], Awaitable[None]],
    ) -> TransactionManager:
        """The manager of a producer's ``sender`` (given a fresh IdempotenceState: the id comes
        from init_transactions, never from the sender's own epoch bumps)."""
        sender.idem = IdempotenceState()
        return cls(
            sender.client,
            sender.idem,
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=sender.backoff * 1000.0,
            wake=sender.poke,  # a partition added, an abort: every slot looked at again
            drain=drain,
            reset_sequences=sender.reset_sequences,
            gate_sends=sender.acc.gate_sends,
        )

    # -- the sender's side (loop thread, accumulator lock held: no I/O, no waiting) ---------------

    def may_send(self, topic: str, partition: int) -> bool:
        """Whether batches of this partition may go now; asks for it to be added if not yet
        (v2: the Produce adds it)."""
        if not self._adding() or not self.epoch.ready():  # the step owed since the last one first
            return False
        if self.coord.v2:
            return True
        key = (topic, partition)
        if key in self.added:
            return True
        if key not in self.pending:
            self.pending.add(key)
            if self._adder is None or self._adder.done():
                self._adder = asyncio.get_running_loop().create_task(self._add_partitions())
        return False

    def produce_version(self, top: int) -> int:
        """The highest Produce version for a request of this transaction, as it leaves: v2 needs
        v12+ (the partitions join the transaction by it, so the transaction has begun at the
        coordinator, or may have: EndTxn is owed); v1 stays below 12 (as the Java client)."""
        if self.coord.v2:
            self.started = True
            return top
        return min(top, PRODUCE_V1_MAX_VERSION)

    @property
    def transaction_version(self) -> int:
        """2 for transactions v2 (KIP-890 part 2), 1 otherwise (0 until init_transactions)."""
        return 0 if self.coord.v2 is None else 2 if self.coord.v2 else 1

    def add_cause(self, topic: str) -> BaseException | None:
        """Why partitions of ``topic`` are still waiting to be added to the transaction (or for
        the step between transactions)."""
        if any(t == topic for t, _ in self.pending):
            return self.coord.last_cause
        return self.epoch.cause()

    def unsent_error(self) -> KafkaTransactionError | None:
        """What to fail batches not yet sent with: they must not go (aborting, or an error)."""
        state = self.state
        if state is S.ABORTING:
            return KafkaTransactionError("transaction aborted: the record was not sent")
        if state is S.ABORTABLE_ERROR or state is S.FATAL_ERROR:
            return self.error
        return None

    def need_bump(self) -> None:
        """Sequence numbers of this epoch were lost (a batch failed after it was numbered)."""
        self.epoch.bump_required = True

    def batch_failed(self, exc: BaseException) -> None:
        """A record of the transaction failed: the transaction cannot commit."""
        if isinstance(exc, KafkaTransactionError):
            if exc.fatal or exc.abortable:
                self.enter_error(exc)
            return
        code = exc.code if isinstance(exc, KafkaProtocolError) else None
        if code is not None and code in BUMP_CODES:
            self.epoch.bump_required = True
        if code is not None and code in PRODUCE_FATAL_CODES:
            self.enter_error(self._classify(code, "Produce"))
        else:
            self.enter_error(
                KafkaTransactionError(
                    f"transaction {self.transactional_id!r} cannot commit: a record failed ({exc}); "
                    "abort_transaction() and start again",
                    abortable=True,
                    code=code,
                )
            )

    def _classify(self, code: int, what: str) -> KafkaTransactionError:
        if code in BUMP_CODES:
            self.epoch.bump_required = True
        return self.coord.classify(code, what)

    # -- the application's calls -------------------------------------------------------------------

    async def init(self, timeout: float) -> None:
        if not self.resuming("init_transactions"):
            self.require("init_transactions", S.UNINITIALIZED)
        await self._run("init_transactions", self._init, timeout)

    def begin(self) -> None:
        self.require("begin_transaction", S.READY)
        self.added.clear()
        self.pending.clear()
        self.started = False
        self.error = None
        self.state = S.IN_TRANSACTION

    async def send_offsets(
        self, offsets: Mapping[Any, int | OffsetAndMetadata], group: Group, timeout: float
    ) -> None:
        if not self.resuming("send_offsets_to_transaction"):
            self.require("send_offsets_to_transaction", S.IN_TRANSACTION)
        wanted = {
            as_topic_partition(k): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            for k, v in offsets.items()
        }
        await self._run("send_offsets_to_transaction", lambda: self._send_offsets(wanted, group), timeout)

    async def prepare(self, timeout: float) -> tuple[str, int, int]:
        """Deliver every record of the transaction and keep it open at the coordinator, to be
        ended by any process with EndTxn under (transactional id, producer id, epoch). A
        transaction with nothing in it answers producer id -1: there is nothing to end."""
        if not self.resuming("prepare_transaction"):
            self.require("prepare_transaction", S.IN_TRANSACTION)
            self.leave_transaction(S.PREPARING)
        await self._run("prepare_transaction", self._prepare, timeout)
        if not self.started:
            return (self.transactional_id, -1, -1)
        return (self.transactional_id, self.idem.producer_id, self.idem.producer_epoch)

    async def commit(self, timeout: float) -> None:
        """Commit; then wait, within what is left of ``timeout``, for the step to the next
        transaction, which never fails the commit (epoch.py)."""
        deadline = time.monotonic() + timeout
        if not self.resuming("commit_transaction"):
            self.require("commit_transaction", S.IN_TRANSACTION, S.PREPARED)
            self.leave_transaction(S.COMMITTING)
        await self._run("commit_transaction", self._commit, timeout)
        await self.epoch.wait(deadline - time.monotonic())

    async def abort(self, timeout: float) -> None:
        """Abort; then the step to the next transaction, as :meth:`commit`."""
        deadline = time.monotonic() + timeout
        if not self.resuming("abort_transaction"):
            self.require("abort_transaction", S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.PREPARED)
            self.leave_transaction(S.ABORTING)
            self.wake()  # the sender fails what is not sent yet
        await self._run("abort_transaction", self._abort, timeout)
        await self.epoch.wait(deadline - time.monotonic())

    def close(self) -> None:
        """The producer closed: stop what still runs (a timed-out operation, adding partitions)."""
        for task in (self._adder, self.op[1] if self.op is not None else None):
            if task is not None and not task.done():
                task.cancel()
        self.epoch.close()
        self.op = None

    async def _run(self, call: str, make: Callable[[], Coroutine[Any, Any, None]], timeout: float) -> None:
        if self.op is not None and self.op[0] == call:
            task = self.op[1]
        else:
            self.coord.last_cause = None
            self._phase = ""
            task = asyncio.get_running_loop().create_task(make())
            self.op = (call, task)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            last = self.coord.last_cause
            cause = f" (still {self._phase})" if self._phase else ""
            cause += f"; last error: {last}" if last is not None else ""
            raise KafkaTimeoutError(
                f"{call}() did not finish within {timeout:g}s; it goes on in the background: "
                f"call {call}() again to wait for it{cause}"
            )
        if self.op is not None and self.op[1] is task:
            self.op = None
        task.result()

    # -- the operations (tasks) ----------------------------------------------------------------------

    async def _init(self) -> None:
        try:
            await self.epoch.new_id(bump=False)
            self._phase = "asking the coordinator for the transaction protocol (ApiVersions)"
            v2 = await self.coord.detect_v2()
        except KafkaTransactionError as exc:
            if exc.fatal:
                self.enter_error(exc)
            raise
        log.info("transactional producer %r: transactions v%d", self.transactional_id, 2 if v2 else 1)
        self.state = S.READY
        self.wake()

    async def _end_txn(self, commit: bool) -> None:
        """EndTxn; with v2, go on under the producer id and epoch it bumped to (sequence numbers
        start again from 0, and what the bump was wanted for is done)."""
        bumped = await self.coord.end_txn(commit)
        if bumped is not None:
            self.epoch.adopt(*bumped)

    async def _send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Group) -> None:
        try:
            await self.epoch.settled()  # the first request of the transaction, maybe
            if not self.coord.v2:  # v2: TxnOffsetCommit v5 adds the group itself
                self._phase = "adding the group to the transaction (AddOffsetsToTxn)"
                await self.coord.add_offsets(group[0])
            self.started = True
            self._phase = f"committing the offsets to group {group[0]!r} (TxnOffsetCommit)"
            await self.coord.commit_offsets(offsets, group)
        except KafkaTransactionError as exc:
            self.enter_error(exc)
            raise

    async def _commit(self) -> None:
        t0 = time.monotonic()
        try:
            self._phase = "delivering the transaction's records"
            await self.sends_appended()
            await self._drain()
            self._phase = "ending the transaction (EndTxn)"
            if self.state is not S.COMMITTING:  # a record failed meanwhile
                raise self.error or KafkaTransactionError("commit failed", abortable=True)
            if self.started:
                await self._end_txn(True)
        except KafkaTransactionError as exc:
            self.enter_error(exc)
            raise
        self.epoch.start()
        self.state = S.READY
        self.counters["commits"] += 1
        self.counters["commit_time_ms"] += (time.monotonic() - t0) * 1000.0

    async def _prepare(self) -> None:
        try:
            self._phase = "delivering the transaction's records"
            await self.sends_appended()
            await self._drain()
            if self.state is not S.PREPARING:  # a record failed meanwhile
                raise self.error or KafkaTransactionError("prepare failed", abortable=True)
        except KafkaTransactionError as exc:
            self.enter_error(exc)
            raise
        # Every batch went out only once its partition was added (may_send), offsets are added
        # by send_offsets itself: the coordinator's transaction holds all of it.
        self.state = S.PREPARED

    async def _abort(self) -> None:
        t0 = time.monotonic()
        try:
            self._phase = "waiting for the requests in flight"
            await self.sends_appended()
            await self._drain()  # what is in flight settles; the rest fails (unsent_error)
            if self._adder is not None:  # its request in flight may add partitions: EndTxn after it
                await asyncio.wait({self._adder})
            self.pending.clear()
            # The coordinator does not know this producer id any more: no EndTxn, only the bump.
            lost_id = self.error is not None and self.error.code == E.INVALID_PRODUCER_ID_MAPPING
            self._phase = "ending the transaction (EndTxn)"
            if self.started and not lost_id:
                await self._end_txn(False)
        except KafkaTransactionError as exc:
            if exc.fatal:
                self.enter_error(exc)
            else:
                self.state = S.ABORTABLE_ERROR
                self.error = self.error or exc
            raise
        self.epoch.start(cause=self.error)
        self.state = S.READY
        self.error = None
        self.counters["aborts"] += 1
        self.counters["abort_time_ms"] += (time.monotonic() - t0) * 1000.0
        self.wake()

    def _adding(self) -> bool:
        state = self.state
        return state is S.IN_TRANSACTION or state is S.COMMITTING or state is S.PREPARING

    async def _add_partitions(self) -> None:
        """Add what the sender asked for, in one request per round, until nothing is pending."""
        while self.pending and self._adding():
            wanted = sorted(self.pending)
            try:
                codes = await self.coord.add_partitions(wanted, stop=lambda: not self._adding())
            except KafkaTransactionError as exc:
                self.pending.clear()
                self.enter_error(exc)
                return
            except KafkaClosedError:
                return  # the producer closed meanwhile
            if codes is None:
                return  # aborting, or failed meanwhile: nothing more is added
            retry: KafkaProtocolError | None = None
            for key in wanted:
                code = codes.get(key, E.UNKNOWN_TOPIC_OR_PARTITION)
                if code == 0:
                    self.pending.discard(key)
                    self.added.add(key)
                    self.started = True
                elif retriable(code) or code == E.OPERATION_NOT_ATTEMPTED:
                    # Not attempted: another partition failed; name that one as the cause.
                    if code != E.OPERATION_NOT_ATTEMPTED or retry is None:
                        retry = error_for(code, f"AddPartitionsToTxn {key[0]}[{key[1]}]")
                    self.coord.moved(code)
                else:
                    self.pending.clear()
                    self.enter_error(self._classify(code, f"AddPartitionsToTxn {key[0]}[{key[1]}]"))
                    return
            self.wake()
            if retry is not None:
                await self.coord.pause(retry)

    def metrics(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "transaction_version": self.transaction_version,
            "producer_id": self.idem.producer_id,
            "producer_epoch": self.idem.producer_epoch,
            **self.counters,
        }
