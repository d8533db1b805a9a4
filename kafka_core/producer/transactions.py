"""The transactional producer's state machine (KIP-98, KIP-447, KIP-890).

One ``TransactionManager`` per producer with a ``transactional_id``. It owns the producer id and
epoch (through the IdempotenceState the sender stamps on batches), the partitions added to the
current transaction, and the operations on the coordinators (txn_requests.TxnCoordinator). It
never sees the producer: what it needs (wake the sender, wait for every queued record to settle,
renumber the partitions after an epoch bump) is passed in as callables. ``TransactionalProducer``
(txn_face) is the producer's public face of it (a base class of the asyncio producer).

Errors split as the Java client's: *abortable* (a record failed, TRANSACTION_ABORTABLE, a group
or topic authorisation, a lost producer id...) lets the application abort and go on, bumping the
epoch first when sequence numbers were lost; *fatal* (fenced by a newer producer, transactional
id not authorised, invalid transaction state) ends the producer, every later call raising it.

A coordinator operation (init, send_offsets, commit, abort) runs as a task: when the caller's
time runs out it goes on, and calling the same method again waits for it, as the Java client.

Transactions v2 (KIP-890 part 2; txn_version), where the cluster offers it, chosen by
init_transactions and again at the end of each transaction for the next one
(``_next_version``): no AddPartitionsToTxn (a Produce v12 adds its partition) and no
AddOffsetsToTxn (TxnOffsetCommit v5 adds the group); every EndTxn bumps the epoch and answers
the producer id and epoch the next transaction uses, so a zombie's late Produce of an ended
transaction is fenced.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.errors import KafkaClosedError, KafkaProtocolError, KafkaTimeoutError, KafkaTransactionError
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.txn_requests import (
    BUMP_CODES,
    PRODUCE_FATAL_CODES,
    Group,
    TxnCoordinator,
    retriable,
)
from kafka_core.producer.txn_version import PRODUCE_V1_MAX_VERSION
from kafka_core.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafka_core.producer")

__all__ = ["TransactionManager", "TransactionState"]

E = ErrorCode


class TransactionState(StrEnum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    PREPARING = "preparing"
    PREPARED = "prepared"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


S = TransactionState


class TransactionManager:
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
        gate_sends: Callable[[Callable[[], Callable[[], BaseException] | None]], None] | None = None,
    ) -> None:
        self._gate_sends = gate_sends
        self._state = S.UNINITIALIZED
        self._pending_op: tuple[str, asyncio.Task[Any]] | None = None
        self.idem = idem
        self.transactional_id = transactional_id
        self.coord = TxnCoordinator(
            client,
            transactional_id,
            idem,
            transaction_timeout_ms=transaction_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._wake = wake
        self._drain = drain
        self._reset_sequences = reset_sequences
        self.error: KafkaTransactionError | None = None  # the first cause (abortable) or the fatal one
        self.bump_required = False
        self.added: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        self.started = False  # something was added to the coordinator's transaction (EndTxn needed)
        self._adder: asyncio.Task[None] | None = None
        self._phase = ""  # what the pending operation is doing (named when it runs out of time)
        self.counters = {"commits": 0, "aborts": 0, "commit_time_ms": 0.0, "abort_time_ms": 0.0}
        # Record sends are gated by the accumulator (``gate_sends``, under its lock): a record is
        # appended in the transaction it was sent in, or refused. ``send_batch`` calls, which
        # append chunk by chunk, are counted between their state check and their last append, so
        # that a transaction ends only after they appended.
        self._gate = threading.Lock()
        self._sending = 0
        self._sends_done: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._sync_gate()

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
            wake=sender.wake,
            drain=drain,
            reset_sequences=sender.reset_sequences,
            gate_sends=sender.acc.gate_sends,
        )

    # -- the sender's side (loop thread, accumulator lock held: no I/O, no waiting) ---------------

    def may_send(self, topic: str, partition: int) -> bool:
        """Whether batches of this partition may go now; asks for it to be added if not yet
        (v2: the Produce adds it)."""
        if not self._adding():
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
        """Why partitions of ``topic`` are still waiting to be added to the transaction."""
        if any(t == topic for t, _ in self.pending):
            return self.coord.last_cause
        return None

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
        self.bump_required = True

    def batch_failed(self, exc: BaseException) -> None:
        """A record of the transaction failed: the transaction cannot commit."""
        if isinstance(exc, KafkaTransactionError):
            if exc.fatal or exc.abortable:
                self._enter_error(exc)
            return
        code = exc.code if isinstance(exc, KafkaProtocolError) else None
        if code is not None and code in BUMP_CODES:
            self.bump_required = True
        if code is not None and code in PRODUCE_FATAL_CODES:
            self._enter_error(self._classify(code, "Produce"))
        else:
            self._enter_error(
                KafkaTransactionError(
                    f"transaction {self.transactional_id!r} cannot commit: a record failed ({exc}); "
                    "abort_transaction() and start again",
                    abortable=True,
                    code=code,
                )
            )

    # -- state ---------------------------------------------------------------------------------------

    @property
    def state(self) -> TransactionState:
        return self._state

    @state.setter
    def state(self, state: TransactionState) -> None:
        self._state = state
        self._sync_gate()

    @property
    def _op(self) -> tuple[str, asyncio.Task[Any]] | None:
        """The coordinator operation running (or finished and not yet collected): name, task."""
        return self._pending_op

    @_op.setter
    def _op(self, op: tuple[str, asyncio.Task[Any]] | None) -> None:
        self._pending_op = op
        if op is not None and not op[1].done():
            op[1].add_done_callback(lambda _task: self._sync_gate())
        self._sync_gate()

    def _sync_gate(self) -> None:
        """Open or close the accumulator to records as the state now says. Never called with the
        accumulator's lock held (the state never changes under it)."""
        if self._gate_sends is not None:
            self._gate_sends(self._send_gate)

    def _send_gate(self) -> Callable[[], BaseException] | None:
        """None while a record may be added (in a transaction, no operation running); else what
        makes the error a send raises."""
        op = self._pending_op
        if self._state is S.IN_TRANSACTION and (op is None or op[1].done()):
            return None
        return self._send_refused

    def _send_refused(self) -> BaseException:
        return self._state_error("send", S.IN_TRANSACTION) or KafkaTransactionError(
            f"send() is not allowed now (state {self._state.value})"
        )

    def _enter_error(self, err: KafkaTransactionError) -> None:
        if self.state is S.FATAL_ERROR:
            return
        if err.fatal:
            log.error("transactional producer %r: fatal error: %s", self.transactional_id, err)
            self.state, self.error = S.FATAL_ERROR, err
        elif self.state in (S.IN_TRANSACTION, S.COMMITTING, S.PREPARING, S.ABORTABLE_ERROR):
            if self.error is None:
                log.warning("transaction %r must be aborted: %s", self.transactional_id, err)
                self.error = err
            self.state = S.ABORTABLE_ERROR
        self._wake()

    def _classify(self, code: int, what: str) -> KafkaTransactionError:
        if code in BUMP_CODES:
            self.bump_required = True
        return self.coord.classify(code, what)

    def _invalid(self, call: str, why: str) -> KafkaTransactionError:
        if self.state is S.FATAL_ERROR and self.error is not None:
            return self.error
        if self._op is not None and not self._op[1].done():
            why = f"{self._op[0]}() is still in progress (it timed out: call it again to wait for it)"
        return KafkaTransactionError(f"{call}() is not allowed now: {why} (state {self.state.value})")

    def _state_error(self, call: str, *states: TransactionState) -> KafkaTransactionError | None:
        """Why ``call`` is not allowed now (None: it is); changes nothing (any thread may ask)."""
        op = self._op
        if op is not None and not op[1].done():
            return self._invalid(call, "")
        if self.state in states:
            return None
        if self.state is S.ABORTABLE_ERROR and self.error is not None:
            return self.error
        why = {
            S.UNINITIALIZED: "call init_transactions() first",
            S.READY: "no transaction begun: call begin_transaction() first",
            S.IN_TRANSACTION: "a transaction is already in progress",
            S.PREPARED: "the transaction is prepared: commit_transaction() or abort_transaction() it, "
            "or close() and complete_transaction() it from elsewhere",
        }.get(self.state, f"the transaction is {self.state.value}")
        return self._invalid(call, why)

    def _require(self, call: str, *states: TransactionState) -> None:
        """Raise unless in one of ``states`` with no other operation pending."""
        err = self._state_error(call, *states)
        if err is not None:
            raise err
        op, self._op = self._op, None  # one that finished in the background, never collected
        if op is not None and not op[1].cancelled():
            op[1].exception()

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction with no operation pending (raised in the
        caller's thread, nothing queued)."""
        if self.state is not S.IN_TRANSACTION or self._op is not None:
            err = self._state_error("send", S.IN_TRANSACTION)
            if err is not None:
                raise err

    def enter_send(self) -> None:
        """Before a ``send_batch``'s appends (any thread): check the state, and hold the
        transaction's end (commit, abort, prepare) until :meth:`exit_send`, so its records are
        delivered or failed with the transaction they were sent in, never held over to the next."""
        with self._gate:
            self.check_send()
            self._sending += 1

    def exit_send(self) -> None:
        """After the append of a send that :meth:`enter_send` let in (appended or failed)."""
        with self._gate:
            self._sending -= 1
            done = self._sends_done if self._sending == 0 else None
        if done is not None:
            done[0].call_soon_threadsafe(done[1].set)

    @contextmanager
    def sending(self) -> Iterator[None]:
        """:meth:`enter_send` ... :meth:`exit_send` around a block."""
        self.enter_send()
        try:
            yield
        finally:
            self.exit_send()

    def _end(self, state: TransactionState) -> None:
        """Leave IN_TRANSACTION (under the gate: a send checked after this is refused)."""
        with self._gate:
            self.state = state

    async def _sends_appended(self) -> None:
        """Wait for the sends that passed their check before the transaction's end to append."""
        while True:
            with self._gate:
                if self._sending == 0:
                    self._sends_done = None
                    return
                event = asyncio.Event()
                self._sends_done = (asyncio.get_running_loop(), event)
            await event.wait()

    # -- the application's calls -------------------------------------------------------------------

    async def init(self, timeout: float) -> None:
        if not self._resuming("init_transactions"):
            self._require("init_transactions", S.UNINITIALIZED)
        await self._run("init_transactions", self._init, timeout)

    def begin(self) -> None:
        self._require("begin_transaction", S.READY)
        self.added.clear()
        self.pending.clear()
        self.started = False
        self.error = None
        self.state = S.IN_TRANSACTION

    async def send_offsets(
        self, offsets: Mapping[Any, int | OffsetAndMetadata], group: Group, timeout: float
    ) -> None:
        if not self._resuming("send_offsets_to_transaction"):
            self._require("send_offsets_to_transaction", S.IN_TRANSACTION)
        wanted = {
            as_topic_partition(k): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            for k, v in offsets.items()
        }
        await self._run("send_offsets_to_transaction", lambda: self._send_offsets(wanted, group), timeout)

    async def prepare(self, timeout: float) -> tuple[str, int, int]:
        """Deliver every record of the transaction and keep it open at the coordinator, to be
        ended by any process with EndTxn under (transactional id, producer id, epoch). A
        transaction with nothing in it answers producer id -1: there is nothing to end."""
        if not self._resuming("prepare_transaction"):
            self._require("prepare_transaction", S.IN_TRANSACTION)
            self._end(S.PREPARING)
        await self._run("prepare_transaction", self._prepare, timeout)
        if not self.started:
            return (self.transactional_id, -1, -1)
        return (self.transactional_id, self.idem.producer_id, self.idem.producer_epoch)

    async def commit(self, timeout: float) -> None:
        if not self._resuming("commit_transaction"):
            self._require("commit_transaction", S.IN_TRANSACTION, S.PREPARED)
            self._end(S.COMMITTING)
        await self._run("commit_transaction", self._commit, timeout)

    async def abort(self, timeout: float) -> None:
        if not self._resuming("abort_transaction"):
            self._require("abort_transaction", S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.PREPARED)
            self._end(S.ABORTING)
            self._wake()  # the sender fails what is not sent yet
        await self._run("abort_transaction", self._abort, timeout)

    def close(self) -> None:
        """The producer closed: stop what still runs (a timed-out operation, adding partitions)."""
        for task in (self._adder, self._op[1] if self._op is not None else None):
            if task is not None and not task.done():
                task.cancel()
        self._op = None

    @property
    def ongoing(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.ABORTABLE_ERROR)

    def _resuming(self, call: str) -> bool:
        return self._op is not None and self._op[0] == call

    async def _run(self, call: str, make: Callable[[], Coroutine[Any, Any, None]], timeout: float) -> None:
        if self._op is not None and self._op[0] == call:
            task = self._op[1]
        else:
            self.coord.last_cause = None
            self._phase = ""
            task = asyncio.get_running_loop().create_task(make())
            self._op = (call, task)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            last = self.coord.last_cause
            cause = f" (still {self._phase})" if self._phase else ""
            cause += f"; last error: {last}" if last is not None else ""
            raise KafkaTimeoutError(
                f"{call}() did not finish within {timeout:g}s; it goes on in the background: "
                f"call {call}() again to wait for it{cause}"
            )
        if self._op is not None and self._op[1] is task:
            self._op = None
        task.result()

    # -- the operations (tasks) ----------------------------------------------------------------------

    async def _init(self) -> None:
        try:
            await self._new_id(bump=False)
            self._phase = "asking the coordinator for the transaction protocol (ApiVersions)"
            v2 = await self.coord.detect_v2()
        except KafkaTransactionError as exc:
            if exc.fatal:
                self._enter_error(exc)
            raise
        log.info("transactional producer %r: transactions v%d", self.transactional_id, 2 if v2 else 1)
        self.state = S.READY
        self._wake()

    async def _new_id(self, *, bump: bool) -> None:
        pid, epoch = await self.coord.init_producer_id(bump=bump, cause=self.error)
        self.idem.producer_id, self.idem.producer_epoch = pid, epoch
        self.idem.bump_needed = False
        self.bump_required = False
        self._reset_sequences()

    async def _end_txn(self, commit: bool) -> None:
        """EndTxn; with v2, go on under the producer id and epoch it bumped to (sequence numbers
        start again from 0, and what the bump was wanted for is done)."""
        bumped = await self.coord.end_txn(commit)
        if bumped is not None:
            self.idem.producer_id, self.idem.producer_epoch = bumped
            self.idem.bump_needed = False
            self.bump_required = False
            self._reset_sequences()

    async def _next_version(self) -> None:
        """Between transactions: the next one's protocol; the epoch bumped if owed or on an upgrade."""
        self._phase = "re-reading the cluster's transaction.version (ApiVersions)"
        self.bump_required = await self.coord.refresh_version() or self.bump_required
        self._phase = "bumping the epoch (InitProducerId)"
        if self.bump_required:
            await self._new_id(bump=True)

    async def _send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Group) -> None:
        try:
            if not self.coord.v2:  # v2: TxnOffsetCommit v5 adds the group itself
                self._phase = "adding the group to the transaction (AddOffsetsToTxn)"
                await self.coord.add_offsets(group[0])
            self.started = True
            self._phase = f"committing the offsets to group {group[0]!r} (TxnOffsetCommit)"
            await self.coord.commit_offsets(offsets, group)
        except KafkaTransactionError as exc:
            self._enter_error(exc)
            raise

    async def _commit(self) -> None:
        t0 = time.monotonic()
        try:
            self._phase = "delivering the transaction's records"
            await self._sends_appended()
            await self._drain()
            self._phase = "ending the transaction (EndTxn)"
            if self.state is not S.COMMITTING:  # a record failed meanwhile
                raise self.error or KafkaTransactionError("commit failed", abortable=True)
            if self.started:
                await self._end_txn(True)
            await self._next_version()
        except KafkaTransactionError as exc:
            self._enter_error(exc)
            raise
        self.state = S.READY
        self.counters["commits"] += 1
        self.counters["commit_time_ms"] += (time.monotonic() - t0) * 1000.0

    async def _prepare(self) -> None:
        try:
            self._phase = "delivering the transaction's records"
            await self._sends_appended()
            await self._drain()
            if self.state is not S.PREPARING:  # a record failed meanwhile
                raise self.error or KafkaTransactionError("prepare failed", abortable=True)
        except KafkaTransactionError as exc:
            self._enter_error(exc)
            raise
        # Every batch went out only once its partition was added (may_send), offsets are added
        # by send_offsets itself: the coordinator's transaction holds all of it.
        self.state = S.PREPARED

    async def _abort(self) -> None:
        t0 = time.monotonic()
        try:
            self._phase = "waiting for the requests in flight"
            await self._sends_appended()
            await self._drain()  # what is in flight settles; the rest fails (unsent_error)
            if self._adder is not None:  # its request in flight may add partitions: EndTxn after it
                await asyncio.wait({self._adder})
            self.pending.clear()
            # The coordinator does not know this producer id any more: no EndTxn, only the bump.
            lost_id = self.error is not None and self.error.code == E.INVALID_PRODUCER_ID_MAPPING
            self._phase = "ending the transaction (EndTxn)"
            if self.started and not lost_id:
                await self._end_txn(False)
            await self._next_version()
        except KafkaTransactionError as exc:
            if exc.fatal:
                self._enter_error(exc)
            else:
                self.state = S.ABORTABLE_ERROR
                self.error = self.error or exc
            raise
        self.state = S.READY
        self.error = None
        self.counters["aborts"] += 1
        self.counters["abort_time_ms"] += (time.monotonic() - t0) * 1000.0
        self._wake()

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
                self._enter_error(exc)
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
                    self._enter_error(self._classify(code, f"AddPartitionsToTxn {key[0]}[{key[1]}]"))
                    return
            self._wake()
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
