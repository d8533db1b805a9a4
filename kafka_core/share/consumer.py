"""The asyncio KafkaShareConsumer (KIP-932): a member of a share group.

Members of one share group read the same partitions together; the broker hands each record to
one member at a time, under an acquisition lock, and counts deliveries. The consumer polls
(ShareFetch on a share session per broker), hands over only the records the broker acquired for
it, and acknowledges each (accept, release, reject), piggybacked on the next ShareFetch or sent
by ``commit_sync``/``commit_async``/``close`` (ShareAcknowledge). The blocking
``kafka_core.KafkaShareConsumer`` is a thin face over this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self, cast

from kafka_core.client.metadata import TopicPartition
from kafka_core.config import takes_config
from kafka_core.consumer_base.options import (
    DEFAULT_BOOTSTRAP,
    check_int,
    check_known_options,
    deserializers,
    resolve_client,
)
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.share.acking import AckSender
from kafka_core.share.acks import AckBook
from kafka_core.share.fetch import (
    AckResults,
    Chunk,
    ColumnPiece,
    NodeSession,
    ShareRequests,
    batch_ranges,
    call_back,
    join_tables,
    leader_of,
)
from kafka_core.share.membership import ShareMembership
from kafka_core.share.options import share_keywords
from kafka_core.share.records import (
    AcknowledgeMode,
    AcknowledgeType,
    ShareRecord,
    deserialize,
)
from kafka_core.telemetry import pusher_for, wait_instance_id

log = logging.getLogger(__name__)

# A prefetch goes only while the records not acknowledged to the broker stay under this: the
# broker's default in-flight limit per share partition (group.share.partition.max.record.locks).
PREFETCH_LOCK_BUDGET = 2_000
AckCallback = Callable[[dict[TopicPartition, set[int]], BaseException | None], Any]


class KafkaShareConsumer:
    """Consume records as a member of a share group (asyncio). Use ``async with`` or ``await close()``.

    A dict of Java-style names may come first, as confluent-kafka takes (``{"bootstrap.servers":
    ..., "group.id": "g"}``, translated as ``from_config`` does; keyword arguments beside it win
    over the same option in the dict).

    Options: ``topics`` (positional or ``topics=``; or ``subscribe`` later), ``bootstrap_servers``,
    ``group_id`` (the share group, required), ``share_acknowledgement_mode``: ``"implicit"``
    (default: what a poll returned is accepted at the next poll, commit or close) or
    ``"explicit"`` (each record is acknowledged with ``acknowledge``; polling again with records
    of the last poll unacknowledged raises KafkaAcknowledgementError), ``key_deserializer`` /
    ``value_deserializer``, ``max_poll_records`` (the most records one poll hands over and one
    ShareFetch asks for), ``fetch_max_wait_ms`` / ``fetch_min_bytes`` / ``fetch_max_bytes``,
    ``client_rack``, ``client`` (a client to share) and the client's options
    (``client_id``, ``request_timeout_ms``, ``security_protocol``, ``ssl_*``, ``sasl_*``...).

    Delivery is at least once, in no particular order across members: a record not accepted
    (released, its lock expired, its member gone) is delivered again, with ``delivery_count``
    raised, until the group's ``group.share.delivery.attempt.limit`` archives it.
    """

    @takes_config(share_keywords)
    def __init__(
        self,
        *topics_args: str | Mapping[str, Any],
        bootstrap_servers: str | Iterable[str] = DEFAULT_BOOTSTRAP,
        topics: Iterable[str] | None = None,
        group_id: str | None = None,
        share_acknowledgement_mode: str | AcknowledgeMode = "implicit",
        key_deserializer: Callable[[Any], Any] | None = None,
        value_deserializer: Callable[[Any], Any] | None = None,
        max_poll_records: int = 500,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        client_rack: str | None = None,
        client: Any = None,
        **client_options: Any,
    ) -> None:
        check_known_options(type(self).__name__, client_options, KafkaShareConsumer.__init__)
        if not isinstance(group_id, str) or not group_id:
            raise KafkaConfigError(
                f"a share consumer needs a group_id (a non-empty string), not {group_id!r}"
            )
        self.mode = AcknowledgeMode.parse(share_acknowledgement_mode)
        check_int("max_poll_records", max_poll_records, 1)
        check_int("fetch_max_wait_ms", fetch_max_wait_ms, 0)
        check_int("fetch_min_bytes", fetch_min_bytes, 0)
        check_int("fetch_max_bytes", fetch_max_bytes, 1)
        self._deserializers = deserializers(key_deserializer, value_deserializer)
        self._client, self._owns_client, request_timeout_ms = resolve_client(
            bootstrap_servers, client, client_options
        )
        self.group_id = group_id
        # takes_config took a config dict out: topic names are left
        self._topics = sorted(set(list(cast("tuple[str, ...]", topics_args)) + list(topics or [])))
        self._max_poll_records = max_poll_records
        self._changed = asyncio.Event()  # the assignment or metadata changed: a waiting poll looks again
        # The regular consumer's outage policy (kafka_core.consumer_base.outage): poll raises a named
        # "cut off" error only when no broker answered for request_timeout_ms.
        self._outage = OutageTracker(request_timeout_ms / 1000.0)
        self._member = ShareMembership(
            self._client,
            group_id,
            on_change=self._changed.set,
            rack_id=client_rack,
            request_timeout_ms=request_timeout_ms,
            outage=self._outage,
        )
        self._requests = ShareRequests(
            self._client,
            group_id,
            member_id=lambda: self._member.member_id,
            topic_id=self._member.topic_id,
            topic_name=self._member.topic_name,
            max_wait_ms=fetch_max_wait_ms,
            min_bytes=fetch_min_bytes,
            max_bytes=fetch_max_bytes,
            max_records=max_poll_records,
            request_timeout_ms=request_timeout_ms,
        )
        self._book = AckBook(self.mode)
        self._sessions: dict[int, NodeSession] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        # The assignment by leader, worked out again only when the assignment or the client's
        # metadata snapshot is replaced (neither changes in place): a poll routes no partition.
        self._routes: dict[int, frozenset[TopicPartition]] = {}
        self._routed_from: tuple[Any, Any] | None = None  # (assignment, snapshot) routed
        self._leaderless: set[str] = set()  # topics with partitions of unknown leader in the routes
        self._refreshing: set[str] = set()  # topics whose metadata is being asked for
        # Partitions whose outage streak is open: a ShareFetch answered ends only theirs, so a
        # healthy poll does no per-partition bookkeeping.
        self._streaking: set[TopicPartition] = set()
        self._acker = AckSender(
            self._client,
            self._requests,
            self._book,
            self._session,
            lambda: list(self._sessions),
            self._tasks.__contains__,
        )
        self._buffer: list[Chunk] = []
        self._callback: AckCallback | None = None
        self._errors: list[BaseException] = []
        self._started = False
        self._lock_budget = PREFETCH_LOCK_BUDGET
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._background: set[asyncio.Task[Any]] = set()
        self._orphan_task: asyncio.Task[None] | None = None
        self._telemetry = pusher_for(  # KIP-714, started with the membership
            self._client,
            "consumer",
            self.metrics,
            lambda: {"group_id": group_id, "client_rack": client_rack or ""},
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """A share consumer from Java-style names (``{"bootstrap.servers": ..., "group.id": "g",
        "share.acknowledgement.mode": "explicit"}``) with keyword ``overrides`` on top."""
        return cls(**share_keywords(config, overrides))

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaClosedError(
                "this share consumer is closed: nothing more can be polled or acknowledged (records "
                "it held are delivered again once their acquisition lock expires or it left the group)"
            )

    async def _ensure_started(self) -> None:
        if not self._topics:
            raise KafkaConfigError("nothing to consume: subscribe to topics first")
        if not self._member.running:
            await self._member.start(self._topics)
            self._started = True
            if self._telemetry is not None:
                self._telemetry.start()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is pending (implicit mode: accept what the last poll returned; records
        fetched but not handed over are released), close the share sessions, leave the group.
        ``timeout`` (seconds) bounds it; past it KafkaTimeoutError says so (unsent
        acknowledgements' records come back after their lock expires)."""
        if self._closed:
            return
        self._closed = True
        error: BaseException | None = None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            async with asyncio.timeout(timeout):
                await self._drain_tasks()  # a fetch waits no longer than its poll did
                if self._orphan_task is not None:
                    await asyncio.gather(self._orphan_task, return_exceptions=True)
                self._release_buffer()
                self._book.settle_for_close()
                self._report(await self._send_acks(close=True))
                await self._member.leave()
        except TimeoutError:
            error = KafkaTimeoutError(
                self._acker.timeout_message("share consumer close", timeout, self._tasks)
            )
        finally:
            tasks = [*self._tasks.values(), *self._background]
            if self._orphan_task is not None:
                tasks.append(self._orphan_task)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._telemetry is not None:  # the last push, flagged terminating
                await self._telemetry.close(None if deadline is None else deadline - time.monotonic())
            if self._owns_client:
                await self._client.close()
        if error is not None:
            raise error

    # -- subscription -----------------------------------------------------------------------------

    async def subscribe(self, topics: Iterable[str] | str) -> None:
        """Consume ``topics`` (replacing the subscription); the broker assigns the partitions."""
        self._check_open()
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise KafkaConfigError(f"subscribe needs topic names, not {topics!r}")
        self._topics = sorted(set(names))
        if self._member.running:
            self._member.set_topics(self._topics)
        else:
            await self._ensure_started()

    async def unsubscribe(self) -> None:
        """Stop consuming: pending acknowledgements sent, fetched records released, group left."""
        self._check_open()
        await self._drain_tasks()
        if self._orphan_task is not None:
            await asyncio.gather(self._orphan_task, return_exceptions=True)
        self._release_buffer()
        self._book.settle_for_close()
        self._report(await self._send_acks(close=True))
        await self._member.leave()
        self._topics = []

    @property
    def max_poll_records(self) -> int:
        return self._max_poll_records

    def subscription(self) -> list[str]:
        return list(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the broker assigned to this member (shared with other members)."""
        return set(self._member.assignment)

    # -- polling ----------------------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ShareRecord]:
        """The records acquired for this member (empty after ``timeout_ms`` without any)."""
        out: list[ShareRecord] = []
        for tp, records in await self.poll_pieces(timeout_ms, max_records or self._max_poll_records):
            self.hand_over(tp, records)
            out.extend(records)
        return out

    async def poll_pieces(
        self, timeout_ms: float, max_records: int, ahead: int = 1, prefetch: bool = True
    ) -> list[tuple[TopicPartition, list[ShareRecord]]]:
        """Up to ``ahead * max_records`` records taken from what was fetched, by partition, not
        handed over yet: each piece must then go through ``hand_over`` (delivered to the
        application) or ``release_pieces``. The blocking face brings several polls' worth in
        one hop to its loop thread this way and hands them out from its own thread.
        ``prefetch=False``: no ShareFetch goes out ahead, only when the next poll needs one."""
        chunks_out = await self._poll(timeout_ms)
        limit = max_records * max(ahead, 1)
        pieces: list[tuple[TopicPartition, list[ShareRecord]]] = []
        n = 0
        for chunk in chunks_out:
            if n >= limit:
                break
            taken = chunk.take(limit - n)
            if taken:
                pieces.append((chunk.tp, taken))
                n += len(taken)
        self._drop_exhausted()
        if prefetch:
            self._prefetch(min(n, max_records))
        if self._deserializers is not None and pieces:
            try:
                pieces = [(tp, deserialize(recs, *self._deserializers)) for tp, recs in pieces]
            except KafkaError:
                self.release_pieces(pieces)  # delivered again: the delivery limit ends a poison one
                raise
        return pieces

    def hand_over(self, tp: TopicPartition, records: list[ShareRecord]) -> None:
        """``records`` (of ``tp``, from ``poll_pieces``) are the application's now (thread-safe)."""
        self._book.delivered_records(tp, records, self._requests.lock_timeout_ms)

    def release_pieces(self, pieces: list[tuple[TopicPartition, list[ShareRecord]]]) -> None:
        """Give back records taken by ``poll_pieces`` and never handed over (thread-safe)."""
        for tp, records in pieces:
            self._book.release_offsets(tp, [r.offset for r in records])

    def settle_for_poll(self) -> None:
        """What a poll does first (thread-safe): refuse when closed, raise a pending error, and
        settle the last poll's records (explicit mode: unacknowledged raises; implicit: accept)."""
        self._check_open()
        if self._errors:
            raise self._errors.pop(0)
        self._book.settle_before_poll()

    async def poll_columns(self, timeout_ms: float = 1_000, max_records: int | None = None) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` (topic, partition, offset, timestamp,
        timestamp_type, key, value, headers, delivery_count), or None. Deserializers do not
        apply. Acknowledge rows with ``acknowledge_batch``."""
        pieces = await self.poll_column_pieces(timeout_ms, max_records or self._max_poll_records)
        for piece in pieces:
            self.hand_over_columns(piece)
        return join_tables([p[1] for p in pieces])

    async def poll_column_pieces(
        self, timeout_ms: float, max_records: int, ahead: int = 1, prefetch: bool = True
    ) -> list[ColumnPiece]:
        """``poll_pieces`` for the columnar path: (partition, RecordBatch, its single acquired
        range or None) pieces, handed over with ``hand_over_columns``."""
        chunks_out = await self._poll(timeout_ms)
        limit = max_records * max(ahead, 1)
        pieces: list[ColumnPiece] = []
        rows = 0
        for chunk in chunks_out:
            if rows >= limit:
                break
            t = chunk.take_columns(limit - rows)
            if t is not None and t.num_rows:
                pieces.append((chunk.tp, t, chunk.single))
                rows += t.num_rows
        self._drop_exhausted()
        if prefetch:
            self._prefetch(min(rows, max_records))
        return pieces

    def hand_over_columns(self, piece: ColumnPiece) -> None:
        """The rows of a piece are the application's now (thread-safe)."""
        tp, table, single = piece
        self._book.delivered_columns(tp, table, single, self._requests.lock_timeout_ms)

    def release_column_pieces(self, pieces: list[ColumnPiece]) -> None:
        """Give back rows taken by ``poll_column_pieces`` and never handed over (thread-safe)."""
        for tp, table, _ in pieces:
            self._book.release_offsets(tp, table.column("offset").to_pylist())

    async def _poll(self, timeout_ms: float) -> list[Chunk]:
        self._check_open()
        if self._errors:
            raise self._errors.pop(0)
        self._book.settle_before_poll()  # explicit: unacknowledged raises; implicit: accept
        await self._ensure_started()
        loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        while True:
            if self._member.fatal is not None:
                raise self._member.fatal
            self._harvest()
            if self._errors:
                raise self._errors.pop(0)
            ready = [c for c in self._buffer if not c.exhausted]
            if ready:
                return ready
            remaining = deadline - loop.time()
            # a ShareFetch waits at the broker no longer than this poll: one still waiting after
            # it would hold up the commit or close that follows (one request per share session)
            self._launch(max_wait_ms=max(int(remaining * 1000), 0))
            if remaining <= 0:
                err = self._outage.due()
                if err is not None:
                    raise err
                return []
            self._changed.clear()
            waits: list[Any] = [asyncio.ensure_future(self._changed.wait())]
            waits.extend(self._tasks.values())
            await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            waits[0].cancel()

    def _prefetch(self, handed: int = 1) -> None:
        """The next ShareFetch goes now, while the application works (it carries the pending
        acknowledgements), if the broker can acquire for it: what it would still count in flight
        once they are sent is under its limit per share partition (max.record.locks, 2000 by
        default); a prefetch back empty while records were in flight halves the budget.
        Only the asyncio consumer prefetches: in the blocking face the answer would be read on
        the loop thread while the application's thread runs Python, and the two fighting for
        the GIL made each ShareFetch several times slower (a third of the throughput)."""
        if (
            handed
            and not self._tasks
            and not self._closed
            and self._member.assignment
            and self._book.unacknowledged_after_send() < self._lock_budget
        ):
            self._launch(prefetch=True, max_wait_ms=0)  # no long poll while the application works

    def _drop_exhausted(self) -> None:
        for c in self._buffer:
            if c.gaps:  # acquired offsets without a record: acknowledged as gaps
                self._book.gaps(c.tp, c.gaps)
                c.gaps = []
        self._buffer = [c for c in self._buffer if not c.exhausted]

    def _harvest(self) -> None:
        for node, task in list(self._tasks.items()):
            if task.done():
                del self._tasks[node]
                if not task.cancelled() and task.exception() is not None:
                    exc = task.exception()
                    assert exc is not None
                    log.info("share fetch from broker %s failed: %r", node, exc)
                    if not isinstance(exc, KafkaError):
                        self._errors.append(exc)

    def _route(self) -> dict[int, frozenset[TopicPartition]]:
        """The assigned partitions by leader, kept while the assignment and the metadata
        snapshot are the same objects (a refresh or a leader move replaces the snapshot). A
        topic with partitions of unknown leader is looked up again, one lookup at a time: its
        answer is a new snapshot, routed afresh."""
        assignment, meta = self._member.assignment, self._client.cached_metadata()
        seen = self._routed_from
        if seen is None or seen[0] is not assignment or seen[1] is not meta:
            by_node: dict[int, set[TopicPartition]] = {}
            self._leaderless = set()
            for tp in assignment:
                node = leader_of(meta, tp)
                if node is None:
                    self._leaderless.add(tp.topic)
                else:
                    by_node.setdefault(node, set()).add(tp)
            self._routes = {node: frozenset(tps) for node, tps in by_node.items()}
            self._routed_from = (assignment, meta)
        for topic in self._leaderless - self._refreshing:
            self._refreshing.add(topic)
            self._client.invalidate_metadata(topic)
            self._spawn(self._refresh(topic))
        return self._routes

    def _launch(self, prefetch: bool = False, max_wait_ms: int = 0) -> None:
        """A ShareFetch to each leader of assigned partitions that has none in flight."""
        routes = self._route()
        for node, tps in routes.items():
            if node not in self._tasks:
                self._tasks[node] = asyncio.get_running_loop().create_task(
                    self._fetch_node(node, tps, prefetch, min(max_wait_ms, self._requests.max_wait_ms))
                )
        pending = self._book.pending_partitions()  # what awaits acknowledging: the records moved
        if not pending:
            return
        orphans = {tp for tp in pending if not any(tp in tps for tps in routes.values())}
        if orphans and (self._orphan_task is None or self._orphan_task.done()):
            # acknowledgements for partitions no longer fetched here (reassigned, leader moved)
            self._orphan_task = asyncio.get_running_loop().create_task(self._send_orphans(orphans))

    async def _send_orphans(self, tps: set[TopicPartition]) -> None:
        self._report(await self._send_acks(only=tps))

    async def _refresh(self, topic: str) -> None:
        try:
            with contextlib.suppress(KafkaError):
                await self._client.metadata([topic])
        finally:
            self._refreshing.discard(topic)
        self._changed.set()

    def _session(self, node: int) -> NodeSession:
        sess = self._sessions.get(node)
        if sess is None:
            sess = self._sessions[node] = NodeSession(node)
        return sess

    async def _fetch_node(
        self, node: int, tps: frozenset[TopicPartition], prefetch: bool = False, max_wait_ms: int = 0
    ) -> None:
        sess = self._session(node)
        async with sess.lock:
            acks = self._book.take_pending(tps) if sess.epoch != 0 else {}
            in_flight = self._book.outstanding
            started = asyncio.get_running_loop().time()
            sent = time.monotonic()
            chunks, results, error = await self._requests.fetch(sess, tps, acks, max_wait_ms)
            if isinstance(error, KafkaConnectionError | KafkaTimeoutError):  # no answer
                self._outage.failed_all(tps, error, since=sent)
                self._streaking.update(tps)
            elif self._streaking and not self._streaking.isdisjoint(tps):
                ended = self._streaking & tps
                self._streaking -= ended
                self._outage.ok_all(ended)
            else:
                self._outage.answered()
            if acks:
                self._book.ack_latency(asyncio.get_running_loop().time() - started)
        if prefetch and not chunks and error is None and in_flight >= self._lock_budget // 2:
            # near the budget: held records likely filled the broker's in-flight limit (a
            # prefetch does not wait, so empty alone may just mean nothing new yet)
            self._lock_budget //= 2
        self._buffer.extend(chunks)
        self._book.acquired(chunks)
        self._report(results)
        if error is not None:
            log.info("share fetch from broker %s: %r", node, error)
            if isinstance(error, KafkaProtocolError) and not error.retriable:
                self._errors.append(error)  # e.g. an authorization refused: poll raises it
        if not chunks and error is not None:
            await asyncio.sleep(0.1)  # a failing broker is not asked again at once

    async def _drain_tasks(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            self._harvest()

    def _release_buffer(self) -> None:
        """Records fetched but never handed over go back to the group now."""
        for chunk in self._buffer:
            self._book.release_offsets(chunk.tp, chunk.undelivered())
        self._buffer = []

    # -- acknowledgement --------------------------------------------------------------------------

    def acknowledge(self, record: Any, type: AcknowledgeType | str | int = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge one record of the last poll (explicit mode). Sent with the next poll or
        commit. A record acknowledged already, or never delivered to this consumer, raises
        KafkaAcknowledgementError (nothing changes)."""
        self._check_open()
        self._book.acknowledge(record.topic, record.partition, record.offset, AcknowledgeType.parse(type))

    def acknowledge_batch(
        self,
        batch: Any,
        type: AcknowledgeType | str | int = AcknowledgeType.ACCEPT,
        rows: Iterable[int] | None = None,
    ) -> None:
        """Acknowledge the rows of a ``poll_columns`` batch (all of them, or those at ``rows``)
        in one call; checked first, so a bad row changes nothing."""
        self._check_open()
        kind = AcknowledgeType.parse(type)
        if rows is None and self._book.acknowledge_ranges(batch_ranges(batch), kind):
            return  # the whole batch as ranges; else offset by offset, for the exact error
        topics = batch.column("topic").to_pylist()
        parts = batch.column("partition").to_pylist()
        offsets = batch.column("offset").to_pylist()
        index = range(len(offsets)) if rows is None else list(rows)
        keys = []
        for i in index:
            if not isinstance(i, int) or not 0 <= i < len(offsets):
                raise KafkaConfigError(f"row {i!r} is not in the batch ({len(offsets)} rows)")
            keys.append((topics[i], parts[i], offsets[i]))
        self._book.acknowledge_many(keys, kind)

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """``callback(offsets_by_partition, exception)`` once per partition whose
        acknowledgements the broker answered (exception None: all taken)."""
        if callback is not None and not callable(callback):
            raise KafkaConfigError(f"the acknowledgement commit callback must be callable, not {callback!r}")
        self._callback = callback

    async def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the pending acknowledgements (then RENEWs) now and wait: per partition, None or
        the error. Past ``timeout`` (seconds) KafkaTimeoutError names what it waited for; what
        was not sent stays pending."""
        self._check_open()
        self._book.settle_for_commit()
        try:
            async with asyncio.timeout(timeout):
                results = await self._acker.commit(self._book.take_pending(None))
        except TimeoutError:
            raise KafkaTimeoutError(
                self._acker.timeout_message("commit_sync", timeout, self._tasks)
            ) from None
        self._report(results)
        return {tp: err for tp, (_, err) in results.items()}

    async def commit_async(self, callback: AckCallback | None = None) -> None:
        """Send the pending acknowledgements in the background; the outcome goes to ``callback``
        (else the acknowledgement commit callback)."""
        self._check_open()
        self._book.settle_for_commit()

        async def run() -> None:
            results = await self._acker.commit(self._book.take_pending(None))
            self._report(results, callback)

        self._spawn(run())

    async def _send_acks(self, *, close: bool = False, only: set[TopicPartition] | None = None) -> AckResults:
        """ShareAcknowledge for the pending acknowledgements (of ``only``, or all), beside any
        ShareFetch in flight (kafka_core.share.acking); ``close`` also closes every share session."""
        return await self._acker.send(self._book.take_pending(only), close=close)

    def _report(self, results: AckResults, callback: AckCallback | None = None) -> None:
        self._book.outcomes(results)
        cb = callback or self._callback
        if cb is not None:
            for out in call_back(cb, results):
                self._spawn(_await(out))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def client_instance_id(self, timeout: float) -> uuid.UUID:
        """The KIP-714 client instance id the broker assigned this share consumer, as Java's
        ``clientInstanceId(Duration)``, waiting at most ``timeout`` seconds for it.

        KafkaConfigError when ``enable_metrics_push`` is off, KafkaUnsupportedVersionError when
        the brokers do not support KIP-714, KafkaTimeoutError saying what is awaited."""
        return await wait_instance_id(self._telemetry, timeout)

    def metrics(self) -> dict[str, Any]:
        """The client's network counters plus ``"share"``: records acquired, accepted, released,
        rejected, redelivered (delivery count above 1), lock expiries seen, ack latency."""
        snap: dict[str, Any] = self._client.metrics()
        share = self._book.snapshot()
        share.update(
            group_id=self.group_id,
            member_id=self._member.member_id,
            member_epoch=self._member.epoch,
            assignment=sorted(str(tp) for tp in self._member.assignment),
            heartbeats=self._member.heartbeats,
            acquisition_lock_timeout_ms=self._requests.lock_timeout_ms,
        )
        snap["share"] = share
        return snap


async def _await(aw: Any) -> None:
    await aw
