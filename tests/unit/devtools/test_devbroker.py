"""The S3 emulator behind the persistent test broker: it comes up with its bucket and goes away.
An Apache Kafka without Java fails to start with the error the test set-up reads as a missing
prerequisite (tests/prerequisites.py), naming what to install."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kafka_core.devbroker import BrokerStartError, KafkaCluster, S3Emulator, TansuBroker
from kafka_core.devtools.brokers.common import free_ports, port_open

pytestmark = pytest.mark.timeout(60)


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_emulator_serves_its_bucket_until_stopped() -> None:
    with S3Emulator(bucket="chaos") as s3:
        assert s3.running
        assert status(f"{s3.endpoint}/chaos") == 200
        assert status(f"{s3.endpoint}/other") == 404
        assert s3.storage_url == "s3://chaos/"
        assert s3.tansu_env["AWS_ENDPOINT"] == s3.endpoint
        assert s3.tansu_env["AWS_ALLOW_HTTP"] == "true"
        port = s3.port
    assert not s3.running
    assert not port_open("127.0.0.1", port)


def test_emulator_that_cannot_bind_raises_a_typed_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        s3 = S3Emulator(taken.getsockname()[1], startup_timeout=20)
        with pytest.raises(BrokerStartError, match="moto_server"):
            s3.start()
        assert not s3.running
        s3.close()


def test_persistent_broker_owns_its_emulator() -> None:
    broker = TansuBroker.persistent()
    try:
        assert broker.s3 is not None and broker.s3.running
        assert broker.storage == "s3://tansu/"
        assert broker.env is not None and broker.env["AWS_ENDPOINT"] == broker.s3.endpoint
        s3 = broker.s3
    finally:
        broker.close()
    assert not s3.running and broker.s3 is None


def test_kafka_without_java_is_a_broker_start_error_naming_java(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no java, no mvn: cached jars or not, no start
    cluster = KafkaCluster(1)
    try:
        with pytest.raises(BrokerStartError, match="`java` on PATH"):
            cluster.start()
    finally:
        cluster.close()


def test_free_ports_are_distinct_and_free() -> None:
    ports = free_ports(64)
    assert len(set(ports)) == 64
    for port in ports:  # each can still be bound once the picking is over
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_clusters_listeners_never_share_a_port(tmp_path: Path) -> None:
    """Kafka refuses two listeners on one port (CI: PLAINTEXT and SSL both got 42063 when each
    port was picked and released on its own)."""
    cluster = KafkaCluster(3, workdir=tmp_path)
    try:
        ports = [port for node in cluster.nodes for port in node.ports.values()]
        assert len(ports) == len(set(ports)) >= 15
    finally:
        cluster.close()
