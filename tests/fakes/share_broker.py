"""A scripted share-group broker (KIP-932) in process, standing in for the client of a share
consumer: one node that is coordinator and leader, share sessions with epoch checks, records
acquired per member with delivery counts, acknowledgements (accept/release/reject/gap), the
delivery count limit, and knobs to inject errors. For unit tests of kafka_core.share."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta, TopicPartition
from kafka_core.codec import KafkaRecord, encode_record_batch
from kafka_core.errors import KafkaConnectionError, KafkaUnsupportedVersionError
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

NODE = 1
AVAILABLE, ACQUIRED, DONE = "available", "acquired", "done"


class Coordinator:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id


class FakeShareBroker:
    """The async client a share consumer is given (``client=``)."""

    request_timeout_ms = 5_000

    def __init__(self, topics: dict[str, int], *, share_groups: bool = True, delivery_limit: int = 5) -> None:
        self.topic_ids = {t: uuid.uuid4() for t in topics}
        self.partitions = dict(topics)
        self.share_groups = share_groups
        self.delivery_limit = delivery_limit
        self.log: dict[TopicPartition, list[bytes]] = {
            TopicPartition(t, p): [] for t, n in topics.items() for p in range(n)
        }
        # (tp, offset) -> [state, delivery count, member]
        self.state: dict[tuple[TopicPartition, int], list[Any]] = {}
        self.sessions: dict[str, int] = {}  # member -> next expected epoch
        self.session_parts: dict[str, set[tuple[uuid.UUID, int]]] = {}  # member -> (topic id, partition)
        self.members: dict[str, int] = {}  # member -> epoch
        self.requests: list[Any] = []
        self.ack_error: int = 0  # answer every acknowledgement with this code
        self.fetch_error: int = 0  # answer the next ShareFetch with this top-level code
        self.closed = False
        self.down = False  # every request fails as against a broker that refuses connections
        self._watcher: Any = None
        self._snapshot: tuple[Any, ClusterMeta] | None = None

    # -- the script's side ------------------------------------------------------------------------

    def produce(self, topic: str, values: list[bytes], partition: int = 0) -> None:
        tp = TopicPartition(topic, partition)
        for v in values:
            self.state[(tp, len(self.log[tp]))] = [AVAILABLE, 0, None]
            self.log[tp].append(v)

    def states(self, topic: str, partition: int = 0) -> list[tuple[str, int]]:
        tp = TopicPartition(topic, partition)
        return [(self.state[(tp, o)][0], self.state[(tp, o)][1]) for o in range(len(self.log[tp]))]

    def expire_locks(self) -> None:
        for st in self.state.values():
            if st[0] == ACQUIRED:
                st[0], st[2] = AVAILABLE, None
                if st[1] >= self.delivery_limit:
                    st[0] = DONE

    # -- the client interface the share consumer uses ----------------------------------------------

    async def find_coordinator(self, key: str, key_type: int = 0, *, timeout_ms: float | None = None) -> Any:
        self._check_up()
        return Coordinator(NODE)

    def _check_up(self) -> None:
        if self.down:
            raise KafkaConnectionError("cannot connect to 127.0.0.1:1: [Errno 111] Connect call failed")

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        if not self.share_groups:
            raise KafkaUnsupportedVersionError(f"broker {node_id} does not support API {api_key}")
        return 1

    def _meta(self) -> ClusterMeta:
        topics = [
            TopicMeta(t, [PartitionMeta(p, NODE) for p in range(n)], topic_id=self.topic_ids[t])
            for t, n in self.partitions.items()
        ]
        return ClusterMeta([BrokerMeta(NODE, "127.0.0.1", 1)], topics)

    async def metadata(self, topics: list[str] | None = None, **_: Any) -> ClusterMeta:
        return self._meta()

    def cached_metadata(self) -> ClusterMeta:
        """One snapshot until the topics change, as the real client's cache: replaced, never
        changed in place."""
        key = tuple(self.partitions.items())
        if self._snapshot is None or self._snapshot[0] != key:
            self._snapshot = (key, self._meta())
        return self._snapshot[1]

    def watch_topics(self, on_change: Any, **kw: Any) -> Any:
        """The real watcher, over this fake's metadata."""
        from kafka_core.client.watch import TopicWatcher

        if self._watcher is None:
            self._watcher = TopicWatcher(self.metadata, (10, 50))
        kw["refresh_s"] = kw.pop("refresh_ms", 300_000) / 1000
        return self._watcher.watch(on_change, **kw)

    def invalidate_metadata(self, topic: str | None = None) -> None:
        pass

    def note_error(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        return NODE

    def metrics(self) -> dict[str, Any]:
        return {}

    async def close(self) -> None:
        self.closed = True
        if self._watcher is not None:
            self._watcher.close()

    async def send(self, node_id: int, body: Any, version: int | None = None, **_: Any) -> Any:
        await asyncio.sleep(0)
        if self.down:
            await asyncio.sleep(0.01)
            self._check_up()
        self.requests.append(body)
        if isinstance(body, ShareGroupHeartbeatRequest):
            return self._heartbeat(body)
        if isinstance(body, ShareFetchRequest):
            return self._fetch(body)
        if isinstance(body, ShareAcknowledgeRequest):
            return self._acknowledge(body)
        raise AssertionError(f"unexpected request {body!r}")

    # -- the broker -----------------------------------------------------------------------------

    def _heartbeat(self, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        if req.member_epoch == -1:
            self.members.pop(req.member_id, None)
            for st in self.state.values():
                if st[0] == ACQUIRED and st[2] == req.member_id:
                    st[0], st[2] = AVAILABLE, None
            return ShareGroupHeartbeatResponse(member_id=req.member_id, member_epoch=-1)
        epoch = self.members.get(req.member_id, 0) + 1
        self.members[req.member_id] = epoch
        tps = ShareGroupHeartbeatResponse.TopicPartitions
        assignment = ShareGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                tps(topic_id=self.topic_ids[t], partitions=list(range(n))) for t, n in self.partitions.items()
            ]
        )
        return ShareGroupHeartbeatResponse(
            member_id=req.member_id, member_epoch=epoch, heartbeat_interval_ms=50, assignment=assignment
        )

    def _session(self, member: str, epoch: int) -> int:
        """0 if the epoch is in step, else the error code."""
        if epoch == 0:
            self.sessions[member] = 1
            return 0
        if epoch == -1:
            self.sessions.pop(member, None)
            return 0
        expected = self.sessions.get(member)
        if expected is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != expected:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        self.sessions[member] = epoch + 1
        return 0

    def _name(self, topic_id: uuid.UUID) -> str:
        return next(t for t, i in self.topic_ids.items() if i == topic_id)

    def _apply_acks(self, member: str, tp: TopicPartition, batches: list[Any]) -> int:
        if self.ack_error:
            return self.ack_error
        for b in batches:
            for i, offset in enumerate(range(b.first_offset, b.last_offset + 1)):
                kind = b.acknowledge_types[0] if len(b.acknowledge_types) == 1 else b.acknowledge_types[i]
                st = self.state.get((tp, offset))
                if st is None or st[0] != ACQUIRED or st[2] != member:
                    return ErrorCode.INVALID_RECORD_STATE
                if kind == 2:
                    st[0], st[2] = (DONE if st[1] >= self.delivery_limit else AVAILABLE), None
                else:  # accept, reject, gap
                    st[0] = DONE
        return 0

    def _fetch(self, req: ShareFetchRequest) -> ShareFetchResponse:
        member = req.member_id or ""
        if self.fetch_error:
            code, self.fetch_error = self.fetch_error, 0
            self.sessions.pop(member, None)
            return ShareFetchResponse(error_code=code)
        has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
        if req.share_session_epoch == 0 and has_acks:
            return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)
        code = self._session(member, req.share_session_epoch)
        if code:
            return ShareFetchResponse(error_code=code)
        # The session keeps its partitions (as Kafka's share session): a request names only the
        # partitions it adds or acknowledges for, and those it forgets; every one held is fetched.
        if req.share_session_epoch == 0:
            self.session_parts[member] = set()
        held = self.session_parts.setdefault(member, set())
        named = {(t.topic_id, p.partition_index): p for t in req.topics for p in t.partitions}
        held.update(named)
        held.difference_update((t.topic_id, i) for t in req.forgotten_topics_data for i in t.partitions)
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for tid, index in sorted(held | named.keys()):
            by_topic.setdefault(tid, []).append(
                named.get((tid, index)) or ShareFetchRequest.FetchPartition(partition_index=index)
            )
        responses = []
        budget = req.max_records
        for topic_id, fetched in by_topic.items():
            name = self._name(topic_id)
            parts = []
            for p in fetched:
                tp = TopicPartition(name, p.partition_index)
                ack_code = self._apply_acks(member, tp, p.acknowledgement_batches)
                acquired: list[Any] = []
                records = []
                for offset, value in enumerate(self.log[tp]):
                    st = self.state[(tp, offset)]
                    if budget <= 0 or st[0] != AVAILABLE:
                        continue
                    st[0], st[1], st[2] = ACQUIRED, st[1] + 1, member
                    budget -= 1
                    acquired.append(
                        ShareFetchResponse.AcquiredRecords(
                            first_offset=offset, last_offset=offset, delivery_count=st[1]
                        )
                    )
                    records.append(
                        encode_record_batch(
                            [KafkaRecord(key=None, value=value, headers=[], timestamp=0, offset=0)],
                            base_offset=offset,
                        )
                    )
                if not acquired and (topic_id, p.partition_index) not in named:
                    continue  # as Kafka: a partition without news is left out of the answer
                parts.append(
                    ShareFetchResponse.PartitionData(
                        partition_index=p.partition_index,
                        acknowledge_error_code=ack_code,
                        current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=NODE, leader_epoch=0),
                        records=b"".join(records) if records else None,
                        acquired_records=acquired,
                    )
                )
            if parts:
                responses.append(
                    ShareFetchResponse.ShareFetchableTopicResponse(topic_id=topic_id, partitions=parts)
                )
        return ShareFetchResponse(acquisition_lock_timeout_ms=30_000, responses=responses)

    def _acknowledge(self, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        member = req.member_id or ""
        code = self._session(member, req.share_session_epoch)
        if code:
            return ShareAcknowledgeResponse(error_code=code)
        responses = []
        for t in req.topics:
            name = self._name(t.topic_id)
            parts = [
                ShareAcknowledgeResponse.PartitionData(
                    partition_index=p.partition_index,
                    error_code=self._apply_acks(
                        member, TopicPartition(name, p.partition_index), p.acknowledgement_batches
                    ),
                    current_leader=ShareAcknowledgeResponse.LeaderIdAndEpoch(leader_id=NODE, leader_epoch=0),
                )
                for p in t.partitions
            ]
            responses.append(
                ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts)
            )
        return ShareAcknowledgeResponse(responses=responses)
