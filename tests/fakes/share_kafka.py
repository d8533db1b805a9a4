"""Set-up that the share consumer's tests on Apache Kafka share (tests/integration/
test_share_*_kafka.py): a fresh topic with records and a share group that reads it from the
beginning, and an asyncio consumer acknowledging explicitly. One copy, so both files set up
their groups the same way."""

from __future__ import annotations

import uuid
from typing import Any

from kafka_core import KafkaAdmin, KafkaProducer
from kafka_core.admin.results import ConfigResourceType
from kafka_core.aio import KafkaShareConsumer as AsyncShareConsumer
from kafka_core.devtools.brokers.kafka import KafkaCluster


def share_setup(
    kafka: KafkaCluster, n: int, group_config: dict[str, str] | None = None, *, prefix: str = "share"
) -> tuple[str, str]:
    """A fresh topic with ``n`` records (values b"0".. b"n-1") and a share group reading it from
    the earliest offset (a share group starts at the latest by default), with ``group_config``
    on top; both named ``prefix``-t-… and ``prefix``-g-…."""
    topic, group = f"{prefix}-t-{uuid.uuid4().hex[:10]}", f"{prefix}-g-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(topic, 1)
    configs = {"share.auto.offset.reset": "earliest", **(group_config or {})}
    with KafkaAdmin(kafka.bootstrap) as admin:
        for result in admin.incremental_alter_configs({(ConfigResourceType.GROUP, group): configs}).values():
            result.result()
    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as producer:
        for i in range(n):
            producer.send(topic, value=str(i).encode())
        producer.flush()
    return topic, group


def explicit_consumer(kafka: KafkaCluster, topic: str, group: str, **options: Any) -> AsyncShareConsumer:
    """An asyncio share consumer of ``group`` on ``topic`` in explicit acknowledgement mode."""
    return AsyncShareConsumer(
        topic,
        bootstrap_servers=kafka.bootstrap,
        group_id=group,
        share_acknowledgement_mode="explicit",
        **options,
    )
