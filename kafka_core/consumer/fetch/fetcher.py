"""The fetch pipeline: one Fetch in flight per leader, results buffered per partition.

A partition is fetched again as soon as its buffered data has been handed to the application,
so the next response is on its way while the application works on the current records. Positions
move only when records are handed over: a dropped connection or a broker restart costs a resend
from the same position, never a skipped record. A partition whose leader cannot be looked up (the
cluster is down) is tried again after a backoff, for as long as the consumer runs: an outage of
any length ends with the consumer fetching again. Failures go to the OutageTracker, so that
poll can say why nothing comes.

Each fetch connection keeps an incremental fetch session (KIP-227, see session.py): a Fetch names
only the partitions whose fetch state changed, and the work of a round is the partitions that
changed (data taken, a seek, a pause, an answer with records or an error, a leader move), never
the whole assignment: the subscription notes every change to a partition's state, and a metadata
change is compared against the sessions once. Partitions with records to read are dealt over
``fetch_concurrency`` connections (lanes) per broker; caught-up ones share one lane and session,
so an idle consumer long-polls each broker once per fetch_max_wait (moving a partition between
lanes is a leader move in small: the old session forgets it, the new one adds it).

Fetches carry the partition leader's epoch (v9+) and the last fetched record's epoch (v12+): a
leader change puts the position up for validation (KIP-320, see validation.py) and a diverging
epoch in an answer is a truncation. A partition whose answer says to retry (leader moved, epoch
unknown to the broker yet...) waits out its own backoff; the others go on being fetched.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import logging
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Any

from kafka_core.client.metadata import EARLIEST, LATEST, EpochEndOffset, TopicPartition
from kafka_core.client.waiting import wait_event
from kafka_core.consumer.fetch.buffer import FetchBuffer
from kafka_core.consumer.fetch.replicas import ReadReplicas, online
from kafka_core.consumer.fetch.requests import FetchRequests, cached_topic_ids, session_topics_of, topics_of
from kafka_core.consumer.fetch.results import PartitionFetch, last_offset_at, leader_moved
from kafka_core.consumer.fetch.session import SESSION_ERRORS, FetchSession, PartitionData, SessionRequest
from kafka_core.consumer.fetch.validation import PositionValidator
from kafka_core.consumer.policies import IsolationLevel, OffsetReset
from kafka_core.consumer.subscription import PartitionState, SubscriptionState
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import KafkaClosedError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafka_core.metrics.registry import ConsumerMetrics
from kafka_core.network.backoff import Backoff
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import RETRIABLE_FETCH_CODES, ErrorCode, error_for

log = logging.getLogger("kafka_core.consumer.fetcher")  # its name before the move: log filters keep working
# A latest-offset probe reads batch headers only (61 bytes in v2): a partition's share of it.
PROBE_PARTITION_BYTES = 1024

# The fetch loop's lanes are FETCH_LANE_BASE, FETCH_LANE_BASE + 1, ...: never lane 0, the
# connection of the client's other requests. A broker answers one connection's requests in
# order, and some answers take seconds: the group coordinator's (OffsetCommit, and Heartbeat,
# which Kafka's coordinator runtime answers only once its __consumer_offsets high watermark
# passes the group's last write) wait up to offsets.commit.timeout.ms (5 s) while a killed
# follower is still in that partition's ISR; a Fetch behind them on the same connection waited
# as long (issue 21, kafka_core/devtools/chaos/timing.py).
FETCH_LANE_BASE = 1
# Partitions caught up with their log's end are fetched on this one lane of their broker, in
# one fetch session: an idle consumer sends one long poll per broker per fetch_max_wait, as the
# Java client and librdkafka do, not one per lane (each costs the client some 1.2 ms of CPU and
# the broker a walk over the session). A partition with records to read goes back to its lane.
PARK_LANE = FETCH_LANE_BASE
# The longest a close waits for the brokers to take the fetch sessions' closes.
CLOSE_SESSIONS_S = 1.0


class FetchOutcome(enum.Enum):
    """What one partition's answer in a Fetch response led to."""

    NOTHING = enum.auto()  # stale, empty, or only a partial batch: nothing for poll
    GOT = enum.auto()  # records (or an error) buffered for poll: wake it
    RETRY = enum.auto()  # leader moved, topic not ready...: metadata refreshed, retry after a pause
    MOVED = enum.auto()  # the answer named the new leader (KIP-951): fetched from it at once


def next_fetch_offset(st: PartitionState, q: deque[PartitionFetch] | None) -> int | None:
    """Where the next Fetch of a partition starts: after its buffered data, or at its position."""
    return q[-1].next_offset if q else st.position


class Fetcher:
    def __init__(
        self,
        client: Any,
        subs: SubscriptionState,
        *,
        auto_offset_reset: OffsetReset,
        isolation_level: IsolationLevel,
        fetch_max_wait_ms: int,
        fetch_min_bytes: int,
        fetch_max_bytes: int,
        max_partition_fetch_bytes: int,
        check_crcs: bool = True,
        prefetch_depth: int = 2,
        fetch_concurrency: int = 1,
        request_timeout_ms: float = 30_000,
        outage: OutageTracker | None = None,
        metrics: ConsumerMetrics | None = None,
        client_rack: str | None = None,
        metadata_max_age_ms: float = 300_000,
    ) -> None:
        self._client = client
        self.metrics = metrics if metrics is not None else ConsumerMetrics()
        self._net = getattr(client, "network_metrics", None)  # Fetch errors by broker
        self._subs = subs
        self.auto_offset_reset = auto_offset_reset
        self._isolation = isolation_level
        self._max_wait = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._requests = FetchRequests(
            client, fetch_max_bytes, max_partition_fetch_bytes, isolation_level, rack_id=client_rack
        )
        # Follower fetching (KIP-392, see replicas.py): the replica a leader named for a
        # partition, read from until its lease (metadata_max_age_ms, as Java) ends.
        self.replicas = ReadReplicas(metadata_max_age_ms / 1000.0)
        self._view: tuple[Any, dict[str, Any], set[int]] = (None, {}, set())  # see _replica_view
        self._check_crcs = check_crcs
        self._request_timeout = request_timeout_ms
        self.outage = outage if outage is not None else OutageTracker(request_timeout_ms / 1000.0)
        # Between rounds that left partitions without a leader (the cluster unreachable).
        self._lookup_backoff = Backoff(100, 2_000)
        # Up to ``prefetch_depth`` undelivered responses per partition: a partition with data
        # waiting is still fetched ahead, so one caught-up partition's long poll never holds
        # back a busy one.
        self._depth = max(1, prefetch_depth)
        self.buffer = FetchBuffer()
        self.errors: list[BaseException] = []
        # Per-partition errors, raised at poll until a seek (the partition is not fetched meanwhile).
        self.partition_errors: dict[TopicPartition, tuple[int, BaseException]] = {}
        # Up to ``fetch_concurrency`` Fetch requests in flight per broker, each on its own
        # connection (lane): a broker serves one connection's requests one at a time, so this is
        # what lets it work on several partitions at once, and a lane long-polling a caught-up
        # partition never holds up the others. A partition keeps its lane while it has records to
        # read; caught up (its next offset at its log's end, ``_ends``), it waits on PARK_LANE
        # with the other caught-up partitions of its broker. Lanes start at FETCH_LANE_BASE:
        # lane 0 carries everything else, the group coordinator's requests too.
        self._lanes = max(1, fetch_concurrency)
        self._lane_of: dict[TopicPartition, int] = {}
        self._ends: dict[TopicPartition, int] = {}  # as last answered: high watermark (LSO: read_committed)
        self._next_lane: dict[int, int] = defaultdict(int)
        self._inflight: dict[tuple[int, int], asyncio.Task[None]] = {}
        # One fetch session per (broker, lane), and the slot each fetched partition is in.
        self.sessions: dict[tuple[int, int], FetchSession] = {}
        self._slot_of: dict[TopicPartition, tuple[int, int]] = {}
        # Partitions to look at again in the next round (besides the subscription's changes):
        # data taken or dropped, an answer with records or an error, a hold over, a leader move.
        self._dirty: set[TopicPartition] = set()
        self._meta_seen: Any = None  # the metadata snapshot the sessions were last checked against
        # Partitions looked at per round (a test's witness that idle rounds cost nothing).
        self.touched = 0
        self._topic_ids: dict[str, uuid.UUID] = {}  # the id each topic was last fetched under
        self.fetch_version: int | None = None  # of the last Fetch sent (v13+: by topic id)
        self._backoff: dict[int, Backoff] = defaultdict(lambda: Backoff(50, 2000))
        # Partitions whose last answer said to retry: not fetched before the time (monotonic),
        # and when each hold is over (a heap: looked at again then).
        self._held: dict[TopicPartition, tuple[float, Backoff]] = {}
        self._hold_ends: list[tuple[float, TopicPartition]] = []
        # Wakes the fetch loop before its pause ends: a seek, a reset, data taken by poll, a
        # partition resumed or assigned (its state: the subscription's positions and _held).
        self._wake = asyncio.Event()
        # Set when records or an error reached ``buffer``/``errors``: a waiting poll wakes.
        self.data_ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.validator = PositionValidator(
            client,
            subs,
            auto_offset_reset=auto_offset_reset,
            errors=self.partition_errors,
            drop=lambda tp: self.drop([tp]),
            wake=self.wake,
            outage=self.outage,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kafka-core-fetcher")

    async def close(self, timeout_s: float | None = None) -> None:
        """Stop fetching, then close the brokers' fetch sessions within ``timeout_s`` (and
        CLOSE_SESSIONS_S)."""
        self._closed = True
        tasks = [t for t in (self._task, *self._inflight.values()) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.validator.close()
        self._task = None
        bound = CLOSE_SESSIONS_S if timeout_s is None else min(max(timeout_s, 0.0), CLOSE_SESSIONS_S)
        await self._close_sessions(bound)

    async def _close_sessions(self, timeout_s: float) -> None:
        """Tell each broker to drop our fetch sessions (FINAL_EPOCH, KIP-227), as Java's consumer
        does on close: a session left behind holds a slot of the broker's cache (1,000 by
        default, for every client) until it is evicted. Sent on lane 0, not behind a lane's
        cancelled long poll; best effort: a broker that does not take it in time evicts it."""
        closes = [(slot[0], p) for slot, s in self.sessions.items() if (p := s.close_request()) is not None]
        if not closes or timeout_s <= 0:
            return

        async def close_one(node: int, plan: SessionRequest) -> None:
            request, version = await self._requests.build_close(node, plan)
            resp = await self._client.send(node, request, version)
            if resp.error_code:
                log.debug(
                    "fetch session %d on node %s: close answered %s", plan.session_id, node, resp.error_code
                )

        try:
            async with asyncio.timeout(timeout_s):
                results = await asyncio.gather(*(close_one(n, p) for n, p in closes), return_exceptions=True)
        except TimeoutError:
            log.debug("fetch sessions not closed within %.1fs: the brokers evict them", timeout_s)
            return
        for (node, plan), result in zip(closes, results, strict=True):
            if isinstance(result, KafkaError):
                log.debug("closing fetch session %d on node %s failed: %r", plan.session_id, node, result)
            elif isinstance(result, BaseException):  # a bug: said, but the close goes on
                log.warning(
                    "closing fetch session %d on node %s failed", plan.session_id, node, exc_info=result
                )

    def wake(self) -> None:
        self._wake.set()

    def _notify(self) -> None:
        self.data_ready.set()

    def drop(self, tps: Iterable[TopicPartition]) -> None:
        """Forget buffered data (after a seek or a revocation)."""
        for tp in tps:
            self.buffer.pop(tp, None)
            self._dirty.add(tp)
        self.wake()

    def drain(self, max_records: int | None, columns: bool, pending: list[BaseException]) -> Any:
        """Hand buffered records over (see FetchBuffer.drain); what was taken is fetched again."""
        if not self.buffer:
            return None
        try:
            return self.buffer.drain(self._subs, self.metrics, max_records, columns, pending)
        finally:
            self.wake()

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            unrouted = False
            try:
                await self._reset_positions()
                self.validator.start()
                unrouted = await self._send_fetches()
            except asyncio.CancelledError:
                raise
            except KafkaClosedError:
                return
            except Exception as exc:  # surfaced at the next poll, never swallowed
                log.debug("fetcher round failed: %r", exc)
                self.errors.append(exc)
                self._notify()
                await asyncio.sleep(0.1)
            if unrouted:
                # Nothing else would wake us for those partitions: look their leaders up again.
                await wait_event(self._wake, self._lookup_backoff.next_s())
                continue
            self._lookup_backoff.reset()
            if self._pending_resets():
                await asyncio.sleep(0.1)
                continue
            # Held partitions and a failed validation round come due without anything waking us.
            due = [self._hold_ends[0][0]] if self._hold_ends else []
            lease_end = self.replicas.next_due()
            if lease_end is not None:
                due.append(lease_end)
            if self.validator.retry_in is not None:
                due.append(time.monotonic() + self.validator.retry_in)
            if not due:
                await self._wake.wait()
                continue
            await wait_event(self._wake, max(min(due) - time.monotonic(), 0.001))

    def take_error(self) -> BaseException | None:
        """The next error for poll to raise; partition errors made stale by a seek are dropped."""
        if self.errors:
            return self.errors.pop(0)
        for tp, (epoch, err) in list(self.partition_errors.items()):
            if tp in self._subs and self._subs.state(tp).epoch == epoch:
                return err  # kept: raised again until the application seeks
            del self.partition_errors[tp]
            self._dirty.add(tp)
            self.wake()
        return None

    def _pending_resets(self) -> list[TopicPartition]:
        return [tp for tp in self._subs.resets() if self._subs.state(tp).reset is not OffsetReset.NONE]

    async def _reset_positions(self) -> None:
        todo: dict[TopicPartition, OffsetReset] = {}
        for tp in self._subs.resets():
            st = self._subs.state(tp)
            if st.reset is None:
                continue
            if st.reset is OffsetReset.NONE:
                st.reset = None
                msg = f"no offset for {tp.topic}[{tp.partition}] and auto_offset_reset='none'"
                self.partition_errors[tp] = (st.epoch, error_for(ErrorCode.OFFSET_OUT_OF_RANGE, msg))
                self._notify()
                continue
            todo[tp] = st.reset
        if not todo:
            return
        try:
            found = await self._client.list_offsets(
                {tp: EARLIEST if policy is OffsetReset.EARLIEST else LATEST for tp, policy in todo.items()},
                isolation_level=self._isolation,
                timeout_ms=10_000,
            )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("offset reset failed, will retry: %r", exc)
            self.outage.failed_all(todo, exc)
            return
        self.outage.ok_all(todo)
        ends = await self.true_ends(
            {tp: listed.offset for tp, listed in found.items() if todo[tp] is OffsetReset.LATEST}
        )
        for tp, listed in found.items():
            policy = todo[tp]
            offset = ends.get(tp, listed.offset)
            if tp in self._subs and self._subs.state(tp).reset == policy:
                # The leader's own answer: no validation needed; its epoch is the offset's.
                self._subs.seek_validated(
                    tp, offset, listed.leader_epoch if offset == listed.offset else None
                )
                self.buffer.pop(tp, None)
        self._notify()

    async def true_ends(self, listed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The log end offsets, each checked against the batch holding ``listed - 1``.

        Some brokers (Tansu) answer ListOffsets latest with the last batch's base offset + 1;
        the batch containing that offset tells where the log really ends. One Fetch per leader
        for all its partitions, reading batch headers only (PROBE_PARTITION_BYTES each), not
        one per partition: a 3,000-partition topic's ends in a round trip per broker. A
        partition whose probe fails keeps its listed offset."""
        out = dict(listed)
        by_node: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, offset in listed.items():
            if offset <= 0:
                continue
            try:
                node = await self._client.leader_for(tp.topic, tp.partition, timeout_ms=10_000)
            except KafkaError as exc:
                log.debug("latest-offset probe of %s: no leader: %r", tp, exc)
                continue
            by_node[node][tp] = offset - 1

        async def probe(node: int, wanted: dict[TopicPartition, int]) -> None:
            try:
                request, version = await self._requests.build(
                    node, wanted, max_wait=100, min_bytes=1, partition_max_bytes=PROBE_PARTITION_BYTES
                )
                self.fetch_version = version
                resp = await self._client.send(node, request, version)
            except KafkaError as exc:
                log.debug(
                    "latest-offset probe of %d partition(s) on node %d failed: %r", len(wanted), node, exc
                )
                return
            for topic, t in topics_of(resp, request):
                for p in t.partitions:
                    tp = TopicPartition(topic, p.partition_index)
                    target = wanted.get(tp)
                    if target is None or p.error_code or not p.records:
                        continue
                    last = last_offset_at(p.records, target)
                    if last is not None and last + 1 > out[tp]:
                        out[tp] = last + 1

        await asyncio.gather(*(probe(node, wanted) for node, wanted in by_node.items()))
        return out

    def _check_recreated(self, topics: Any) -> None:
        """A topic whose id changed was deleted and recreated: its positions mean nothing now."""
        ids = cached_topic_ids(self._client, topics) or {}
        for name, tid in ids.items():
            known = self._topic_ids.get(name)
            self._topic_ids[name] = tid
            if known is None or known == tid:
                continue
            tps = [tp for tp in self._subs.assigned() if tp.topic == name]
            log.warning(
                "topic %s was recreated (id %s -> %s); resetting %d partition(s) per auto_offset_reset='%s'",
                name,
                known,
                tid,
                len(tps),
                self.auto_offset_reset,
            )
            for tp in tps:
                self._subs.request_reset(tp, self.auto_offset_reset)
                self.buffer.pop(tp, None)
            self.wake()

    async def _send_fetches(self) -> bool:
        """Bring the sessions up to date with what changed, then send a Fetch on each free
        connection that has partitions to fetch; True if some have no leader."""
        self._note_metadata()
        now = time.monotonic()
        while self._hold_ends and self._hold_ends[0][0] <= now:
            self._dirty.add(heapq.heappop(self._hold_ends)[1])
        self._dirty.update(self.replicas.due(now))  # their leader next
        dirty = self._subs.take_changed()
        if self._dirty:
            dirty |= self._dirty
            self._dirty = set()
        unrouted = False
        if dirty:
            unrouted = await self._place(dirty, now)
        self.validator.start()  # for the positions just put up for validation
        loop = asyncio.get_running_loop()
        for slot, session in self.sessions.items():
            if session and slot not in self._inflight:
                self._inflight[slot] = loop.create_task(self._fetch_node(slot, session))
        return unrouted

    def _note_metadata(self) -> None:
        """A new metadata snapshot: partitions whose leader moved (or whose leader epoch
        changed) are looked at again. Once per metadata answer, not per round."""
        snapshot = self._client.cached_metadata()
        if snapshot is self._meta_seen:
            return
        self._meta_seen = snapshot
        # A recreated topic first: its new id goes into the next Fetch, which must not ask for
        # the old log's positions in the new log (a rebootstrap can bring the new id without any
        # partition being placed again).
        self._check_recreated({tp.topic for tp in self._subs.assigned()})
        meta = {t.name: t for t in snapshot.topics}
        brokers = {b.node_id for b in snapshot.brokers}
        # Leader changes of every partition with a position, paused ones too: a paused
        # partition's buffered records are not handed over past a leader change unvalidated.
        # A partition read from a replica moves when that replica is no longer online for it.
        for tp, st in self._subs.items():
            if st.position is None:
                continue
            before = st.leader_epoch
            self.validator.check_leader(tp, meta)
            slot = self._slot_of.get(tp)
            if slot is None:
                continue
            t = meta.get(tp.topic)
            p = t.partition(tp.partition) if t is not None else None
            replica = self.replicas.node(tp)
            if replica is not None and replica == slot[0]:
                moved = not online(meta, brokers, tp, replica)
            else:
                moved = p is None or p.leader != slot[0]
            if moved or st.leader_epoch != before:
                self._dirty.add(tp)

    def _replica_view(self) -> tuple[dict[str, Any], set[int]]:
        """The cached metadata as read replicas are checked against it: topics by name, the
        live brokers' ids (built once per metadata answer)."""
        snapshot = self._client.cached_metadata()
        if self._view[0] is not snapshot:
            topics = {t.name: t for t in snapshot.topics}
            self._view = (snapshot, topics, {b.node_id for b in snapshot.brokers})
        return self._view[1], self._view[2]

    def _wanted(self, tp: TopicPartition, now: float) -> bool:
        """Whether ``tp`` is to be fetched now (it is assigned)."""
        st = self._subs.state(tp)
        if not st.fetchable or tp in self.partition_errors:
            return False
        held = self._held.get(tp)
        if held is not None and held[0] > now:
            return False
        q = self.buffer.get(tp)
        if q and len(q) >= self._depth:
            return False
        if st.fetch_until is not None:
            offset = next_fetch_offset(st, q)
            return offset is not None and offset < st.fetch_until
        return True

    def _unplace(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` (its session forgets it with the next request)."""
        slot = self._slot_of.pop(tp, None)
        if slot is not None:
            self.sessions[slot].drop(tp)

    async def _place(self, dirty: set[TopicPartition], now: float) -> bool:
        """Put each changed partition in the session of its leader's connection with its fetch
        state, or out of every session; True if some have no leader."""
        self.touched += len(dirty)
        self.outage.forget(lambda key: not isinstance(key, TopicPartition) or key in self._subs)
        meta: dict[str, Any] | None = None
        todo: list[TopicPartition] = []
        for tp in dirty:
            if tp not in self._subs:
                self._unplace(tp)
                self._held.pop(tp, None)
                self._ends.pop(tp, None)
                self.replicas.clear(tp)
                continue
            if self._subs.state(tp).position is not None:
                if meta is None:
                    meta = {t.name: t for t in self._client.cached_metadata().topics}
                self.validator.check_leader(tp, meta)
            if self._wanted(tp, now):
                todo.append(tp)
            else:
                self._unplace(tp)
        if not todo:
            return False
        self._check_recreated({tp.topic for tp in todo})
        unrouted: dict[str, BaseException] = {}  # topic -> why its leader lookup failed this round
        looked_up: set[str] = set()  # topics checked for recreation after their leader lookup
        for tp in todo:
            if tp not in self._subs or not self._wanted(tp, now):
                self._unplace(tp)  # revoked during a lookup, or reset (its topic recreated)
                continue
            cause = unrouted.get(tp.topic)
            if cause is None:
                try:
                    node = await self._client.leader_for(tp.topic, tp.partition, timeout_ms=5_000)
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    log.debug("no leader for %s yet: %r", tp, exc)
                    # Its topic's other partitions would wait as long for the same answer.
                    cause = unrouted[tp.topic] = exc
                else:
                    if self.outage.failing(tp):
                        # Its failure dropped its topic's metadata: a broker answered this lookup
                        # (perhaps naming the lost leader still). Not a cut off: a failover.
                        self.outage.answered()
            if cause is not None:
                self.outage.failed(tp, cause)
                self._unplace(tp)
                self._dirty.add(tp)  # looked up again after the lookup backoff
                continue
            if tp.topic not in looked_up:
                # The lookup may have brought the topic's first metadata since it was deleted
                # and created again: its new id must not be fetched at the old log's positions.
                looked_up.add(tp.topic)
                self._check_recreated({tp.topic})
            if tp not in self._subs or not self._wanted(tp, now):
                self._unplace(tp)  # revoked, reassigned or reset during the lookup
                continue
            if self.replicas.node(tp) is not None:
                node = self.replicas.choose(tp, node, *self._replica_view(), now)
            data = self._partition_data(tp)
            slot = (node, self._lane(node, tp, data.fetch_offset))
            if self._slot_of.get(tp) != slot:
                # Its leader moved, or it caught up or fell behind: the old session forgets it
                # with its next request, the new one adds it with its own.
                self._unplace(tp)
                self._slot_of[tp] = slot
            session = self.sessions.get(slot)
            if session is None:
                session = self.sessions[slot] = FetchSession(node)
            session.want(tp, data)
        return bool(unrouted)

    def _partition_data(self, tp: TopicPartition) -> PartitionData:
        """What the next Fetch of ``tp`` asks: from after its buffered data, or its position."""
        st = self._subs.state(tp)
        offset = next_fetch_offset(st, self.buffer.get(tp))
        assert offset is not None
        current, last = self._fetch_epochs(tp)
        return PartitionData(offset, current, last, self._requests.partition_max_bytes, st.epoch)

    def _fetch_epochs(self, tp: TopicPartition) -> tuple[int, int]:
        """(current leader epoch, epoch of the last fetched batch) for the partition's Fetch."""
        st = self._subs.state(tp)
        q = self.buffer.get(tp)
        last = q[-1].epoch_before(q[-1].next_offset) if q else st.offset_epoch
        return st.leader_epoch, -1 if last is None else last

    def _hold(self, tp: TopicPartition) -> None:
        """Fetch the partition again only after its backoff (the others are not held up)."""
        held = self._held.get(tp)
        backoff = held[1] if held is not None else Backoff(50, 2_000)
        until = time.monotonic() + backoff.next_s()
        self._held[tp] = (until, backoff)
        heapq.heappush(self._hold_ends, (until, tp))

    def _lane(self, node: int, tp: TopicPartition, offset: int) -> int:
        """The partition's lane: PARK_LANE while ``offset`` is at its log's end as last answered,
        else its own, dealt round-robin per broker the first time it is fetched."""
        if self._lanes > 1:
            end = self._ends.get(tp)
            if end is not None and offset >= end:
                return PARK_LANE
        lane = self._lane_of.get(tp)
        if lane is None:
            if len(self._lane_of) > 2 * self._subs.size() + 64:
                self._lane_of = {t: n for t, n in self._lane_of.items() if t in self._subs}
            lane = self._lane_of[tp] = FETCH_LANE_BASE + self._next_lane[node] % self._lanes
            self._next_lane[node] += 1
        return lane

    async def _fetch_node(self, slot: tuple[int, int], session: FetchSession) -> None:
        node, lane = slot
        # Not idle while data waits for the application: then do not long-poll the others.
        busy = any(self.buffer.values())
        sent = time.monotonic()  # a stalled fetch leaves these partitions unserved from now
        plan = None
        try:
            request, version, plan = await self._requests.build_session(
                node,
                session,
                max_wait=min(self._max_wait, 10) if busy else self._max_wait,
                min_bytes=self._min_bytes,
            )
            self.fetch_version = version
            resp = await self._client.send(
                node, request, version, timeout_ms=self._max_wait + self._request_timeout, lane=lane
            )
            self._backoff[node].reset()
            self.outage.ok_all(plan.partitions)
            answered = session.answered(plan, resp.error_code, getattr(resp, "session_id", 0))
            if not answered and resp.error_code in SESSION_ERRORS:
                # The broker lost or refused the session: the next request opens a new one,
                # from the positions as they are (nothing of this answer was taken).
                log.debug("fetch session on node %s: error %s, full fetch next", node, resp.error_code)
                return
            if resp.error_code:
                self._client.note_error(resp.error_code)
                if resp.error_code in RETRIABLE_FETCH_CODES:  # e.g. a stale topic id
                    for topic in {tp.topic for tp in session.wanted()}:
                        self._client.invalidate_metadata(topic)
                err = error_for(resp.error_code, f"Fetch from node {node}")
                if not err.retriable:
                    raise err
                retry = True
            else:
                retry = False
            got = False
            for topic, t in session_topics_of(resp, request, session, plan):
                for p in t.partitions:
                    tp = TopicPartition(topic, p.partition_index)
                    if p.error_code and self._net is not None:
                        self._net.error_code(ApiKey.FETCH, node, p.error_code)
                    asked = session.sent(tp)
                    outcome = self._handle_partition(
                        tp, p, None if asked is None else (asked.fetch_offset, asked.version), resp, node
                    )
                    if outcome is FetchOutcome.NOTHING:
                        if (
                            asked is not None
                            and self._lanes > 1
                            and lane != self._lane(node, tp, asked.fetch_offset)
                        ):
                            self._dirty.add(tp)  # caught up off PARK_LANE, or behind on it
                        continue
                    got |= outcome is FetchOutcome.GOT
                    self._dirty.add(tp)  # its next fetch offset, or whether it is held, changed
                    if outcome is FetchOutcome.RETRY:
                        self._hold(tp)
                    else:
                        self._held.pop(tp, None)  # answered: its backoff starts over
            if got:
                self._notify()
            if retry:
                # The whole answer failed (a stale topic id...): metadata is refreshed, retry
                # after a pause.
                self._from_leaders(node, session)
                self._dirty.update(session.wanted())  # their leaders looked up again
                await asyncio.sleep(self._backoff[node].next_s())
        except asyncio.CancelledError:
            session.failed()
            raise
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            # Lost connection or broker restart: back off, refresh metadata, resend from the
            # unchanged positions (in full: the broker's session may be gone with it).
            log.debug("fetch from node %s failed: %r", node, exc)
            session.failed()
            self.outage.failed_all(list(session.wanted()), exc, since=sent)
            for topic in {tp.topic for tp in session.wanted()}:
                self._client.invalidate_metadata(topic)
            self._from_leaders(node, session)
            self._dirty.update(session.wanted())  # their leaders looked up again
            await asyncio.sleep(self._backoff[node].next_s())
        except KafkaClosedError:
            session.failed()
        except Exception as exc:  # anything else reaches the application at its next poll
            log.debug("fetch from node %s failed: %r", node, exc)
            session.failed()
            self.errors.append(exc)
            self._notify()
            await asyncio.sleep(self._backoff[node].next_s())
        finally:
            self._inflight.pop(slot, None)
            self.wake()

    def _from_leaders(self, node: int, session: FetchSession) -> None:
        """A failed Fetch from ``node``: the partitions read from it as a replica go back to
        their leaders (KIP-392), as Java's consumer does."""
        if self.replicas:
            for tp in session.wanted():
                if self.replicas.clear(tp, node):
                    log.debug("fetch of %s from replica %s failed: from its leader again", tp, node)

    def _replica_failed(self, tp: TopicPartition, p: Any, code: int, node: int, resp: Any) -> FetchOutcome:
        """An error from the replica ``tp`` was read from (KIP-392): it is read from its leader
        again, whose answer decides. OFFSET_OUT_OF_RANGE resets nothing: the replica may be
        behind the leader, or have deleted more; the leader is asked at once."""
        log.debug("fetch of %s from replica %s: error %s; from its leader again", tp, node, code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return FetchOutcome.MOVED
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            self.validator.fenced(tp)  # our leader epoch is old: validate under the new one
        if resp is not None and leader_moved(self._client, tp, p, resp):
            return FetchOutcome.MOVED
        if code in RETRIABLE_FETCH_CODES or self._client.note_error(code, tp.topic):
            self._client.invalidate_metadata(tp.topic)
            return FetchOutcome.RETRY  # after its backoff: the leader may name it again at once
        return FetchOutcome.MOVED  # the leader's answer is the one raised, if it is the same

    def _handle_partition(
        self,
        tp: TopicPartition,
        p: Any,
        sent: tuple[int, int] | None,
        resp: Any = None,
        node: int | None = None,
    ) -> FetchOutcome:
        if sent is None or tp not in self._subs:
            return FetchOutcome.NOTHING
        fetch_offset, epoch = sent
        st = self._subs.state(tp)
        q = self.buffer.get(tp)
        expected = next_fetch_offset(st, q)
        if st.epoch != epoch or st.reset is not None or expected != fetch_offset:
            return FetchOutcome.NOTHING  # a seek or reset happened meanwhile: this data is stale
        code = p.error_code
        if code and node is not None and self.replicas.clear(tp, node):
            return self._replica_failed(tp, p, code, node, resp)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset is not OffsetReset.NONE:
                log.info(
                    "offset %s out of range for %s; resetting to %s", fetch_offset, tp, self.auto_offset_reset
                )
                self._subs.request_reset(tp, self.auto_offset_reset)
                return FetchOutcome.NOTHING
            msg = f"offset {fetch_offset} out of range for {tp.topic}[{tp.partition}] (auto_offset_reset='none')"
            self.partition_errors[tp] = (st.epoch, error_for(code, msg))
            return FetchOutcome.GOT
        diverging = getattr(p, "diverging_epoch", None)
        if not code and diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            # Fetch v12+: the log diverged from ours at this epoch (KIP-320), as an
            # OffsetForLeaderEpoch answer would have said. Data fetched past it is not to be had.
            self.buffer.pop(tp, None)
            assert st.position is not None
            answer = EpochEndOffset(diverging.epoch, diverging.end_offset)
            if not self.validator.complete(tp, st, st.position, answer) and diverging.epoch >= 0:
                # Intact up to the position: go on under the leader's epoch for it, so that the
                # next Fetch is not told the same again.
                st.offset_epoch = diverging.epoch
            return FetchOutcome.GOT
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            self.validator.fenced(tp)  # our leader epoch is old: validate under the new one
        if code and resp is not None and leader_moved(self._client, tp, p, resp):
            return FetchOutcome.MOVED
        if code:
            if code in RETRIABLE_FETCH_CODES or self._client.note_error(code, tp.topic):
                self._client.invalidate_metadata(tp.topic)
                return FetchOutcome.RETRY
            self.partition_errors[tp] = (st.epoch, error_for(code, f"Fetch {tp.topic}[{tp.partition}]"))
            return FetchOutcome.GOT
        if p.high_watermark >= 0:
            st.high_watermark = p.high_watermark
            lso = p.last_stable_offset
            if self._isolation is IsolationLevel.READ_COMMITTED and lso >= 0:
                self._ends[tp] = lso  # the end of what read_committed may read
            else:
                self._ends[tp] = p.high_watermark
        records = p.records
        replica = getattr(p, "preferred_read_replica", -1)
        if replica >= 0 and node is not None and replica != node:
            # KIP-392: the leader names the replica to read from (its answer has no records).
            if online(*self._replica_view(), tp, replica):
                log.debug("fetch of %s: read from replica %s (was %s)", tp, replica, node)
                self.replicas.prefer(tp, replica)
                if not records:
                    return FetchOutcome.MOVED
            elif not records:
                # Not a live replica in our metadata (yet, or any more): the leader asked again
                # at once would answer the same at once. Wait, with fresher metadata.
                log.debug("fetch of %s: replica %s named, not online in the metadata", tp, replica)
                self._client.invalidate_metadata(tp.topic)
                return FetchOutcome.RETRY
        if not records:
            return FetchOutcome.NOTHING
        aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or ())]
        pf = PartitionFetch(
            tp,
            fetch_offset,
            records,
            aborted=aborted,
            read_committed=self._isolation is IsolationLevel.READ_COMMITTED,
            check_crcs=self._check_crcs,
        )
        pf.prepare()
        if pf.next_offset == fetch_offset and not pf.batch_count:
            return FetchOutcome.NOTHING  # only a partial batch: nothing to hand over yet
        self.metrics.fetched(tp.topic, pf.complete_bytes())
        if q is None:
            self.buffer[tp] = q = deque()
        q.append(pf)
        return FetchOutcome.GOT
