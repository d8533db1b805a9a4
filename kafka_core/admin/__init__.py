"""Kafka administration: ``kafka_core.KafkaAdmin`` (blocking) and ``kafka_core.aio.KafkaAdmin``.

This package holds the result and description types the admin calls return (``Result``,
``TopicDescription``, ``GroupLag``, ``ConfigResource``...); guide: docs/admin.md.
"""

from kafka_core.admin.offsets import SPECS as OFFSET_SPECS
from kafka_core.admin.results import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    AlterConfigOp,
    BrokerMeta,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    GroupDescription,
    GroupLag,
    GroupListing,
    MemberDescription,
    PartitionDescription,
    PartitionLag,
    PatternType,
    Result,
    SharePartitionOffset,
    TopicDescription,
)
from kafka_core.client.metadata import ListedOffset, NewTopic, OffsetAndMetadata, TopicPartition

__all__ = [
    "OFFSET_SPECS",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "AlterConfigOp",
    "BrokerMeta",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "ListedOffset",
    "MemberDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionDescription",
    "PartitionLag",
    "PatternType",
    "Result",
    "SharePartitionOffset",
    "TopicDescription",
    "TopicPartition",
]
