"""The driver's fail-fast check of the bootstrap addresses (no broker, no Spark session)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from prerequisites import need_module

from kafka_core.errors import KafkaConnectionError
from kafka_core.spark.reach import check_bootstrap

# Hang guards: without the check, the client's bootstrap waits 60 s before it gives up.
pytestmark = pytest.mark.timeout(30)


def closed_port() -> int:
    """A port nothing listens on (bound once to find a free one, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_address_refused_fails_naming_them() -> None:
    a, b = closed_port(), closed_port()
    with pytest.raises(KafkaConnectionError) as info:
        check_bootstrap([("127.0.0.1", a), ("127.0.0.1", b)])
    message = str(info.value)
    assert f"127.0.0.1:{a}" in message and f"127.0.0.1:{b}" in message
    assert "connection refused" in message and "kafka.bootstrap.servers" in message


def test_a_name_that_does_not_resolve_counts_as_refused() -> None:
    port = closed_port()
    with pytest.raises(KafkaConnectionError) as info:
        check_bootstrap([("no-such-broker.invalid", 9092), ("127.0.0.1", port)])
    message = str(info.value)
    assert "no-such-broker.invalid:9092: name does not resolve" in message
    assert f"127.0.0.1:{port}: connection refused" in message


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    try:
        yield s
    finally:
        s.close()


def test_one_listening_address_is_enough(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    check_bootstrap([("127.0.0.1", closed_port()), ("127.0.0.1", port)])


def test_refused_then_accepted_is_a_restart_not_a_failure() -> None:
    """A broker coming back within the window: the client gets its full timeout."""
    port = closed_port()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def start_later() -> None:
        time.sleep(0.5)
        server.bind(("127.0.0.1", port))
        server.listen(8)

    thread = threading.Thread(target=start_later)
    thread.start()
    try:
        check_bootstrap([("127.0.0.1", port)], window_s=20)  # wide: a loaded machine may be slow
    finally:
        thread.join()
        server.close()


def test_timeouts_are_not_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that does not answer (slow network, dropped packets) may be a broker: no error."""
    attempts: list[tuple[str, int]] = []

    def silent(address: tuple[str, int], timeout: float | None = None) -> socket.socket:
        attempts.append(address)
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    check_bootstrap([("10.0.0.1", 9092)])
    assert attempts == [("10.0.0.1", 9092)]


def test_batch_planning_fails_fast_when_no_address_listens() -> None:
    """The driver's planning of a read (what Spark calls for ``load().count()``)."""
    need_module("pyspark")
    from kafka_core.spark import KafkaDataSource, read_schema

    port = closed_port()
    source = KafkaDataSource({"kafka.bootstrap.servers": f"127.0.0.1:{port}", "subscribe": "orders"})
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}: connection refused"):
        source.reader(read_schema()).partitions()


def test_streaming_planning_fails_fast_when_no_address_listens() -> None:
    need_module("pyspark")
    from kafka_core.spark import KafkaDataSource, read_schema

    port = closed_port()
    source = KafkaDataSource({"kafka.bootstrap.servers": f"localhost:{port}", "subscribe": "orders"})
    reader = source.streamReader(read_schema())
    try:
        with pytest.raises(KafkaConnectionError, match=f"localhost:{port}"):
            reader.initialOffset()
    finally:
        reader.stop()
