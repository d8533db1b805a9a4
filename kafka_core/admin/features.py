"""The cluster's own state: the KRaft metadata quorum and the feature levels.

DescribeQuorum and UpdateFeatures are controller business, which a KRaft broker forwards to the
active controller, so any broker takes them. The feature levels come from ApiVersions: every
broker's answer carries the cluster's finalized levels and its own supported ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import any_broker, call_timeout, detail_suffix, outcome, per_resource
from kafka_core.admin.results import (
    FeatureMetadata,
    FeatureRange,
    FeatureUpdate,
    QuorumInfo,
    QuorumReplica,
    Result,
)
from kafka_core.errors import KafkaConfigError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import ApiVersionsRequest, DescribeQuorumRequest, UpdateFeaturesRequest

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

METADATA_TOPIC = "__cluster_metadata"
UPGRADE_TYPE_VERSION = 1  # KIP-778: v0 has allow_downgrade only


def _replica(r: Any) -> QuorumReplica:
    return QuorumReplica(
        replica_id=r.replica_id,
        log_end_offset=r.log_end_offset,
        last_fetch_timestamp_ms=r.last_fetch_timestamp if r.last_fetch_timestamp >= 0 else None,
        last_caught_up_timestamp_ms=r.last_caught_up_timestamp if r.last_caught_up_timestamp >= 0 else None,
    )


class FeatureCalls:
    """The quorum and feature calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    async def describe_quorum(self, *, timeout_ms: float | None = None) -> QuorumInfo:
        await self.client.start()
        data_cls = DescribeQuorumRequest.TopicData
        part_cls = DescribeQuorumRequest.PartitionData
        body = DescribeQuorumRequest(
            topics=[data_cls(topic_name=METADATA_TOPIC, partitions=[part_cls(partition_index=0)])]
        )

        def read(resp: Any) -> QuorumInfo:
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(
                            p.error_code, "DescribeQuorum " + METADATA_TOPIC + detail_suffix(p.error_message)
                        )
                    return QuorumInfo(
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        high_watermark=p.high_watermark,
                        voters=[_replica(r) for r in p.current_voters],
                        observers=[_replica(r) for r in p.observers],
                    )
            raise error_for(-1, f"DescribeQuorum: the answer did not describe {METADATA_TOPIC}")

        return await any_broker(
            self.client, "describe_quorum", body, read, timeout_ms, request="DescribeQuorum"
        )

    async def describe_features(self, *, timeout_ms: float | None = None) -> FeatureMetadata:
        await self.client.start()

        body = ApiVersionsRequest(client_software_name="kafka-core", client_software_version="admin")

        def read(resp: Any) -> FeatureMetadata:
            return FeatureMetadata(
                finalized={
                    f.name: FeatureRange(f.min_version_level, f.max_version_level)
                    for f in resp.finalized_features
                },
                finalized_epoch=resp.finalized_features_epoch if resp.finalized_features_epoch >= 0 else None,
                supported={
                    f.name: FeatureRange(f.min_version, f.max_version) for f in resp.supported_features
                },
            )

        return await any_broker(
            self.client, "describe_features", body, read, timeout_ms, request="ApiVersions (features)"
        )

    async def update_features(
        self,
        updates: Mapping[str, FeatureUpdate | int],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[str, Result[None]]:
        await self.client.start()
        wanted = {
            name: u if isinstance(u, FeatureUpdate) else FeatureUpdate(int(u)) for name, u in updates.items()
        }
        if not wanted:
            raise KafkaConfigError("update_features: name at least one feature")
        for name, u in wanted.items():
            u.code()  # a bad upgrade_type is the caller's error, before anything is sent
            if u.max_version_level < 0:
                raise KafkaConfigError(f"update_features: {name}'s level must be >= 0")
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        key_cls = UpdateFeaturesRequest.FeatureUpdateKey

        async def attempt(pending: list[str]) -> dict[str, Any]:
            node = await self.client.controller_node()
            version = await self.client.api_version(node, ApiKey.UPDATE_FEATURES)
            keys = []
            for name in pending:
                u = wanted[name]
                fields: dict[str, Any] = {"feature": name, "max_version_level": u.max_version_level}
                if version >= UPGRADE_TYPE_VERSION:
                    fields["upgrade_type"] = u.code()
                else:
                    fields["allow_downgrade"] = u.upgrade_type != "upgrade"
                keys.append(key_cls(**fields))
            body = UpdateFeaturesRequest(
                timeout_ms=int(timeout), feature_updates=keys, validate_only=validate_only
            )
            resp = await self.client.send(node, body, version)
            error = outcome(resp.error_code, "UpdateFeatures", resp.error_message)
            if error is not None:
                return dict.fromkeys(pending, error)
            out: dict[str, Any] = dict.fromkeys(pending)  # v2 leaves out the results of a success
            for r in resp.results:
                out[r.feature] = outcome(r.error_code, f"updating feature {r.feature!r}", r.error_message)
            return out

        return await per_resource("update_features", list(wanted), attempt, timeout)
