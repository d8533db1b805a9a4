"""An in-memory stand-in for KafkaClient: enough of it for the consumer's unit tests (fetch, offsets, group)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

from kafka_core.client.metadata import (
    BrokerMeta,
    ClusterMeta,
    ListedOffset,
    OffsetAndMetadata,
    PartitionMeta,
    TopicMeta,
    TopicPartition,
)
from kafka_core.client.watch import TopicInterest, TopicWatcher
from kafka_core.codec import encode_record_batch
from kafka_core.errors import KafkaConnectionError
from kafka_core.protocol.messages import FetchRequest, FetchResponse


class FakeLog:
    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []  # (base, last, bytes)
        self.start = 0

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else self.start

    def append(self, records: list[Any], **kw: Any) -> None:
        base = self.end
        data = bytes(encode_record_batch(records, base_offset=base, **kw))
        self.batches.append((base, base + len(records) - 1, data))

    def append_raw(self, base: int, last: int, data: bytes) -> None:
        self.batches.append((base, last, data))


class FakeClient:
    request_timeout_ms = 30_000.0

    def __init__(self, partitions: dict[str, int]) -> None:
        self.topics = partitions
        self.logs: dict[TopicPartition, FakeLog] = defaultdict(FakeLog)
        self.fail_fetches = 0
        self.partition_errors: list[int] = []  # error codes for the next fetched partitions
        self.fetch_requests: list[dict[TopicPartition, int]] = []
        self.fetch_bodies: list[Any] = []
        self.committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = defaultdict(dict)
        self.commit_error: Exception | None = None
        self.coordinator_error: Exception | None = None
        self.closed = False
        # Fetch by topic id (v13+) unless fetch_version says otherwise or a topic has no id.
        self.fetch_version = 17
        self.fetch_versions: list[int] = []
        self.unknown_id_answers = 0
        self.cached_ids: dict[str, uuid.UUID] | None = None  # stale view, refreshed on invalidation
        self.topic_ids: dict[str, uuid.UUID] = {t: uuid.uuid4() for t in partitions}
        self._watcher: TopicWatcher | None = None

    async def metadata(self, topics: Any = None, **kw: Any) -> Any:
        names = topics if topics is not None else list(self.topics)
        return ClusterMeta(
            brokers=[], topics=[await self.await_topic_ready(t) for t in names if t in self.topics]
        )

    def watch_topics(self, on_change: Any, **kw: Any) -> TopicInterest:
        """The real watcher, over this fake's metadata."""
        if self._watcher is None:
            self._watcher = TopicWatcher(self.metadata, (10, 50))
        kw.setdefault("refresh_ms", 300_000)
        kw["refresh_s"] = kw.pop("refresh_ms") / 1000
        return self._watcher.watch(on_change, **kw)

    def log(self, topic: str, partition: int) -> FakeLog:
        return self.logs[TopicPartition(topic, partition)]

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        return 1

    async def await_topic_ready(
        self, topic: str, min_partitions: int = 1, *, timeout_ms: float | None = None
    ) -> TopicMeta:
        return TopicMeta(
            topic,
            [PartitionMeta(p, 1) for p in range(self.topics[topic])],
            topic_id=self.topic_ids.get(topic),
        )

    def cached_metadata(self) -> ClusterMeta:
        if self.cached_ids is None:
            self.cached_ids = dict(self.topic_ids)
        return ClusterMeta(
            brokers=[],
            topics=[
                TopicMeta(t, [PartitionMeta(p, 1) for p in range(n)], topic_id=self.cached_ids.get(t))
                for t, n in self.topics.items()
            ],
        )

    async def connection(self, node_id: int) -> _FakeConnection:
        return _FakeConnection(self)

    async def list_offsets(
        self, timestamps: dict, *, isolation_level: int = 0, timeout_ms: float | None = None
    ) -> dict:
        out = {}
        for tp, ts in timestamps.items():
            log = self.logs[TopicPartition(*tp)]
            out[TopicPartition(*tp)] = ListedOffset(log.start if ts == -2 else self.listed_end(log))
        return out

    def listed_end(self, log: FakeLog) -> int:
        """What ListOffsets latest answers: the log end (a subclass: as another broker does)."""
        return log.end

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        assert isinstance(body, FetchRequest)
        assert version is not None and version <= self.fetch_version
        self.fetch_versions.append(version)
        by_id = version >= 13
        names = {tid: name for name, tid in self.topic_ids.items()}
        unknown: list[Any] = []
        asked = {}
        for t in body.topics:
            # v13+ encodes only the id, older versions only the name.
            assert (t.topic_id.int != 0) if by_id else bool(t.topic)
            name = names.get(t.topic_id) if by_id else t.topic
            if name is None:
                unknown.append(t)
                continue
            for p in t.partitions:
                asked[TopicPartition(name, p.partition)] = p.fetch_offset
        self.fetch_requests.append(asked)
        self.fetch_bodies.append(body)
        if self.fail_fetches:
            self.fail_fetches -= 1
            await asyncio.sleep(0)
            raise KafkaConnectionError("connection lost (fake)")
        topics: dict[str, list[Any]] = defaultdict(list)
        any_data = False
        for tp, off in asked.items():
            log = self.logs[tp]
            if self.partition_errors:
                code = self.partition_errors.pop(0)
                topics[tp.topic].append(
                    FetchResponse.PartitionData(partition_index=tp.partition, error_code=code)
                )
                any_data = True
                continue
            if off < log.start or off > log.end:
                topics[tp.topic].append(
                    FetchResponse.PartitionData(partition_index=tp.partition, error_code=1)
                )
                any_data = True
                continue
            data = b"".join(d for base, last, d in log.batches if last >= off)
            any_data |= bool(data)
            topics[tp.topic].append(
                FetchResponse.PartitionData(
                    partition_index=tp.partition,
                    high_watermark=log.end,
                    log_start_offset=log.start,
                    records=data,
                )
            )
        if not any_data and not unknown:
            await asyncio.sleep(min(body.max_wait_ms, 20) / 1000)
        responses = [
            FetchResponse.FetchableTopicResponse(topic=t, partitions=ps)
            if not by_id
            else FetchResponse.FetchableTopicResponse(topic_id=self.topic_ids[t], partitions=ps)
            for t, ps in topics.items()
        ]
        for t in unknown:  # UNKNOWN_TOPIC_ID, echoing the id as Apache Kafka does
            self.unknown_id_answers += 1
            responses.append(
                FetchResponse.FetchableTopicResponse(
                    topic_id=t.topic_id,
                    partitions=[
                        FetchResponse.PartitionData(partition_index=p.partition, error_code=100)
                        for p in t.partitions
                    ],
                )
            )
        return FetchResponse(responses=responses)

    def invalidate_metadata(self, topic: str | None = None) -> None:
        self.cached_ids = None

    def note_error(self, code: int, topic: str | None = None, **kw: Any) -> bool:
        return code in (3, 5, 6, 100)

    async def find_coordinator(self, key: str, key_type: int = 0, **kw: Any) -> BrokerMeta:
        if self.coordinator_error is not None:
            raise self.coordinator_error
        return BrokerMeta(1, "127.0.0.1", 1)

    async def commit_offsets(self, group_id: str, offsets: dict, **kw: Any) -> None:
        if self.commit_error is not None:
            raise self.commit_error
        for tp, v in offsets.items():
            om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            self.committed[group_id][TopicPartition(*tp)] = om

    async def fetch_committed_offsets(self, group_id: str, partitions: Any = None, **kw: Any) -> dict:
        if self.coordinator_error is not None:
            raise self.coordinator_error
        got = self.committed[group_id]
        return {tp: got[tp] for tp in (partitions or got) if tp in got}

    async def close(self) -> None:
        self.closed = True
        if self._watcher is not None:
            self._watcher.close()


class _FakeConnection:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def choose_version(self, api_key: int, max_version: int | None = None) -> int:
        if api_key == 1:  # Fetch
            return min(self.client.fetch_version, max_version if max_version is not None else 17)
        return 5


class FakeGroupClient(FakeClient):
    """A one-member group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup with scripted errors."""

    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.join_errors: list[int] = []
        self.sync_errors: list[int] = []
        self.heartbeat_errors: list[int] = []
        self.generation = 0
        self.joins: list[Any] = []
        self.leaves: list[Any] = []
        self.heartbeats = 0
        self.join_delay = 0.0  # seconds JoinGroup takes to answer (a slow rebalance)

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        from kafka_core.protocol import messages as m

        if isinstance(body, m.JoinGroupRequest):
            self.joins.append(body)
            if self.join_delay:
                await asyncio.sleep(self.join_delay)
            if self.join_errors:
                return m.JoinGroupResponse(error_code=self.join_errors.pop(0), member_id=body.member_id)
            if not body.member_id and body.group_instance_id is None:
                return m.JoinGroupResponse(error_code=79, member_id="member-1")
            self.generation += 1
            member_id = body.member_id or "static-1"
            proto = body.protocols[0]
            return m.JoinGroupResponse(
                generation_id=self.generation,
                protocol_type="consumer",
                protocol_name=proto.name,
                leader=member_id,
                member_id=member_id,
                members=[
                    m.JoinGroupResponse.JoinGroupResponseMember(member_id=member_id, metadata=proto.metadata)
                ],
            )
        if isinstance(body, m.SyncGroupRequest):
            if self.sync_errors:
                return m.SyncGroupResponse(error_code=self.sync_errors.pop(0))
            mine = next(a for a in body.assignments if a.member_id == body.member_id)
            return m.SyncGroupResponse(
                protocol_type="consumer", protocol_name=body.protocol_name, assignment=mine.assignment
            )
        if isinstance(body, m.HeartbeatRequest):
            self.heartbeats += 1
            return m.HeartbeatResponse(
                error_code=self.heartbeat_errors.pop(0) if self.heartbeat_errors else 0
            )
        if isinstance(body, m.LeaveGroupRequest):
            self.leaves.append(body)
            return m.LeaveGroupResponse()
        return await super().send(node, body, version, **kw)
