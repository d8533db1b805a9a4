"""Topic and cluster administration: create, delete, list, describe topics; partitions; cluster.

Topic changes go to the controller; NOT_CONTROLLER makes the next round look the controller up
afresh. Descriptions come from Metadata, without ever auto-creating a topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.controller import Controller
from kafka_core.admin.engine import call_timeout, outcome, per_resource
from kafka_core.admin.results import ClusterDescription, PartitionDescription, Result, TopicDescription
from kafka_core.client.metadata import BrokerMeta, NewTopic, TopicMeta
from kafka_core.client.requests import create_topics_request
from kafka_core.errors import KafkaConfigError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import (
    CreatePartitionsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
)

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient


def _describe(t: TopicMeta) -> TopicDescription:
    return TopicDescription(
        name=t.name,
        topic_id=t.topic_id,
        internal=t.is_internal,
        partitions=[
            PartitionDescription(p.partition, p.leader, p.replicas, p.isr, p.offline_replicas)
            for p in t.partitions
        ],
    )


class TopicCalls:
    """The topic and cluster calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout_ms: float = 30_000,
    ) -> dict[str, Result[None]]:
        await self.client.start()
        topics = {t.name: t for t in (t if isinstance(t, NewTopic) else NewTopic(t) for t in new_topics)}
        controller = Controller(self.client)

        async def attempt(pending: list[str]) -> dict[str, Any]:
            node = await controller.node()
            body = create_topics_request(
                (topics[n] for n in pending), timeout_ms=timeout_ms, validate_only=validate_only
            )
            resp = await self.client.send(node, body)
            out: dict[str, Any] = {}
            for r in resp.topics:
                out[r.name] = controller.outcome(r.error_code, f"creating topic {r.name!r}", r.error_message)
                if not r.error_code and not validate_only:
                    self.client.invalidate_metadata(r.name)
            return out

        return await per_resource("create_topics", topics, attempt, timeout_ms)

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: float = 30_000
    ) -> dict[str, Result[None]]:
        await self.client.start()
        names = [names] if isinstance(names, str) else list(names)
        controller = Controller(self.client)

        async def attempt(pending: list[str]) -> dict[str, Any]:
            node = await controller.node()
            version = await self.client.api_version(node, ApiKey.DELETE_TOPICS)
            if version >= 6:
                state_cls = DeleteTopicsRequest.DeleteTopicState
                body = DeleteTopicsRequest(
                    topics=[state_cls(name=n) for n in pending], timeout_ms=int(timeout_ms)
                )
            else:
                body = DeleteTopicsRequest(topic_names=list(pending), timeout_ms=int(timeout_ms))
            resp = await self.client.send(node, body, version)
            out: dict[str, Any] = {}
            for r in resp.responses:
                self.client.invalidate_metadata(r.name)
                out[r.name] = controller.outcome(
                    r.error_code, f"deleting topic {r.name!r}", getattr(r, "error_message", None)
                )
            return out

        return await per_resource("delete_topics", names, attempt, timeout_ms)

    async def list_topics(self, *, internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        meta = await self.client.retry(
            "list_topics", lambda: self.client.metadata(None, allow_auto_topic_creation=False), timeout_ms
        )
        return sorted(t.name for t in meta.topics if not t.error_code and (internal or not t.is_internal))

    async def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, Result[TopicDescription]]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        if names is None:
            meta = await self.client.retry(
                "describe_topics",
                lambda: self.client.metadata(None, allow_auto_topic_creation=False),
                timeout,
            )
            return {t.name: Result(_describe(t)) for t in sorted(meta.topics, key=lambda t: t.name)}
        wanted = [names] if isinstance(names, str) else list(names)

        async def attempt(pending: list[str]) -> dict[str, Any]:
            meta = await self.client.metadata(pending, allow_auto_topic_creation=False)
            out: dict[str, Any] = {}
            for t in meta.topics:
                out[t.name] = outcome(t.error_code, f"describing topic {t.name!r}") or _describe(t)
            return out

        return await per_resource("describe_topics", wanted, attempt, timeout)

    async def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        await self.client.start()

        async def attempt() -> ClusterDescription:
            node = await self.client.any_node()
            try:
                await self.client.api_version(node, ApiKey.DESCRIBE_CLUSTER)
            except KafkaUnsupportedVersionError:
                meta = await self.client.metadata([], allow_auto_topic_creation=False)
                return ClusterDescription(meta.cluster_id, meta.controller_id, sorted(meta.brokers, key=_id))
            resp = await self.client.send(node, DescribeClusterRequest())
            if resp.error_code:
                raise error_for(resp.error_code, f"DescribeCluster: {resp.error_message or ''}".rstrip(": "))
            brokers = [BrokerMeta(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
            return ClusterDescription(resp.cluster_id, resp.controller_id, sorted(brokers, key=_id))

        return await self.client.retry("describe_cluster", attempt, timeout_ms)

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: float = 30_000,
    ) -> dict[str, Result[None]]:
        await self.client.start()
        for topic, count in new_totals.items():
            if not isinstance(count, int) or count < 1:
                raise KafkaConfigError(f"create_partitions: total for {topic!r} must be a positive int")
        topic_cls = CreatePartitionsRequest.CreatePartitionsTopic
        controller = Controller(self.client)

        async def attempt(pending: list[str]) -> dict[str, Any]:
            node = await controller.node()
            version = await self.client.api_version(node, ApiKey.CREATE_PARTITIONS)
            body = CreatePartitionsRequest(
                topics=[topic_cls(name=t, count=new_totals[t], assignments=None) for t in pending],
                timeout_ms=int(timeout_ms),
                validate_only=validate_only,
            )
            resp = await self.client.send(node, body, version)
            out: dict[str, Any] = {}
            for r in resp.results:
                self.client.invalidate_metadata(r.name)
                out[r.name] = controller.outcome(
                    r.error_code, f"adding partitions to topic {r.name!r}", r.error_message
                )
            return out

        return await per_resource("create_partitions", list(new_totals), attempt, timeout_ms)


def _id(b: BrokerMeta) -> int:
    return b.node_id
