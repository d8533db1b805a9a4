"""The test bed itself: the broker fixture gives a real, reachable Kafka-compatible broker."""

from __future__ import annotations

import socket


def test_broker_is_reachable_and_creates_topics(bootstrap_servers: str, new_topic) -> None:
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5):
        pass
    from confluent_kafka.admin import AdminClient

    name = new_topic(partitions=3)
    meta = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(topic=name, timeout=10)
    assert len(meta.topics[name].partitions) == 3
