"""Classic group membership: FindCoordinator, JoinGroup/SyncGroup, Heartbeat, LeaveGroup.

Heartbeats run as their own task on the event loop, so a slow handler between polls keeps the
membership until ``max_poll_interval_ms``; past that the member leaves, as Java's does, and
rejoins at the next poll. Rebalance errors (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) lead to a rejoin. With only cooperative assignors the
incremental protocol of KIP-429 is used: only partitions that move are revoked.

JoinGroup and SyncGroup travel on a connection of their own (``JOIN_LANE``): a broker holds a
JoinGroup until the rebalance completes and serves a connection's requests one at a time, so
on the shared connection a LeaveGroup (and heartbeats, commits) would wait behind it. A member
closed mid-join leaves with the member id the broker gave it, as a zombie member would otherwise
hold the next rebalance (leader of it, on some brokers) until its session times out.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.client.watch import TopicInterest, TopicView, topic_view
from kafka_core.consumer.group.assignors import COOPERATIVE, get_assignor
from kafka_core.consumer.group.classic_leader import leader_plan
from kafka_core.consumer.group.classic_meta import (
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from kafka_core.consumer.group.rebalance import ConsumerGroupMetadata, RebalanceListener
from kafka_core.consumer.subscription import SubscriptionState, topics_matching
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kafka_core.metrics.registry import ConsumerMetrics
from kafka_core.network.backoff import Backoff
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import COORDINATOR_CODES, REJOIN_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

log = logging.getLogger("kafka_core.consumer.group")  # its name before the move: log filters keep working

METADATA_CHECK_S = 5.0
# A further connection to the coordinator for JoinGroup/SyncGroup (far above any fetch lane).
JOIN_LANE = 1 << 16
# Join rounds in a row that end without an assignment before the join counts as failing (a
# WARNING, and poll raises once it has lasted request_timeout_ms): one or two are ordinary.
STUCK_ROUNDS = 3


class GroupMembership:
    """One consumer's membership of its group; it never sees the consumer (aiokafka's
    ``GroupCoordinator(client, subscription)`` shape): it gets the subscription state to update,
    a listener to tell, ``on_error`` for errors the application must see at its next poll, the
    outage tracker for failures retried in the background, and ``wake`` to interrupt a waiting
    poll when a rejoin is needed."""

    def __init__(
        self,
        client: Any,
        subscription: SubscriptionState,
        listener: RebalanceListener,
        on_error: Callable[[BaseException], None],
        group_id: str,
        *,
        outage: OutageTracker,
        wake: Callable[[], None],
        topics: list[str],
        pattern: re.Pattern[str] | None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        group_instance_id: str | None,
        assignors: Iterable[Any],
        coordinator_ready_timeout_ms: int = 30_000,
        metadata_max_age_ms: int = int(METADATA_CHECK_S * 1000),
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else ConsumerMetrics()  # rebalances
        self._client = client
        self._subs = subscription
        self._listener = listener
        self._on_error = on_error
        self._outage = outage
        self._wake = wake
        self.group_id = group_id
        self._topics = list(topics)
        self._pattern = pattern
        self._session_timeout = session_timeout_ms
        self._heartbeat_interval = heartbeat_interval_ms / 1000.0
        self._max_poll_interval = max_poll_interval_ms
        self._metadata_check = metadata_max_age_ms / 1000.0
        self.group_instance_id = group_instance_id
        self._assignors = [get_assignor(a) for a in assignors]
        if not self._assignors:
            raise KafkaConfigError("at least one assignor is needed")
        self.cooperative = all(a.protocol == COOPERATIVE for a in self._assignors)
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.needs_rejoin = True
        self._partitions_lost = False
        self._owned: set[TopicPartition] = set()
        self._subscribed: list[str] = []
        self._last_poll = 0.0
        self._task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None  # a join going on behind poll()
        # One join at a time (ensure_active): the JoinGroup/SyncGroup exchange, _owned and the
        # subscription changes it makes. The heartbeat task may still reset member_id/generation
        # (fenced, expired); the join in progress then fails and retries.
        self._join_lock = asyncio.Lock()
        self._closed = False
        self._joined_once = False
        # The leader watches every member's topics, from what it assigned from: one that
        # appears, goes, is recreated or grows means a rebalance (as Java's leader). A pattern
        # member watches what its pattern matches: a new match means a rejoin.
        self._leader_watch: TopicInterest | None = None
        self._pattern_watch: TopicInterest | None = None
        self._pattern_view: TopicView = {}  # what the pattern matched at the last join
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        self._failed_rounds = 0  # join rounds in a row that got no assignment
        # A refused login (SASL credentials, TLS handshake): fatal, every poll raises it.
        self._refused: KafkaAuthenticationError | None = None
        self._join_key = f"joining group {group_id!r}"  # what the outage report names
        self._heartbeat_key = f"heartbeats of group {group_id!r}"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Heartbeats begin; the first join happens at the first poll (``wait_active``)."""
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        if self._task is None:
            self._task = loop.create_task(
                self._heartbeat_loop(), name=f"kafka-core-heartbeat-{self.group_id}"
            )
        if self._pattern is not None and self._pattern_watch is None:
            self._pattern_watch = self._client.watch_topics(
                self._pattern_changed, pattern=self._pattern, refresh_ms=self._metadata_check * 1000
            )

    @property
    def joining(self) -> bool:
        return self._join_task is not None and not self._join_task.done()

    def note_poll(self) -> None:
        self._last_poll = asyncio.get_running_loop().time()

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.group_instance_id)

    def commit_args(self) -> dict[str, Any]:
        return {
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
        }

    async def next_epoch(self) -> bool:
        """Only KIP-848 members have epochs that move under a commit (see ConsumerGroupMembership)."""
        return False

    async def close(self) -> None:
        self._closed = True
        for watch in (self._leader_watch, self._pattern_watch):
            if watch is not None:
                watch.close()
        for task in (self._task, self._join_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._join_task = None
        if self._owned:
            await self._listener.on_partitions_revoked(set(self._owned))
        # Static members do not leave on close (KIP-345): a restart within the session timeout
        # gets the same assignment back without a rebalance. A member closed mid-join leaves
        # too (generation -1, but the broker knows its member id): else it stays in the group,
        # awaited by the next rebalance until its session times out.
        if self.group_instance_id is None and self.member_id:
            await self._leave("consumer closed")

    async def _leave(self, reason: str) -> None:
        try:
            coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=5_000)
            conn = await self._client.connection(coord.node_id)
            version = conn.choose_version(ApiKey.LEAVE_GROUP)
            if version >= 3:
                ident = LeaveGroupRequest.MemberIdentity(
                    member_id=self.member_id, group_instance_id=self.group_instance_id, reason=reason
                )
                body = LeaveGroupRequest(group_id=self.group_id, members=[ident])
            else:
                body = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            resp = await self._client.send(coord.node_id, body, version, timeout_ms=5_000)
            if resp.error_code:
                log.info("LeaveGroup for %s: %s", self.group_id, error_for(resp.error_code))
        except KafkaError as exc:
            log.info("LeaveGroup for %s failed: %r", self.group_id, exc)
        self.member_id = ""
        self.generation = -1

    # -- revocation --------------------------------------------------------------------------

    async def _revoke(self, tps: set[TopicPartition], *, lost: bool) -> None:
        if not tps:
            return
        if lost:
            await self._listener.on_partitions_lost(tps)
        else:
            await self._listener.on_partitions_revoked(tps)
        self._subs.remove(tps)
        self._owned -= tps

    # -- joining -----------------------------------------------------------------------------

    async def wait_active(self, timeout_s: float, interrupt: asyncio.Event | None = None) -> bool:
        """Join when needed, waiting at most ``timeout_s``: False if the join is still going on.

        The join runs as a task of its own, so a poll that times out (or is interrupted: the
        consumer's stop()) returns while it goes on in the background; the next poll picks it
        up (and raises its error, if it failed).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            task = self._join_task
            if task is None:
                if not self.needs_rejoin or self._closed:
                    return True
                task = self._join_task = loop.create_task(
                    self.ensure_active(), name=f"kafka-core-join-{self.group_id}"
                )
            if not task.done():
                remaining = deadline - loop.time()
                if remaining > 0 and not (interrupt is not None and interrupt.is_set()):
                    if interrupt is None:
                        await asyncio.wait({task}, timeout=remaining)
                    else:
                        waiter = loop.create_task(interrupt.wait())
                        try:
                            await asyncio.wait(
                                {task, waiter}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                            )
                        finally:
                            waiter.cancel()
                if not task.done():
                    return False
            self._join_task = None
            if task.cancelled():
                raise KafkaClosedError("consumer closed while joining its group")
            task.result()

    async def ensure_active(self) -> None:
        if self._refused is not None:
            raise self._refused
        if not self.needs_rejoin or self._closed:
            return
        async with self._join_lock:
            backoff = Backoff(100, 2_000)
            loop = asyncio.get_running_loop()
            # Cold start gate: a first join that cannot reach a ready coordinator gives up (and
            # nothing was consumed or committed); later rejoins keep trying.
            gate = loop.time() + self._gate_timeout_ms / 1000.0 if not self._joined_once else None
            if self.needs_rejoin and not self._closed:
                self.metrics.rebalance_begin()
            while self.needs_rejoin and not self._closed:
                try:
                    await self._join_once()
                except KafkaAuthenticationError as exc:
                    # Not an outage: logging in again is refused the same way (as the producer,
                    # and Java's AuthenticationException from poll). No retry, no login storm.
                    self._refused = exc
                    self.metrics.rebalance_end(False)
                    raise
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    self._outage.failed(self._join_key, exc)
                    if gate is not None and loop.time() >= gate:
                        self.metrics.rebalance_end(False)
                        raise KafkaTimeoutError(
                            f"group coordinator for {self.group_id!r} not ready within "
                            f"{self._gate_timeout_ms} ms; not consuming: {exc}"
                        ) from exc
                    log.info("joining group %s: %r; retrying", self.group_id, exc)
                    await asyncio.sleep(backoff.next_s())
                except KafkaClosedError:
                    raise
                except _Retry as exc:
                    self._note_failed_round(exc)
                    await asyncio.sleep(backoff.next_s() if exc.backoff or exc.round_failed else 0)
            if not self.needs_rejoin:
                self._failed_rounds = 0
                self._outage.ok_all((self._join_key, self._heartbeat_key))
            self.metrics.rebalance_end(None if self._closed else not self.needs_rejoin)

    def _note_failed_round(self, exc: _Retry) -> None:
        """Log a retry; a run of join rounds without an assignment is reported as failing."""
        if not exc.round_failed:
            log.info("joining group %s: %s; retrying", self.group_id, exc)
            return
        self._failed_rounds += 1
        if self._failed_rounds < STUCK_ROUNDS:
            log.info("joining group %s: %s; rejoining (JoinGroup)", self.group_id, exc)
            return
        cause = error_for(
            ErrorCode.REBALANCE_IN_PROGRESS,
            f"group {self.group_id!r}: {self._failed_rounds} join rounds in a row ended without an "
            f"assignment (last: {exc}); a member that joined but never syncs (a closed consumer "
            "that did not leave) holds the group until its session times out",
        )
        log.warning("%s; rejoining (JoinGroup)", cause)
        self._outage.failed(self._join_key, cause)

    async def _subscription_topics(self) -> list[str]:
        if self._pattern is None:
            topics = sorted(set(self._topics))
            await self._check_authorized(topics)
            return topics
        meta = await self._client.metadata(None)
        matched = topics_matching(self._pattern, meta.topics)
        self._pattern_view = topic_view(meta.topics, matched)
        return matched

    async def _check_authorized(self, topics: list[str]) -> None:
        """A named topic this consumer may not describe is refused, not absent: taken as absent,
        the group would assign it nothing and poll return [] for ever. Raised from the join (so
        from every poll until an ACL allows it), naming the topics, as the Java consumer's poll
        raises TopicAuthorizationException. A pattern only ever matches the topics it may see."""
        if not topics:
            return
        meta = await self._client.metadata(topics)
        denied = [t.name for t in meta.topics if t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        if denied:
            raise error_for(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                f"not authorized to describe or read topic(s) {', '.join(map(repr, sorted(denied)))} "
                f"subscribed by group {self.group_id!r}",
            )

    def _fail(self, code: int, what: str) -> Exception:
        """Turn a group error code into a retry (with the right state reset) or a raise."""
        if code in COORDINATOR_CODES:
            self._client.note_error(code, coordinator_key=self.group_id)
            return _Retry(f"{what}: coordinator moved or loading ({code})", backoff=True)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            if code == ErrorCode.FENCED_INSTANCE_ID:
                log.warning(
                    "group %s: instance id %r fenced by another member", self.group_id, self.group_instance_id
                )
            self.member_id = ""
            self.generation = -1
            self._partitions_lost = True
            return _Retry(f"{what}: {error_for(code).name}", backoff=code == ErrorCode.FENCED_INSTANCE_ID)
        if code == ErrorCode.ILLEGAL_GENERATION:
            self.generation = -1
            self._partitions_lost = True
            return _Retry(f"{what}: illegal generation")
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            return _Retry(f"{what}: rebalance in progress", round_failed=what == "SyncGroup")
        if code == ErrorCode.INVALID_SESSION_TIMEOUT:
            return error_for(
                code,
                f"{what} for group {self.group_id!r}: session_timeout_ms={self._session_timeout} is outside "
                "the broker's group.min.session.timeout.ms..group.max.session.timeout.ms",
            )
        return error_for(code, f"{what} for group {self.group_id!r}")

    async def _join_once(self) -> None:
        if self._partitions_lost and self._owned:
            await self._revoke(set(self._owned), lost=True)
        self._partitions_lost = False
        if not self.cooperative and self._owned:
            await self._revoke(set(self._owned), lost=False)
        coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._gate_timeout_ms)
        self._subscribed = await self._subscription_topics()
        owned: dict[str, list[int]] = {}
        for tp in sorted(self._owned):
            owned.setdefault(tp.topic, []).append(tp.partition)
        meta = encode_subscription(Subscription(self._subscribed, None, owned, self.generation))
        protocols = [
            JoinGroupRequest.JoinGroupRequestProtocol(name=a.name, metadata=meta) for a in self._assignors
        ]
        body = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self._session_timeout,
            rebalance_timeout_ms=self._max_poll_interval,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocols=protocols,
        )
        resp = await self._client.send(
            coord.node_id, body, timeout_ms=self._max_poll_interval + 10_000, lane=JOIN_LANE
        )
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            raise _Retry("member id assigned")
        if resp.error_code:
            raise self._fail(resp.error_code, "JoinGroup")
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        self.protocol_name = resp.protocol_name
        assignments: list[Any] = []
        watched: tuple[set[str], TopicView] | None = None
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            plan, topics, view = await leader_plan(
                self._client, self._assignors, resp.protocol_name, resp.members
            )
            watched = (topics, view)
            assignments = [
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                for m, a in plan.items()
            ]
        sync = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        sresp = await self._client.send(
            coord.node_id, sync, timeout_ms=self._max_poll_interval + 10_000, lane=JOIN_LANE
        )
        if sresp.error_code:
            retry = self._fail(sresp.error_code, "SyncGroup")
            if isinstance(retry, _Retry) and resp.leader != self.member_id:
                retry.args = (f"{retry} (leader {resp.leader!r} did not send the assignment)",)
            raise retry
        # The watches start from what this join was made from (a change during the join is
        # seen again against it, not lost with the join's end).
        if watched is not None:
            self._watch_as_leader(*watched)
        elif self._leader_watch is not None:
            self._leader_watch.close()  # another member leads now: its job
            self._leader_watch = None
        if self._pattern_watch is not None:
            self._pattern_watch.set_topics((), view=self._pattern_view)
        self._joined_once = True
        assignment = decode_assignment(sresp.assignment)
        new = {TopicPartition(t, p) for t, ps in assignment.partitions.items() for p in ps}
        await self._apply(new)

    async def _apply(self, new: set[TopicPartition]) -> None:
        revoked = self._owned - new
        added = new - self._owned
        self.needs_rejoin = False
        if revoked:
            await self._revoke(revoked, lost=False)
            if self.cooperative:
                self.needs_rejoin = True  # let the new owners have them (KIP-429 second round)
        self._owned = set(new)
        if added or not self.cooperative:
            # Eager: everything was revoked before this join, so ``added`` is the whole assignment.
            self._subs.add(added)
            await self._listener.on_partitions_assigned(added)
        log.info("group %s generation %s: assigned %s", self.group_id, self.generation, sorted(self._owned))

    # -- heartbeats --------------------------------------------------------------------------

    def _request_rejoin(self) -> None:
        self.needs_rejoin = True
        self._wake()  # a waiting poll rejoins promptly

    def _watch_as_leader(self, topics: set[str], view: TopicView) -> None:
        """Watch the group's topics from the metadata this assignment was made from."""
        if self._leader_watch is None:
            self._leader_watch = self._client.watch_topics(
                self._assigned_topics_changed,
                topics=topics,
                refresh_ms=self._metadata_check * 1000,
                view=view,
            )
        else:
            self._leader_watch.set_topics(topics, view)

    def _assigned_topics_changed(self, view: TopicView) -> None:
        """(Leader) a subscribed topic appeared, went, was recreated or grew: rebalance."""
        if self._closed or not self.member_id:
            return
        log.info("group %s: subscribed topics changed (now %s); rejoining", self.group_id, view)
        self._request_rejoin()

    def _pattern_changed(self, view: TopicView) -> None:
        """The pattern matches other topics than this member joined with: rejoin."""
        if self._closed or not self.member_id or sorted(view) == self._subscribed:
            return
        log.info("group %s: the pattern now matches %s; rejoining", self.group_id, sorted(view))
        self._request_rejoin()

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            await asyncio.sleep(self._heartbeat_interval)
            if self.needs_rejoin or not self.member_id or self.generation < 0:
                continue
            if (loop.time() - self._last_poll) * 1000 > self._max_poll_interval:
                log.warning(
                    "group %s: no poll for over max_poll_interval_ms=%s; leaving the group",
                    self.group_id,
                    self._max_poll_interval,
                )
                await self._leave("max_poll_interval_ms exceeded")
                self._partitions_lost = True
                self._request_rejoin()
                continue
            try:
                coord = await self._client.find_coordinator(
                    self.group_id, 0, timeout_ms=self._session_timeout
                )
                body = HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=self.group_instance_id,
                )
                resp = await self._client.send(coord.node_id, body, timeout_ms=self._session_timeout)
            except asyncio.CancelledError:
                raise
            except KafkaClosedError:
                return
            except KafkaError as exc:
                log.info("heartbeat for %s failed: %r", self.group_id, exc)
                self._outage.failed(self._heartbeat_key, exc)
                self._client.note_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, coordinator_key=self.group_id)
                continue
            self._outage.ok(self._heartbeat_key)
            code = resp.error_code
            if not code:
                continue
            if code in COORDINATOR_CODES:
                self._client.note_error(code, coordinator_key=self.group_id)
            elif code in REJOIN_CODES:
                log.info("group %s: heartbeat says %s; rejoining", self.group_id, error_for(code).name)
                if code != ErrorCode.REBALANCE_IN_PROGRESS:
                    self._fail(code, "Heartbeat")
                self._request_rejoin()
            else:
                self._on_error(error_for(code, f"Heartbeat for group {self.group_id!r}"))


class _Retry(Exception):
    """Join again; ``round_failed``: a whole JoinGroup/SyncGroup round ended without an
    assignment (counted towards STUCK_ROUNDS, and backed off)."""

    def __init__(self, what: str, *, backoff: bool = False, round_failed: bool = False) -> None:
        super().__init__(what)
        self.backoff = backoff
        self.round_failed = round_failed
