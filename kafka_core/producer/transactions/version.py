"""Which transaction protocol a transactional producer speaks with its cluster (KIP-890).

Transactions v2 (KIP-890 part 2) is on when the cluster has finalized the feature
``transaction.version`` at level 2 or more (the ApiVersions answer's finalized features) and the
transaction coordinator offers the request versions that carry it: Produce v12 (partitions join
the transaction by being written to), EndTxn v5 (answers the bumped producer id and epoch) and
TxnOffsetCommit v5 (the group joins the transaction by the commit, no AddOffsetsToTxn). Anything
less (Kafka 3.9, Tansu, versions held back by ``api_version_caps``) keeps v1: AddPartitionsToTxn and
AddOffsetsToTxn, the epoch bumped only when sequence numbers were lost.

Decided by ``init_transactions``, then again between transactions (at the end of each commit or
abort, for the next one; never in the middle of one), as the Java client: an operator raising or
lowering ``transaction.version`` (kafka-features.sh), or a broker upgrade, takes effect at the
next transaction without a restart. ``VersionTracker`` keeps it: the coordinator is re-asked
(ApiVersions, one request, its failure keeping the version) at most once per
``FEATURE_REFRESH_S``, so a producer committing often pays no round trip per transaction, and an
answer of an older finalized-features epoch than one already seen (a broker behind on the
cluster's metadata) is ignored. An upgrade to v2 bumps the epoch first (epoch.py:
owed to the next transaction if that fails, never failing the commit or abort it follows).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import ApiVersionsRequest

log = logging.getLogger("kafka_core.producer")

__all__ = [
    "END_TXN_V2_VERSION",
    "FEATURE_REFRESH_S",
    "PRODUCE_V1_MAX_VERSION",
    "PRODUCE_V2_VERSION",
    "TRANSACTION_VERSION_FEATURE",
    "TXN_OFFSET_COMMIT_V2_VERSION",
    "VersionTracker",
]

TRANSACTION_VERSION_FEATURE = "transaction.version"
PRODUCE_V1_MAX_VERSION = 11  # a v1 transaction's Produce: v12+ asks the broker to add partitions
PRODUCE_V2_VERSION = 12
END_TXN_V2_VERSION = 5
TXN_OFFSET_COMMIT_V2_VERSION = 5
# Between transactions, the cluster's features are re-asked at most this often (seconds): a
# change is seen within this time, at the cost of one ApiVersions per interval.
FEATURE_REFRESH_S = 30.0
_NEEDED = {
    ApiKey.PRODUCE: PRODUCE_V2_VERSION,
    ApiKey.END_TXN: END_TXN_V2_VERSION,
    ApiKey.TXN_OFFSET_COMMIT: TXN_OFFSET_COMMIT_V2_VERSION,
}


async def finalized_features(client: Any, node: int, timeout_ms: float) -> tuple[int, dict[str, int]]:
    """``node``'s ApiVersions answer: the finalized features' epoch (-1: not told) and levels."""
    resp = await client.send(
        node,
        ApiVersionsRequest(client_software_name="kafka-core", client_software_version="0"),
        timeout_ms=timeout_ms,
    )
    levels = {key.name: int(key.max_version_level) for key in getattr(resp, "finalized_features", None) or ()}
    epoch = getattr(resp, "finalized_features_epoch", -1)
    return (epoch if isinstance(epoch, int) else -1), levels


async def version_for(client: Any, node: int, level: int) -> int:
    """1 or 2: the protocol for a finalized ``transaction.version`` ``level`` with ``node``'s
    request versions (v2 needs them all)."""
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


class VersionTracker:
    """The protocol of the current or next transaction (0 until first asked), and when and at
    which finalized-features epoch the cluster was last asked."""

    def __init__(self) -> None:
        self.version = 0
        self.features_epoch = -1
        self.asked_at: float | None = None

    def due(self) -> bool:
        """Whether the cluster should be asked again (never asked, or FEATURE_REFRESH_S passed)."""
        return self.asked_at is None or time.monotonic() - self.asked_at >= FEATURE_REFRESH_S

    async def ask(self, client: Any, node: int, timeout_ms: float) -> int:
        """Ask ``node`` (ApiVersions) and take its answer unless it is of an older features epoch
        than one already taken; the version now in force."""
        epoch, levels = await finalized_features(client, node, timeout_ms)
        self.asked_at = time.monotonic()
        if epoch >= 0 and epoch < self.features_epoch:
            log.debug("ignoring finalized features of epoch %d (have %d)", epoch, self.features_epoch)
            return self.version
        self.features_epoch = max(epoch, self.features_epoch)
        self.version = await version_for(client, node, levels.get(TRANSACTION_VERSION_FEATURE, 0))
        return self.version
