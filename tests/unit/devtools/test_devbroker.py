"""The S3 emulator behind the persistent test broker: it comes up with its bucket and goes away.
An Apache Kafka without Java fails to start with the error the test set-up reads as a missing
prerequisite (tests/prerequisites.py), naming what to install. A port in use is refused before
a broker starts, in one line, by both entry points (exit 2)."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_core.devbroker import BrokerStartError, KafkaCluster, S3Emulator, TansuBroker
from kafka_core.devtools.brokers.common import (
    LISTENER_PORTS_FLOOR,
    PortInUseError,
    ephemeral_ports,
    free_ports,
    port_open,
    require_free_port,
)

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


def test_kafka_jit_profile_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def jit(**kwargs: str) -> str:
        cluster = KafkaCluster(1, **kwargs)
        cluster.close()
        return cluster.jit

    monkeypatch.delenv("KAFKA_CORE_DEV_JVM", raising=False)
    assert jit() == "server"  # the bench's broker: G1 and the full JIT
    monkeypatch.setenv("KAFKA_CORE_DEV_JVM", "quick")
    assert jit() == "quick"
    assert jit(jit="server") == "server"
    monkeypatch.setenv("KAFKA_CORE_DEV_JVM", "fast")
    with pytest.raises(ValueError, match=r"KAFKA_CORE_DEV_JVM.*'fast'|'fast'.*KAFKA_CORE_DEV_JVM"):
        KafkaCluster(1)


def test_free_ports_are_distinct_and_free() -> None:
    ports = free_ports(64)
    assert len(set(ports)) == 64
    for port in ports:  # each can still be bound once the picking is over
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_free_ports_are_none_the_kernel_hands_out_itself() -> None:
    """A stopped node's port must stay free until it restarts: ports of the ephemeral range can
    go to any outgoing connection meanwhile (CI: a restarted Kafka node's 'Address already in
    use'), so listeners are picked below it."""
    low, _high = ephemeral_ports()
    assert low - LISTENER_PORTS_FLOOR >= 1_000, "this machine's ephemeral range leaves no room below"
    ports = free_ports(64)
    assert all(LISTENER_PORTS_FLOOR <= port < low for port in ports), ports


def test_a_clusters_listeners_never_share_a_port(tmp_path: Path) -> None:
    """Kafka refuses two listeners on one port (CI: PLAINTEXT and SSL both got 42063 when each
    port was picked and released on its own)."""
    cluster = KafkaCluster(3, workdir=tmp_path)
    try:
        ports = [port for node in cluster.nodes for port in node.ports.values()]
        assert len(ports) == len(set(ports)) >= 15
    finally:
        cluster.close()


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else listens on, as another broker would."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_tansu_on_a_busy_port_is_refused_before_it_starts(busy_port: int) -> None:
    broker = TansuBroker(busy_port)
    with pytest.raises(PortInUseError, match=f"port {busy_port} on 127.0.0.1 is in use"):
        broker.start()
    assert not broker.running
    broker.close()


def test_a_port_left_in_time_wait_is_free(tmp_path: Path) -> None:
    """Closed connections of a stopped broker do not block its restart on the same port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = int(server.getsockname()[1])
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end of the connection waits (TIME_WAIT)
        client.close()
    require_free_port(port)


def test_devbroker_on_a_busy_port_says_so_in_one_line_and_exits_2(busy_port: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kafka_core.devbroker", str(busy_port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""  # no "listening on" for a broker that is not
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"devbroker: port {busy_port} on 127.0.0.1 is in use"), lines[0]
    assert "\x1b" not in proc.stderr


def test_kafka_core_broker_on_a_busy_port_says_so_in_one_line_and_exits_2(
    busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_core.devtools.commands import main as run_here  # what `kafka-core broker` starts

    assert run_here(["broker", "--port", str(busy_port)]) == 2
    got = capsys.readouterr()
    assert got.out == ""
    lines = got.err.strip().splitlines()
    assert len(lines) == 1, got.err
    assert f"port {busy_port} on 127.0.0.1 is in use" in lines[0] and "--port" in lines[0], lines[0]


def test_devbroker_help_is_plain_text() -> None:
    from kafka_core.devtools.brokers.__main__ import _parser

    text = _parser().format_help()
    assert "``" not in text and ":mod:" not in text and ":class:" not in text, text
    assert "--no-kerberos" in text
