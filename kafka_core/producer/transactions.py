"""The transactional producer's state machine (KIP-98, KIP-447; KIP-890 part 1's error).

One ``TransactionManager`` per producer with a ``transactional_id``. It owns the producer id and
epoch (through the IdempotenceState the sender stamps on batches), the partitions added to the
current transaction, and the calls to the transaction and group coordinators. It never sees the
producer: what it needs (wake the sender, wait for every queued record to settle, renumber the
partitions after an epoch bump) is passed in as callables.

Errors split as the Java client's: *abortable* (a record failed, TRANSACTION_ABORTABLE, a group
or topic authorisation, a lost producer id...) lets the application abort and go on, bumping the
epoch first when sequence numbers were lost; *fatal* (fenced by a newer producer, transactional
id not authorised, invalid transaction state) ends the producer, every later call raising it.

A coordinator operation (init, send_offsets, commit, abort) runs as a task: when the caller's
time runs out it goes on, and calling the same method again waits for it, as the Java client.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from enum import StrEnum
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.errors import (
    KafkaCodecError,
    KafkaConnectionError,
    KafkaProducerFencedError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaTransactionError,
    KafkaUnsupportedVersionError,
)
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.txn_requests import add_offsets, add_partitions, end_txn, txn_offset_commit
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import (
    COORDINATOR_CODES,
    PRODUCER_ID_CODES,
    REJOIN_CODES,
    RETRIABLE_CODES,
    ErrorCode,
    error_for,
)

log = logging.getLogger("kafka_core.producer")

__all__ = ["TransactionManager", "TransactionState"]

E = ErrorCode
# Another producer took the transactional id over: fatal, as KafkaProducerFencedError.
FENCED_CODES = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH})
# The producer cannot go on whatever the application does (the Java client's fatal errors).
FATAL_CODES = frozenset(
    {
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.INVALID_TXN_STATE,
        E.INVALID_TRANSACTION_TIMEOUT,
        E.UNSUPPORTED_VERSION,
        E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)
# Abortable, and sequence numbers were lost: the epoch is bumped when the transaction is aborted.
BUMP_CODES = (PRODUCER_ID_CODES - FENCED_CODES) | {
    E.OUT_OF_ORDER_SEQUENCE_NUMBER,
    E.INVALID_PRODUCER_ID_MAPPING,
}
# Partitions of an AddPartitionsToTxn the broker did not try because another one failed.
_NOT_ATTEMPTED = E.OPERATION_NOT_ATTEMPTED
CONCURRENT_BACKOFF = 0.02  # CONCURRENT_TRANSACTIONS clears quickly (the Java client's 20 ms)
BUMP_MIN_VERSION = 3  # InitProducerId with the current id and epoch (KIP-360)


class TransactionState(StrEnum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


S = TransactionState


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN"


def _retriable(code: int) -> bool:
    return code in RETRIABLE_CODES or code in COORDINATOR_CODES


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
    ) -> None:
        self.client = client
        self.idem = idem
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.backoff = retry_backoff_ms / 1000.0
        self._wake = wake
        self._drain = drain
        self._reset_sequences = reset_sequences
        self.state = S.UNINITIALIZED
        self.error: KafkaTransactionError | None = None  # the first cause (abortable) or the fatal one
        self.bump_required = False
        self.added: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        self.started = False  # something was added to the coordinator's transaction (EndTxn needed)
        self._adder: asyncio.Task[None] | None = None
        self._op: tuple[str, asyncio.Task[Any]] | None = None
        self._refresh = False
        self.last_cause: BaseException | None = None
        self.counters = {"commits": 0, "aborts": 0, "commit_time_ms": 0.0, "abort_time_ms": 0.0}

    # -- the sender's side (loop thread, accumulator lock held: no I/O, no waiting) ---------------

    def may_send(self, topic: str, partition: int) -> bool:
        """Whether batches of this partition may go now; asks for it to be added if not yet."""
        state = self.state
        if state is not S.IN_TRANSACTION and state is not S.COMMITTING:
            return False
        key = (topic, partition)
        if key in self.added:
            return True
        if key not in self.pending:
            self.pending.add(key)
            if self._adder is None or self._adder.done():
                self._adder = asyncio.get_running_loop().create_task(self._add_partitions())
        return False

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
        if (code is not None and code in BUMP_CODES) or isinstance(exc, KafkaTimeoutError):
            self.bump_required = True
        if code is not None and (code in FENCED_CODES or code in FATAL_CODES):
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

    def _enter_error(self, err: KafkaTransactionError) -> None:
        if self.state is S.FATAL_ERROR:
            return
        if err.fatal:
            log.error("transactional producer %r: fatal error: %s", self.transactional_id, err)
            self.state, self.error = S.FATAL_ERROR, err
        elif self.state in (S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR):
            if self.error is None:
                log.warning("transaction %r must be aborted: %s", self.transactional_id, err)
                self.error = err
            self.state = S.ABORTABLE_ERROR
        self._wake()

    def _classify(self, code: int, what: str, hint: str = "") -> KafkaTransactionError:
        msg = (
            f"{what} for transactional id {self.transactional_id!r} failed: [Error {code}] {_code_name(code)}"
        )
        if code in FENCED_CODES:
            return KafkaProducerFencedError(
                msg + ": a newer producer with this transactional id fenced this one; close it", code=code
            )
        if code in FATAL_CODES:
            return KafkaTransactionError(msg + "; the producer cannot go on: close it", fatal=True, code=code)
        if code in BUMP_CODES:
            self.bump_required = True
        return KafkaTransactionError(
            msg + (hint or "; abort_transaction() and start again"), abortable=True, code=code
        )

    def _invalid(self, call: str, why: str) -> KafkaTransactionError:
        if self.state is S.FATAL_ERROR and self.error is not None:
            return self.error
        if self._op is not None and not self._op[1].done():
            why = f"{self._op[0]}() is still in progress (it timed out: call it again to wait for it)"
        return KafkaTransactionError(f"{call}() is not allowed now: {why} (state {self.state.value})")

    def _require(self, call: str, *states: TransactionState) -> None:
        """Raise unless in one of ``states`` with no other operation pending."""
        op = self._op
        if op is not None:
            if not op[1].done():
                raise self._invalid(call, "")
            self._op = None  # finished in the background and never collected
            if not op[1].cancelled():
                op[1].exception()
        if self.state in states:
            return
        if self.state is S.ABORTABLE_ERROR and self.error is not None:
            raise self.error
        why = {
            S.UNINITIALIZED: "call init_transactions() first",
            S.READY: "no transaction begun: call begin_transaction() first",
            S.IN_TRANSACTION: "a transaction is already in progress",
        }.get(self.state, f"the transaction is {self.state.value}")
        raise self._invalid(call, why)

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction (raised synchronously, nothing queued)."""
        if self.state is not S.IN_TRANSACTION:
            self._require("send", S.IN_TRANSACTION)

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
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group: tuple[str, int, str, str | None],
        timeout: float,
    ) -> None:
        if not self._resuming("send_offsets_to_transaction"):
            self._require("send_offsets_to_transaction", S.IN_TRANSACTION)
        wanted = {
            as_topic_partition(k): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            for k, v in offsets.items()
        }
        await self._run("send_offsets_to_transaction", lambda: self._send_offsets(wanted, group), timeout)

    async def commit(self, timeout: float) -> None:
        if not self._resuming("commit_transaction"):
            self._require("commit_transaction", S.IN_TRANSACTION)
            self.state = S.COMMITTING
        await self._run("commit_transaction", self._commit, timeout)

    async def abort(self, timeout: float) -> None:
        if not self._resuming("abort_transaction"):
            self._require("abort_transaction", S.IN_TRANSACTION, S.ABORTABLE_ERROR)
            self.state = S.ABORTING
            self._wake()  # the sender fails what is not sent yet
        await self._run("abort_transaction", self._abort, timeout)

    @property
    def ongoing(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.ABORTABLE_ERROR)

    def _resuming(self, call: str) -> bool:
        return self._op is not None and self._op[0] == call

    async def _run(self, call: str, make: Callable[[], Coroutine[Any, Any, None]], timeout: float) -> None:
        if self._op is not None and self._op[0] == call:
            task = self._op[1]
        else:
            task = asyncio.get_running_loop().create_task(make())
            self._op = (call, task)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            cause = f"; last error: {self.last_cause}" if self.last_cause is not None else ""
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
            await self._init_producer_id(bump=False)
        except KafkaTransactionError as exc:
            if exc.fatal:
                self._enter_error(exc)
            raise
        self.state = S.READY
        self._wake()

    async def _send_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group: tuple[str, int, str, str | None]
    ) -> None:
        group_id = group[0]
        try:
            await self._coordinated(
                "AddOffsetsToTxn",
                lambda node: add_offsets(self.client, node, self._ident(), group_id, self.request_timeout_ms),
            )
            self.started = True
            await self._commit_offsets(offsets, group)
        except KafkaTransactionError as exc:
            self._enter_error(exc)
            raise

    async def _commit_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group: tuple[str, int, str, str | None]
    ) -> None:
        group_id = group[0]
        refresh = False
        while offsets:
            try:
                coord = await self.client.find_coordinator(
                    group_id, 0, refresh=refresh, timeout_ms=self.request_timeout_ms
                )
                codes = await txn_offset_commit(
                    self.client, coord.node_id, self._ident(), group, offsets, self.request_timeout_ms
                )
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                refresh = await self._pause(exc)
                continue
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    raise self._classify(exc.code, "TxnOffsetCommit") from exc
                refresh = await self._pause(exc)
                continue
            except KafkaUnsupportedVersionError as exc:
                raise KafkaTransactionError(f"TxnOffsetCommit: {exc}", fatal=True) from exc
            retry: BaseException | None = None
            for tp in list(offsets):
                code = codes.get(tp, E.UNKNOWN_TOPIC_OR_PARTITION)
                if code == 0:
                    del offsets[tp]
                elif _retriable(code):
                    retry = KafkaProtocolError(code, _code_name(code), True, f"TxnOffsetCommit {tp}")
                    refresh = refresh or code in COORDINATOR_CODES
                else:
                    hint = ""
                    if code in REJOIN_CODES:
                        hint = (
                            f"; the consumer's group membership ({group[1]}/{group[2]!r}) is stale "
                            "(it was rebalanced): abort_transaction() and consume again"
                        )
                    raise self._classify(code, f"TxnOffsetCommit for group {group_id!r} {tp}", hint)
            if retry is not None:
                await self._pause(retry, code_backoff=True)

    async def _commit(self) -> None:
        t0 = time.monotonic()
        try:
            await self._drain()
            if self.state is not S.COMMITTING:  # a record failed meanwhile
                raise self.error or KafkaTransactionError("commit failed", abortable=True)
            if self.started:
                await self._coordinated(
                    "EndTxn(commit)",
                    lambda node: end_txn(self.client, node, self._ident(), True, self.request_timeout_ms),
                )
        except KafkaTransactionError as exc:
            self._enter_error(exc)
            raise
        self.state = S.READY
        self.counters["commits"] += 1
        self.counters["commit_time_ms"] += (time.monotonic() - t0) * 1000.0

    async def _abort(self) -> None:
        t0 = time.monotonic()
        try:
            await self._drain()  # what is in flight settles; the rest fails (unsent_error)
            if self._adder is not None:  # its request in flight may add partitions: EndTxn after it
                await asyncio.wait({self._adder})
            self.pending.clear()
            skip_end = (
                isinstance(self.error, KafkaTransactionError)
                and self.error.code == E.INVALID_PRODUCER_ID_MAPPING
            )
            if self.started and not skip_end:
                await self._coordinated(
                    "EndTxn(abort)",
                    lambda node: end_txn(self.client, node, self._ident(), False, self.request_timeout_ms),
                )
            if self.bump_required:
                await self._init_producer_id(bump=True)
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

    async def _add_partitions(self) -> None:
        """Add what the sender asked for, in one request per round, until nothing is pending."""
        while self.pending and self.state in (S.IN_TRANSACTION, S.COMMITTING):
            wanted = sorted(self.pending)
            try:
                codes = await self._coordinated(
                    "AddPartitionsToTxn",
                    functools.partial(self._add_request, wanted),
                    whole=False,
                    stop=lambda: self.state not in (S.IN_TRANSACTION, S.COMMITTING),
                )
            except KafkaTransactionError as exc:
                self.pending.clear()
                self._enter_error(exc)
                return
            if codes is None:
                return  # aborting, or failed meanwhile: nothing more is added
            retry: KafkaProtocolError | None = None
            for key in wanted:
                code = codes.get(key, E.UNKNOWN_TOPIC_OR_PARTITION)
                if code == 0:
                    self.pending.discard(key)
                    self.added.add(key)
                    self.started = True
                elif _retriable(code) or code == _NOT_ATTEMPTED:
                    if code != _NOT_ATTEMPTED or retry is None:
                        retry = error_for(code, f"AddPartitionsToTxn {key[0]}[{key[1]}]")
                    self._refresh = self._refresh or code in COORDINATOR_CODES
                else:
                    self.pending.clear()
                    self._enter_error(self._classify(code, f"AddPartitionsToTxn {key[0]}[{key[1]}]"))
                    return
            self._wake()
            if retry is not None:
                await self._pause(retry, code_backoff=True)

    async def _add_request(self, wanted: list[tuple[str, int]], node: int) -> dict[tuple[str, int], int]:
        return await add_partitions(self.client, node, self._ident(), wanted, self.request_timeout_ms)

    # -- requests with their retries ----------------------------------------------------------------

    def _ident(self) -> tuple[str, int, int]:
        return (self.transactional_id, self.idem.producer_id, self.idem.producer_epoch)

    async def _pause(self, cause: BaseException, *, code_backoff: bool = False) -> bool:
        """Note why a request is retried and back off; returns True (re-find the coordinator)."""
        self.last_cause = cause
        concurrent = isinstance(cause, KafkaProtocolError) and cause.code == E.CONCURRENT_TRANSACTIONS
        log.debug("transaction %r: retrying after %s", self.transactional_id, cause)
        await asyncio.sleep(CONCURRENT_BACKOFF if concurrent and code_backoff else self.backoff)
        return True

    async def _coordinated(
        self,
        what: str,
        attempt: Callable[[int], Awaitable[Any]],
        *,
        whole: bool = True,
        stop: Callable[[], bool] | None = None,
    ) -> Any:
        """Send to the transaction coordinator until the answer is not retriable. With ``whole``
        the answer is one error code (0 returns, another raises it classified); else the
        answer is returned as it is (per-partition codes are the caller's). ``stop``: give up
        (returning None) before a new attempt when it says so."""
        while True:
            if stop is not None and stop():
                return None
            try:
                coord = await self.client.find_coordinator(
                    self.transactional_id, 1, refresh=self._refresh, timeout_ms=self.request_timeout_ms
                )
                self._refresh = False
                answer = await attempt(coord.node_id)
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                self._refresh = await self._pause(exc)
                continue
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    raise self._classify(exc.code, what) from exc
                self._refresh = await self._pause(exc)
                continue
            except KafkaUnsupportedVersionError as exc:
                raise KafkaTransactionError(f"{what}: {exc}", fatal=True) from exc
            if not whole:
                return answer
            if answer == 0:
                return answer
            if not _retriable(answer):
                raise self._classify(answer, what)
            self._refresh = answer in COORDINATOR_CODES
            await self._pause(error_for(answer, what), code_backoff=True)

    async def _init_producer_id(self, *, bump: bool) -> None:
        """InitProducerId for the transactional id: a first id, or the next epoch of ours."""
        idem = self.idem
        what = "InitProducerId (epoch bump)" if bump else "InitProducerId"
        while True:
            try:
                if bump:
                    coord = await self.client.find_coordinator(
                        self.transactional_id, 1, timeout_ms=self.request_timeout_ms
                    )
                    version = await self.client.api_version(coord.node_id, ApiKey.INIT_PRODUCER_ID)
                    if version < BUMP_MIN_VERSION:
                        raise KafkaTransactionError(
                            f"transaction {self.transactional_id!r} lost sequence numbers and the broker "
                            f"cannot bump the epoch (InitProducerId v{version}, v{BUMP_MIN_VERSION}+ "
                            f"needed; cause: {self.error}): close the producer",
                            fatal=True,
                        )
                got = await self.client.init_producer_id(
                    self.transactional_id,
                    self.transaction_timeout_ms,
                    producer_id=idem.producer_id if bump else -1,
                    producer_epoch=idem.producer_epoch if bump else -1,
                    timeout_ms=self.request_timeout_ms,
                )
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                await self._pause(exc)
                continue
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    err = self._classify(exc.code, what)
                    if not bump:  # nothing to abort: the Java client's init errors are fatal
                        err = _as_fatal(err)
                    raise err from exc
                await self._pause(exc, code_backoff=True)
                continue
            except KafkaUnsupportedVersionError as exc:
                raise KafkaTransactionError(f"{what}: {exc}", fatal=True) from exc
            log.info(
                "transactional producer %r: producer id %s epoch %s (was %s/%s)",
                self.transactional_id,
                got[0],
                got[1],
                idem.producer_id,
                idem.producer_epoch,
            )
            idem.producer_id, idem.producer_epoch = int(got[0]), int(got[1])
            idem.bump_needed = False
            self.bump_required = False
            self._reset_sequences()
            return

    def metrics(self) -> dict[str, Any]:
        return {"state": self.state.value, **self.counters}


def _as_fatal(err: KafkaTransactionError) -> KafkaTransactionError:
    if err.fatal:
        return err
    return KafkaTransactionError(
        str(err).split(";")[0] + "; the producer cannot go on: close it", fatal=True, code=err.code
    )
