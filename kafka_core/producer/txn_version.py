"""Which transaction protocol a transactional producer speaks with its cluster (KIP-890).

Transactions v2 (KIP-890 part 2) is on when the cluster has finalized the feature
``transaction.version`` at level 2 or more (the ApiVersions answer's finalized features) and the
transaction coordinator offers the request versions that carry it: Produce v12 (partitions join
the transaction by being written to), EndTxn v5 (answers the bumped producer id and epoch) and
TxnOffsetCommit v5 (the group joins the transaction by the commit, no AddOffsetsToTxn). Anything
less (Kafka 3.9, Tansu, versions held back by ``api_version_caps``) keeps v1: AddPartitionsToTxn and
AddOffsetsToTxn, the epoch bumped only when sequence numbers were lost. Decided once, by
``init_transactions`` (as the Java client, never in the middle of a transaction).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import ApiVersionsRequest

log = logging.getLogger("kafka_core.producer")

__all__ = [
    "END_TXN_V2_VERSION",
    "PRODUCE_V1_MAX_VERSION",
    "PRODUCE_V2_VERSION",
    "TRANSACTION_VERSION_FEATURE",
    "TXN_OFFSET_COMMIT_V2_VERSION",
    "transaction_version",
]

TRANSACTION_VERSION_FEATURE = "transaction.version"
PRODUCE_V1_MAX_VERSION = 11  # a v1 transaction's Produce: v12+ asks the broker to add partitions
PRODUCE_V2_VERSION = 12
END_TXN_V2_VERSION = 5
TXN_OFFSET_COMMIT_V2_VERSION = 5
_NEEDED = {
    ApiKey.PRODUCE: PRODUCE_V2_VERSION,
    ApiKey.END_TXN: END_TXN_V2_VERSION,
    ApiKey.TXN_OFFSET_COMMIT: TXN_OFFSET_COMMIT_V2_VERSION,
}


async def finalized_level(client: Any, node: int, feature: str, timeout_ms: float) -> int:
    """The finalized level of ``feature`` as ``node`` answers ApiVersions (0: not finalized)."""
    resp = await client.send(
        node,
        ApiVersionsRequest(client_software_name="kafka-core", client_software_version="0"),
        timeout_ms=timeout_ms,
    )
    for key in getattr(resp, "finalized_features", None) or ():
        if key.name == feature:
            return int(key.max_version_level)
    return 0


async def transaction_version(client: Any, node: int, timeout_ms: float) -> int:
    """1 or 2: the transaction protocol to use with the coordinator ``node`` (see the module
    docstring). A broker that cannot tell (no finalized features, an older ApiVersions) is v1."""
    level = await finalized_level(client, node, TRANSACTION_VERSION_FEATURE, timeout_ms)
    if level < 2:
        return 1
    for key, wanted in _NEEDED.items():
        try:
            version = await client.api_version(node, key)
        except KafkaUnsupportedVersionError:
            version = -1
        if version < wanted:
            log.info(
                "transaction.version %d is finalized but %s v%d is not usable (v%d): transactions v1",
                level,
                key.name,
                wanted,
                version,
            )
            return 1
    return 2
