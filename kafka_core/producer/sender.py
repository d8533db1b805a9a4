"""The I/O side of the producer: drain sealed batches, send Produce requests, settle or retry.

Runs as one task on the producer's event loop. Order per partition: without idempotence one
batch per partition is in flight; with it up to ``max_in_flight`` (<= 5), and the broker's
sequence checks catch any gap, but only once the partition's broker holds our state: Kafka takes
any first sequence from a producer (id and epoch) it has none for, so a later batch could be
written before a first one refused with a retriable error (a new partition's NOT_LEADER), which
could then never be written under this epoch. So until a partition has acknowledged a batch of
the current epoch, it has one batch in flight. A retriable error parks the batch until the
partition has nothing in flight, then the parked batches go out again first, in order and
together, up to ``max_in_flight`` (as librdkafka resends once the old leader's requests have
drained; the Java client resends one at a time): after a leader move the new leader gets them in
one round trip, not one round trip each. No new batch is numbered until every resent one is
answered, so the batches from the oldest unacknowledged one to the newest numbered are never
more than ``max_in_flight`` (but for the halves of a MESSAGE_TOO_LARGE split, which was not
written): one written without its acknowledgement reaching us is still in the
broker's window of five, and its resend is answered as a duplicate. While batches of a partition
are out to one broker, none goes to another (its leader moved): the old leader answers first,
else a later batch could reach the new one before earlier ones. Sequence
errors (OUT_OF_ORDER_SEQUENCE_NUMBER with no earlier failure, or for a batch a later one was
acknowledged past, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH) quiesce every partition, bump
the epoch (KIP-360) and renumber what is unacknowledged from 0.

Requests are built per broker connection (slot) as the Java client's ``RecordAccumulator.drain``
builds them (see accumulator): once anything of a slot is due, one request takes the first
batch of every partition it leads, up to ``max_request_size``, and up to ``max_in_flight`` such
requests are out per connection. A slot with every request in flight is not drained, so its
batches keep filling while requests are slow. Deadlines are kept by ``expiry``; a batch failed at its deadline after it was
numbered leaves a hole in the sequence: if it was surely not written the epoch is bumped at once;
if it may have been written the partition is "unresolved" until an acknowledgement past it
(written) or a sequence error right after it (not written) tells, numbering nothing new meanwhile,
and the epoch is bumped if nothing is left to tell (as the Java client's unresolved sequences).
A response that cannot be read leaves the outcome unknown too: it is retried like a lost one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Hashable
from typing import Any

from kafka_core.client.hints import leader_hint
from kafka_core.client.waiting import wait_event
from kafka_core.codec import encode_record_batch_columns
from kafka_core.errors import (
    KafkaClosedError,
    KafkaCodecError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.metrics.registry import ProducerMetrics
from kafka_core.producer.accumulator import (
    BATCH_OVERHEAD,
    FULL,
    PARTITION_OVERHEAD,
    Accumulator,
    PartitionQueue,
    ProducerBatch,
)
from kafka_core.producer.expiry import expire
from kafka_core.producer.leaders import Leaders
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import PRODUCER_ID_CODES, STALE_METADATA_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import ProduceRequest

log = logging.getLogger("kafka_core.producer")

__all__ = ["Sender"]

PRODUCE_MAX_VERSION = 12  # v13 addresses topics by id only
_MAX_SEQUENCE = 0x7FFFFFFF
# A broker serves one connection's requests one at a time (Kafka mutes a connection while one of
# its requests is in process), so a producer on one connection keeps the broker writing one
# partition at a time however many requests are out (bench/results_notes.md, "Producer").
# Produce requests travel on ``concurrency`` connections (lanes) per broker, partitions dealt
# among them; a partition keeps its lane, so its batches stay in order on one connection. The
# first lane is the client's own (lane 0: metadata, InitProducerId); the others start far from
# the consumer's fetch lanes and group lanes, in case the client is shared.
PRODUCE_LANE_BASE = 1 << 12


class Sender:
    """Owns the producer's network work; see the module docstring."""

    def __init__(
        self,
        client: Any,
        acc: Accumulator,
        *,
        acks: int,
        max_in_flight: int,
        retry_backoff_ms: float,
        concurrency: int = 1,
        max_request_size: int = 1_048_576,
        request_timeout_ms: float,
        compression: str,
        compression_level: int | None,
        idempotence: Any,
        metrics: ProducerMetrics | None = None,
    ) -> None:
        self.client = client
        # Counted per batch and per request only; per-partition Produce errors go to the
        # client's network counters (by API and broker) when it has them.
        self.metrics = metrics if metrics is not None else ProducerMetrics()
        self._net = getattr(client, "network_metrics", None)
        self.acc = acc
        acc.available = self._available
        acc.slot_of = self._slot_of
        self.max_request_size = max_request_size
        self.acks = acks
        self.max_in_flight = max_in_flight
        self.backoff = retry_backoff_ms / 1000.0
        self.request_timeout_ms = int(request_timeout_ms)
        self.compression = compression
        self.compression_level = compression_level
        self.idem = idempotence  # IdempotenceState or None
        # The TransactionManager of a transactional producer: it says which partitions may send
        # (added to the transaction), and hears of every failed record. None: not transactional.
        self.txn: Any = None
        self._event = asyncio.Event()
        # Requests in flight per (broker, lane), at most ``max_in_flight`` on each connection.
        self._node_in_flight: dict[tuple[int, int], int] = defaultdict(int)
        self.lanes = max(1, concurrency)
        self._lane_of: dict[tuple[str, int], int] = {}
        self._next_lane: dict[int, int] = defaultdict(int)
        self.leaders = Leaders(
            client, acc, backoff=self.backoff, on_change=self._leaders_changed, on_failed=self.record_failed
        )
        self._refile = False  # leaders changed: the drain index is filed again
        self._poke = False  # every slot is looked at again (see poke)
        self._requests: set[asyncio.Task[None]] = set()
        self._closing = False
        self._bump_task: asyncio.Task[None] | None = None
        self.paused = False  # True until the producer has reached a broker: deadlines only
        self.waiting_for = ""  # while paused with no error yet: what it is still waiting for

    # -- driving ---------------------------------------------------------------------------------

    def wake(self) -> None:
        self._event.set()

    def poke(self) -> None:
        """Wake, and look at every slot again: what held partitions back is gone (a
        transaction's partitions added, its state changed)."""
        self._poke = True
        self._event.set()

    def _leaders_changed(self) -> None:
        self._refile = True
        self._event.set()

    async def run(self) -> None:
        while True:
            self._event.clear()
            now = time.monotonic()
            next_at = expire(self.acc, self, now)
            if not self.paused:
                if self._refile:
                    self._refile = False
                    self.acc.refile()
                if self._poke:
                    self._poke = False
                    self.acc.poke()
                lingered = self.acc.due(now)
                self.leaders.refresh_due(now, (t for t, _ in self.acc.parked_topics()))
                self._send_ready(now)
                next_at = _earliest(next_at, self.acc.stamp_late(lingered, now))
                if self._closing and not self._requests and not self.acc.unfinished():
                    return
            else:
                self.acc.woken()
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            if not self.paused and (self.leaders.stale or self.acc.parked_topics()):
                timeout = self.backoff if timeout is None else min(timeout, self.backoff)
            await wait_event(self._event, timeout)

    def cause_for_topic(self, topic: str) -> BaseException | None:
        """The last error that kept ``topic`` from being sent (metadata, or reaching a broker)."""
        cause = self.leaders.last_error.get(topic)
        if cause is None and self.txn is not None:
            cause = self.txn.add_cause(topic)  # waiting for AddPartitionsToTxn
        cause = cause or getattr(self.client, "last_error", None)
        if cause is None and self.paused and self.waiting_for:
            return KafkaTimeoutError(self.waiting_for)
        return cause

    def begin_close(self) -> None:
        self._closing = True
        self.wake()

    def fail_in_flight(self, exc: BaseException) -> int:
        """Close: cancel every request and fail the batches they carried; returns how many
        records were still unsettled."""
        for task in list(self._requests):
            task.cancel()
        count = 0
        for b in self.acc.take_in_flight():
            if not b.result.done:
                count += b.count
                b.result.set_error(exc)
        return count

    # -- sending -----------------------------------------------------------------------------------

    def _available(self, q: PartitionQueue) -> bool:
        """Whether ``q`` has a leader that is not failing: no retry pending, not backing off."""
        if q.retry or q.muted_until > time.monotonic():
            return False
        if q.in_flight and q.in_flight[0].attempts > 1:
            return False
        return self.leaders.leader(q.topic, q.partition) >= 0

    def _slot_of(self, q: PartitionQueue) -> Hashable:
        """The connection ``q``'s batches go to now, None while its leader is unknown (its topic
        is then asked about again); called with the accumulator's lock held."""
        leader = self.leaders.leader(q.topic, q.partition)
        if leader < 0:
            self.leaders.mark_stale(q.topic)
            return None
        return (leader, self._lane(leader, q))

    def _lane(self, node: int, q: PartitionQueue) -> int:
        """``q``'s connection to its broker: dealt round-robin the first time it is asked for,
        kept from then on (see PRODUCE_LANE_BASE); called with the accumulator's lock held."""
        if self.lanes == 1:
            return 0
        key = (q.topic, q.partition)
        lane = self._lane_of.get(key)
        if lane is None:
            index = self._next_lane[node] % self.lanes
            self._next_lane[node] += 1
            lane = self._lane_of[key] = 0 if index == 0 else PRODUCE_LANE_BASE + index - 1
        return lane

    def _send_ready(self, now: float) -> None:
        """Send a request per ready slot with room (more while its batches keep coming)."""
        idem = self.idem
        txn = self.txn
        if txn is not None:
            unsent = txn.unsent_error()
            if unsent is not None:  # aborting, or the transaction failed: nothing more goes out
                self._fail_unsent(unsent)
        if idem is not None and (idem.bump_needed or idem.producer_id < 0):
            if txn is None:  # a transactional producer's id is its transaction manager's
                self._maybe_bump()
            return
        pipelined = self.max_in_flight if idem is not None else 1
        in_flight = self._node_in_flight
        head, take = self.acc.head, self.acc.take_head

        def capacity(slot: Hashable) -> int:
            return self.max_in_flight - in_flight[slot]  # type: ignore[index]

        def pick(q: PartitionQueue, room: int | None) -> ProducerBatch | object | None:
            # Runs with the accumulator's lock held. Before the partition's broker has
            # acknowledged a batch of this epoch it takes any first sequence: one batch goes
            # alone, or a later one could pass a refused first.
            limit = pipelined if q.epoch_acked else 1
            if idem is not None and q.unresolved >= 0 and self._unprobed(q):
                # Nothing left that could tell whether the failed batch was written.
                log.info("%s[%s]: sequence unresolved; bumping the epoch", q.topic, q.partition)
                idem.bump_needed = True
                return None
            if q.retry or len(q.in_flight) >= limit:
                return None  # retries are parked until every batch in flight is answered
            if q.in_flight and q.sent_to != q.filed:
                return None  # the leader moved: the old one answers what it holds first
            if q.muted_until > now:
                return None  # its retry backoff: a timer makes its slot ready again
            if txn is not None and not txn.may_send(q.topic, q.partition):
                return None
            first = head(q)
            if first is None:
                return None
            if first.sequence < 0 and (q.unresolved >= 0 or (q.in_flight and q.in_flight[0].resent)):
                # Nothing new is numbered until the hole is resolved, or while resent batches
                # are out (they go together, in order; see the docstring). Resent batches go
                # only when nothing is in flight, and new ones only behind none: the first
                # batch in flight tells.
                return None
            if room is not None and first.size + PARTITION_OVERHEAD > room:
                return FULL
            b = take(q)
            if idem is not None:
                if b.sequence < 0:
                    b.sequence = q.next_sequence
                    q.next_sequence = (q.next_sequence + b.count) & _MAX_SEQUENCE
                    b.producer_id, b.producer_epoch = idem.producer_id, idem.producer_epoch
                else:
                    b.resent = True
            q.in_flight.append(b)
            q.sent_to = q.filed
            b.attempts += 1
            if b.resent:
                log.debug("resending %r to %s: %d of its partition in flight", b, q.filed, len(q.in_flight))
            return b

        drained = self.acc.drain_ready(capacity, pick, self.max_request_size)
        loop = asyncio.get_running_loop()
        queued = self.metrics.queue_ms.add
        for slot, requests in drained:
            for items in requests:  # created (and so written to the connection) in order
                for _, b in items:
                    queued(max(int((now - b.created) * 1000), 0))
                self._node_in_flight[slot] += 1  # type: ignore[index]
                task = loop.create_task(self._produce(slot, items))  # type: ignore[arg-type]
                self._requests.add(task)
                task.add_done_callback(self._request_done)

    def _request_done(self, task: asyncio.Task[None]) -> None:
        self._requests.discard(task)
        self.wake()  # a quiesce (epoch bump, close) may have been waiting for this one

    @staticmethod
    def _unprobed(q: PartitionQueue) -> bool:
        """No batch of ``q`` in flight or numbered and waiting: nothing can resolve its hole."""
        return not q.in_flight and not q.retry and not (q.sealed and q.sealed[0].sequence >= 0)

    def hole(self, q: PartitionQueue, b: ProducerBatch) -> None:
        """``b`` failed after it was numbered (called with or without the lock; no I/O)."""
        if self.idem is None or b.sequence < 0:
            return
        if self.txn is not None:
            # The transaction cannot commit now; its abort bumps the epoch (as the Java client).
            self.txn.need_bump()
            return
        if b.unknown_outcome:
            end = (b.sequence + b.count) & _MAX_SEQUENCE
            if q.unresolved < 0 or _at_or_after(end, q.unresolved):
                q.unresolved = end
        else:
            # Surely not written: later batches will be rejected; renumber from a new epoch.
            log.info("%r failed and was not written: its sequence numbers leave a hole; bumping the epoch", b)
            self.idem.bump_needed = True

    def _encode(self, b: ProducerBatch) -> bytearray:
        ident = (b.producer_id, b.producer_epoch, b.sequence)
        if b.encoded is not None and b.encoded_for == ident:
            return b.encoded
        if b.columns is not None:
            keys, values, headers, timestamps = b.columns
        else:
            keys = b.keys
            values, headers, timestamps = b.values, b.headers, b.settle_timestamps()
            if timestamps is not None:
                base = b.result.base_timestamp
                timestamps = [base if ts is None else ts for ts in timestamps]
        b.encoded = encode_record_batch_columns(
            keys,
            values,
            headers=headers,
            timestamps=timestamps,
            base_timestamp=b.result.base_timestamp,
            compression=self.compression,
            compression_level=self.compression_level,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            base_sequence=b.sequence,
            transactional=self.txn is not None,
        )
        b.encoded_for = ident
        return b.encoded

    async def _produce(
        self, slot: tuple[int, int], items: list[tuple[PartitionQueue, ProducerBatch]]
    ) -> None:
        node, lane = slot
        try:
            by_topic: dict[str, list[Any]] = defaultdict(list)
            sent: list[tuple[PartitionQueue, ProducerBatch]] = []
            for q, b in items:
                try:
                    data = self._encode(b)
                except Exception as exc:  # bad record content: that batch fails alone
                    self._settle(q, b)
                    self.fail(b, exc)
                    continue
                by_topic[b.topic].append(ProduceRequest.PartitionProduceData(index=b.partition, records=data))
                sent.append((q, b))
            if not sent:
                return
            body = ProduceRequest(
                transactional_id=self.txn.transactional_id if self.txn is not None else None,
                acks=self.acks,
                timeout_ms=self.request_timeout_ms,
                topic_data=[
                    ProduceRequest.TopicProduceData(name=t, partition_data=p) for t, p in by_topic.items()
                ],
            )
            try:
                # The producer's request_timeout_ms, whatever the client's default: a stalled
                # request is given up (its connection dropped) and retried at this bound.
                top = (
                    PRODUCE_MAX_VERSION if self.txn is None else self.txn.produce_version(PRODUCE_MAX_VERSION)
                )
                resp = await self.client.send(
                    node, body, max_version=top, timeout_ms=self.request_timeout_ms, lane=lane
                )
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                for q, b in sent:
                    b.unknown_outcome = True
                    self.leaders.mark_stale(b.topic)
                    self._retry_or_fail(q, b, exc)
                return
            except (KafkaCodecError, KafkaProtocolError) as exc:
                # A garbled response (the connection is dropped with it): written or not is
                # unknown, and retrying under the same sequence numbers is safe.
                log.warning("unreadable Produce response from node %s: %s; retrying", node, exc)
                for q, b in sent:
                    b.unknown_outcome = True
                    self._retry_or_fail(q, b, exc, force_retry=True)
                return
            except KafkaClosedError as exc:
                for q, b in sent:
                    self._settle(q, b)
                    self.fail(b, exc)
                return
            if resp is None:  # acks=0
                for q, b in sent:
                    self._settle(q, b)
                    self._succeed(b, -1, -1)
                return
            self._handle_response(resp, sent, node)
        except Exception as exc:  # never lose a batch to a bug: fail it loudly
            log.exception("producer request to node %s failed unexpectedly", node)
            for q, b in items:
                if b in q.in_flight or not b.result.done:
                    b.unknown_outcome = True
                    self._settle(q, b)
                    self.hole(q, b)
                    self.fail(b, exc)
        finally:
            self._node_in_flight[slot] -= 1
            self.wake()

    def _handle_response(
        self, resp: Any, sent: list[tuple[PartitionQueue, ProducerBatch]], node: int = -1
    ) -> None:
        answers: dict[tuple[str, int], Any] = {}
        for topic_resp in resp.responses:
            for pr in topic_resp.partition_responses:
                answers[(topic_resp.name, pr.index)] = pr
        for q, b in sent:
            pr = answers.get((b.topic, b.partition))
            if pr is None:
                self._retry_or_fail(
                    q,
                    b,
                    error_for(ErrorCode.NETWORK_EXCEPTION, "partition missing from the Produce response"),
                )
                continue
            code = pr.error_code
            if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                if b.sequence >= 0:
                    q.epoch_acked = True
                    q.acked_next = (b.sequence + b.count) & _MAX_SEQUENCE
                    if q.unresolved >= 0 and _at_or_after(q.acked_next, q.unresolved):
                        q.unresolved = -1  # acknowledged past the hole: it was written
                q.last_error = None
                self._settle(q, b)
                self._succeed(b, pr.base_offset if code == 0 else -1, pr.log_append_time_ms)
                continue
            exc = error_for(code, pr.error_message or f"{b.topic}[{b.partition}]")
            if self._net is not None:
                self._net.error_code(ApiKey.PRODUCE, node, code)
            hint = leader_hint(pr, resp)
            if hint is not None and hint.leader != node and self.leaders.hinted(b.topic, b.partition, hint):
                # KIP-951: the answer named the new leader and it is news: the batch goes to it
                # without a retry backoff or a metadata round trip first (the client refreshes
                # the topic in the background, as Java's does).
                self._retry_or_fail(q, b, exc, at_once=True)
                continue
            if code in STALE_METADATA_CODES:
                self.leaders.mark_stale(b.topic)
            if self.idem is not None and (
                code in PRODUCER_ID_CODES or code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            ):
                # Out of order is expected while an earlier batch is unresolved (it failed, or its
                # answer has not been read yet): retry in order. When this batch is the very next
                # one the broker should take, it is a real gap; when a later batch was acknowledged
                # past it, the broker took that one as a first sequence (it had no state for us)
                # and this one was not written (a written one within the last five would be a
                # duplicate): it never will be under this epoch. Either way: renumber from a new
                # epoch.
                passed = not _at_or_after(b.sequence, q.acked_next)
                if code in PRODUCER_ID_CODES or passed or b.sequence in (q.acked_next, q.unresolved):
                    if self.txn is not None:  # the transaction must be aborted (and the epoch bumped)
                        self._settle(q, b)
                        self.fail(b, exc)
                        continue
                    if passed:
                        log.warning(
                            "%r: %s: the broker wrote later batches first (it had lost our state); "
                            "bumping the epoch: this batch follows them",
                            b,
                            exc,
                        )
                    else:
                        log.info("%r: %s with nothing unresolved before it; bumping the epoch", b, exc)
                    self.idem.bump_needed = True
                    b.unknown_outcome = False
                self._retry_or_fail(q, b, exc, force_retry=True)
                continue
            if code == ErrorCode.MESSAGE_TOO_LARGE and b.count > 1 and b.columns is None:
                self._split(q, b)
                continue
            self._retry_or_fail(q, b, exc)

    def _settle(self, q: PartitionQueue, b: ProducerBatch) -> None:
        """The batch leaves flight; if the partition has nothing else out, parked retries go first."""
        self.acc.settle(q, b)

    def _retry_or_fail(
        self,
        q: PartitionQueue,
        b: ProducerBatch,
        exc: BaseException,
        *,
        force_retry: bool = False,
        at_once: bool = False,
    ) -> None:
        retriable = (
            force_retry
            or (isinstance(exc, KafkaProtocolError) and exc.retriable)
            or isinstance(exc, KafkaConnectionError | KafkaTimeoutError)
        )
        now = time.monotonic()
        q.last_error = exc
        if retriable and now < b.deadline and not b.expired and not self._closing_hard():
            self.acc.park_retry(q, b, now if at_once else now + self.backoff)
            self.metrics.retries += 1
            self._settle(q, b)
            log.debug("retrying %r after %s", b, exc)
            return
        if retriable:
            exc = KafkaTimeoutError(
                f"{b.topic}[{b.partition}]: delivery_timeout_ms expired; last error: {exc}"
            )
        self._settle(q, b)
        self.hole(q, b)
        self.fail(b, exc)

    def _closing_hard(self) -> bool:
        return self.acc.closed and not self._closing

    def _split(self, q: PartitionQueue, b: ProducerBatch) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: resend them in halves."""
        half = b.count // 2
        parts = []
        for lo, hi in ((0, half), (half, b.count)):
            nb = ProducerBatch(b.topic, b.partition, b.created, b.deadline)
            nb.keys = b.keys[lo:hi] if b.keys is not None else None
            nb.values = b.values[lo:hi]
            nb.headers = b.headers[lo:hi] if b.headers is not None else None
            nb.timestamps = b.timestamps[lo:hi] if b.timestamps is not None else None
            nb.result.timestamps = nb.timestamps
            nb.result.base_timestamp = b.result.base_timestamp
            nb.count = hi - lo
            if b.sequence >= 0:  # the halves take the sequence numbers the whole had
                nb.sequence, nb.producer_id, nb.producer_epoch = (
                    b.sequence + lo,
                    b.producer_id,
                    b.producer_epoch,
                )
            nb.size = BATCH_OVERHEAD  # releases nothing...
            parts.append((nb, lo))
        parts[0][0].size = b.size  # ...but the first half, which carries the batch's memory
        self.acc.split_in_flight(q, b, [nb for nb, _ in parts])
        b.result.forward([(nb.result, i - lo) for nb, lo in parts for i in range(lo, lo + nb.count)])
        self._settle(q, b)

    def _succeed(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.metrics.batch_sent(b.topic, b.count, len(b.encoded) if b.encoded is not None else 0)
        self.acc.release(b)
        if not b.result.done:  # an expired batch's records already failed at their deadline
            b.result.set_result(base_offset, log_append_time if log_append_time is not None else -1)

    def fail(self, b: ProducerBatch, exc: BaseException) -> None:
        self.metrics.batch_failed(b.topic, b.count)
        self.acc.release(b)
        if not b.result.done:
            b.result.set_error(exc)
        self.record_failed(exc)

    def refused(self, topic: str, exc: BaseException) -> None:
        """A record failed in ``send`` (its topic's partitions could not be had): counted as a
        failed one-record batch, and a transaction in progress can no longer commit."""
        self.metrics.batch_failed(topic, 1)
        self.record_failed(exc)

    def record_failed(self, exc: BaseException) -> None:
        """Records failed: a transaction in progress can no longer commit."""
        if self.txn is not None:
            self.txn.batch_failed(exc)

    def _fail_unsent(self, exc: BaseException) -> None:
        """Fail every record not sent yet (a transaction being aborted, or failed)."""
        batches, parked = self.acc.take_unsent()
        for b in batches:
            if b.sequence >= 0:
                self.txn.need_bump()  # numbered, maybe written: this epoch's sequence is lost
            self.fail(b, exc)
        for result, _count in parked:
            if not result.done:
                result.set_error(exc)

    # -- idempotence -------------------------------------------------------------------------------

    def _maybe_bump(self) -> None:
        if self._requests or (self._bump_task is not None and not self._bump_task.done()):
            return
        self._bump_task = asyncio.get_running_loop().create_task(self._bump())

    async def _bump(self) -> None:
        idem = self.idem
        try:
            await idem.acquire(self.client)
        except KafkaError as exc:
            log.warning("InitProducerId failed: %s; retrying", exc)
            await asyncio.sleep(self.backoff)
            self.wake()
            return
        self.reset_sequences()

    def reset_sequences(self) -> None:
        """A new producer id or epoch: every partition numbers from 0 again, the batches not
        acknowledged yet renumbered in their order."""
        self.acc.restart_sequences()
        self.wake()


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _at_or_after(seq: int, ref: int) -> bool:
    """Sequence ``seq`` is at or after ``ref``, modulo the 31-bit wrap."""
    return ((seq - ref) & _MAX_SEQUENCE) < (1 << 30)
