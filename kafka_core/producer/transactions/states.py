"""The transactional producer's states and what each allows (the gate half of manager.py).

``TxnStateMachine`` holds the state, the error that put the transaction in an error state, and
the coordinator operation running (init, send_offsets, commit, abort, prepare): which call is
allowed now, the error a refused call raises, and the accumulator's gate that lets records in
only inside a transaction with no operation running. ``TransactionManager`` (manager.py)
is one, adding the operations themselves; this half does no I/O.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from kafka_core.errors import KafkaTransactionError

log = logging.getLogger("kafka_core.producer")

__all__ = ["GateSends", "TransactionState", "TxnStateMachine"]

# The accumulator's hook: given a function that says whether a record may be appended now (None)
# or makes the error its send raises, keep it and ask it under the accumulator's lock.
GateSends = Callable[[Callable[[], Callable[[], BaseException] | None]], None]


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


class TxnStateMachine:
    """See the module docstring."""

    def __init__(self, transactional_id: str, wake: Callable[[], None], gate_sends: GateSends | None) -> None:
        self.transactional_id = transactional_id
        self.wake = wake
        self._gate_sends = gate_sends
        self._state = S.UNINITIALIZED
        self._pending_op: tuple[str, asyncio.Task[Any]] | None = None
        self.error: KafkaTransactionError | None = None  # the first cause (abortable) or the fatal one
        # Record sends are gated by the accumulator (``gate_sends``, under its lock): a record is
        # appended in the transaction it was sent in, or refused. ``send_batch`` calls, which
        # append chunk by chunk, are counted between their state check and their last append, so
        # that a transaction ends only after they appended.
        self._gate = threading.Lock()
        self._sending = 0
        self._sends_done: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._sync_gate()

    @property
    def state(self) -> TransactionState:
        return self._state

    @state.setter
    def state(self, state: TransactionState) -> None:
        self._state = state
        self._sync_gate()

    @property
    def op(self) -> tuple[str, asyncio.Task[Any]] | None:
        """The coordinator operation running (or finished and not yet collected): name, task."""
        return self._pending_op

    @op.setter
    def op(self, op: tuple[str, asyncio.Task[Any]] | None) -> None:
        self._pending_op = op
        if op is not None and not op[1].done():
            op[1].add_done_callback(lambda _task: self._sync_gate())
        self._sync_gate()

    @property
    def ongoing(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.ABORTABLE_ERROR)

    def resuming(self, call: str) -> bool:
        """Whether ``call`` is the operation running (called again after it timed out)."""
        return self._pending_op is not None and self._pending_op[0] == call

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
        return self.state_error("send", S.IN_TRANSACTION) or KafkaTransactionError(
            f"send() is not allowed now (state {self._state.value})"
        )

    def enter_error(self, err: KafkaTransactionError) -> None:
        """A fatal error ends the producer; another fails the transaction running (abortable)."""
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
        self.wake()

    def _invalid(self, call: str, why: str) -> KafkaTransactionError:
        if self.state is S.FATAL_ERROR and self.error is not None:
            return self.error
        op = self._pending_op
        if op is not None and not op[1].done():
            why = f"{op[0]}() is still in progress (it timed out: call it again to wait for it)"
        return KafkaTransactionError(f"{call}() is not allowed now: {why} (state {self.state.value})")

    def state_error(self, call: str, *states: TransactionState) -> KafkaTransactionError | None:
        """Why ``call`` is not allowed now (None: it is); changes nothing (any thread may ask)."""
        op = self._pending_op
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

    def require(self, call: str, *states: TransactionState) -> None:
        """Raise unless in one of ``states`` with no other operation pending."""
        err = self.state_error(call, *states)
        if err is not None:
            raise err
        op, self.op = self._pending_op, None  # one that finished in the background, never collected
        if op is not None and not op[1].cancelled():
            op[1].exception()

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction with no operation pending (raised in the
        caller's thread, nothing queued)."""
        if self.state is not S.IN_TRANSACTION or self._pending_op is not None:
            err = self.state_error("send", S.IN_TRANSACTION)
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

    def leave_transaction(self, state: TransactionState) -> None:
        """Leave IN_TRANSACTION (under the gate: a send checked after this is refused)."""
        with self._gate:
            self.state = state

    async def sends_appended(self) -> None:
        """Wait for the sends that passed their check before the transaction's end to append."""
        while True:
            with self._gate:
                if self._sending == 0:
                    self._sends_done = None
                    return
                event = asyncio.Event()
                self._sends_done = (asyncio.get_running_loop(), event)
            await event.wait()
