"""A scripted KIP-848 group coordinator on the consumer's fake client, and a member of it, for
the unit tests of the KIP-848 membership and its reconciliation."""

from __future__ import annotations

from typing import Any

from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import T
from kafka_core.client.metadata import ClusterMeta, TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol import messages as m

TP2 = TopicPartition(T, 2)


class FakeCoordinator(FakeClient):
    """One member's KIP-848 coordinator: answers ConsumerGroupHeartbeat as Kafka does (the
    whole assignment when it changed; a revocation first, at the same epoch, and the new
    partitions only once the member acknowledged it), with scripted errors."""

    def __init__(self, partitions: dict[str, int], *, version: int | None = 1) -> None:
        super().__init__(partitions)
        self.version = version  # None: the API is not offered
        self.requests: list[Any] = []
        self.errors: list[int] = []
        self.epoch = 0
        self.target: set[TopicPartition] = {
            TopicPartition(t, p) for t, n in partitions.items() for p in range(n)
        }
        self.owned: set[TopicPartition] = set()  # as the member last reported it
        self.sent: set[TopicPartition] | None = None
        self.coordinator_errors: list[int] = []
        self.noted: list[tuple[int, Any]] = []

    async def api_version(self, node: int, api_key: int, **kw: Any) -> int:
        assert api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT
        if self.version is None:
            raise KafkaUnsupportedVersionError(
                "broker 1 (127.0.0.1:1) does not support API CONSUMER_GROUP_HEARTBEAT"
            )
        return self.version

    async def metadata(self, topics: Any = None, **kw: Any) -> ClusterMeta:
        return self.cached_metadata()

    def note_error(self, code: int, topic: str | None = None, **kw: Any) -> bool:
        self.noted.append((code, kw.get("coordinator_key")))
        return super().note_error(code, topic, **kw)

    def _ids(self, tps: set[TopicPartition]) -> list[Any]:
        by: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by.setdefault(tp.topic, []).append(tp.partition)
        cls = m.ConsumerGroupHeartbeatResponse.TopicPartitions
        return [cls(topic_id=self.topic_ids[t], partitions=ps) for t, ps in by.items()]

    def _names(self, tps: list[Any]) -> set[TopicPartition]:
        names = {tid: n for n, tid in self.topic_ids.items()}
        return {TopicPartition(names[x.topic_id], p) for x in tps for p in x.partitions}

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if not isinstance(body, m.ConsumerGroupHeartbeatRequest):
            return await super().send(node, body, version, **kw)
        self.requests.append(body)
        r = m.ConsumerGroupHeartbeatResponse
        if self.errors:
            return r(error_code=self.errors.pop(0), member_epoch=-1, error_message="scripted")
        if body.member_epoch < 0:
            self.epoch, self.owned, self.sent = 0, set(), None
            return r(member_epoch=body.member_epoch, heartbeat_interval_ms=20)
        if body.member_epoch == 0:
            self.epoch += 1
            self.owned, self.sent = set(), None
        if body.topic_partitions is not None:
            self.owned = self._names(body.topic_partitions)
        answer: set[TopicPartition] | None = None
        if self.owned - self.target:  # revoke first, same epoch
            answer = self.owned & self.target
        elif self.sent != self.target:
            if self.sent is not None:
                self.epoch += 1
            answer = set(self.target)
        if answer is not None and answer == self.sent:
            answer = None
        if answer is not None:
            self.sent = answer
        return r(
            member_id=body.member_id,
            member_epoch=self.epoch,
            heartbeat_interval_ms=20,
            assignment=None if answer is None else r.Assignment(topic_partitions=self._ids(answer)),
        )


def member(client: FakeCoordinator, events: list, **kw: Any) -> KafkaConsumer:
    kw.setdefault("topics", [T])
    return KafkaConsumer(
        group_id="g",
        client=client,
        group_protocol="consumer",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        on_assign=lambda tps: events.append(("assign", sorted(tps))),
        on_revoke=lambda tps: events.append(("revoke", sorted(tps))),
        on_lost=lambda tps: events.append(("lost", sorted(tps))),
        **kw,
    )


async def until(c: KafkaConsumer, cond: Any, rounds: int = 200) -> None:
    for _ in range(rounds):
        await c.poll(10)
        if cond():
            return
    raise AssertionError("condition not reached")
