"""Rebootstrap on Apache Kafka (KIP-899, KIP-1102), three nodes where it matters.

Every node is known to the clients at an address of the test's (a FaultProxy in front of an
AdvertisingProxy in front of the node, the AdvertisingProxies making every Metadata and
FindCoordinator answer name those FaultProxies), and the bootstrap address is an AdvertisingProxy
in front of node 1 that does the same. Then the known brokers go away: black-holed (connections
taken, nothing answered, as a decommissioned broker left running: KIP-1102's trigger) or gone
(connections cut and refused); the bootstrap name still answers, now with the nodes' own
addresses. The producer, the group consumer and the admin go on by themselves; under
``metadata_recovery_strategy="none"`` they stay cut off, which shows the test can fail.

REBOOTSTRAP_REQUIRED (error 129, Metadata v13+) is what a gateway in front of a cluster answers
when its clients must start again from the bootstrap servers; Kafka itself has no call to send it,
so the AdvertisingProxy puts it into the real broker's Metadata answers.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakes.advertising_proxy import AdvertisingProxy

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.devbroker import KafkaCluster
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.errors import KafkaConnectionError, KafkaError, KafkaProtocolError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

TRIGGER_MS = 10_000
OPTIONS: dict[str, Any] = {
    "request_timeout_ms": 3_000,
    "connect_timeout_ms": 3_000,
    "retry_backoff_max_ms": 500,
    "metadata_recovery_rebootstrap_trigger_ms": TRIGGER_MS,
}
PARTITIONS = 3


@dataclass
class Fronted:
    """A cluster as its clients see it: ``bootstrap`` (the name that still answers), ``known``
    (node id -> the FaultProxy the clients know that node at), ``inner`` (the AdvertisingProxies
    behind those)."""

    bootstrap: AdvertisingProxy
    known: dict[int, FaultProxy]
    inner: list[AdvertisingProxy]

    def served(self) -> int:
        """Metadata and FindCoordinator answers that came through the known brokers."""
        return sum(proxy.rewritten for proxy in self.inner)

    def move(self, how: str) -> None:
        """The known brokers go away (``"stalled"`` or ``"gone"``); the bootstrap name answers
        with the nodes' own addresses."""
        for proxy in self.known.values():
            if how == "stalled":
                proxy.stall(3_600)
            else:
                proxy.refuse(3_600)
                proxy.reset_all()
        self.bootstrap.advertise = None


@contextlib.contextmanager
def fronted(cluster: KafkaCluster) -> Iterator[Fronted]:
    with contextlib.ExitStack() as stack:
        inner: list[AdvertisingProxy] = []
        known: dict[int, FaultProxy] = {}
        for node in cluster.nodes:
            proxy = stack.enter_context(AdvertisingProxy("127.0.0.1", node.port))
            inner.append(proxy)
            known[node.node_id] = FaultProxy("127.0.0.1", proxy.port).start()
            stack.callback(known[node.node_id].close)
        bootstrap = stack.enter_context(AdvertisingProxy("127.0.0.1", cluster.nodes[0].port))
        addresses = {node_id: ("127.0.0.1", proxy.port) for node_id, proxy in known.items()}
        for proxy in (bootstrap, *inner):
            proxy.advertise = addresses
        yield Fronted(bootstrap, known, inner)


def make_topic(cluster: KafkaCluster) -> str:
    topic = f"rebootstrap-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin(cluster.bootstrap, api_timeout_ms=30_000) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, len(cluster.nodes))])[topic].result()
    return topic


def read(consumer: KafkaConsumer, want: set[bytes], seconds: float) -> set[bytes]:
    """Poll until ``want`` came; a poll saying the consumer is cut off (its known brokers answer
    nothing for request_timeout_ms) is retriable, as documented: polled on."""
    got: set[bytes] = set()
    deadline = time.monotonic() + seconds
    while not want <= got and time.monotonic() < deadline:
        try:
            got |= {m.value for m in consumer.poll(timeout_ms=500) if m.value is not None}
        except KafkaConnectionError as exc:
            print(f"poll: {exc}")
    return got


def send_each(producer: KafkaProducer, topic: str, tag: str, seconds: float) -> set[bytes]:
    values = {f"{tag}-{p}".encode() for p in range(PARTITIONS)}
    futures = [producer.send(topic, f"{tag}-{p}".encode(), partition=p) for p in range(PARTITIONS)]
    for future in futures:
        future.result(seconds)
    return values


@pytest.mark.parametrize("how", ["stalled", "gone"])
def test_three_nodes_clients_go_on_when_their_known_brokers_go_away(
    kafka_three: KafkaCluster, how: str
) -> None:
    topic = make_topic(kafka_three)
    with fronted(kafka_three) as cluster:
        address = cluster.bootstrap.address
        producer = KafkaProducer(address, linger_ms=0, delivery_timeout_ms=120_000, **OPTIONS)
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=address,
            group_id=f"rebootstrap-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=45_000,
            **OPTIONS,
        )
        admin = KafkaAdmin(address, **OPTIONS)
        try:
            before = send_each(producer, topic, "before", 60)
            assert read(consumer, before, 60) == before
            consumer.commit()
            assert topic in admin.list_topics()
            used = [node_id for node_id, proxy in cluster.known.items() if proxy.connections > 0]
            assert len(used) >= 2, used  # the clients work through the known brokers, several nodes
            assert cluster.bootstrap.rewritten > 0

            cluster.move(how)
            moved = time.monotonic()
            served = cluster.served()
            after = send_each(producer, topic, "after", TRIGGER_MS / 1000 + 60)
            produced_in = time.monotonic() - moved
            assert read(consumer, after, TRIGGER_MS / 1000 + 60) == after
            consumed_in = time.monotonic() - moved
            consumer.commit()
            assert topic in admin.list_topics(timeout_ms=TRIGGER_MS + 60_000)
            admin_in = time.monotonic() - moved
            assert cluster.served() == served  # nothing came through the known brokers since
            print(
                f"{how}: produced in {produced_in:.1f}s, consumed in {consumed_in:.1f}s, "
                f"admin in {admin_in:.1f}s (trigger {TRIGGER_MS / 1000:.0f}s)"
            )
        finally:
            consumer.close()
            producer.close()
            admin.close()


def test_three_nodes_with_recovery_none_the_clients_stay_cut_off(kafka_three: KafkaCluster) -> None:
    """The control: the same move, and clients that never go back to the bootstrap servers time
    out (so the test above fails on a client that does not rebootstrap)."""
    topic = make_topic(kafka_three)
    none = {**OPTIONS, "metadata_recovery_strategy": "none"}
    with fronted(kafka_three) as cluster:
        address = cluster.bootstrap.address
        with (
            KafkaProducer(
                address, linger_ms=0, delivery_timeout_ms=2 * TRIGGER_MS + 5_000, **none
            ) as producer,
            KafkaAdmin(address, **none) as admin,
        ):
            send_each(producer, topic, "before", 60)
            assert topic in admin.list_topics()
            cluster.move("stalled")
            served = cluster.served()
            failed = producer.send(topic, b"after", partition=0).exception(2 * TRIGGER_MS / 1000 + 60)
            assert isinstance(failed, KafkaError), failed
            with pytest.raises(KafkaError):
                admin.list_topics(timeout_ms=2 * TRIGGER_MS)
            assert cluster.served() == served


def test_rebootstrap_required_from_a_gateway_sends_the_clients_to_the_bootstrap_servers(
    real_kafka: KafkaCluster,
) -> None:
    """The known brokers keep working but answer Metadata with REBOOTSTRAP_REQUIRED: the clients
    go back to the bootstrap servers at once (the KIP-1102 clock set far out, 300 s, so it is not
    what moved them), and under "none" the admin raises the error by name."""
    topic, other = make_topic(real_kafka), make_topic(real_kafka)
    patient = {**OPTIONS, "metadata_recovery_rebootstrap_trigger_ms": 300_000}
    with fronted(real_kafka) as cluster:
        address = cluster.bootstrap.address
        with (
            KafkaProducer(address, linger_ms=0, delivery_timeout_ms=120_000, **patient) as producer,
            KafkaAdmin(address, **patient) as admin,
            KafkaAdmin(address, **{**patient, "metadata_recovery_strategy": "none"}) as admin_none,
        ):
            send_each(producer, topic, "before", 60)
            assert topic in admin.list_topics() and topic in admin_none.list_topics()

            for proxy in cluster.inner:
                proxy.rebootstrap_required = True
            cluster.bootstrap.advertise = None
            served = cluster.served()
            assert other in admin.list_topics(timeout_ms=30_000)
            assert cluster.served() > served  # it was answered REBOOTSTRAP_REQUIRED, then moved
            with pytest.raises(KafkaProtocolError) as refused:
                admin_none.list_topics(timeout_ms=30_000)
            assert refused.value.name == "REBOOTSTRAP_REQUIRED"

            # The producer asks about a topic new to it, is answered 129 and goes to the
            # bootstrap servers; then its old brokers are black-holed and it does not notice.
            send_each(producer, other, "asked", 30)
            for proxy in cluster.known.values():
                proxy.stall(3_600)
            send_each(producer, topic, "after", 30)
