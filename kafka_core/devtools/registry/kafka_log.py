"""The dev registry's changes kept in a Kafka topic (``_schemas``, as Confluent's registry keeps
its own), so a registry started again on the same topic comes back with the same ids, versions
and settings. One JSON event per record on a one-partition topic, written with acks=all and
flushed before the change is answered; replayed in order at start.

One writer per topic: two dev registries on one topic do not see each other's changes (there is
no leader election here).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol.errors import ErrorCode

__all__ = ["KafkaSchemaLog"]

_MARKER = "marker"


class KafkaSchemaLog:
    """``log = KafkaSchemaLog(bootstrap); store = SchemaStore(journal=log.append); log.load_into(store)``."""

    def __init__(self, bootstrap_servers: str, topic: str = "_schemas", *, timeout_s: float = 30.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.timeout_s = timeout_s
        with KafkaAdmin(bootstrap_servers=bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, 1)])  # TOPIC_ALREADY_EXISTS is fine: its own Result
            count = self._partitions(admin)
        if count != 1:
            raise ValueError(f"{topic} has {count} partitions: the registry's log needs one, for its order")
        self._producer = KafkaProducer(bootstrap_servers, acks="all")

    def _partitions(self, admin: KafkaAdmin) -> int:
        """The topic's partition count. Apache Kafka answers CreateTopics once its controller has
        the topic; the broker answering Metadata may learn of it a moment later and says
        UNKNOWN_TOPIC_OR_PARTITION until then, so that answer is asked again until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return len(admin.describe_topics([self.topic])[self.topic].result().partitions)
            except KafkaProtocolError as exc:
                if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def append(self, event: dict[str, Any]) -> None:
        """Writes ``event``; returns once the broker has it (raises if it cannot within the timeout)."""
        future = self._producer.send(self.topic, json.dumps(event).encode())
        self._producer.flush(self.timeout_s)
        future.get(self.timeout_s)

    def events(self) -> list[dict[str, Any]]:
        """Every change in the topic, in order: read up to a marker written now (the end offset of
        some brokers cannot be trusted, a record of our own can)."""
        marker = uuid.uuid4().hex
        self.append({"op": _MARKER, "id": marker})
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + self.timeout_s
        with KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            topics=[self.topic],
            group_id=None,
            auto_offset_reset="earliest",
        ) as consumer:
            while time.monotonic() < deadline:
                for record in consumer.poll(500):
                    if record.value is None:
                        continue
                    event = json.loads(bytes(record.value))
                    if event["op"] == _MARKER:
                        if event["id"] == marker:
                            return found
                        continue
                    found.append(event)
        raise TimeoutError(f"did not read {self.topic} to its end within {self.timeout_s} s")

    def close(self) -> None:
        self._producer.close()
