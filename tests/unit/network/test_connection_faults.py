"""Connections against misbehaving in-test brokers on loopback: every fault fails clearly, nothing hangs.

The fake broker speaks ApiVersions and Metadata through kafka_core.protocol and misbehaves when a
Metadata request names a topic ``fault-<mode>``, so one server can serve healthy and faulty calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fakes.loopback_broker import LoopbackBroker
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.errors import (
    KafkaCodecError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.metrics.registry import NetworkMetrics
from kafka_core.network.connection import BrokerConnection
from kafka_core.protocol import (
    REQUEST_CLASSES,
    ApiKey,
    Response,
    encode_response,
)
from kafka_core.protocol.messages import (
    ApiVersionsResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitResponse,
    ProduceRequest,
    ProduceResponse,
)

pytestmark = pytest.mark.timeout(60)


NODE_ID = 7
SUPPORTED = (
    ApiKey.METADATA,
    ApiKey.PRODUCE,
    ApiKey.FIND_COORDINATOR,
    ApiKey.OFFSET_COMMIT,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.LIST_OFFSETS,
)


class FakeBroker(LoopbackBroker):
    """A loopback server answering ApiVersions and Metadata, with injectable faults."""

    def __init__(self, *, api_versions_max: int = 4, hold_until: int = 0, rejection: str = "kafka") -> None:
        super().__init__()
        self.api_versions_max = api_versions_max
        # How a too-new ApiVersions request is refused: "kafka" (a v0 body), "librdkafka-mock" (the
        # mock cluster's 17-byte body, valid in no version) or "bare" (the error code alone).
        self.rejection = rejection
        self.rejection_code = 35
        self.hold_until = hold_until  # answer nothing until this many Metadata requests arrived
        self.api_versions_seen: list[int] = []
        self.metadata_seen = 0
        # Error codes to answer, in turn, per API key (then success); requests seen per API key.
        self.script: dict[int, list[int]] = {}
        self.seen: dict[int, int] = {}
        self.ranges: dict[int, tuple[int, int]] = {}  # advertised version ranges overriding the defaults
        self.cold_rounds = 0  # Metadata answers in which "cold-*" topics have no leader yet
        self.throttle_ms: list[int] = []  # throttle_time_ms of the next Metadata answers, in turn
        self.metadata_times: list[float] = []  # when each Metadata request arrived (loop time)
        self._held: list[tuple[asyncio.StreamWriter, bytes]] = []

    def connection(self, **kwargs: Any) -> BrokerConnection:
        kwargs.setdefault("connect_timeout_ms", 5000)
        kwargs.setdefault("request_timeout_ms", 5000)
        return BrokerConnection("127.0.0.1", self.port, node_id=NODE_ID, **kwargs)

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        h = req.header
        if h.api_key == ApiKey.API_VERSIONS:
            self.api_versions_seen.append(h.api_version)
            return self._api_versions(h, writer)
        self.seen[h.api_key] = self.seen.get(h.api_key, 0) + 1
        if h.api_key != ApiKey.METADATA:
            return self._scripted(req, writer)
        self.metadata_seen += 1
        self.metadata_times.append(asyncio.get_running_loop().time())
        names = [t.name for t in (req.body.topics or [])]
        fault = next((n[len("fault-") :] for n in names if n and n.startswith("fault-")), None)
        frame = self._metadata_frame(h.api_version, h.correlation_id, names)
        if fault == "silent":
            return True
        if fault == "close-mid-response":
            writer.write(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
            await writer.drain()
            return False
        if fault == "oversize":
            writer.write(struct.pack(">i", 1 << 30) + frame)
        elif fault == "negative-size":
            writer.write(struct.pack(">i", -5))
        elif fault == "garbled":
            garbage = frame[:4] + bytes([0xFF]) * (len(frame) - 4)
            writer.write(struct.pack(">i", len(garbage)) + garbage)
        elif fault and fault.startswith("random-"):
            # Seeded junk: a plausible size prefix and correlation id over random bytes, or pure noise.
            rng = random.Random(int(fault[len("random-") :]))
            junk = rng.randbytes(rng.randrange(0, 300))
            if rng.random() < 0.7:
                junk = struct.pack(">i", h.correlation_id) + junk
                if rng.random() < 0.8:
                    junk = struct.pack(">i", len(junk)) + junk
            writer.write(junk)
            await writer.drain()
            return False  # and hang up, as a crashing broker would
        elif fault == "wrong-correlation":
            bad = struct.pack(">i", h.correlation_id + 1000) + frame[4:]
            writer.write(struct.pack(">i", len(bad)) + bad)
        elif self.hold_until:
            self._held.append((writer, frame))
            if len(self._held) >= self.hold_until:
                for w, f in self._held:
                    w.write(struct.pack(">i", len(f)) + f)
                self._held.clear()
        else:
            writer.write(struct.pack(">i", len(frame)) + frame)
        await writer.drain()
        return True

    def _api_versions(self, h: Any, writer: asyncio.StreamWriter) -> bool:
        keys = [
            ApiVersionsResponse.ApiVersion(
                api_key=k,
                min_version=self.ranges.get(k, (0, 0))[0],
                max_version=self.ranges.get(k, (0, REQUEST_CLASSES[k].MAX_VERSION))[1],
            )
            for k in SUPPORTED
        ]
        keys.append(
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=self.api_versions_max)
        )
        if h.api_version > self.api_versions_max and self.rejection != "kafka":
            # Error 35, then (mock) a one-byte count 1 that is no valid compact length, the
            # ApiVersions range 0-max without tagged fields, and throttle_time_ms 0.
            tail = b""
            if self.rejection == "librdkafka-mock":
                tail = b"\x01" + struct.pack(">hhh", 18, 0, self.api_versions_max) + b"\x00" * 4
            frame = struct.pack(">ih", h.correlation_id, self.rejection_code) + tail
        elif h.api_version > self.api_versions_max:
            # What Kafka does: a v0 body with UNSUPPORTED_VERSION, listing what it supports.
            body = ApiVersionsResponse(error_code=35, api_keys=keys)
            frame = encode_response(Response(18, 0, h.correlation_id, body))
        else:
            body = ApiVersionsResponse(error_code=0, api_keys=keys)
            frame = encode_response(Response(18, h.api_version, h.correlation_id, body))
        writer.write(struct.pack(">i", len(frame)) + frame)
        return True

    def _error(self, api_key: int) -> int:
        queue = self.script.get(api_key)
        return queue.pop(0) if queue else 0

    def _scripted(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        h, body = req.header, req.body
        err = self._error(h.api_key)
        if h.api_key == ApiKey.PRODUCE:
            if body.acks == 0:
                return True  # acks=0: the broker never answers
            resp: Any = ProduceResponse(responses=[])
        elif h.api_key == ApiKey.FIND_COORDINATOR:
            c = FindCoordinatorResponse.Coordinator(
                key=body.coordinator_keys[0],
                node_id=NODE_ID,
                host="127.0.0.1",
                port=self.port,
                error_code=err,
            )
            resp = FindCoordinatorResponse(coordinators=[c])
        elif h.api_key == ApiKey.OFFSET_COMMIT:
            resp = OffsetCommitResponse(
                topics=[
                    OffsetCommitResponse.OffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            OffsetCommitResponse.OffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=err
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ]
            )
        elif h.api_key == ApiKey.INIT_PRODUCER_ID:
            resp = InitProducerIdResponse(error_code=err, producer_id=42 if not err else -1, producer_epoch=0)
        elif h.api_key == ApiKey.LIST_OFFSETS:
            resp = ListOffsetsResponse(
                topics=[
                    ListOffsetsResponse.ListOffsetsTopicResponse(
                        name=t.name,
                        partitions=[
                            ListOffsetsResponse.ListOffsetsPartitionResponse(
                                partition_index=p.partition_index, error_code=err, offset=100, timestamp=-1
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ]
            )
        else:
            raise AssertionError(f"fake broker got unexpected API {h.api_key}")
        frame = encode_response(Response(h.api_key, h.api_version, h.correlation_id, resp))
        writer.write(struct.pack(">i", len(frame)) + frame)
        return True

    def _metadata_frame(self, version: int, correlation_id: int, names: list[str | None]) -> bytes:
        broker = MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=self.port)
        cold = self.cold_rounds > 0 and any(n and n.startswith("cold-") for n in names)
        if cold:
            self.cold_rounds -= 1
        topics = [
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=n,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=5 if cold else 0,
                        partition_index=0,
                        leader_id=-1 if cold else NODE_ID,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                    )
                ],
            )
            for n in names
        ]
        body = MetadataResponse(
            throttle_time_ms=self.throttle_ms.pop(0) if self.throttle_ms else 0,
            brokers=[broker],
            cluster_id="fake",
            controller_id=NODE_ID,
            topics=topics,
        )
        return encode_response(Response(ApiKey.METADATA, version, correlation_id, body))


@contextlib.asynccontextmanager
async def connected(broker: FakeBroker, **kwargs: Any) -> AsyncIterator[BrokerConnection]:
    conn = broker.connection(**kwargs)
    await conn.connect()
    try:
        yield conn
    finally:
        await conn.close()


def meta(*names: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names])


@aio
async def test_healthy_round_trip_uses_negotiated_version() -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        resp = await conn.send(meta("a"))
        assert [t.name for t in resp.topics] == ["a"]
        assert conn.negotiated_versions()[ApiKey.METADATA] == MetadataRequest.MAX_VERSION
        assert broker.api_versions_seen == [4]


@pytest.mark.parametrize("broker_max", [0, 2])
@aio
async def test_api_versions_falls_back_when_rejected(broker_max: int) -> None:
    async with FakeBroker(api_versions_max=broker_max) as broker, connected(broker) as conn:
        assert broker.api_versions_seen == [4, broker_max]
        assert conn.api_versions_used == broker_max
        assert (await conn.send(meta("x"))).topics[0].name == "x"


def test_librdkafka_mock_rejection_is_the_documented_17_bytes() -> None:
    # The body seen from librdkafka's mock cluster (shared notes), byte for byte.
    body = bytes.fromhex("0000000700230100120000000200000000")
    assert len(body) == 17
    tail = b"\x01" + struct.pack(">hhh", 18, 0, 2) + b"\x00" * 4
    assert struct.pack(">ih", 7, 35) + tail == body


@pytest.mark.parametrize(("rejection", "retry_at"), [("librdkafka-mock", 2), ("bare", 0)])
@aio
async def test_api_versions_retries_lower_after_an_undecodable_rejection(
    rejection: str, retry_at: int
) -> None:
    # librdkafka's mock answers v3/v4 with error 35 in a body no version decodes: read the error
    # code, take the ApiVersions range when it can be found (else v0), retry on the same socket.
    async with FakeBroker(api_versions_max=2, rejection=rejection) as broker, connected(broker) as conn:
        assert broker.api_versions_seen == [4, retry_at]
        assert broker.connections == 1
        assert conn.api_versions_used == retry_at
        assert (await conn.send(meta("x"))).topics[0].name == "x"


@aio
async def test_a_broker_refusing_even_v0_is_unsupported_not_garbled() -> None:
    async with FakeBroker(api_versions_max=-1, rejection="bare") as broker:
        conn = broker.connection()
        with pytest.raises(KafkaUnsupportedVersionError, match="refused ApiVersions down to v0"):
            await conn.connect()
        assert broker.api_versions_seen == [4, 0]


@aio
async def test_undecodable_api_versions_with_another_error_is_still_garbled() -> None:
    # Leniency is for UNSUPPORTED_VERSION only: any other undecodable answer is a codec error.
    async with FakeBroker(api_versions_max=2, rejection="bare") as broker:
        broker.rejection_code = 0
        conn = broker.connection()
        with pytest.raises(KafkaError, match="garbled API_VERSIONS v4"):
            await conn.connect()
        assert conn.failed and broker.api_versions_seen == [4]


@aio
async def test_pipelined_requests_are_matched_in_order() -> None:
    # The broker answers only once all 5 requests are in flight: without pipelining this times out.
    async with FakeBroker(hold_until=5) as broker, connected(broker) as conn:
        results = await asyncio.gather(*(conn.send(meta(f"t{i}")) for i in range(5)))
        assert [r.topics[0].name for r in results] == [f"t{i}" for i in range(5)]
        assert conn.connected


FAULTS: list[tuple[str, type[KafkaError], str]] = [
    ("close-mid-response", KafkaConnectionError, "closed the connection"),
    ("oversize", KafkaConnectionError, "max_response_size"),
    ("negative-size", KafkaConnectionError, "response frame of -5 bytes"),
    ("garbled", KafkaProtocolError, "garbled METADATA"),
    ("wrong-correlation", KafkaConnectionError, "correlation id"),
]


@pytest.mark.parametrize(("fault", "error", "match"), FAULTS, ids=[f[0] for f in FAULTS])
@aio
async def test_fault_fails_request_and_drops_connection(
    fault: str, error: type[KafkaError], match: str
) -> None:
    async with FakeBroker() as broker, connected(broker, max_response_size=1 << 20) as conn:
        with pytest.raises(error, match=match):
            await conn.send(meta(f"fault-{fault}"))
        assert not conn.connected
        with pytest.raises(KafkaConnectionError, match="down"):
            await conn.send(meta("after"))


@aio
async def test_fault_fails_every_in_flight_request() -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        # Queue a request the broker never answers, then one that kills the stream.
        silent = asyncio.ensure_future(conn.send(meta("fault-silent")))
        await asyncio.sleep(0)
        with pytest.raises(KafkaConnectionError):
            await conn.send(meta("fault-wrong-correlation"))
        with pytest.raises(KafkaConnectionError):
            await silent
        assert conn.in_flight_count == 0


@aio
async def test_garbled_frame_error_is_typed_for_the_codec_too() -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        with pytest.raises((KafkaProtocolError, KafkaCodecError)) as info:
            await conn.send(meta("fault-garbled"))
        assert "127.0.0.1" in str(info.value)


@aio
async def test_request_timeout_drops_connection_without_hanging() -> None:
    async with FakeBroker() as broker, connected(broker, request_timeout_ms=200) as conn:
        other = asyncio.ensure_future(conn.send(meta("fault-silent"), timeout_ms=60_000))
        await asyncio.sleep(0)
        with pytest.raises(KafkaTimeoutError, match="no response"):
            await conn.send(meta("fault-silent"))
        with pytest.raises(KafkaError):
            await other
        assert not conn.connected


@aio
async def test_cancelled_caller_does_not_desync_the_stream() -> None:
    async with FakeBroker(hold_until=2) as broker, connected(broker) as conn:
        first = asyncio.ensure_future(conn.send(meta("first")))
        await asyncio.sleep(0.05)
        first.cancel()
        # The answer to "first" still arrives (held until the second request) and must be skipped.
        resp = await conn.send(meta("second"))
        assert resp.topics[0].name == "second"
        assert conn.connected


@aio
async def test_other_connections_carry_on() -> None:
    async with FakeBroker() as broker, connected(broker) as bad, connected(broker) as good:
        with pytest.raises(KafkaConnectionError):
            await bad.send(meta("fault-close-mid-response"))
        assert (await good.send(meta("fine"))).topics[0].name == "fine"


@aio
async def test_connect_refused_is_a_connection_error() -> None:
    async with FakeBroker() as broker:
        port = broker.port
    conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=2000)
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        await conn.connect()
    assert conn.failed


@aio
async def test_connect_timeout_when_broker_never_answers_api_versions() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(30)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=200)
        with pytest.raises(KafkaTimeoutError, match="timed out"):
            await conn.connect()
    finally:
        server.close()


@aio
async def test_unsupported_api_is_reported() -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        with pytest.raises(KafkaUnsupportedVersionError, match="FETCH"):
            conn.choose_version(ApiKey.FETCH)


@pytest.mark.parametrize(
    ("advertised", "expected"),
    [((0, 2), None), ((0, 3), 3), ((0, 11), 11), ((0, 999), ProduceRequest.MAX_VERSION)],
)
@aio
async def test_version_choice_respects_the_kafka4_floor(
    advertised: tuple[int, int], expected: int | None
) -> None:
    async with FakeBroker() as broker:
        broker.ranges[ApiKey.PRODUCE] = advertised
        async with connected(broker) as conn:
            if expected is None:
                # Produce below v3 is never sent, even though the broker advertises v0-2.
                with pytest.raises(KafkaUnsupportedVersionError, match="PRODUCE"):
                    conn.choose_version(ApiKey.PRODUCE)
                assert ApiKey.PRODUCE not in conn.negotiated_versions()
            else:
                assert conn.choose_version(ApiKey.PRODUCE) == expected
                assert conn.negotiated_versions()[ApiKey.PRODUCE] == expected
                assert conn.choose_version(ApiKey.PRODUCE, max_version=5) == min(5, expected)


@aio
async def test_client_rebuilds_connection_after_fault() -> None:
    async with (
        FakeBroker() as broker,
        KafkaClient(broker.bootstrap, reconnect_backoff_ms=10, retry_backoff_ms=10) as client,
    ):
        first = await client.connection(NODE_ID)
        with pytest.raises(KafkaProtocolError):
            await client.send(NODE_ID, meta("fault-garbled"))
        cluster = await client.metadata(["healthy"])
        assert cluster.topics[0].name == "healthy"
        second = await client.connection(NODE_ID)
        assert second is not first and second.connected
        assert broker.connections >= 2


@aio
async def test_client_retries_metadata_through_a_dropped_connection() -> None:
    async with (
        FakeBroker() as broker,
        KafkaClient(broker.bootstrap, retry_backoff_ms=10, reconnect_backoff_ms=10) as client,
    ):
        conn = await client.connection(NODE_ID)
        await conn.close()  # as if the broker had gone away between calls
        assert (await client.metadata(["again"])).topics[0].name == "again"


class RefusingOnce(FakeBroker):
    """Hangs up on the ApiVersions of the next ``refuse`` connections (a broker coming back)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = 0
        self.names: list[str] = []  # the topics named by each Metadata request, in turn

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        if req.header.api_key == ApiKey.API_VERSIONS and self.refuse > 0:
            self.refuse -= 1
            return False
        if req.header.api_key == ApiKey.METADATA:
            self.names.extend(t.name for t in req.body.topics or ())
        return await super().answer(req, writer)


@aio
async def test_requests_queued_behind_a_failed_connect_fail_with_it() -> None:
    """Two requests to a broker whose connection is gone: the first one's connect attempt fails,
    and the second, which waited for it, fails with it rather than connecting after the backoff
    and reaching the broker ahead of the first (a producer's pipelined batches on the librdkafka
    mock, which checks no sequences, were written out of order that way). The next request
    connects."""
    async with (
        RefusingOnce() as broker,
        KafkaClient(broker.bootstrap, reconnect_backoff_ms=20, reconnect_backoff_max_ms=20) as client,
    ):
        conn = await client.connection(NODE_ID)
        await conn.close()
        broker.refuse = 1
        first = asyncio.ensure_future(client.send(NODE_ID, meta("first")))
        second = asyncio.ensure_future(client.send(NODE_ID, meta("second")))
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert all(isinstance(r, KafkaConnectionError) for r in results), results
        assert str(results[0]) == str(results[1])
        assert "second" not in broker.names, (
            "the second request reached the broker on a connection of its own"
        )
        resp = await client.send(NODE_ID, meta("third"))
        assert resp.topics[0].name == "third"


@aio
async def test_client_bootstrap_skips_dead_servers() -> None:
    async with FakeBroker() as dead:
        dead_port = dead.port
    async with FakeBroker() as broker:
        client = KafkaClient([f"127.0.0.1:{dead_port}", broker.bootstrap], connect_timeout_ms=2000)
        async with client:
            assert (await client.metadata(["x"])).brokers[0].node_id == NODE_ID


@aio
async def test_client_bootstrap_gives_up_with_a_clear_error() -> None:
    async with FakeBroker() as dead:
        dead_port = dead.port
    client = KafkaClient(f"127.0.0.1:{dead_port}", api_timeout_ms=300, retry_backoff_ms=20)
    with pytest.raises(KafkaTimeoutError, match="bootstrap"):
        await client.start()
    await client.close()


@aio
async def test_client_send_after_close_fails() -> None:
    from kafka_core.errors import KafkaClosedError

    async with FakeBroker() as broker:
        client = KafkaClient(broker.bootstrap)
        await client.start()
        await client.close()
        with pytest.raises(KafkaClosedError):
            await client.metadata(["x"])


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("a:1,b:2", [("a", 1), ("b", 2)]),
        (["h"], [("h", 9092)]),
        ("[::1]:9093, host:9094", [("::1", 9093), ("host", 9094)]),
    ],
)
def test_parse_bootstrap(servers: Any, expected: list[tuple[str, int]]) -> None:
    from kafka_core.client.cluster import parse_bootstrap

    assert parse_bootstrap(servers) == expected


@pytest.mark.parametrize("bad", ["", "h:notaport", "h:0", "[::1"])
def test_parse_bootstrap_rejects_bad_input(bad: str) -> None:
    from kafka_core.client.cluster import parse_bootstrap
    from kafka_core.errors import KafkaConfigError

    with pytest.raises(KafkaConfigError):
        parse_bootstrap(bad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"security_protocol": "BOGUS"},
        {"security_protocol": "SASL_PLAINTEXT"},
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "NTLM",
            "sasl_username": "u",
            "sasl_password": "p",
        },
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
        {"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"},
    ],
)
def test_config_errors(kwargs: dict[str, Any]) -> None:
    from kafka_core.errors import KafkaConfigError

    with pytest.raises(KafkaConfigError):
        KafkaClient("127.0.0.1:1", **kwargs)


def test_sync_face_runs_without_an_event_loop() -> None:
    from kafka_core.sync_client import KafkaClient as SyncClient

    async def serve(ready: Callable[[str], None], stop: asyncio.Event) -> None:
        async with FakeBroker() as broker:
            ready(broker.bootstrap)
            await stop.wait()

    # Run the fake broker on its own loop thread so that this test's thread has no loop at all.
    from kafka_core._sync import LoopThread

    server_loop = LoopThread("fake-broker")
    addr: list[str] = []
    got_addr = threading.Event()

    def ready(a: str) -> None:
        addr.append(a)
        got_addr.set()

    stop = asyncio.Event()
    fut = asyncio.run_coroutine_threadsafe(serve(ready, stop), server_loop.loop)
    try:
        assert got_addr.wait(10)
        with pytest.raises(RuntimeError):
            asyncio.get_running_loop()
        with SyncClient(addr[0]) as client:
            assert client.metadata(["s"]).topics[0].name == "s"
            assert client.negotiated_versions()[NODE_ID][ApiKey.METADATA] == MetadataRequest.MAX_VERSION
            with pytest.raises(KafkaProtocolError):
                client.send(NODE_ID, meta("fault-garbled"))
            assert client.leader_for("s", 0) == NODE_ID
        from kafka_core.errors import KafkaClosedError

        with pytest.raises(KafkaClosedError):
            client.metadata(["s"])
    finally:
        server_loop.loop.call_soon_threadsafe(stop.set)
        fut.result(timeout=10)
        server_loop.stop()


@aio
async def test_produce_acks0_expects_no_response_and_keeps_the_stream_in_sync() -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        body = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
        assert await conn.send(body) is None
        assert conn.in_flight_count == 0
        assert (await conn.send(meta("next"))).topics[0].name == "next"
        acked = await conn.send(ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]))
        assert acked is not None


def fast_client(broker: FakeBroker, **kwargs: Any) -> KafkaClient:
    kwargs.setdefault("retry_backoff_ms", 5)
    kwargs.setdefault("retry_backoff_max_ms", 20)
    return KafkaClient(broker.bootstrap, **kwargs)


@aio
async def test_find_coordinator_retries_coordinator_errors() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[ApiKey.FIND_COORDINATOR] = [14, 15, 16]
        coord = await client.find_coordinator("g")
        assert coord.node_id == NODE_ID
        assert broker.seen[ApiKey.FIND_COORDINATOR] == 4
        await client.find_coordinator("g")  # cached now
        assert broker.seen[ApiKey.FIND_COORDINATOR] == 4


@aio
async def test_commit_re_resolves_the_coordinator_on_not_coordinator() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[ApiKey.OFFSET_COMMIT] = [16, 14]
        await client.commit_offsets("g", {("t", 0): 1})
        assert broker.seen[ApiKey.OFFSET_COMMIT] == 3
        # NOT_COORDINATOR dropped the cached coordinator; the load-in-progress retry kept it.
        assert broker.seen[ApiKey.FIND_COORDINATOR] == 2


@aio
async def test_non_retriable_commit_error_is_raised_at_once() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[ApiKey.OFFSET_COMMIT] = [25]  # UNKNOWN_MEMBER_ID
        with pytest.raises(KafkaProtocolError) as info:
            await client.commit_offsets("g", {("t", 0): 1}, generation_id=3, member_id="m")
        assert info.value.name == "UNKNOWN_MEMBER_ID"
        assert broker.seen[ApiKey.OFFSET_COMMIT] == 1


@aio
async def test_init_producer_id_retries_the_transaction_coordinator() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[ApiKey.INIT_PRODUCER_ID] = [
            15,
            51,
        ]  # COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
        pid = await client.init_producer_id("txn")
        assert pid.producer_id == 42
        assert broker.seen[ApiKey.INIT_PRODUCER_ID] == 3


@pytest.mark.parametrize(
    ("api", "code", "name"),
    [
        (ApiKey.FIND_COORDINATOR, 30, "GROUP_AUTHORIZATION_FAILED"),
        (ApiKey.INIT_PRODUCER_ID, 31, "CLUSTER_AUTHORIZATION_FAILED"),
        (ApiKey.INIT_PRODUCER_ID, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    ],
)
@aio
async def test_fatal_coordinator_errors_are_raised_at_once(api: ApiKey, code: int, name: str) -> None:
    # The mock cluster cannot show this (its error answers to FindCoordinator are undecodable).
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[api] = [code]
        with pytest.raises(KafkaProtocolError) as info:
            if api == ApiKey.FIND_COORDINATOR:
                await client.find_coordinator("g")
            else:
                await client.init_producer_id(None)
        assert (info.value.code, info.value.name) == (code, name)
        assert broker.seen[api] == 1


@aio
async def test_retries_give_up_at_the_deadline() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.script[ApiKey.FIND_COORDINATOR] = [15] * 10_000
        with pytest.raises(KafkaTimeoutError, match="COORDINATOR_NOT_AVAILABLE"):
            await client.find_coordinator("g", timeout_ms=200)


@aio
async def test_leader_lookup_waits_for_a_leader() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        broker.cold_rounds = 3
        assert await client.leader_for("cold-topic", 0) == NODE_ID
        assert broker.cold_rounds == 0
        ready = await client.await_topic_ready("cold-other", 1)
        assert ready.partitions[0].leader == NODE_ID


@aio
async def test_list_offsets_refreshes_metadata_on_stale_leader() -> None:
    async with FakeBroker() as broker, fast_client(broker) as client:
        await client.leader_for("t", 0)
        before = broker.metadata_seen
        broker.script[ApiKey.LIST_OFFSETS] = [6]  # NOT_LEADER_OR_FOLLOWER
        got = await client.list_offsets({("t", 0): -1})
        assert got[("t", 0)].offset == 100
        assert broker.metadata_seen > before
        assert broker.seen[ApiKey.LIST_OFFSETS] == 2


@aio
async def test_rebootstrap_when_every_known_broker_is_gone() -> None:
    async with FakeBroker() as new_home:
        old_home = FakeBroker()
        await old_home.__aenter__()
        client = fast_client(old_home, reconnect_backoff_ms=5, reconnect_backoff_max_ms=20)
        try:
            await client.metadata(["t"])
            # The cluster moves: the old address dies and the bootstrap name now points elsewhere.
            await old_home.__aexit__(None, None, None)
            client._bootstrap = [("127.0.0.1", new_home.port)]
            cluster = await client.metadata(["t"], allow_auto_topic_creation=False)
            assert cluster.brokers[0].port == new_home.port
            assert (await client.connection(NODE_ID)).port == new_home.port
        finally:
            await client.close()


@aio
async def test_idle_connections_are_replaced_before_the_broker_reaps_them() -> None:
    async with FakeBroker() as broker, fast_client(broker, connections_max_idle_ms=50) as client:
        first = await client.connection(NODE_ID)
        await asyncio.sleep(0.1)
        second = await client.connection(NODE_ID)
        assert second is not first and not first.connected
        assert (await client.metadata(["x"])).topics[0].name == "x"


@pytest.mark.parametrize("seed", range(40))
@aio
async def test_random_junk_responses_fail_cleanly(seed: int) -> None:
    async with FakeBroker() as broker, connected(broker) as conn:
        with pytest.raises(KafkaError):
            await conn.send(meta(f"fault-random-{seed}"))
        assert not conn.connected and conn.in_flight_count == 0


@aio
async def test_a_throttled_connection_holds_back_its_next_request() -> None:
    """KIP-219: after an answer with throttle_time_ms the client sends that broker nothing until
    the time has passed (the broker has muted the channel meanwhile)."""
    async with FakeBroker() as broker:
        conn = broker.connection()
        await conn.connect()
        try:
            broker.throttle_ms = [300]
            await conn.send(MetadataRequest(topics=[]))
            answered = asyncio.get_running_loop().time()
            assert conn.throttle_time_ms_total == 300 and conn.throttled_until >= answered + 0.29
            await conn.send(MetadataRequest(topics=[]))
            assert broker.metadata_times[1] >= conn.throttled_until - 0.01  # not sent before
            await conn.send(MetadataRequest(topics=[]))  # no throttle now: sent at once
            assert conn.throttle_time_ms_total == 300
        finally:
            await conn.close()


@aio
async def test_throttle_times_are_counted_per_api_and_broker_in_the_metrics() -> None:
    """produce.throttle.time (KIP-714) comes from here: every response's throttle_time_ms."""
    metrics = NetworkMetrics()
    async with FakeBroker() as broker:
        conn = broker.connection(metrics=metrics)
        await conn.connect()
        try:
            broker.throttle_ms = [40, 0, 25]
            for _ in range(3):
                await conn.send(MetadataRequest(topics=[]))
        finally:
            await conn.close()
    stats = metrics.snapshot()["requests"]["METADATA"][NODE_ID]
    assert (stats["count"], stats["throttle_time_sum_ms"], stats["throttle_time_max_ms"]) == (3, 65, 40)
