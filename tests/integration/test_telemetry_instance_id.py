"""client_instance_id(timeout) against the test broker, which runs no KIP-714 telemetry receiver:
Kafka then leaves GetTelemetrySubscriptions out of ApiVersions, and the call says so at once
(test_telemetry_kafka.py checks the id a broker with a receiver assigns)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_core import KafkaProducer
from kafka_core.errors import KafkaUnsupportedVersionError


def test_without_a_telemetry_receiver_the_instance_id_is_unsupported(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        producer.send(topic, b"x").result(30)
        with pytest.raises(KafkaUnsupportedVersionError, match="does not support KIP-714"):
            producer.client_instance_id(30)
