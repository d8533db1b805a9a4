"""Frames from real clients and the real broker re-encode byte for byte.

A loopback proxy sits between the peer clients (librdkafka via confluent-kafka, kafka-python,
aiokafka) and the test broker and records every frame both ways. Metadata, FindCoordinator and
DescribeCluster responses are rewritten on the way back so that clients keep talking through the
proxy; the recorded frames are the originals.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_core.protocol import (
    ApiKey,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

pytestmark = [pytest.mark.broker, pytest.mark.interop]

_SIZE = struct.Struct(">i")
_REQ_HDR = struct.Struct(">hhi")
_REWRITE = {ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER}


@dataclass
class Frame:
    kind: str  # "request" or "response"
    api_key: int
    api_version: int
    data: bytes


@dataclass
class CaptureProxy:
    """One listener per upstream broker; every connection's frames go to ``frames``."""

    frames: list[Frame] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _listeners: dict[tuple[str, int], tuple[socket.socket, int]] = field(default_factory=dict)
    _sockets: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def listen_for(self, host: str, port: int) -> int:
        with self._lock:
            if (host, port) in self._listeners:
                return self._listeners[(host, port)][1]
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", 0))
            srv.listen(16)
            local = srv.getsockname()[1]
            self._listeners[(host, port)] = (srv, local)
        threading.Thread(target=self._accept, args=(srv, host, port), daemon=True).start()
        return local

    def close(self) -> None:
        self._closed = True
        with self._lock:
            socks = [s for s, _ in self._listeners.values()] + self._sockets
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self, srv: socket.socket, host: str, port: int) -> None:
        while not self._closed:
            try:
                client, _ = srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((host, port), timeout=10)
            except OSError as exc:
                self.errors.append(f"upstream {host}:{port}: {exc}")
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            pending: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._pump, args=(client, upstream, True, pending), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False, pending), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool, pending: dict) -> None:
        buf = bytearray()
        try:
            while True:
                chunk = src.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 4:
                    (size,) = _SIZE.unpack_from(buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4 : 4 + size])
                    del buf[: 4 + size]
                    out = self._on_request(frame, pending) if requests else self._on_response(frame, pending)
                    dst.sendall(_SIZE.pack(len(out)) + out)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _on_request(self, frame: bytes, pending: dict) -> bytes:
        api_key, api_version, correlation_id = _REQ_HDR.unpack_from(frame, 0)
        pending[correlation_id] = (api_key, api_version)
        self.frames.append(Frame("request", api_key, api_version, frame))
        return frame

    def _on_response(self, frame: bytes, pending: dict) -> bytes:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        api_key, api_version = pending.pop(correlation_id, (-1, -1))
        if api_key < 0:
            self.errors.append(f"response to unknown correlation id {correlation_id}")
            return frame
        self.frames.append(Frame("response", api_key, api_version, frame))
        if api_key not in _REWRITE:
            return frame
        try:
            resp = decode_response(api_key, api_version, frame)
            self._redirect(resp)
            return encode_response(resp)
        except Exception as exc:  # the round-trip tests report it; keep the client going
            self.errors.append(f"cannot rewrite {ApiKey(api_key).name} v{api_version}: {exc!r}")
            return frame

    def _redirect(self, resp: Response) -> None:
        body: Any = resp.body
        nodes = []
        if resp.api_key == ApiKey.METADATA or resp.api_key == ApiKey.DESCRIBE_CLUSTER:
            nodes = list(body.brokers)
        elif resp.api_key == ApiKey.FIND_COORDINATOR:
            nodes = [body, *body.coordinators]
        for node in nodes:
            if node.host and node.port > 0:
                node.port = self.listen_for(node.host, node.port)
                node.host = "127.0.0.1"


# ------------------------------------------------------------------------------------------------
# peer client workloads


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _run_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    topic = _topic("cap-ck")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "cap-ck", "linger.ms": 5})
    for i in range(50):
        producer.produce(topic, key=str(i % 5).encode(), value=b"v" * i, headers=[("h", b"x")])
    assert producer.flush(30) == 0
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4"})
    for i in range(20):
        idem.produce(topic, value=b"idempotent-%d" % i)
    assert idem.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": _topic("cap-ck-g"),
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 40
    while got < 70 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    assert got == 70
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": _topic("cap-ck-txn")})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, value=b"txn-%d" % i)
    txn.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 30)
    txn.commit_transaction(30)
    consumer.close()
    admin.list_topics(timeout=10)
    admin.list_consumer_groups().result(30)
    admin.describe_cluster().result(30)
    admin.delete_topics([topic])[topic].result(30)


def _run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    topic = _topic("cap-kp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="cap-kp-admin")
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="cap-kp", linger_ms=5)
    for i in range(30):
        producer.send(topic, key=b"k%d" % (i % 3), value=b"w" * i, headers=[("h", b"y")])
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=_topic("cap-kp-g"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        consumer_timeout_ms=20000,
        fetch_max_wait_ms=100,
    )
    got = 0
    for _ in consumer:
        got += 1
        if got == 30:
            break
    assert got == 30
    consumer.commit()
    consumer.close()
    admin.list_groups()
    admin.describe_cluster()
    admin.close()


def _run_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _topic("cap-aio")

    async def work() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="cap-aio", linger_ms=5)
        await producer.start()
        try:
            for i in range(30):
                await producer.send(topic, value=b"a" * i, key=b"k", headers=[("h", b"z")])
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=_topic("cap-aio-g"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        await consumer.start()
        try:
            got = 0
            deadline = time.monotonic() + 30
            while got < 30 and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                got += sum(len(v) for v in batch.values())
            assert got == 30
            await consumer.commit()
            tp = TopicPartition(topic, next(iter(consumer.assignment())).partition)
            await consumer.end_offsets([tp])
            await consumer.offsets_for_times({tp: 0})
        finally:
            await consumer.stop()

    asyncio.run(work())


_WORKLOADS = {"confluent-kafka": _run_confluent, "kafka-python": _run_kafka_python, "aiokafka": _run_aiokafka}


@pytest.fixture(scope="module", params=sorted(_WORKLOADS))
def captured(request: pytest.FixtureRequest, bootstrap_servers: str) -> Iterator[tuple[str, CaptureProxy]]:
    host, _, port = bootstrap_servers.partition(",")[0].rpartition(":")
    proxy = CaptureProxy()
    local = proxy.listen_for(host or "127.0.0.1", int(port))
    try:
        _WORKLOADS[request.param](f"127.0.0.1:{local}")
        time.sleep(0.2)  # let the last responses land in the log
        yield request.param, proxy
    finally:
        proxy.close()


def _check(frames: list[Frame]) -> list[str]:
    bad = []
    for f in frames:
        name = f"{ApiKey(f.api_key).name} v{f.api_version} {f.kind}"
        try:
            if f.kind == "request":
                again = encode_request(decode_request(f.data))
            else:
                again = encode_response(decode_response(f.api_key, f.api_version, f.data))
        except Exception as exc:
            bad.append(f"{name}: {exc!r}")
            continue
        if again != f.data:
            bad.append(f"{name}: re-encoded {len(again)} bytes differ from the {len(f.data)} captured")
    return bad


def test_captured_frames_roundtrip(captured: tuple[str, CaptureProxy]) -> None:
    client, proxy = captured
    assert not proxy.errors, proxy.errors
    frames = proxy.frames
    keys = {f.api_key for f in frames}
    # the workload must have exercised the core client APIs, or this test proves nothing
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH} <= keys, (client, keys)
    assert {"request", "response"} == {f.kind for f in frames}
    bad = _check(frames)
    assert not bad, f"{client}: {len(bad)} of {len(frames)} frames do not round-trip:\n" + "\n".join(bad[:20])
