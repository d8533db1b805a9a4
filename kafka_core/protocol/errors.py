"""Kafka's error-code table (Errors.java of Apache Kafka 4.x, codes -1..133).

Every error code a response carries surfaces as :class:`KafkaProtocolError`; ``retriable``
mirrors whether Java maps the code to a ``RetriableException``, which is what clients key their
retry logic on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol.error_codes import ErrorCode

__all__ = [
    "COORDINATOR_CODES",
    "COORDINATOR_MOVED_CODES",
    "ERRORS",
    "ERROR_CODES",
    "LEADER_MOVED_CODES",
    "MEMBER_FENCED_CODES",
    "PRODUCER_ID_CODES",
    "REJOIN_CODES",
    "RETRIABLE_CODES",
    "RETRIABLE_FETCH_CODES",
    "STALE_METADATA_CODES",
    "ErrorCode",
    "ErrorInfo",
    "KafkaProtocolError",
    "error_for",
    "raise_for_code",
    "raise_for_response",
    "response_errors",
]


class ErrorInfo(NamedTuple):
    code: int
    name: str
    retriable: bool
    description: str


_R = True
_N = False

# fmt: off
_TABLE: tuple[tuple[int, str, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", _N, "The server experienced an unexpected error when processing the request."),
    (0, "NONE", _N, ""),
    (1, "OFFSET_OUT_OF_RANGE", _N, "The requested offset is not within the range of offsets maintained by the server."),
    (2, "CORRUPT_MESSAGE", _R, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", _R, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", _N, "The requested fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", _R, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (6, "NOT_LEADER_OR_FOLLOWER", _R, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."),
    (7, "REQUEST_TIMED_OUT", _R, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", _N, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", _R, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."),
    (10, "MESSAGE_TOO_LARGE", _N, "The request included a message larger than the max message size the server will accept."),
    (11, "STALE_CONTROLLER_EPOCH", _N, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", _N, "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", _R, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", _R, "The coordinator is loading and hence can't process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", _R, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", _R, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", _N, "The request attempted to perform an operation on an invalid topic."),
    (18, "RECORD_LIST_TOO_LARGE", _N, "The request included message batch larger than the configured segment size on the server."),
    (19, "NOT_ENOUGH_REPLICAS", _R, "Messages are rejected since there are fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", _R, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", _N, "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", _N, "Specified group generation id is not valid."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", _N, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    (24, "INVALID_GROUP_ID", _N, "The group id is invalid."),
    (25, "UNKNOWN_MEMBER_ID", _N, "The coordinator is not aware of this member."),
    (26, "INVALID_SESSION_TIMEOUT", _N, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    (27, "REBALANCE_IN_PROGRESS", _N, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", _N, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", _N, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", _N, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", _N, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", _N, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", _N, "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", _N, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", _N, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", _N, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", _N, "Number of partitions is below 1."),
    (38, "INVALID_REPLICATION_FACTOR", _N, "Replication factor is below 1 or larger than the number of available brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", _N, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", _N, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", _R, "This is not the correct controller for this cluster."),
    (42, "INVALID_REQUEST", _N, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", _N, "The message format version on the broker does not support the request."),
    (44, "POLICY_VIOLATION", _N, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", _N, "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", _N, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", _N, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", _N, "The producer attempted a transactional operation in an invalid state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", _N, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", _N, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."),
    (51, "CONCURRENT_TRANSACTIONS", _R, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (52, "TRANSACTION_COORDINATOR_FENCED", _N, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", _N, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", _N, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", _N, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."),
    (56, "KAFKA_STORAGE_ERROR", _R, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", _N, "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", _N, "SASL Authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", _N, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    (60, "REASSIGNMENT_IN_PROGRESS", _N, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", _N, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", _N, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", _N, "Specified Principal is not valid Owner/Renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", _N, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", _N, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", _N, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", _N, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", _N, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", _N, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", _R, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", _R, "The fetch session epoch is invalid."),
    (72, "LISTENER_NOT_FOUND", _R, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (73, "TOPIC_DELETION_DISABLED", _N, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", _R, "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", _R, "The leader epoch in the request is newer than the epoch on the broker."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", _N, "The requesting client does not support the compression type of given partition."),
    (77, "STALE_BROKER_EPOCH", _N, "Broker epoch has changed."),
    (78, "OFFSET_NOT_AVAILABLE", _R, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (79, "MEMBER_ID_REQUIRED", _N, "The group member needs to have a valid member id before actually entering a consumer group."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", _R, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", _N, "The group has reached its maximum size."),
    (82, "FENCED_INSTANCE_ID", _N, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", _R, "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", _R, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", _N, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", _N, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (87, "INVALID_RECORD", _N, "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", _R, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", _R, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", _N, "There is a newer producer with the same transactionalId which fences the current one."),
    (91, "RESOURCE_NOT_FOUND", _N, "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", _N, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", _N, "Requested credential would not meet criteria for acceptability."),
    (94, "INCONSISTENT_VOTER_SET", _N, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", _N, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", _N, "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", _N, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."),
    (98, "SNAPSHOT_NOT_FOUND", _N, "Requested snapshot was not found."),
    (99, "POSITION_OUT_OF_RANGE", _N, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (100, "UNKNOWN_TOPIC_ID", _R, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", _N, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", _N, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", _R, "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", _N, "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", _N, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", _R, "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", _N, "The new ISR contains at least one ineligible replica."),
    (108, "NEW_LEADER_ELECTED", _N, "The AlterPartition request successfully updated the partition state but the leader has changed."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", _N, "The requested offset is moved to tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", _N, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."),
    (111, "UNRELEASED_INSTANCE_ID", _N, "The instance ID is still used by another member in the consumer group. That member must leave first."),
    (112, "UNSUPPORTED_ASSIGNOR", _N, "The assignor or its version range is not supported by the consumer group."),
    (113, "STALE_MEMBER_EPOCH", _N, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."),
    (114, "MISMATCHED_ENDPOINT_TYPE", _N, "The request was sent to an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", _N, "This endpoint type is not supported yet."),
    (116, "UNKNOWN_CONTROLLER_ID", _N, "This controller ID is not known."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", _N, "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (118, "TELEMETRY_TOO_LARGE", _N, "Client sent a push telemetry request larger than the maximum size the broker will accept."),
    (119, "INVALID_REGISTRATION", _N, "The controller has considered the broker registration to be invalid."),
    (120, "TRANSACTION_ABORTABLE", _N, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."),
    (121, "INVALID_RECORD_STATE", _N, "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (122, "SHARE_SESSION_NOT_FOUND", _R, "The share session was not found."),
    (123, "INVALID_SHARE_SESSION_EPOCH", _R, "The share session epoch is invalid."),
    (124, "FENCED_STATE_EPOCH", _N, "The share coordinator rejected the request because the share-group state epoch did not match."),
    (125, "INVALID_VOTER_KEY", _N, "The voter key doesn't match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", _N, "The voter is already part of the set of voters."),
    (127, "VOTER_NOT_FOUND", _N, "The voter is not part of the set of voters."),
    (128, "INVALID_REGULAR_EXPRESSION", _N, "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", _N, "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (130, "STREAMS_INVALID_TOPOLOGY", _N, "The supplied topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", _N, "The supplied topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", _N, "The supplied topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", _R, "The limit of share sessions has been reached."),
)
# fmt: on

ERRORS: dict[int, ErrorInfo] = {row[0]: ErrorInfo(*row) for row in _TABLE}
ERROR_CODES: dict[str, int] = {info.name: code for code, info in ERRORS.items()}

# The sets every component keys its handling on, defined once (franz-go's kerr does the same).
E = ErrorCode

RETRIABLE_CODES: frozenset[ErrorCode] = frozenset(E(c) for c, info in ERRORS.items() if info.retriable)

# The cached leader or topic is wrong: refresh metadata, then retry on the (new) leader. Java's
# InvalidMetadataException family, with KAFKA_STORAGE_ERROR (the replica's log dir went offline).
STALE_METADATA_CODES: frozenset[ErrorCode] = frozenset(
    {
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.LEADER_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER,
        E.REPLICA_NOT_AVAILABLE,
        E.NETWORK_EXCEPTION,
        E.KAFKA_STORAGE_ERROR,
        E.FENCED_LEADER_EPOCH,
        E.UNKNOWN_LEADER_EPOCH,
        E.UNKNOWN_TOPIC_ID,
    }
)

# The partition's leader moved: a Produce v10+ / Fetch v12+ answer with one of these names the
# new leader (KIP-951, kafka_core/client/hints.py).
LEADER_MOVED_CODES: frozenset[ErrorCode] = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH})

# A Fetch partition error after which the fetcher refreshes metadata and fetches again.
RETRIABLE_FETCH_CODES: frozenset[ErrorCode] = STALE_METADATA_CODES | {
    E.INCONSISTENT_TOPIC_ID,
    E.FETCH_SESSION_TOPIC_ID_ERROR,
}

# The group or transaction coordinator is loading, gone or elsewhere: find it again and retry
# (LOAD_IN_PROGRESS keeps the coordinator, the other two look it up again).
COORDINATOR_CODES: frozenset[ErrorCode] = frozenset(
    {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
)
COORDINATOR_MOVED_CODES: frozenset[ErrorCode] = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})

# The member's generation is over: join the group again.
REJOIN_CODES: frozenset[ErrorCode] = frozenset(
    {E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS, E.FENCED_INSTANCE_ID}
)

# KIP-848: the member's epoch is not the group's any more: its partitions are lost, join at epoch 0.
MEMBER_FENCED_CODES: frozenset[ErrorCode] = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})

# The producer id or epoch is no longer the broker's: an idempotent producer gets a new epoch.
PRODUCER_ID_CODES: frozenset[ErrorCode] = frozenset({E.INVALID_PRODUCER_EPOCH, E.UNKNOWN_PRODUCER_ID})
del E


def error_for(code: int, message: str | None = None) -> KafkaProtocolError:
    """The exception for ``code``; an unknown code keeps its number and is not retriable (as Java)."""
    info = ERRORS.get(code)
    if info is None:
        return KafkaProtocolError(code, f"UNKNOWN_ERROR_CODE_{code}", False, message)
    return KafkaProtocolError(ErrorCode(code), info.name, info.retriable, message or info.description)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the error for a response's error code; ``0`` (NONE) passes."""
    if code:
        raise error_for(code, message)


def response_errors(body: Any) -> list[tuple[str, KafkaProtocolError]]:
    """Every non-zero ``*error_code`` in a decoded response, as ``(path, error)`` pairs.

    The path (``"responses[0].partitions[2].error_code"``) says where the error sits; the message
    is the sibling ``*error_message`` field when the response has one. Responses report errors per
    topic, partition or member, so a caller acts on each rather than on the first.
    """
    out: list[tuple[str, KafkaProtocolError]] = []
    _walk(body, "", out)
    return out


def raise_for_response(body: Any) -> None:
    """Raise the first error in ``body`` (outermost first); pass when there is none."""
    errors = response_errors(body)
    if errors:
        raise errors[0][1]


def _walk(obj: Any, prefix: str, out: list[tuple[str, KafkaProtocolError]]) -> None:
    fields = getattr(type(obj), "_FIELDS", None)
    if fields is None:
        return
    nested = []
    for name in fields:
        value = getattr(obj, name)
        if name.endswith("error_code"):
            if isinstance(value, int) and value:
                message = getattr(obj, name[: -len("code")] + "message", None)
                out.append((prefix + name, error_for(value, message if isinstance(message, str) else None)))
        elif isinstance(value, list):
            nested.append((name, value))
        elif hasattr(type(value), "_FIELDS"):
            nested.append((name, [value]))
    for name, items in nested:
        single = not isinstance(getattr(obj, name), list)
        for i, item in enumerate(items):
            _walk(item, f"{prefix}{name}." if single else f"{prefix}{name}[{i}].", out)
