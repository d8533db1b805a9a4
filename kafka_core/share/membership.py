"""Share-group membership (KIP-932): the ShareGroupHeartbeat loop.

The broker assigns partitions: the member heartbeats its subscription (epoch 0 joins, -1 leaves)
and each answer says its epoch, the interval to the next heartbeat and, when it changed, the
whole assignment (by topic id). Unlike KIP-848 nothing is revoked first: share partitions are
read by many members at once, so the new assignment simply replaces the old one. Fenced
(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): the assignment is dropped and the member joins again.
A broker without the API is a :class:`KafkaShareGroupsUnsupportedError` at start.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.client.waiting import wait_event
from kafka_core.client.watch import TopicInterest, TopicView, topic_view
from kafka_core.consumer_base.member import new_member_id
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaError,
    KafkaProtocolError,
    KafkaUnsupportedVersionError,
)
from kafka_core.network.backoff import Backoff
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import COORDINATOR_CODES, RETRIABLE_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import ShareGroupHeartbeatRequest
from kafka_core.share.records import REJOIN_CODES, UNSUPPORTED, KafkaShareGroupsUnsupportedError

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
DEFAULT_INTERVAL_S = 5.0  # until an answer says (group.share.heartbeat.interval.ms)
LEAVE_TIMEOUT_MS = 5_000


def unsupported(detail: str | None = None) -> KafkaShareGroupsUnsupportedError:
    return KafkaShareGroupsUnsupportedError(UNSUPPORTED + (f" ({detail})" if detail else ""))


async def share_api_version(client: Any, node_id: int, api_key: int, what: str) -> int:
    """The version of a share API to use with ``node_id``, or the clear error."""
    try:
        return int(await client.api_version(node_id, api_key))
    except KafkaUnsupportedVersionError as exc:
        raise unsupported(f"{what}: {exc}") from exc


class ShareMembership:
    """One share consumer's membership of ``group_id``; ``assignment`` is what it may fetch."""

    def __init__(
        self,
        client: Any,
        group_id: str,
        *,
        on_change: Callable[[], None],
        rack_id: str | None = None,
        request_timeout_ms: float = 30_000,
        outage: OutageTracker | None = None,
    ) -> None:
        self._client = client
        # the consumer's outage policy: heartbeats failing are one streak of it
        self._outage = outage if outage is not None else OutageTracker(request_timeout_ms / 1000.0)
        self._outage_key = f"share group {group_id!r} heartbeat"
        self.group_id = group_id
        self._on_change = on_change
        self._rack_id = rack_id
        self._timeout_ms = request_timeout_ms
        self.member_id = new_member_id()
        self.epoch = 0
        self.topics: list[str] = []
        self.assignment: set[TopicPartition] = set()
        self.fatal: BaseException | None = None
        self.last_error: BaseException | None = None
        self.heartbeats = 0
        self._full = True
        self._sent_topics: list[str] | None = None
        self._interval = DEFAULT_INTERVAL_S
        self._task: asyncio.Task[None] | None = None
        self._send_now = asyncio.Event()  # topics changed or a rejoin: heartbeat before the interval
        self._joined = asyncio.Event()  # a member (or a fatal error): a waiting poll goes on
        self._names: dict[uuid.UUID, str] = {}
        # The subscribed topics as the cluster shows them: one appearing means the broker has
        # an assignment for it, fetched at once by a heartbeat rather than at the next interval.
        self._watch: TopicInterest | None = None

    async def start(self, topics: list[str]) -> None:
        """Check the coordinator speaks ShareGroupHeartbeat, then heartbeat (the first joins)."""
        if self.fatal is not None:
            raise self.fatal
        self.set_topics(topics)
        if self._task is not None and not self._task.done():
            return
        coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._timeout_ms)
        await share_api_version(
            self._client, coord.node_id, ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat"
        )
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"kafka-core-share-heartbeat-{self.group_id}"
        )
        if self._watch is None:  # from what the client knows: only a change heartbeats early
            seen = topic_view(self._client.cached_metadata().topics, self.topics)
            self._watch = self._client.watch_topics(self._topics_changed, topics=self.topics, view=seen)

    def _topics_changed(self, view: TopicView) -> None:
        """A subscribed topic appeared (or went): heartbeat now, every field, so the broker's
        assignment for it comes now and its id resolves."""
        self._full = True
        self._send_now.set()

    def set_topics(self, topics: list[str]) -> None:
        topics = sorted(set(topics))
        if topics != self.topics:
            self.topics = topics
            self._send_now.set()
            if self._watch is not None:
                self._watch.set_topics(topics)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def wait_joined(self, timeout_s: float) -> bool:
        if self.fatal is not None:
            raise self.fatal
        if not self._joined.is_set() and timeout_s > 0:
            await wait_event(self._joined, timeout_s)
        if self.fatal is not None:
            raise self.fatal
        return self._joined.is_set()

    async def _run(self) -> None:
        try:
            await self._beat()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: never silent, every poll raises it
            log.exception("share group %s: the heartbeat loop failed", self.group_id)
            self._fail(exc)

    async def _beat(self) -> None:
        backoff = Backoff(100, 2_000)
        while True:
            try:
                resp = await self._heartbeat()
            except KafkaClosedError:
                return
            except KafkaUnsupportedVersionError as exc:
                self._fail(
                    exc if isinstance(exc, KafkaShareGroupsUnsupportedError) else unsupported(str(exc))
                )
                return
            except KafkaAuthenticationError as exc:
                self._fail(exc)
                return
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    self._fail(exc)
                    return
                self._outage.failed(self._outage_key, exc)
                self.last_error = exc
                self._full = True
                await self._pause(backoff.next_s())
                continue
            except KafkaError as exc:
                log.info("share group %s: heartbeat failed: %r; retrying", self.group_id, exc)
                self._outage.failed(self._outage_key, exc)
                self.last_error = exc
                self._full = True
                self._client.note_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, coordinator_key=self.group_id)
                await self._pause(backoff.next_s())
                continue
            delay = await self._answer(resp, backoff)
            if delay is None:
                return
            await self._pause(delay)

    async def _pause(self, delay: float) -> None:
        await wait_event(self._send_now, delay)
        self._send_now.clear()

    async def _heartbeat(self) -> Any:
        coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=self._timeout_ms)
        version = await share_api_version(
            self._client, coord.node_id, ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat"
        )
        topics = list(self.topics)
        body = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.epoch
        )
        if self._full or self.epoch == 0:
            body.rack_id = self._rack_id
        if self._full or self.epoch == 0 or topics != self._sent_topics:
            body.subscribed_topic_names = topics
        resp = await self._client.send(coord.node_id, body, version, timeout_ms=self._timeout_ms)
        self.heartbeats += 1
        if not resp.error_code:
            self._sent_topics = topics
        return resp

    async def _answer(self, resp: Any, backoff: Backoff) -> float | None:
        code = resp.error_code
        if not code:
            self._outage.ok(self._outage_key)
            backoff.reset()
            self._full = False
            self.last_error = None
            if resp.member_id:
                self.member_id = resp.member_id
            if self.epoch <= 0 < resp.member_epoch:
                log.info(
                    "share group %s: joined as %s (epoch %s)",
                    self.group_id,
                    self.member_id,
                    resp.member_epoch,
                )
            self.epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self._interval = resp.heartbeat_interval_ms / 1000.0
            if resp.assignment is not None:
                await self._assign(resp.assignment.topic_partitions)
            self._joined.set()
            if not self.assignment and self.topics:  # the assignment follows soon: ask again early
                return min(self._interval, 0.5)
            return self._interval
        self._full = True
        what = f"ShareGroupHeartbeat for group {self.group_id!r}"
        err = error_for(code, f"{what}: {resp.error_message}" if resp.error_message else what)
        self.last_error = err
        self._outage.failed(self._outage_key, err)  # an answer: the cluster is there
        if code in REJOIN_CODES:
            log.warning("share group %s: %s; joining again", self.group_id, err.name)
            self.epoch = 0
            self._set_assignment(set())
            return 0.0
        if code in COORDINATOR_CODES:
            self._client.note_error(code, coordinator_key=self.group_id)
            return backoff.next_s()
        if code == ErrorCode.UNSUPPORTED_VERSION:
            self._fail(unsupported(str(err)))
            return None
        if code in RETRIABLE_CODES:
            return backoff.next_s()
        self._fail(err)
        return None

    async def _assign(self, topic_partitions: list[Any]) -> None:
        """The broker's assignment (topic ids) as names; ids not known yet are looked up."""
        missing = [t.topic_id for t in topic_partitions if t.topic_id not in self._names]
        if missing:
            meta = await self._client.metadata(self.topics or None)
            for t in meta.topics:
                if t.topic_id is not None:
                    self._names[t.topic_id] = t.name
        new: set[TopicPartition] = set()
        for t in topic_partitions:
            name = self._names.get(t.topic_id)
            if name is None:  # deleted meanwhile, or not in metadata yet: next heartbeat again
                self._full = True
                continue
            new.update(TopicPartition(name, p) for p in t.partitions)
        self._set_assignment(new)

    def topic_id(self, name: str) -> uuid.UUID | None:
        for tid, n in self._names.items():
            if n == name:
                return tid
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)

    def remember(self, name: str, topic_id: uuid.UUID) -> None:
        self._names[topic_id] = name

    def _set_assignment(self, new: set[TopicPartition]) -> None:
        if new != self.assignment:
            log.info("share group %s: assigned %s", self.group_id, sorted(new))
            self.assignment = new
            self._on_change()

    def _fail(self, err: BaseException) -> None:
        log.error("share group %s: %s", self.group_id, err)
        self.fatal = err
        self.epoch = 0
        self._set_assignment(set())
        self._joined.set()  # a waiting poll returns and raises
        self._on_change()

    async def leave(self) -> None:
        """Stop heartbeating and leave (epoch -1): the member's acquired records are released."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.epoch > 0:
            try:
                coord = await self._client.find_coordinator(self.group_id, 0, timeout_ms=LEAVE_TIMEOUT_MS)
                body = ShareGroupHeartbeatRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH
                )
                resp = await self._client.send(coord.node_id, body, timeout_ms=LEAVE_TIMEOUT_MS)
                if resp.error_code:
                    log.info("leaving share group %s: %s", self.group_id, error_for(resp.error_code))
            except KafkaError as exc:
                log.info("leaving share group %s failed: %r", self.group_id, exc)
        self.epoch = 0
        self._full = True
        self._sent_topics = None
        self._joined.clear()
        self.assignment = set()
