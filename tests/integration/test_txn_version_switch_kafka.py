"""The transaction protocol (KIP-890 part 2) follows Apache Kafka's finalized ``transaction.version``
between transactions without a restart (the ``real_kafka`` fixture): lowered to 1 by UpdateFeatures
(what ``kafka-features.sh downgrade`` sends), the producer's next transaction is v1; raised to 2
again, the next one is v2 (after an epoch bump); read_committed sees every committed transaction
whole. The level is put back to 2 whatever happens. ``FEATURE_REFRESH_S`` is 0 here so that the
change is read at the very next transaction's end."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from fakes.topics import wait_writable
from test_transactions import by_partition, expected_values, read_topic, send_tagged, txn_producer

from kafka_core.client import KafkaClient
from kafka_core.devbroker import KafkaCluster
from kafka_core.producer import KafkaProducer
from kafka_core.producer.transactions import version as txn_version
from kafka_core.protocol.messages import UpdateFeaturesRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

FEATURE = txn_version.TRANSACTION_VERSION_FEATURE
UPGRADE, SAFE_DOWNGRADE = 1, 2  # UpdateFeatures v1+ upgrade_type


async def _set_level(bootstrap: str, level: int) -> None:
    """Finalize ``transaction.version`` at ``level``, then wait until every broker answers it."""
    async with KafkaClient(bootstrap) as client:
        node = await client.any_node()
        update = UpdateFeaturesRequest.FeatureUpdateKey(
            feature=FEATURE, max_version_level=level, upgrade_type=UPGRADE if level >= 2 else SAFE_DOWNGRADE
        )
        resp = await client.send(
            node, UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=[update], validate_only=False)
        )
        codes = [resp.error_code] + [r.error_code for r in resp.results or ()]
        assert not any(codes), f"UpdateFeatures {FEATURE}={level}: {resp.error_code} {resp.error_message}"
        nodes = [b.node_id for b in (await client.metadata([])).brokers]
        deadline = time.monotonic() + 60
        while True:  # the brokers learn it from the metadata log: wait, never assume
            levels = [
                (await txn_version.finalized_features(client, n, 10_000))[1].get(FEATURE, 0) for n in nodes
            ]
            if all(lv == level for lv in levels):
                return
            assert time.monotonic() < deadline, f"brokers still answer {FEATURE} {levels}, not {level}"
            await asyncio.sleep(0.1)


@pytest.fixture
def kafka(real_kafka: KafkaCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[KafkaCluster]:
    monkeypatch.setattr(txn_version, "FEATURE_REFRESH_S", 0.0)
    try:
        yield real_kafka
    finally:
        asyncio.run(_set_level(real_kafka.bootstrap, 2))


def _commit(p: KafkaProducer, topic: str, tag: str) -> int:
    """One committed transaction of 4 records; the protocol it ran under."""
    p.begin_transaction()
    version = p.transaction_version
    futures = send_tagged(p, topic, tag, 4, 1)
    p.flush(30)
    assert all(f.exception() is None for f in futures)
    p.commit_transaction(30)
    return version


def _adds(p: KafkaProducer) -> int:
    per_node = p.metrics()["network"]["requests"].get("ADD_PARTITIONS_TO_TXN", {})
    return sum(int(n["count"]) for n in per_node.values())


@pytest.mark.needs_kafka("4.0", "transactions v2 (transaction.version finalized at 2)")
def test_a_downgrade_and_an_upgrade_take_effect_at_the_next_transaction(kafka: KafkaCluster) -> None:
    topic = f"txswitch-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(topic, 1)
    wait_writable(kafka.bootstrap, topic, 1)
    with txn_producer(kafka.bootstrap) as p:
        p.init_transactions(30)
        assert p.transaction_version == 2
        asyncio.run(_set_level(kafka.bootstrap, 1))
        assert _commit(p, topic, "a") == 2  # decided before the downgrade: ends as it began
        assert p.transaction_version == 1  # the next one
        adds = _adds(p)
        assert _commit(p, topic, "b") == 1
        assert _adds(p) > adds  # v1 adds the partition first
        asyncio.run(_set_level(kafka.bootstrap, 2))
        assert _commit(p, topic, "c") == 1
        assert p.transaction_version == 2
        epoch = p.producer_id_and_epoch[1]
        adds = _adds(p)
        assert _commit(p, topic, "d") == 2
        assert _adds(p) == adds  # v2: the Produce adds it
        assert p.producer_id_and_epoch[1] == epoch + 1  # EndTxn v5 bumped it
    committed = read_topic(kafka.bootstrap, topic, 1, committed=True, expected=16)
    assert by_partition(committed) == expected_values([("a", 4), ("b", 4), ("c", 4), ("d", 4)], 1)
