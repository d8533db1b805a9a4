"""What the admin client returns: per-resource ``Result`` and plain, immutable descriptions.

Admin calls act on many resources at once and brokers answer per resource, so one bad topic must
not hide the others: every multi-resource call returns ``{key: Result}`` and each failure keeps
its Kafka error code and name (``KafkaProtocolError``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

from kafka_core.client.metadata import BrokerMeta, TopicPartition
from kafka_core.errors import KafkaConfigError, KafkaError

T = TypeVar("T")

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "AlterConfigOp",
    "BrokerMeta",
    "ClientQuotaEntity",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "DelegationToken",
    "FeatureMetadata",
    "FeatureRange",
    "FeatureUpdate",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "HangingTransaction",
    "LogDirDescription",
    "MemberDescription",
    "PartitionDescription",
    "PartitionLag",
    "PartitionReassignment",
    "PatternType",
    "ProducerState",
    "QuorumInfo",
    "QuorumReplica",
    "ReplicaInfo",
    "Result",
    "ScramCredentialInfo",
    "ScramDeletion",
    "ScramUpsertion",
    "SharePartitionOffset",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
]


class Result(Generic[T]):
    """The outcome for one resource: a value, or the error that resource got."""

    __slots__ = ("error", "value")

    def __init__(self, value: T | None = None, error: KafkaError | None = None) -> None:
        self.value = value
        self.error = error

    @property
    def ok(self) -> bool:
        return self.error is None

    def result(self) -> T:
        """The value, or raise the resource's error (so a caller can opt into exceptions)."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return self.value == other.value and self.error is other.error

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Result(error={self.error!r})" if self.error is not None else f"Result({self.value!r})"


# -- topics and cluster ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: list[PartitionDescription]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller: int
    brokers: list[BrokerMeta]


# -- configs -----------------------------------------------------------------------------------


class ConfigResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A thing with configs: ``ConfigResource.topic("orders")`` or ``ConfigResource.broker(1)``."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(node_id))

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        """A group's configs (KIP-848/932), e.g. a share group's ``share.auto.offset.reset``."""
        return cls(ConfigResourceType.GROUP, group_id)

    @classmethod
    def of(cls, value: ConfigResource | tuple[str | int, str | int]) -> ConfigResource:
        """Accept ``("topic", "orders")``/``("broker", 1)`` tuples as well as ConfigResource."""
        if isinstance(value, ConfigResource):
            return value
        try:
            kind, name = value
            rtype = ConfigResourceType[kind.upper()] if isinstance(kind, str) else ConfigResourceType(kind)
        except (TypeError, ValueError, KeyError) as exc:
            raise KafkaConfigError(
                f"not a config resource: {value!r} (use ConfigResource.topic(...))"
            ) from exc
        return cls(rtype, str(name))


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    source: int = -1


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One incremental change; ``op`` is set, delete, append or subtract (list-valued configs)."""

    name: str
    value: str | None = None
    op: str = "set"

    OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}

    def code(self) -> int:
        try:
            return self.OPS[self.op]
        except KeyError:
            raise KafkaConfigError(f"config op must be one of {list(self.OPS)}, not {self.op!r}") from None


# -- groups ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupListing:
    """``group_type``: ``"classic"``, ``"consumer"`` (KIP-848) or ``"share"`` (KIP-932), as
    ListGroups v5 (Kafka 3.8+) gives it; None from an older broker, which has classic groups only."""

    group_id: str
    protocol_type: str
    state: str | None = None
    group_type: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A member. For a KIP-848 group also its ``member_epoch``, the ``target_assignment`` the
    broker is moving it to (equal to ``assignment`` once reconciled), ``rack_id`` and what it
    subscribed to (``subscribed_topics``, or ``subscribed_pattern``); None/empty for classic."""

    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)
    group_instance_id: str | None = None
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] = field(default_factory=list)
    rack_id: str | None = None
    subscribed_topics: list[str] = field(default_factory=list)
    subscribed_pattern: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group. ``group_type`` is ``"classic"`` (DescribeGroups) or ``"consumer"`` (a KIP-848
    group, described by ConsumerGroupDescribe: ``protocol`` is then the broker's assignor,
    ``state`` one of Empty, Assigning, Reconciling, Stable, and ``group_epoch`` /
    ``assignment_epoch`` are set)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition's lag. ``committed`` is None when the group has no committed offset there;
    then ``lag`` is None too (what it would read depends on the consumer's auto_offset_reset)."""

    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's lag: ``lag.total`` (or ``lag["total"]``) sums the partitions that have a
    committed offset and a known end; ``lag[tp]`` is one partition's :class:`PartitionLag`."""

    group_id: str
    partitions: dict[TopicPartition, PartitionLag]

    @property
    def total(self) -> int:
        return sum(p.lag for p in self.partitions.values() if p.lag is not None)

    def __getitem__(self, key: str | TopicPartition | tuple[str, int]) -> int | PartitionLag:
        if key == "total":
            return self.total
        if isinstance(key, tuple):
            return self.partitions[TopicPartition(key[0], int(key[1]))]
        raise KeyError(key)

    def __iter__(self) -> Iterator[PartitionLag]:
        return iter(self.partitions[tp] for tp in sorted(self.partitions))

    def __len__(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share group's progress on one partition: ``start_offset``, where its window of records
    not yet acknowledged begins (-1: no member has fetched the partition yet); ``lag``, the
    records not acknowledged from there to the end, as the broker counts them (Kafka 4.2+;
    None from an older broker or when it does not know)."""

    topic: str
    partition: int
    start_offset: int
    leader_epoch: int | None = None
    lag: int | None = None
    error: KafkaError | None = None


# -- ACLs --------------------------------------------------------------------------------------


class AclResourceType(IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: ``principal`` (``"User:alice"``) may (or may not) do ``operation`` on a resource."""

    resource_type: AclResourceType
    resource_name: str
    principal: str
    operation: AclOperation
    permission_type: AclPermissionType = AclPermissionType.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which ACLs to describe or delete; None fields match anything."""

    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    principal: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY
    host: str | None = None
    pattern_type: PatternType = PatternType.ANY


# -- transactions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A transactional id its coordinator knows, with its producer id and state (``Ongoing``,
    ``Empty``, ``PrepareCommit``, ``CompleteAbort``...)."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transaction as its coordinator sees it; ``start_time_ms`` is None when none is open, and
    ``partitions`` are those the coordinator added to the open one."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None
    partitions: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer a partition's leader keeps state for (DescribeProducers).
    ``current_txn_start_offset`` is the first offset of its open transaction there (None: none
    open); ``coordinator_epoch`` is what an abort's marker must carry."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int | None


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """An open transaction on a partition that its coordinator will never finish, so it holds
    back the partition's last stable offset (read_committed readers stop there) until aborted
    with :meth:`KafkaAdmin.abort_transaction`. ``reason`` says why it is taken as hanging;
    ``transactional_id`` is None when no coordinator knows the producer id."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int
    transactional_id: str | None
    reason: str


# -- replicas: reassignments, elections, log dirs ------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment under way: ``replicas`` is the full set while it runs (old and new),
    ``adding``/``removing`` the replicas on their way in and out."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log dir: its size, how far it is behind (``offset_lag``) and whether it
    is the future copy of a move between dirs."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """A broker's log dir: its error (e.g. KAFKA_STORAGE_ERROR for an offline dir), the replicas
    in it and, from Kafka 3.3, its total and usable bytes (None when the broker does not say)."""

    path: str
    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None = None
    usable_bytes: int | None = None


# -- the KRaft quorum and features ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    """A voter or observer of the metadata quorum; timestamps are None where the leader has none."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp_ms: int | None
    last_caught_up_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The KRaft metadata quorum (``__cluster_metadata``): leader, epoch, high watermark, voters
    and observers (brokers that are not controllers)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]


@dataclass(frozen=True, slots=True)
class FeatureRange:
    """A feature's versions: what a broker supports (min..max), or the level the cluster finalized."""

    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """The cluster's finalized feature levels (``metadata.version``, ``transaction.version``...),
    their epoch, and the versions the answering broker supports."""

    finalized: dict[str, FeatureRange]
    finalized_epoch: int | None
    supported: dict[str, FeatureRange]


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """Set a feature's level: ``upgrade_type`` is "upgrade", "safe_downgrade" or
    "unsafe_downgrade" (level 0 with a downgrade removes the feature)."""

    max_version_level: int
    upgrade_type: str = "upgrade"

    TYPES = {"upgrade": 1, "safe_downgrade": 2, "unsafe_downgrade": 3}

    def code(self) -> int:
        try:
            return self.TYPES[self.upgrade_type]
        except KeyError:
            raise KafkaConfigError(
                f"upgrade_type must be one of {list(self.TYPES)}, not {self.upgrade_type!r}"
            ) from None


# -- quotas, SCRAM users, delegation tokens ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """Whom a quota applies to: ``{"user": "alice", "client-id": None}`` (None: the default
    entity of that type). Keys: ``user``, ``client-id``, ``ip``."""

    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, parts: dict[str, str | None] | ClientQuotaEntity) -> ClientQuotaEntity:
        if isinstance(parts, ClientQuotaEntity):
            return parts
        if not parts:
            raise KafkaConfigError("a client quota entity names at least one of user, client-id, ip")
        for kind in parts:
            if kind not in ("user", "client-id", "ip"):
                raise KafkaConfigError(
                    f"client quota entity type must be user, client-id or ip, not {kind!r}"
                )
        return cls(tuple(sorted(parts.items())))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """A SCRAM credential's mechanism and iterations (the broker never gives out more)."""

    mechanism: str
    iterations: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """Set a user's SCRAM password for one mechanism. The password is salted and hashed here
    (only the salted hash is sent) and never shown: ``repr`` hides it."""

    user: str
    password: str = field(repr=False)
    mechanism: str = "SCRAM-SHA-512"
    iterations: int = 8192


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    """Remove a user's SCRAM credential for one mechanism."""

    user: str
    mechanism: str = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A delegation token: its id and HMAC (the secret a client authenticates with: SCRAM with
    the token id as user name and the base64 HMAC as password); ``repr`` hides the HMAC."""

    token_id: str
    hmac: bytes = field(repr=False)
    owner: str
    requester: str
    renewers: list[str]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int
