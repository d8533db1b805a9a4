"""Building Fetch requests (by topic id from v13 when the broker and metadata allow) and
mapping their answers back to topic names.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.policies import IsolationLevel
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import FetchRequest

# Fetch 13+ addresses topics by id (from Metadata v10+); below that, or while a topic's id is
# unknown, by name.
FETCH_MAX_VERSION = 17
FETCH_BY_NAME_MAX_VERSION = 12
# Fetch 12+ carries the last fetched epoch (the leader answers a diverging epoch, KIP-320).
LAST_FETCHED_EPOCH_MIN_VERSION = 12
_ZERO_UUID = uuid.UUID(int=0)


class FetchRequests:
    """The consumer's fixed Fetch settings, and the request for given partitions and offsets."""

    def __init__(
        self, client: Any, max_bytes: int, partition_max_bytes: int, isolation: IsolationLevel
    ) -> None:
        self._client = client
        self._max_bytes = max_bytes
        self._part_max = partition_max_bytes
        self._isolation = isolation

    async def build(
        self,
        node: int,
        offsets: dict[TopicPartition, int],
        *,
        max_wait: int,
        min_bytes: int,
        epochs: Mapping[TopicPartition, tuple[int, int]] | None = None,
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
                    partition_max_bytes=self._part_max,
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
        )
        return request, version


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
