"""KIP-848 group membership (``group_protocol="consumer"``): the ConsumerGroupHeartbeat loop.

The broker runs the assignment: the member heartbeats its subscription and what it owns, and
the answer carries its epoch and, when it changed, the whole target assignment (by topic id),
which the Reconciler brings in incrementally (revoke first, acknowledge, then add). The member
id is the client's own (KIP-1082); joining is a heartbeat at epoch 0, leaving one at -1 (-2 for
a static member, whose assignment the broker keeps for its session). A heartbeat carries every
field when joining and after an error, else only what changed. Fenced (FENCED_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID): the partitions are lost and the member joins again at epoch 0. Errors the
application must act on stay raised by every poll; a broker without the API is said so at the
start, never a silent hang.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from kafka_core.client.waiting import wait_event
from kafka_core.client.watch import TopicInterest, TopicView, topic_view
from kafka_core.consumer.group.kip848_reconcile import Reconciler, Target
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata, RebalanceListener
from kafka_core.consumer.subscription import SubscriptionState, topics_matching
from kafka_core.consumer_base.member import new_member_id
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.metrics.registry import ConsumerMetrics
from kafka_core.network.backoff import Backoff
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import (
    COORDINATOR_CODES,
    MEMBER_FENCED_CODES,
    RETRIABLE_CODES,
    ErrorCode,
    error_for,
)
from kafka_core.protocol.messages import ConsumerGroupHeartbeatRequest

log = logging.getLogger(
    "kafka_core.consumer.heartbeat_group"
)  # its name before the move: log filters keep working

UNSUPPORTED = (
    "the broker does not support the KIP-848 consumer group protocol (ConsumerGroupHeartbeat); "
    "use group_protocol='classic'"
)
LEAVE_EPOCH = -1  # a dynamic member leaves
LEAVE_STATIC_EPOCH = -2  # a static member leaves for now; the broker keeps its assignment
LEAVE_TIMEOUT_MS = 5_000
DEFAULT_INTERVAL_S = 3.0  # until an answer says (Kafka's group.consumer.heartbeat.interval.ms)
EAGER_S = 5.0  # after a subscribed topic appeared: heartbeats this long at the backoff at most


def unsupported_error(cause: BaseException | None = None) -> KafkaUnsupportedVersionError:
    return KafkaUnsupportedVersionError(UNSUPPORTED + (f" ({cause})" if cause is not None else ""))


class ConsumerGroupMembership:
    """One consumer's KIP-848 membership, with GroupMembership's interface (start, note_poll,
    wait_active, metadata, commit_args, close, joining): the consumer drives either the same way.

    It gets what it needs passed in: the client, the subscription state (through the
    Reconciler), the rebalance listener, the outage tracker for failures retried in the
    background, ``wake`` to interrupt a waiting poll, and the metrics."""

    def __init__(
        self,
        client: Any,
        subscription: SubscriptionState,
        listener: RebalanceListener,
        group_id: str,
        *,
        outage: OutageTracker,
        wake: Callable[[], None],
        topics: list[str],
        pattern: re.Pattern[str] | None,
        max_poll_interval_ms: int,
        group_instance_id: str | None,
        remote_assignor: str | None = None,
        rack_id: str | None = None,
        coordinator_ready_timeout_ms: float = 30_000,
        metadata_max_age_ms: float = 5_000,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else ConsumerMetrics()
        self._client = client
        self._outage = outage
        self._wake = wake
        self.group_id = group_id
        self._topics = sorted(set(topics))
        self._pattern = pattern
        self._max_poll_interval = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self._remote_assignor = remote_assignor
        self._rack_id = rack_id
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        self._metadata_check = metadata_max_age_ms / 1000.0
        self._request_timeout_ms = float(getattr(client, "request_timeout_ms", 30_000))
        self.member_id = new_member_id()
        self.epoch = 0  # 0: joining (or not a member); > 0: a member
        self._rec = Reconciler(client, subscription, listener, self._owned_changed)
        self._target: Target | None = None  # the broker's latest assignment, not in place yet
        self._version: int | None = None
        self._fatal: BaseException | None = None
        self._full = True  # the next heartbeat carries every field
        self._sent_subscription: tuple[list[str], str | None] | None = None
        self._sent_owned: dict[uuid.UUID, list[int]] | None = None
        self._interval = DEFAULT_INTERVAL_S  # the broker says how often (each answer)
        self._matched: list[str] = []  # the pattern's topics, resolved here when the broker has v0 only
        self._next_match = 0.0
        self._stale = False  # left at max_poll_interval_ms: rejoins at the next poll
        self._last_poll = 0.0
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        # The subscribed topics (or the pattern's) as the cluster shows them: one appearing
        # means the broker has a new assignment for us, fetched at once by a heartbeat rather
        # than at the next interval, and any topic ids it names that were unknown can resolve.
        self._watch: TopicInterest | None = None
        # After such a change, heartbeats at the retry backoff until an assignment comes (the
        # coordinator may take in the new topic a moment after the client sees it), for a while.
        self._eager: Backoff | None = None
        self._eager_until = 0.0
        self._reconcile_task: asyncio.Task[None] | None = None
        self._send_now = asyncio.Event()  # an acknowledgement or a rejoin: heartbeat now
        self._settled = asyncio.Event()  # a member with its assignment in place
        self._answered = asyncio.Event()  # a heartbeat was answered (next_epoch waits for one)
        self._key = f"heartbeats of group {group_id!r}"  # what the outage report names
        self._assign_key = f"the assignment of group {group_id!r}"

    # -- the interface the consumer drives -----------------------------------------------------

    async def start(self) -> None:
        """Find the coordinator and check that it speaks ConsumerGroupHeartbeat; then the
        heartbeats begin (the first one joins)."""
        if self._fatal is not None:
            raise self._fatal
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        if self._task is not None:
            return
        try:
            coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._gate_timeout_ms)
        except KafkaClosedError:
            raise
        except KafkaAuthenticationError as exc:  # a refused login: every poll raises it from now on
            self._fatal = exc
            raise
        except KafkaError as exc:
            raise KafkaTimeoutError(
                f"group coordinator for {self.group_id!r} not ready within {self._gate_timeout_ms} ms; "
                f"not consuming: {exc}"
            ) from exc
        try:
            self._version = await self._client.api_version(coord.node_id, ApiKey.CONSUMER_GROUP_HEARTBEAT)
        except KafkaUnsupportedVersionError as exc:
            self._fatal = unsupported_error(exc)
            raise self._fatal from exc
        self._task = loop.create_task(self._run(), name=f"kafka-core-heartbeat-{self.group_id}")
        # From what the client knows already: only a change from it heartbeats early.
        known = self._client.cached_metadata().topics
        seen = topic_view(known, None if self._pattern is not None else self._topics)
        if self._pattern is not None:
            matching = set(topics_matching(self._pattern, known))  # once, not once per topic
            seen = {n: v for n, v in seen.items() if n in matching}
        self._watch = self._client.watch_topics(
            self._topics_changed,
            topics=self._topics,
            pattern=self._pattern,
            refresh_ms=self._metadata_check * 1000,
            view=seen,
        )

    @property
    def joining(self) -> bool:
        """Not a member yet, or an assignment being brought in (no auto-commit meanwhile)."""
        return not self._settled.is_set()

    def note_poll(self) -> None:
        self._last_poll = asyncio.get_running_loop().time()
        if self._stale:  # left at max_poll_interval_ms: this poll rejoins
            self._stale = False
            self._send_now.set()

    async def wait_active(self, timeout_s: float, interrupt: asyncio.Event | None = None) -> bool:
        """Wait at most ``timeout_s`` for the member to have its assignment in place (the
        reconciliation's callbacks run meanwhile); False if it is still going on. A fatal error
        (the broker refused the member) is raised by every call."""
        if self._fatal is not None:
            raise self._fatal
        if (
            not self._settled.is_set()
            and timeout_s > 0
            and not (interrupt is not None and interrupt.is_set())
        ):
            waits = [asyncio.ensure_future(self._settled.wait())]
            if interrupt is not None:
                waits.append(asyncio.ensure_future(interrupt.wait()))
            try:
                await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        if self._fatal is not None:
            raise self._fatal
        return self._settled.is_set()

    def metadata(self) -> ConsumerGroupMetadata:
        """The member epoch is the generation (what OffsetCommit and transactions carry)."""
        if self.epoch > 0:
            return ConsumerGroupMetadata(self.group_id, self.epoch, self.member_id, self.group_instance_id)
        return ConsumerGroupMetadata(self.group_id, -1, "", self.group_instance_id)

    def commit_args(self) -> dict[str, Any]:
        meta = self.metadata()
        return {
            "generation_id": meta.generation_id,
            "member_id": meta.member_id,
            "group_instance_id": self.group_instance_id,
        }

    async def next_epoch(self) -> bool:
        """A commit met STALE_MEMBER_EPOCH (the epoch moved while it was on its way): heartbeat
        now and wait for the answer (at most the request timeout); True if the member then has
        an epoch to commit with again."""
        if self._task is None or self._task.done() or self._closed:
            return False
        self._answered.clear()
        self._send_now.set()
        await wait_event(self._answered, self._request_timeout_ms / 1000.0)
        return self._answered.is_set() and self.epoch > 0 and self._fatal is None

    async def close(self) -> None:
        """Revoke what is owned (``on_revoke``), then leave: epoch -1, or -2 for a static member
        (its partitions wait for it for the session timeout). The consumer bounds this by
        close's timeout."""
        self._closed = True
        if self._watch is not None:
            self._watch.close()
        for task in (self._task, self._reconcile_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._reconcile_task = None
        self._settled.set()
        await self._rec.revoke_all()
        if self.epoch > 0:
            await self._leave("consumer closed")

    def _topics_changed(self, view: TopicView) -> None:
        """A subscribed topic appeared, went or grew: heartbeat now (the broker's assignment
        follows the cluster's topics), and retry an assignment waiting on unknown topic ids.
        A pattern resolved here (ConsumerGroupHeartbeat v0) takes the new match at once."""
        if self._closed:
            return
        if self._pattern is not None and self._version == 0:
            self._matched = sorted(view)
            self._next_match = asyncio.get_running_loop().time() + self._metadata_check
        self._send_now.set()
        self._eager = Backoff(100, 1_000)
        self._eager_until = asyncio.get_running_loop().time() + EAGER_S
        if self._target is not None and self.epoch > 0:
            self._kick()

    def _after_topics_changed(self, assigned: bool) -> float:
        """The delay to the next heartbeat: the interval, or sooner while a subscribed topic's
        change has not brought an assignment yet (for at most EAGER_S)."""
        eager = self._eager
        if eager is None:
            return self._interval
        if assigned or asyncio.get_running_loop().time() >= self._eager_until:
            self._eager = None
            return self._interval
        return min(self._interval, eager.next_s())

    # -- the heartbeat loop -------------------------------------------------------------------

    async def _run(self) -> None:
        """The loop, and what ends it unexpectedly (a bug, never silent: every poll raises it)."""
        try:
            await self._beat()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("group %s: the heartbeat loop failed", self.group_id)
            await self._fail(exc)

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(100, 2_000)
        while not self._closed:
            if self._stale:
                await self._send_now.wait()
                self._send_now.clear()
                continue
            if self.epoch > 0 and (loop.time() - self._last_poll) * 1000 > self._max_poll_interval:
                await self._poll_timeout()
                continue
            try:
                resp = await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except KafkaClosedError:
                return
            except KafkaUnsupportedVersionError as exc:
                await self._fail(unsupported_error(exc))
                return
            except KafkaAuthenticationError as exc:  # a refused login: retrying is refused alike
                await self._fail(exc)
                return
            except KafkaProtocolError as exc:
                if not exc.retriable:  # e.g. GROUP_AUTHORIZATION_FAILED finding the coordinator
                    await self._fail(exc)
                    return
                self._outage.failed(self._key, exc)
                self._full = True
                await self._pause(backoff.next_s())
                continue
            except KafkaError as exc:
                log.info("heartbeat for group %s failed: %r; retrying", self.group_id, exc)
                self.metrics.heartbeat_errors += 1
                self._outage.failed(self._key, exc)
                self._full = True
                self._client.note_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, coordinator_key=self.group_id)
                await self._pause(backoff.next_s())
                continue
            delay = await self._answer(resp, backoff)
            self._answered.set()
            if delay is None:
                return
            await self._pause(delay)

    async def _pause(self, delay: float) -> None:
        """Until the next heartbeat is due, or one is wanted now (an acknowledgement)."""
        await wait_event(self._send_now, delay)
        self._send_now.clear()

    async def _heartbeat(self) -> Any:
        coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._request_timeout_ms)
        self._version = await self._client.api_version(coord.node_id, ApiKey.CONSUMER_GROUP_HEARTBEAT)
        body, subscription, owned = await self._request(self._version)
        resp = await self._client.send(
            coord.node_id, body, self._version, timeout_ms=self._request_timeout_ms
        )
        if not resp.error_code:
            self._sent_subscription, self._sent_owned = subscription, owned
        return resp

    async def _request(
        self, version: int
    ) -> tuple[Any, tuple[list[str], str | None], dict[uuid.UUID, list[int]]]:
        """The heartbeat: every field when joining or after an error, else what changed."""
        full = self._full or self.epoch == 0
        subscription = await self._subscription(version)
        owned = self._rec.owned_by_id() if self.epoch > 0 else {}
        body = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.epoch
        )
        if full:
            body.instance_id = self.group_instance_id
            body.rack_id = self._rack_id
            body.rebalance_timeout_ms = self._max_poll_interval
            body.server_assignor = self._remote_assignor
        if full or subscription != self._sent_subscription:
            body.subscribed_topic_names = subscription[0]
            if version >= 1:
                body.subscribed_topic_regex = subscription[1]
        if full or owned != self._sent_owned:
            tp_cls = ConsumerGroupHeartbeatRequest.TopicPartitions
            body.topic_partitions = [tp_cls(topic_id=t, partitions=ps) for t, ps in owned.items()]
        return body, subscription, owned

    async def _subscription(self, version: int) -> tuple[list[str], str | None]:
        """(topic names, regex). With v1 the broker evaluates a pattern (RE2/J); with v0 it is
        resolved here against the metadata, again every ``metadata_max_age_ms``. Both fields
        travel together, the unused one empty, as librdkafka sends them."""
        if self._pattern is None:
            return self._topics, ("" if version >= 1 else None)
        if version >= 1:
            return [], self._pattern.pattern
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_match:
            meta = await self._client.metadata(None)
            self._matched = topics_matching(self._pattern, meta.topics)
            self._next_match = loop.time() + self._metadata_check
        return self._matched, None

    async def _answer(self, resp: Any, backoff: Backoff) -> float | None:
        """Take in a heartbeat's answer: the delay to the next one (None: stop, fatal)."""
        code = resp.error_code
        log.debug(
            "group %s: heartbeat answer %s epoch %s assignment %s",
            self.group_id,
            code,
            resp.member_epoch,
            None
            if resp.assignment is None
            else [(str(t.topic_id), t.partitions) for t in resp.assignment.topic_partitions],
        )
        if not code:
            self._outage.ok(self._key)
            backoff.reset()
            self._full = False
            if resp.member_id:
                self.member_id = resp.member_id
            joined = self.epoch <= 0 < resp.member_epoch
            self.epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self._interval = resp.heartbeat_interval_ms / 1000.0
            if joined:
                log.info("group %s: joined as %s (epoch %s)", self.group_id, self.member_id, self.epoch)
            if resp.assignment is not None:
                self._target = {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}
            if self._target is not None:
                self._kick()
            elif self.epoch > 0 and not self._reconciling:
                self._settle()
            return self._after_topics_changed(resp.assignment is not None)
        self._full = True
        self.metrics.heartbeat_errors += 1
        what = f"ConsumerGroupHeartbeat for group {self.group_id!r}"
        err = error_for(code, f"{what}: {resp.error_message}" if resp.error_message else what)
        if code in MEMBER_FENCED_CODES:
            log.warning("group %s: %s; partitions lost, joining again", self.group_id, err.name)
            await self._rejoin()
            return backoff.next_s()
        if code in COORDINATOR_CODES:
            self._client.note_error(code, coordinator_key=self.group_id)
            self._outage.failed(self._key, err)
            return backoff.next_s()
        if code == ErrorCode.UNSUPPORTED_VERSION:
            await self._fail(unsupported_error(err))
            return None
        if code in RETRIABLE_CODES:
            self._outage.failed(self._key, err)
            return backoff.next_s()
        await self._fail(err)
        return None

    # -- states -------------------------------------------------------------------------------

    @property
    def _reconciling(self) -> bool:
        return self._reconcile_task is not None and not self._reconcile_task.done()

    def _settle(self) -> None:
        if not self._settled.is_set():
            self._settled.set()
            self._wake()

    def _kick(self) -> None:
        """Bring the target in (a task of its own: heartbeats go on while callbacks run)."""
        if self._reconciling or self._closed:
            return
        self._settled.clear()
        self._reconcile_task = asyncio.get_running_loop().create_task(
            self._reconcile(), name=f"kafka-core-reconcile-{self.group_id}"
        )

    async def _reconcile(self) -> None:
        try:
            while self._target is not None and not self._closed and self.epoch > 0:
                target = self._target
                self.metrics.rebalance_begin()
                changed, complete = await self._rec.reconcile(target)
                if changed:
                    self.metrics.assignment_changes += 1
                self.metrics.rebalance_end(True if changed else None)
                self._outage.ok(self._assign_key)
                if self._target is target:
                    if not complete:
                        break  # topic ids unknown yet: again after the next heartbeat
                    self._target = None
        except KafkaClosedError:
            return
        except KafkaError as exc:
            # E.g. the committed offsets of new partitions not readable: again after the next
            # heartbeat; a poll reports it if it lasts (the outage tracker).
            log.warning("group %s: reconciling the assignment failed: %r; retrying", self.group_id, exc)
            self.metrics.rebalance_end(False)
            self._outage.failed(self._assign_key, exc)
        except Exception as exc:  # a bug: never a silent stall, every poll raises it
            log.exception("group %s: reconciling the assignment failed", self.group_id)
            self.metrics.rebalance_end(False)
            await self._fail(exc)
            return
        if self.epoch > 0 and not self._closed:
            self._settle()

    def _owned_changed(self) -> None:
        """What the member owns changed: acknowledge it with a heartbeat now."""
        self._send_now.set()

    async def _rejoin(self) -> None:
        """Fenced: every partition lost (after the step in progress), then epoch 0 again."""
        self._settled.clear()
        self._target = None
        self.epoch = 0
        self._epoch_over()
        await self._rec.lose_all()

    def _epoch_over(self) -> None:
        """The member has no epoch any more: a commit waiting in next_epoch stops waiting now.
        (Losing the partitions waits for the step in progress, which may be that commit.)"""
        self._answered.set()

    async def _poll_timeout(self) -> None:
        """No poll for max_poll_interval_ms: leave (the partitions go to others, as Java's
        member does), lose them here, and rejoin at the next poll."""
        log.warning(
            "group %s: no poll for over max_poll_interval_ms=%s; leaving the group",
            self.group_id,
            self._max_poll_interval,
        )
        self._settled.clear()
        self._target = None
        await self._leave("max_poll_interval_ms exceeded")
        self._stale = True
        self._full = True
        self._epoch_over()
        await self._rec.lose_all()

    async def _fail(self, err: BaseException) -> None:
        """The broker refused the member: every poll raises ``err`` from now on."""
        log.error("group %s: %s", self.group_id, err)
        self._fatal = err
        self._target = None
        self.epoch = 0
        self._settle()  # a waiting poll returns and raises
        self._epoch_over()
        await self._rec.lose_all()

    async def _leave(self, reason: str) -> None:
        epoch = LEAVE_STATIC_EPOCH if self.group_instance_id is not None else LEAVE_EPOCH
        try:
            coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=LEAVE_TIMEOUT_MS)
            body = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=epoch,
                instance_id=self.group_instance_id,
            )
            resp = await self._client.send(coord.node_id, body, timeout_ms=LEAVE_TIMEOUT_MS)
            if resp.error_code:
                log.info("leaving group %s: %s", self.group_id, error_for(resp.error_code))
            else:
                log.info("group %s: left (%s)", self.group_id, reason)
        except KafkaError as exc:
            log.info("leaving group %s failed: %r", self.group_id, exc)
        self.epoch = 0
        self._sent_subscription = self._sent_owned = None
