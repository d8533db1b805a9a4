"""Rebootstrap (KIP-899, KIP-1102): when the brokers a client knows can no longer serve it, it
goes back to its bootstrap servers, whose name is resolved again.

Two clusters (tests/fakes/moving_cluster.py) listen on the same port of two loopback addresses;
the bootstrap name ``kafka.test`` resolves to the first, then, after the first is decommissioned
(it takes connections, answers ApiVersions and nothing else), to the second: a DNS move as a
managed service makes it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.moving_cluster import MovingCluster
from fakes.timing import aio

from kafka_core import KafkaClient as BlockingClient
from kafka_core.aio import KafkaClient, KafkaProducer
from kafka_core.config import translate
from kafka_core.errors import KafkaConfigError, KafkaError
from kafka_core.protocol import ApiKey

pytestmark = pytest.mark.timeout(90)

T = "moving"
NAME = "kafka.test"
FAST: dict[str, Any] = {
    "request_timeout_ms": 400,
    "connect_timeout_ms": 400,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 200,
    "metadata_recovery_rebootstrap_trigger_ms": 1_500,
}


class Dns:
    """``kafka.test`` resolves to ``address`` (changed by the test); other names as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.address = "127.0.0.2"
        self.lookups = 0
        real = socket.getaddrinfo

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host == NAME:
                self.lookups += 1
                host = self.address
            return real(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dns]:
    yield Dns(monkeypatch)


def served(cluster: MovingCluster) -> int:
    """Requests other than ApiVersions ``cluster`` took."""
    return sum(n for (_, api), n in cluster.requests.items() if api != ApiKey.API_VERSIONS)


def test_the_options_are_checked_and_take_java_names() -> None:
    with pytest.raises(KafkaConfigError, match="metadata_recovery_strategy"):
        KafkaClient(metadata_recovery_strategy="sometimes")
    with pytest.raises(KafkaConfigError, match="metadata_recovery_rebootstrap_trigger_ms"):
        KafkaClient(metadata_recovery_rebootstrap_trigger_ms=0)
    assert translate(
        {"metadata.recovery.strategy": "NONE", "metadata.recovery.rebootstrap.trigger.ms": "5000"}, "client"
    ) == {"metadata_recovery_strategy": "none", "metadata_recovery_rebootstrap_trigger_ms": 5000.0}
    client = BlockingClient({"bootstrap.servers": "h:1", "metadata.recovery.strategy": "none"})
    client.close()


@aio
async def _two_clusters(test: Any) -> None:
    old = MovingCluster(1, host="127.0.0.2")
    async with old, MovingCluster(1, host="127.0.0.3", port=await _port_of(old), first_node=11) as new:
        await test(old, new)


async def _port_of(cluster: MovingCluster) -> int:
    """The port ``cluster`` got (the other cluster takes the same one on its own address)."""
    return cluster.ports[1]


def test_a_producer_goes_to_the_cluster_now_at_the_bootstrap_name(dns: Dns) -> None:
    async def test(old: MovingCluster, new: MovingCluster) -> None:
        bootstrap = f"{NAME}:{old.ports[1]}"
        async with KafkaProducer(bootstrap, linger_ms=0, delivery_timeout_ms=30_000, **FAST) as producer:
            await (await producer.send(T, b"old", partition=0))
            old.decommission()
            dns.address = "127.0.0.3"
            await (await producer.send(T, b"new", partition=0))
        assert old.records(0) == [b"old"]
        assert new.records(0) == [b"new"]

    _two_clusters(test)


def test_a_client_rebootstraps_after_the_trigger_time_and_forgets_the_old_brokers(dns: Dns) -> None:
    async def test(old: MovingCluster, new: MovingCluster) -> None:
        async with KafkaClient(f"{NAME}:{old.ports[1]}", api_timeout_ms=20_000, **FAST) as client:
            assert (await client.metadata([T])).topic(T).partitions[0].leader == 1  # type: ignore[union-attr]
            old.decommission()
            dns.address = "127.0.0.3"
            meta = await client.metadata([T])
            assert meta.topic(T).partitions[0].leader == 11  # type: ignore[union-attr]
            assert [b.node_id for b in client.cached_metadata().brokers] == [11]
            assert client.rebootstraps == 1
            with pytest.raises(KafkaError, match="unknown broker node id 1"):
                await client.connection(1)

    _two_clusters(test)


def test_with_strategy_none_the_client_stays_with_the_brokers_it_knows(dns: Dns) -> None:
    async def test(old: MovingCluster, new: MovingCluster) -> None:
        opts: dict[str, Any] = dict(FAST, metadata_recovery_strategy="none")
        async with KafkaClient(f"{NAME}:{old.ports[1]}", api_timeout_ms=4_000, **opts) as client:
            await client.metadata([T])
            old.decommission()
            dns.address = "127.0.0.3"
            with pytest.raises(KafkaError):
                await client.metadata([T])  # 4 s: well past the 1.5 s trigger
            assert client.rebootstraps == 0
        assert served(new) == 0

    _two_clusters(test)


def test_rebootstrap_required_sends_the_client_back_at_once(dns: Dns) -> None:
    async def test(old: MovingCluster, new: MovingCluster) -> None:
        opts: dict[str, Any] = dict(FAST, metadata_recovery_rebootstrap_trigger_ms=300_000)
        async with KafkaClient(f"{NAME}:{old.ports[1]}", **opts) as client:
            await client.metadata([T])
            old.rebootstrap_required = True
            dns.address = "127.0.0.3"
            looked_up = dns.lookups
            meta = await client.metadata([T])
            assert meta.topic(T).partitions[0].leader == 11  # type: ignore[union-attr]
            assert client.rebootstraps == 1
            assert dns.lookups > looked_up  # the name was resolved again

    _two_clusters(test)


def test_no_broker_reachable_rebootstraps_without_waiting_for_the_trigger(dns: Dns) -> None:
    async def test(old: MovingCluster, new: MovingCluster) -> None:
        opts: dict[str, Any] = dict(FAST, metadata_recovery_rebootstrap_trigger_ms=300_000)
        async with KafkaClient(f"{NAME}:{old.ports[1]}", api_timeout_ms=20_000, **opts) as client:
            await client.metadata([T])
            old.black_hole()  # not even ApiVersions: no known broker can be reached
            dns.address = "127.0.0.3"
            await asyncio.sleep(0)
            meta = await client.metadata([T])
            assert meta.topic(T).partitions[0].leader == 11  # type: ignore[union-attr]
            assert client.rebootstraps >= 1

    _two_clusters(test)
