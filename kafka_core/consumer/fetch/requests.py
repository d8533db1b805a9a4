"""Building Fetch requests (by topic id from v13 when the broker and metadata allow) and
mapping their answers back to topic names.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.fetch.session import FetchSession, SessionRequest
from kafka_core.consumer.policies import IsolationLevel
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import FetchRequest

# Fetch 13+ addresses topics by id (from Metadata v10+); below that, or while a topic's id is
# unknown, by name.
FETCH_MAX_VERSION = 17
FETCH_BY_NAME_MAX_VERSION = 12
# Fetch 12+ carries the last fetched epoch (the leader answers a diverging epoch, KIP-320).
LAST_FETCHED_EPOCH_MIN_VERSION = 12
# Fetch 7+ carries a fetch session (KIP-227).
SESSION_MIN_VERSION = 7
# Fetch 11+ carries the client's rack; the leader may answer with a replica to read from (KIP-392).
RACK_MIN_VERSION = 11
_ZERO_UUID = uuid.UUID(int=0)


class FetchRequests:
    """The consumer's fixed Fetch settings, and the request for given partitions and offsets."""

    def __init__(
        self,
        client: Any,
        max_bytes: int,
        partition_max_bytes: int,
        isolation: IsolationLevel,
        *,
        rack_id: str | None = None,
    ) -> None:
        self._client = client
        self._max_bytes = max_bytes
        self._part_max = partition_max_bytes
        self._isolation = isolation
        self._rack = rack_id or ""

    def _rack_for(self, version: int) -> str:
        return self._rack if version >= RACK_MIN_VERSION else ""

    async def build(
        self,
        node: int,
        offsets: dict[TopicPartition, int],
        *,
        max_wait: int,
        min_bytes: int,
        epochs: Mapping[TopicPartition, tuple[int, int]] | None = None,
        partition_max_bytes: int | None = None,
    ) -> tuple[FetchRequest, int]:
        """The request and its version: by topic id (v13+) when the broker and metadata allow.

        ``epochs``: per partition (current leader epoch, last fetched epoch), -1 for unknown;
        the first fences a stale leader (v9+), the second lets the leader tell of a diverging
        log (v12+, KIP-320).
        """
        conn = await self._client.connection(node)
        version = conn.choose_version(ApiKey.FETCH, max_version=FETCH_MAX_VERSION)
        topics_asked = {tp.topic for tp in offsets}
        ids = cached_topic_ids(self._client, topics_asked) if version > FETCH_BY_NAME_MAX_VERSION else None
        if ids is None and version > FETCH_BY_NAME_MAX_VERSION:
            version = conn.choose_version(ApiKey.FETCH, max_version=FETCH_BY_NAME_MAX_VERSION)
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp, off in offsets.items():
            current, last = epochs.get(tp, (-1, -1)) if epochs is not None else (-1, -1)
            by_topic[tp.topic].append(
                FetchRequest.FetchPartition(
                    partition=tp.partition,
                    fetch_offset=off,
                    partition_max_bytes=self._part_max
                    if partition_max_bytes is None
                    else partition_max_bytes,
                    current_leader_epoch=current,
                    last_fetched_epoch=last if version >= LAST_FETCHED_EPOCH_MIN_VERSION else -1,
                )
            )
        if ids is None:
            topics = [FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
        else:
            topics = [
                FetchRequest.FetchTopic(topic=t, topic_id=ids[t], partitions=ps) for t, ps in by_topic.items()
            ]
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait,
            min_bytes=min_bytes,
            max_bytes=self._max_bytes,
            isolation_level=self._isolation,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request is a full one
            topics=topics,
            rack_id=self._rack_for(version),
        )
        return request, version

    async def build_session(
        self, node: int, session: FetchSession, *, max_wait: int, min_bytes: int
    ) -> tuple[FetchRequest, int, SessionRequest]:
        """The session's next request (full or incremental, see session.py) and its version."""
        conn = await self._client.connection(node)
        version = conn.choose_version(ApiKey.FETCH, max_version=FETCH_MAX_VERSION)
        ids: dict[str, uuid.UUID] | None = None
        if version > FETCH_BY_NAME_MAX_VERSION:
            # Every topic the session may name: its wanted partitions' (a full request) or the
            # changed ones' (incremental: the others' ids were told before).
            topics = {tp.topic for tp in (session.wanted() if session.full else session.pending())}
            ids = cached_topic_ids(self._client, topics)
            if ids is not None and any(session.topic_id(t) not in (None, tid) for t, tid in ids.items()):
                # A topic recreated under a new id: the broker's session holds the old one.
                session.restart()
                ids = cached_topic_ids(self._client, {tp.topic for tp in session.wanted()})
            if ids is None:
                version = conn.choose_version(ApiKey.FETCH, max_version=FETCH_BY_NAME_MAX_VERSION)
        plan = session.next_request(by_id=ids is not None, sessions=version >= SESSION_MIN_VERSION)
        if ids is not None:
            ids = {t: ids[t] for t in {tp.topic for tp in plan.partitions} if t in ids}
            session.note_topic_ids(ids)
        by_topic: dict[str, list[Any]] = defaultdict(list)
        last_ok = version >= LAST_FETCHED_EPOCH_MIN_VERSION
        for tp, data in plan.partitions.items():
            by_topic[tp.topic].append(
                FetchRequest.FetchPartition(
                    partition=tp.partition,
                    fetch_offset=data.fetch_offset,
                    partition_max_bytes=data.max_bytes,
                    current_leader_epoch=data.current_leader_epoch,
                    last_fetched_epoch=data.last_fetched_epoch if last_ok else -1,
                )
            )
        forgotten_by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in plan.forgotten:
            forgotten_by_topic[tp.topic].append(tp.partition)
        if plan.by_id:
            topics_out = [
                FetchRequest.FetchTopic(topic=t, topic_id=session.topic_id(t) or _ZERO_UUID, partitions=ps)
                for t, ps in by_topic.items()
            ]
            forgotten = [
                FetchRequest.ForgottenTopic(
                    topic=t, topic_id=session.topic_id(t) or _ZERO_UUID, partitions=ps
                )
                for t, ps in forgotten_by_topic.items()
            ]
        else:
            topics_out = [FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
            forgotten = [
                FetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten_by_topic.items()
            ]
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait,
            min_bytes=min_bytes,
            max_bytes=self._max_bytes,
            isolation_level=self._isolation,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=topics_out,
            forgotten_topics_data=forgotten,
            rack_id=self._rack_for(version),
        )
        return request, version, plan

    async def build_close(self, node: int, plan: SessionRequest) -> tuple[FetchRequest, int]:
        """The Fetch that closes a session (``plan`` from :meth:`FetchSession.close_request`): no
        partition, no wait; the broker removes the session and answers at once."""
        conn = await self._client.connection(node)
        version = conn.choose_version(ApiKey.FETCH, max_version=FETCH_MAX_VERSION)
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=self._max_bytes,
            isolation_level=self._isolation,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=[],
            forgotten_topics_data=[],
        )
        return request, version

    @property
    def partition_max_bytes(self) -> int:
        return self._part_max


def session_topics_of(
    resp: Any, request: FetchRequest, session: FetchSession, plan: SessionRequest
) -> list[tuple[str, Any]]:
    """(topic name, topic response) pairs of a session's answer: an incremental answer may name
    topics the request did not (v13+: by id only)."""
    order = [t.topic for t in request.topics]
    out: list[tuple[str, Any]] = []
    for i, t in enumerate(resp.responses):
        name = t.topic
        if not name and t.topic_id not in (None, _ZERO_UUID):
            name = session.topic_name(t.topic_id)
        if not name and t.topic_id in (None, _ZERO_UUID) and i < len(order) and plan.full:
            name = order[i]  # an unknown id echoed back as zero (seen on Tansu): same order
        if name:
            out.append((name, t))
    return out


def cached_topic_ids(client: Any, topics: Iterable[str]) -> dict[str, uuid.UUID] | None:
    """Topic ids from the metadata cache, or None if one of them has none (then: names)."""
    known = {t.name: t.topic_id for t in client.cached_metadata().topics}
    ids: dict[str, uuid.UUID] = {}
    for name in topics:
        tid = known.get(name)
        if tid is None:
            return None
        ids[name] = tid
    return ids


def topics_of(resp: Any, request: FetchRequest) -> list[tuple[str, Any]]:
    """(topic name, topic response) pairs; v13+ responses name topics by id only."""
    names = {t.topic_id: t.topic for t in request.topics if t.topic_id != _ZERO_UUID}
    order = [t.topic for t in request.topics]
    out: list[tuple[str, Any]] = []
    for i, t in enumerate(resp.responses):
        name = t.topic or names.get(t.topic_id)
        if not name and t.topic_id in (None, _ZERO_UUID) and i < len(order):
            name = order[i]  # an unknown id echoed back as zero (seen on Tansu): same order
        if name:
            out.append((name, t))
    return out
