"""KIP-714 on Apache Kafka: what kafka_core pushes arrives at the broker, under the subscription's
filter, with the names KIP-714 gives and the values the client's own ``metrics()`` shows; and
librdkafka's pushes (confluent-kafka) to the same broker have the same shape.

Kafka takes PushTelemetry only with a metrics reporter that receives client telemetry: the test
starts its own one-node Kafka with one (kafka_core.devtools.brokers.kafka_telemetry: a receiver
compiled against the broker's jars with javac, loaded with ``metric.reporters``), which writes
each push to a file read here.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakes.share_kafka import share_setup
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prerequisites import need_module, unavailable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, KafkaShareConsumer
from kafka_core.admin.results import ClientQuotaEntity
from kafka_core.aio import KafkaProducer as AsyncProducer
from kafka_core.devbroker import KAFKA_VERSION, KafkaCluster
from kafka_core.devtools.brokers.common import BrokerStartError
from kafka_core.devtools.brokers.kafka_telemetry import PushLine, TelemetryKafka

DELTA = 1  # opentelemetry's AggregationTemporality
INTERVAL_MS = 300
PRODUCER_ID = "kc-telemetry-producer"
CONSUMER_ID = "kc-telemetry-consumer"
RDKAFKA_ID = "rdkafka-telemetry-producer"
SHARE_ID = "kc-telemetry-share"
THROTTLED_ID = "kc-telemetry-throttled"
UNMATCHED_ID = "kc-telemetry-unsubscribed"
ADMIN_ID = "kc-telemetry-admin"


@dataclass
class Push:
    instance_id: str
    terminating: bool
    content_type: str
    client_id: str
    data: MetricsData

    @classmethod
    def of(cls, line: PushLine) -> Push:
        return cls(
            line.instance_id,
            line.terminating,
            line.content_type,
            line.client_id,
            MetricsData.FromString(line.data),
        )

    def metrics(self) -> dict[str, Any]:
        return {m.name: m for rm in self.data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}

    def resource(self) -> dict[str, str]:
        return {
            kv.key: kv.value.string_value
            for rm in self.data.resource_metrics
            for kv in rm.resource.attributes
        }


@dataclass
class Broker:
    kafka: TelemetryKafka

    @property
    def cluster(self) -> KafkaCluster:
        assert self.kafka.cluster is not None
        return self.kafka.cluster

    def pushes(self, client_id: str) -> list[Push]:
        return [Push.of(line) for line in self.kafka.pushes(client_id)]

    def wait_pushes(self, client_id: str, count: int, timeout: float = 60.0) -> list[Push]:
        return [Push.of(line) for line in self.kafka.wait_pushes(client_id, count, timeout)]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    kafka = TelemetryKafka()
    try:
        kafka.start()
    except BrokerStartError as exc:
        kafka.close()
        unavailable(f"Apache Kafka {KAFKA_VERSION} with a telemetry receiver (javac, the broker's jars)", exc)
    try:
        kafka.subscribe(
            {
                # the producer is asked for two groups of metrics only: the filter is checked
                "kc-producer": (
                    "org.apache.kafka.producer.record.send,org.apache.kafka.producer.node.request.latency",
                    f"client_id={PRODUCER_ID}",
                ),
                "kc-consumer": ("org.apache.kafka.consumer.", f"client_id={CONSUMER_ID}"),
                "rdkafka": ("*", f"client_id={RDKAFKA_ID}"),
                "kc-share": ("org.apache.kafka.consumer.", f"client_id={SHARE_ID}"),
                "kc-throttled": ("org.apache.kafka.producer.produce.throttle", f"client_id={THROTTLED_ID}"),
                "kc-admin": ("org.apache.kafka.admin.client.", f"client_id={ADMIN_ID}"),
            },
            INTERVAL_MS,
        )
        yield Broker(kafka)
    finally:
        kafka.close()


def poll_records(consumer: Any, n: int, timeout: float = 60.0) -> int:
    """Poll until ``n`` records came (or ``timeout``): how many came."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        got += len(consumer.poll(500))
    return got


def kafka_uuid(u: uuid.UUID) -> str:
    """A client instance id as Kafka's Uuid.toString() writes it (URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def value(metric: Any) -> float:
    (point,) = metric.sum.data_points if metric.WhichOneof("data") == "sum" else metric.gauge.data_points
    return point.as_int if point.WhichOneof("value") == "as_int" else point.as_double


def attribute_keys(metric: Any) -> set[str]:
    points = metric.sum.data_points if metric.WhichOneof("data") == "sum" else metric.gauge.data_points
    return {kv.key for p in points for kv in p.attributes}


def test_producer_pushes_the_subscribed_metrics_with_its_own_values(broker: Broker) -> None:
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"

    async def produce() -> tuple[dict[str, Any], dict[str, Any], uuid.UUID]:
        # the asyncio face: its metrics() still answers after close, with the last push counted
        producer = AsyncProducer(broker.cluster.bootstrap, client_id=PRODUCER_ID, linger_ms=1)
        try:
            await producer.start()
            instance = await producer.client_instance_id(30)
            for i in range(25):
                await producer.send(topic, f"v{i}".encode())
            await producer.flush(30)
            await asyncio.to_thread(broker.wait_pushes, PRODUCER_ID, 2)
            before_close = producer.metrics()
        finally:
            await producer.close(30)
        return before_close, producer.metrics(), instance

    before_close, after_close, instance = asyncio.run(produce())
    pushes = broker.pushes(PRODUCER_ID)
    assert pushes[-1].terminating and not any(p.terminating for p in pushes[:-1])
    # one client instance id, from the broker, the one client_instance_id() returned
    assert {p.instance_id for p in pushes} == {kafka_uuid(instance)}
    last = pushes[-1].metrics()
    # the filter: record.send* and node.request.latency* only, the rest of what the producer has is not sent
    assert set(last) == {
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.producer.node.request.latency.max",
    }
    assert before_close["producer"]["records_sent"] == after_close["producer"]["records_sent"] == 25
    # Kafka asks for delta temporality: each push counts what was sent since the one before, the
    # pushes' windows follow one another, and together they count every record metrics() counts
    name = "org.apache.kafka.producer.record.send.total"
    sums = [p.metrics()[name].sum for p in pushes]
    assert all(s.is_monotonic and s.aggregation_temporality == DELTA for s in sums)
    assert sum(s.data_points[0].as_int for s in sums) == 25
    for earlier, later in itertools.pairwise(sums):
        assert later.data_points[0].start_time_unix_nano == earlier.data_points[0].time_unix_nano
    (node_point,) = last["org.apache.kafka.producer.node.request.latency.max"].gauge.data_points
    assert {kv.key: kv.value.string_value for kv in node_point.attributes} == {"node_id": "1"}
    produce_max = max(s["latency_max_s"] for s in before_close["network"]["requests"]["PRODUCE"].values())
    all_max = max(
        s["latency_max_s"]
        for per_node in after_close["network"]["requests"].values()
        for n, s in per_node.items()
        if n == 1
    )
    assert produce_max * 1000 <= node_point.as_double <= all_max * 1000
    # the pushes themselves are requests the client counts
    assert after_close["network"]["requests"]["PUSH_TELEMETRY"][1]["count"] == len(pushes)


def test_consumer_pushes_its_metrics(broker: Broker) -> None:
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    with KafkaProducer(broker.cluster.bootstrap, client_id=UNMATCHED_ID, linger_ms=1) as producer:
        for i in range(30):
            producer.send(topic, f"v{i}".encode())
        producer.flush(30)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.cluster.bootstrap,
        client_id=CONSUMER_ID,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
    )
    try:
        assert poll_records(consumer, 30) == 30
        consumer.commit()  # one OffsetCommit at least: coordinator.commit.latency
        instance = consumer.client_instance_id(30)
        broker.wait_pushes(CONSUMER_ID, 1)
        snap = consumer.metrics()
    finally:
        consumer.close(30)
    pushes = broker.pushes(CONSUMER_ID)
    assert pushes[-1].terminating
    assert {p.instance_id for p in pushes} == {kafka_uuid(instance)}
    last = pushes[-1].metrics()
    assert all(name.startswith("org.apache.kafka.consumer.") for name in last)
    pushed = {name for p in pushes for name in p.metrics()}
    # KIP-714's standard consumer metrics, all of them
    for name in (
        "connection.creation.rate",
        "connection.creation.total",
        "node.request.latency.avg",
        "node.request.latency.max",
        "poll.idle.ratio.avg",
        "coordinator.commit.latency.avg",
        "coordinator.commit.latency.max",
        "fetch.manager.fetch.latency.avg",
        "fetch.manager.fetch.latency.max",
    ):
        assert "org.apache.kafka.consumer." + name in pushed, name
    commit_max = max(s["latency_max_s"] for s in snap["network"]["requests"]["OFFSET_COMMIT"].values())
    assert value(last["org.apache.kafka.consumer.coordinator.commit.latency.max"]) >= commit_max * 1000
    idle = "org.apache.kafka.consumer.poll.idle.ratio.avg"
    assert all(0 <= value(p.metrics()[idle]) <= 1 for p in pushes if idle in p.metrics())
    rebalances = "org.apache.kafka.consumer.coordinator.rebalance.total"
    assert sum(value(p.metrics()[rebalances]) for p in pushes) == snap["consumer"]["rebalances"] >= 1
    assert pushes[-1].resource() == {"group_id": f"g-{topic}"}
    # a client no subscription matches pushes nothing
    assert broker.pushes(UNMATCHED_ID) == []


def test_librdkafka_pushes_the_same_shape(broker: Broker) -> None:
    confluent_kafka = need_module("confluent_kafka")
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.cluster.bootstrap, "client.id": RDKAFKA_ID}
    )
    for i in range(10):
        producer.produce(topic, f"v{i}".encode())
    producer.flush(30)
    broker.wait_pushes(RDKAFKA_ID, 1)
    ours = KafkaProducer(broker.cluster.bootstrap, client_id=PRODUCER_ID, linger_ms=1)
    try:
        ours.send(topic, b"x")
        ours.flush(30)
        seen = len(broker.pushes(PRODUCER_ID))
        broker.wait_pushes(PRODUCER_ID, seen + 1)
    finally:
        ours.close(10)
    theirs = broker.pushes(RDKAFKA_ID)[0]
    mine = broker.pushes(PRODUCER_ID)[-1]
    print("librdkafka:", sorted(theirs.metrics()), theirs.resource(), theirs.content_type)
    print("kafka_core:", sorted(mine.metrics()), mine.resource(), mine.content_type)
    for push in (theirs, mine):
        assert len(push.data.resource_metrics) == 1 and len(push.data.resource_metrics[0].scope_metrics) == 1
    shared = set(theirs.metrics()) & set(mine.metrics())
    assert "org.apache.kafka.producer.node.request.latency.avg" in shared
    for name in shared:
        a, b = theirs.metrics()[name], mine.metrics()[name]
        assert a.WhichOneof("data") == b.WhichOneof("data"), name
        # the same attributes; librdkafka spells the node's "node.id", the Java client (and kafka_core,
        # following it) "node_id", the snake_case KIP-714 makes of the Java tag "node-id"
        assert {k.replace(".", "_") for k in attribute_keys(a)} == attribute_keys(b), name
    producer.flush(1)


def test_share_consumer_pushes_under_the_consumer_names(broker: Broker) -> None:
    topic, group = share_setup(broker.cluster, 10, prefix="telemetry-share")
    consumer = KafkaShareConsumer(
        topic, bootstrap_servers=broker.cluster.bootstrap, group_id=group, client_id=SHARE_ID
    )
    try:
        assert poll_records(consumer, 10) == 10
        instance = consumer.client_instance_id(30)
        broker.wait_pushes(SHARE_ID, 1)
        snap = consumer.metrics()
    finally:
        consumer.close(30)
    pushes = broker.pushes(SHARE_ID)
    assert pushes[-1].terminating and {p.instance_id for p in pushes} == {kafka_uuid(instance)}
    last = pushes[-1].metrics()
    assert "org.apache.kafka.consumer.connection.creation.total" in last
    assert all(name.startswith("org.apache.kafka.consumer.") for name in last)
    assert value(last["org.apache.kafka.consumer.connection.creation.total"]) >= 0
    assert snap["network"]["requests"]["PUSH_TELEMETRY"]
    assert pushes[-1].resource() == {"group_id": group}


def test_admin_pushes_under_the_admin_client_names(broker: Broker) -> None:
    # Java's admin pushes too, its metrics named by their group (admin-client-metrics)
    with KafkaAdmin(broker.cluster.bootstrap, client_id=ADMIN_ID) as admin:
        admin.list_topics()
        instance = admin.client_instance_id(30)
        broker.wait_pushes(ADMIN_ID, 1)
        snap = admin.metrics()
    pushes = broker.pushes(ADMIN_ID)
    assert pushes[-1].terminating and {p.instance_id for p in pushes} == {kafka_uuid(instance)}
    last = pushes[-1].metrics()
    assert "org.apache.kafka.admin.client.connection.creation.total" in last
    assert all(name.startswith("org.apache.kafka.admin.client.") for name in last)
    created = sum(
        value(p.metrics()["org.apache.kafka.admin.client.connection.creation.total"]) for p in pushes
    )
    assert created >= 1  # the admin's own connection to the broker, at least
    assert snap["network"]["requests"]["PUSH_TELEMETRY"]


def test_a_throttled_producer_pushes_the_throttle_time_the_broker_gave(broker: Broker) -> None:
    """produce.throttle.time.*: each response's throttle_time_ms (KIP-219), here from a byte-rate
    quota the producer exceeds."""
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    entity = ClientQuotaEntity.of({"client-id": THROTTLED_ID})
    with KafkaAdmin(broker.cluster.bootstrap) as admin:
        for result in admin.alter_client_quotas({entity: {"producer_byte_rate": 1024.0}}).values():
            result.result()

    def throttled(snap: dict[str, Any]) -> int:
        return max(s["throttle_time_max_ms"] for s in snap["network"]["requests"]["PRODUCE"].values())

    producer = KafkaProducer(broker.cluster.bootstrap, client_id=THROTTLED_ID, linger_ms=1)
    try:
        # one Produce each, over the quota (Kafka's rate is over its ~10 s window) from the third
        # on; the quota reaches the broker shortly after the alter: sent until a response says so
        for _ in range(30):
            producer.send(topic, b"x" * 4096).result(60)
            snap = producer.metrics()
            if throttled(snap):
                break
        seen = len(broker.pushes(THROTTLED_ID))
        broker.wait_pushes(THROTTLED_ID, seen + 1)
    finally:
        producer.close(30)
        with KafkaAdmin(broker.cluster.bootstrap) as admin:
            for result in admin.alter_client_quotas({entity: {"producer_byte_rate": None}}).values():
                result.result()
    produce = snap["network"]["requests"]["PRODUCE"]
    most = max(s["throttle_time_max_ms"] for s in produce.values())
    assert most > 0 and sum(s["throttle_time_sum_ms"] for s in produce.values()) >= most
    pushes = broker.pushes(THROTTLED_ID)
    assert set(pushes[-1].metrics()) <= {
        "org.apache.kafka.producer.produce.throttle.time.avg",
        "org.apache.kafka.producer.produce.throttle.time.max",
    }
    maxima = [value(p.metrics()["org.apache.kafka.producer.produce.throttle.time.max"]) for p in pushes]
    assert max(maxima) >= most  # later responses may be throttled more, never less than seen
