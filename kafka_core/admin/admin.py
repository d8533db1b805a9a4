"""The asyncio admin client: topics, configs, groups, offsets and ACLs over one ``KafkaClient``.

Each family of calls is a part of its own (``topics``, ``configs``, ``groups``, ``share_groups``,
``offsets``, ``acls``), built here with the client it works over; this class owns that client and
its lifecycle, documents each call and hands it to its part. Calls over many resources return
``{key: Result}``; see ``kafka_core.admin.results``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from kafka_core.admin.acls import AclCalls
from kafka_core.admin.configs import ConfigCalls
from kafka_core.admin.coordinator import Coordinators
from kafka_core.admin.features import FeatureCalls
from kafka_core.admin.groups import GroupCalls
from kafka_core.admin.offsets import OffsetCalls
from kafka_core.admin.replicas import ReplicaCalls
from kafka_core.admin.security import SecurityCalls
from kafka_core.admin.share_groups import ShareGroupCalls
from kafka_core.admin.topics import TopicCalls
from kafka_core.admin.transactions import DEFAULT_MAX_TRANSACTION_TIMEOUT_MS, TransactionCalls
from kafka_core.client import cluster
from kafka_core.client.cluster import KafkaClient
from kafka_core.config import keywords_from_config, role_keywords, takes_config
from kafka_core.option_names import accepted_keywords, reject_unknown
from kafka_core.telemetry import pusher_for, wait_instance_id

if TYPE_CHECKING:
    from kafka_core.admin.configs import ConfigChanges
    from kafka_core.admin.offsets import OffsetSpec
    from kafka_core.admin.results import (
        AclBinding,
        AclBindingFilter,
        ClientQuotaEntity,
        ClusterDescription,
        ConfigEntry,
        ConfigResource,
        DelegationToken,
        FeatureMetadata,
        FeatureUpdate,
        GroupDescription,
        GroupLag,
        GroupListing,
        HangingTransaction,
        LogDirDescription,
        PartitionReassignment,
        ProducerState,
        QuorumInfo,
        Result,
        ScramCredentialInfo,
        ScramDeletion,
        ScramUpsertion,
        SharePartitionOffset,
        TopicDescription,
        TransactionDescription,
        TransactionListing,
    )
    from kafka_core.client.metadata import ListedOffset, NewTopic, OffsetAndMetadata, TopicPartition
    from kafka_core.consumer.policies import IsolationLevel

DEFAULT_API_TIMEOUT_MS = 60_000


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class KafkaAdmin:
    """Asyncio admin client. ``async with KafkaAdmin(bootstrap_servers=...) as admin: ...``.

    Takes the same options as :class:`kafka_core.aio.KafkaClient`; unlike it, the admin never
    auto-creates a topic by asking about it (``allow_auto_create_topics`` defaults to False).
    Calls without a ``timeout_ms`` use ``api_timeout_ms`` (60 s).
    """

    @takes_config(role_keywords("client"))
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] | Mapping[str, Any] = "localhost:9092",
        **client_options: Any,
    ) -> None:
        reject_unknown(type(self).__name__, client_options, accepted_keywords(cluster.KafkaClient.__init__))
        client_options.setdefault("allow_auto_create_topics", False)
        client_options.setdefault("client_id", "kafka-core-admin")
        self.client = KafkaClient(bootstrap_servers, **client_options)
        self.default_timeout_ms = float(client_options.get("api_timeout_ms", DEFAULT_API_TIMEOUT_MS))
        client, timeout = self.client, self.default_timeout_ms
        coordinators = Coordinators(client)
        self._topics = TopicCalls(client, timeout)
        self._configs = ConfigCalls(client, timeout)
        self._offsets = OffsetCalls(client, timeout)
        self._groups = GroupCalls(client, coordinators, timeout)
        self._share_groups = ShareGroupCalls(client, coordinators, self._offsets, timeout)
        self._acls = AclCalls(client, timeout)
        self._transactions = TransactionCalls(client, self._offsets, timeout)
        self._replicas = ReplicaCalls(client, timeout)
        self._features = FeatureCalls(client, timeout)
        self._security = SecurityCalls(client, timeout)
        # KIP-714, as Java's admin: pushes once the client is up (every call starts it)
        self._telemetry = pusher_for(client, "admin", self.metrics)
        if self._telemetry is not None and _loop_running():
            self._telemetry.start()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """An admin from Java-style names (``{"bootstrap.servers": ...}``: the client's), with
        ``overrides`` (keyword names) on top; unknown names raise KafkaConfigError naming them."""
        return cls(**keywords_from_config(config, "client", overrides))

    async def __aenter__(self) -> KafkaAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the cluster (every call does it on first use)."""
        await self.client.start()
        if self._telemetry is not None:
            self._telemetry.start()  # a no-op once started

    async def close(self) -> None:
        """Close the connections. Idempotent."""
        if self._telemetry is not None:  # the last push, flagged terminating
            await self._telemetry.close()
        await self.client.close()

    async def client_instance_id(self, timeout: float) -> uuid.UUID:
        """The KIP-714 client instance id the broker assigned this admin, within ``timeout``
        seconds (Java's ``Admin.clientInstanceId``); see :func:`kafka_core.telemetry.wait_instance_id`
        for what it raises."""
        return await wait_instance_id(self._telemetry, timeout)

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the underlying client's counters (requests, errors, latency by API)."""
        return self.client.metrics()

    # -- topics --------------------------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout_ms: float = 30_000,
    ) -> dict[str, Result[None]]:
        """Create topics; ``{name: Result}`` (TOPIC_ALREADY_EXISTS lands in that topic's Result).

        ``validate_only`` asks the broker to check the request without creating anything."""
        return await self._topics.create_topics(
            new_topics, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: float = 30_000
    ) -> dict[str, Result[None]]:
        """Delete topics by name; an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION in its Result."""
        return await self._topics.delete_topics(names, timeout_ms=timeout_ms)

    async def list_topics(self, *, internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        """Names of the cluster's topics, sorted; internal ones (``__consumer_offsets``) on request."""
        return await self._topics.list_topics(internal=internal, timeout_ms=timeout_ms)

    async def describe_topics(
        self, names: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, Result[TopicDescription]]:
        """Partitions, leaders, replicas and ISR per topic (``None``: every topic)."""
        return await self._topics.describe_topics(names, timeout_ms=timeout_ms)

    async def describe_cluster(self, *, timeout_ms: float | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster where offered, else Metadata)."""
        return await self._topics.describe_cluster(timeout_ms=timeout_ms)

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: float = 30_000,
    ) -> dict[str, Result[None]]:
        """Grow topics to ``{topic: total partition count}`` (Kafka never shrinks a topic).

        Raises KafkaUnsupportedVersionError when the controller does not offer CreatePartitions."""
        return await self._topics.create_partitions(
            new_totals, validate_only=validate_only, timeout_ms=timeout_ms
        )

    # -- configs -------------------------------------------------------------------------------------

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource | tuple[str | int, str | int]],
        *,
        include_synonyms: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, Result[dict[str, ConfigEntry]]]:
        """Each resource's configs as ``{name: ConfigEntry}``."""
        return await self._configs.describe_configs(
            resources, include_synonyms=include_synonyms, timeout_ms=timeout_ms
        )

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource | tuple[str | int, str | int], ConfigChanges],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, Result[None]]:
        """Change only the named configs: ``{ConfigResource.topic("t"): {"retention.ms": "1000"}}``
        (a None value deletes, restoring the default), or lists of :class:`AlterConfigOp`."""
        return await self._configs.incremental_alter_configs(
            changes, validate_only=validate_only, timeout_ms=timeout_ms
        )

    # -- groups --------------------------------------------------------------------------------------

    async def list_groups(self, *, timeout_ms: float | None = None) -> list[GroupListing]:
        """Every group known to any broker (each broker lists the groups it coordinates)."""
        return await self._groups.list_groups(timeout_ms=timeout_ms)

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[GroupDescription]]:
        """State, protocol and members (with their assigned partitions) per group.

        Classic groups by DescribeGroups; a KIP-848 group (``group_protocol="consumer"``), which
        Kafka 4 does not describe that way (GROUP_ID_NOT_FOUND, "not a classic group"), by
        ConsumerGroupDescribe, as Java's describeConsumerGroups: members with their epochs and
        current and target assignments (``group_type="consumer"``). A group the coordinator
        does not know (state Dead) gets GROUP_ID_NOT_FOUND, as in Java."""
        return await self._groups.describe_groups(group_ids, timeout_ms=timeout_ms)

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        """Delete empty groups (and their offsets); a group with members gets NON_EMPTY_GROUP."""
        return await self._groups.delete_groups(group_ids, timeout_ms=timeout_ms)

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all its partitions, or those named); partitions without
        a committed offset are left out."""
        return await self._groups.list_group_offsets(group_id, partitions, timeout_ms=timeout_ms)

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        """Set committed offsets of a group with no active members (else UNKNOWN_MEMBER_ID)."""
        return await self._groups.alter_group_offsets(group_id, offsets, timeout_ms=timeout_ms)

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        """Forget the group's committed offsets for these partitions (OffsetDelete, Kafka 2.4+).

        Raises KafkaUnsupportedVersionError when the coordinator does not offer OffsetDelete."""
        return await self._groups.delete_group_offsets(group_id, partitions, timeout_ms=timeout_ms)

    # -- share groups --------------------------------------------------------------------------------

    async def list_share_groups(
        self, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> list[GroupListing]:
        """Every share group of the cluster (ListGroups with the type filter "share"), sorted by
        id; ``states`` keeps those in one of the states given (e.g. ``["Stable"]``)."""
        return await self._share_groups.list_share_groups(states=states, timeout_ms=timeout_ms)

    async def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[GroupDescription]]:
        """State, group and assignment epochs, members with their assigned partitions, per group.

        A group that does not exist, or is not a share group, gets GROUP_ID_NOT_FOUND."""
        return await self._share_groups.describe_share_groups(group_ids, timeout_ms=timeout_ms)

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        """Delete share groups with no members, and their start offsets (DeleteGroups); a group
        with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
        return await self._share_groups.delete_share_groups(group_ids, timeout_ms=timeout_ms)

    async def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset]:
        """The group's start offset per partition (all the partitions it has state for, or those
        named), with the broker's lag where it gives one (Kafka 4.2+, KIP-1226).

        Raises the group's error (GROUP_ID_NOT_FOUND for a group that does not exist); a
        partition's own error is in its :class:`SharePartitionOffset`."""
        return await self._share_groups.list_share_group_offsets(group_id, partitions, timeout_ms=timeout_ms)

    async def share_group_lag(
        self,
        group_id: str,
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> GroupLag:
        """Each partition's start offset (``committed``) against its end offset, and the records
        not yet acknowledged between them (``lag``; the broker's own count where it gives one,
        which leaves out records acknowledged ahead of the start, else end - start).

        A partition whose share state is not initialized yet (no member fetched it) has
        ``committed=None`` and ``lag=None``."""
        return await self._share_groups.share_group_lag(
            group_id, isolation_level=isolation_level, timeout_ms=timeout_ms
        )

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        """Set the group's start offsets (the next records its members get); the group must have
        no members (else every partition gets NON_EMPTY_GROUP)."""
        return await self._share_groups.alter_share_group_offsets(group_id, offsets, timeout_ms=timeout_ms)

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        """Forget the group's share state for whole topics (DeleteShareGroupOffsets); the group
        must have no members. A member subscribing again starts per ``share.auto.offset.reset``."""
        return await self._share_groups.delete_share_group_offsets(group_id, topics, timeout_ms=timeout_ms)

    # -- offsets -------------------------------------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition | tuple[str, int], OffsetSpec],
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[ListedOffset]]:
        """Offsets per partition for a spec: "earliest", "latest" (the end: next offset to be
        written), "max_timestamp" (the record with the largest timestamp) or a timestamp in ms
        (the first offset whose timestamp is >= it; offset -1 when there is none)."""
        return await self._offsets.list_offsets(specs, isolation_level=isolation_level, timeout_ms=timeout_ms)

    async def delete_records(
        self,
        before: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: float = 30_000,
    ) -> dict[TopicPartition, Result[int]]:
        """Delete records below ``{tp: offset}`` (-1: up to the end); each Result is the new
        low watermark. Raises KafkaUnsupportedVersionError where the leader lacks DeleteRecords."""
        return await self._offsets.delete_records(before, timeout_ms=timeout_ms)

    async def consumer_group_lag(
        self,
        group_id: str,
        *,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> GroupLag:
        """Committed offset against the end offset for every partition of the topics the group
        has committed to: ``lag.total``/``lag["total"]`` and ``lag[tp]`` per partition.

        A partition with no committed offset has ``committed=None`` and ``lag=None`` (what the
        group would read there depends on its consumers' auto_offset_reset) and is not counted in
        ``total``; one whose end offset could not be read has ``end=None`` and its ``error``."""
        return await self._offsets.consumer_group_lag(
            group_id, isolation_level=isolation_level, timeout_ms=timeout_ms
        )

    # -- acls ----------------------------------------------------------------------------------------

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (default: all). SECURITY_DISABLED when the cluster
        has no authorizer."""
        return await self._acls.describe_acls(acl_filter, timeout_ms=timeout_ms)

    async def create_acls(
        self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None
    ) -> dict[AclBinding, Result[None]]:
        """Create ACLs; each binding gets its own Result."""
        return await self._acls.create_acls(bindings, timeout_ms=timeout_ms)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None
    ) -> dict[AclBindingFilter, Result[list[AclBinding]]]:
        """Delete the ACLs matching each filter; each Result lists the ACLs that filter deleted."""
        return await self._acls.delete_acls(filters, timeout_ms=timeout_ms)

    # -- transactions --------------------------------------------------------------------------------

    async def list_transactions(
        self,
        *,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        min_duration_ms: int | None = None,
        transactional_id_pattern: str | None = None,
        timeout_ms: float | None = None,
    ) -> list[TransactionListing]:
        """Every transactional id the coordinators know, sorted (each broker lists its own),
        optionally only those in ``states`` (``["Ongoing"]``), of ``producer_ids``, open at
        least ``min_duration_ms`` (Kafka 3.8+) or matching ``transactional_id_pattern`` (a
        Java regex, Kafka 4.1+; KafkaConfigError on an older broker)."""
        return await self._transactions.list_transactions(
            states=states,
            producer_ids=producer_ids,
            min_duration_ms=min_duration_ms,
            transactional_id_pattern=transactional_id_pattern,
            timeout_ms=timeout_ms,
        )

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[TransactionDescription]]:
        """State, producer id and epoch, timeout, start time and partitions per transactional id,
        from its coordinator; an unknown id gets TRANSACTIONAL_ID_NOT_FOUND."""
        return await self._transactions.describe_transactions(transactional_ids, timeout_ms=timeout_ms)

    async def describe_producers(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        broker_id: int | None = None,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[list[ProducerState]]]:
        """The producers each partition's leader keeps state for, with the start offset of any
        transaction they have open there; ``broker_id`` asks that replica instead."""
        return await self._transactions.describe_producers(
            partitions, broker_id=broker_id, timeout_ms=timeout_ms
        )

    async def abort_transaction(
        self,
        partition: TopicPartition | tuple[str, int],
        *,
        start_offset: int | None = None,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        coordinator_epoch: int | None = None,
        timeout_ms: float | None = None,
    ) -> ProducerState:
        """Abort the open transaction on one partition (an abort marker written by its leader),
        as ``kafka-transactions.sh abort``: name it by ``start_offset`` (looked up with
        DescribeProducers) or by ``producer_id``, ``producer_epoch`` and ``coordinator_epoch``.
        Returns the producer whose transaction was aborted.

        For a hanging transaction (:meth:`find_hanging_transactions`): aborting a live one
        from under its producer loses that producer's writes to this partition."""
        return await self._transactions.abort_transaction(
            partition,
            start_offset=start_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timeout_ms=timeout_ms,
        )

    async def find_hanging_transactions(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        topics: Iterable[str] | None = None,
        broker_id: int | None = None,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        timeout_ms: float | None = None,
    ) -> list[HangingTransaction]:
        """Open transactions that no coordinator will finish, as ``kafka-transactions.sh
        find-hanging``: those open on the partitions (or topics, or a broker's replicas) for
        longer than ``max_transaction_timeout_ms`` (15 min, the broker's
        ``transaction.max.timeout.ms`` default) whose producer id no coordinator knows, or whose
        coordinator has no open transaction including that partition."""
        return await self._transactions.find_hanging_transactions(
            partitions,
            topics=topics,
            broker_id=broker_id,
            max_transaction_timeout_ms=max_transaction_timeout_ms,
            timeout_ms=timeout_ms,
        )

    # -- replicas: reassignments, elections, log dirs ------------------------------------------------

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition | tuple[str, int], Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        """Move partitions to new replica sets (``{tp: [2, 3]}``, the first preferred leader);
        ``None`` cancels a reassignment under way. The call returns once the controller took
        it; the move runs on (see :meth:`list_partition_reassignments`)."""
        return await self._replicas.alter_partition_reassignments(reassignments, timeout_ms=timeout_ms)

    async def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments under way (of the partitions named, or all): an empty dict once
        every move is done."""
        return await self._replicas.list_partition_reassignments(partitions, timeout_ms=timeout_ms)

    async def elect_leaders(
        self,
        election_type: str = "preferred",
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[None]]:
        """Elect leaders: ``"preferred"`` (back to the first replica) or ``"unclean"`` (any
        live replica, even one out of sync: records may be lost). ``None`` partitions: every
        partition that needs one. A partition already led by its preferred replica gets
        ELECTION_NOT_NEEDED; one with no eligible replica ELIGIBLE_LEADERS_NOT_AVAILABLE."""
        return await self._replicas.elect_leaders(election_type, partitions, timeout_ms=timeout_ms)

    async def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        *,
        topics: Iterable[str] | None = None,
        timeout_ms: float | None = None,
    ) -> dict[int, Result[dict[str, LogDirDescription]]]:
        """Per broker (default: all), its log dirs with the replicas in each (size, lag),
        optionally only those of ``topics``; an offline dir has its error."""
        return await self._replicas.describe_log_dirs(broker_ids, topics=topics, timeout_ms=timeout_ms)

    # -- the quorum and features ---------------------------------------------------------------------

    async def describe_quorum(self, *, timeout_ms: float | None = None) -> QuorumInfo:
        """The KRaft metadata quorum: leader, epoch, high watermark, and each voter's and
        observer's log end offset and last fetch (how far behind a controller or broker is)."""
        return await self._features.describe_quorum(timeout_ms=timeout_ms)

    async def describe_features(self, *, timeout_ms: float | None = None) -> FeatureMetadata:
        """The cluster's finalized feature levels (``metadata.version``, ``transaction.version``,
        ``group.version``...) and the ranges the answering broker supports."""
        return await self._features.describe_features(timeout_ms=timeout_ms)

    async def update_features(
        self,
        updates: Mapping[str, FeatureUpdate | int],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[str, Result[None]]:
        """Set feature levels, ``{"transaction.version": 2}`` (an upgrade) or
        :class:`FeatureUpdate` for a downgrade; ``validate_only`` asks the controller whether it
        would. A level the brokers do not support gets INVALID_UPDATE_VERSION."""
        return await self._features.update_features(
            updates, validate_only=validate_only, timeout_ms=timeout_ms
        )

    # -- SCRAM users, client quotas, delegation tokens -------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, Result[list[ScramCredentialInfo]]]:
        """Each user's SCRAM mechanisms and iterations (``None``: every user that has one); a
        user without credentials gets RESOURCE_NOT_FOUND. Passwords are never given out."""
        return await self._security.describe_user_scram_credentials(users, timeout_ms=timeout_ms)

    async def alter_user_scram_credentials(
        self, alterations: Iterable[ScramUpsertion | ScramDeletion], *, timeout_ms: float | None = None
    ) -> dict[str, Result[None]]:
        """Set (:class:`ScramUpsertion`) or remove (:class:`ScramDeletion`) users' SCRAM
        credentials; the password is salted and hashed here, only the hash is sent."""
        return await self._security.alter_user_scram_credentials(alterations, timeout_ms=timeout_ms)

    async def describe_client_quotas(
        self,
        entity: Mapping[str, str | None] | None = None,
        *,
        strict: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Quotas by entity: ``{"user": "alice"}`` matches that user's (and, unless ``strict``,
        those of alice with any client id); a None name is the default entity; no filter: all."""
        return await self._security.describe_client_quotas(entity, strict=strict, timeout_ms=timeout_ms)

    async def alter_client_quotas(
        self,
        changes: Mapping[ClientQuotaEntity, Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ClientQuotaEntity, Result[None]]:
        """Set quotas, ``{ClientQuotaEntity.of({"user": "alice"}): {"producer_byte_rate": 1e6}}``;
        a None value removes that quota."""
        return await self._security.alter_client_quotas(
            changes, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def create_delegation_token(
        self,
        *,
        renewers: Iterable[str] = (),
        max_lifetime_ms: int = -1,
        owner: str | None = None,
        timeout_ms: float | None = None,
    ) -> DelegationToken:
        """A delegation token for the connection's principal (or ``owner``, "User:bob", Kafka
        3.3+), renewable by ``renewers``. Needs a SASL or TLS-authenticated connection and a
        cluster with ``delegation.token.secret.key`` (else DELEGATION_TOKEN_AUTH_DISABLED)."""
        return await self._security.create_delegation_token(
            renewers=renewers, max_lifetime_ms=max_lifetime_ms, owner=owner, timeout_ms=timeout_ms
        )

    async def renew_delegation_token(
        self, hmac: bytes, *, renew_period_ms: int = -1, timeout_ms: float | None = None
    ) -> int:
        """Push the token's expiry out (by ``renew_period_ms``, or the broker's default); the new
        expiry time in ms."""
        return await self._security.renew_delegation_token(
            hmac, renew_period_ms=renew_period_ms, timeout_ms=timeout_ms
        )

    async def expire_delegation_token(
        self, hmac: bytes, *, expiry_time_period_ms: int = -1, timeout_ms: float | None = None
    ) -> int:
        """Expire the token now (-1) or after ``expiry_time_period_ms``; the expiry time in ms."""
        return await self._security.expire_delegation_token(
            hmac, expiry_time_period_ms=expiry_time_period_ms, timeout_ms=timeout_ms
        )

    async def describe_delegation_tokens(
        self, owners: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> list[DelegationToken]:
        """The tokens the principal may see, of ``owners`` ("User:alice") or all."""
        return await self._security.describe_delegation_tokens(owners, timeout_ms=timeout_ms)


__all__ = ["KafkaAdmin"]
