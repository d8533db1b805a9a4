"""A malicious broker on loopback (issue 13): absurd frame lengths (negative, 2 GiB, past
``max_response_size``), wrong correlation ids, truncated frames followed by a hang-up.

Each must fail the request with a typed error at once (not a timeout, not a hang), must not make
us allocate what a forged length claims, and the client must reconnect and work afterwards.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
import tracemalloc
from typing import Any

import pytest
from fakes.loopback_broker import LoopbackBroker, frame_of
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafka_core.network import framing
from kafka_core.network.connection import BrokerConnection
from kafka_core.network.framing import FrameProtocol, FrameSink
from kafka_core.protocol import ApiKey, Response, encode_response
from kafka_core.protocol.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse

pytestmark = pytest.mark.timeout(60)

NODE = 3
INT32_MAX = (1 << 31) - 1
LIMIT = 1 << 20  # max_response_size of the connections under test


class EvilBroker(LoopbackBroker):
    """Answers ApiVersions and Metadata well, except where told to misbehave: ``faults`` is a
    list of modes taken in turn by Metadata requests for the topic ``evil`` (then healthy); ``on_connect`` makes the
    first ApiVersions answer of each of the first connections misbehave instead."""

    def __init__(self, faults: list[str] | None = None, on_connect: list[str] | None = None) -> None:
        super().__init__()
        self.faults = list(faults or [])
        self.on_connect = list(on_connect or [])
        self.produce_requests = 0
        self._connect_fault: str | None = None

    def connected(self) -> None:
        # Only a connection's first ApiVersions answer misbehaves; the client here connects one
        # connection at a time, so the newest connection's fault is the one answer() takes.
        self._connect_fault = self.on_connect.pop(0) if self.on_connect else None

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        h = req.header
        if h.api_key == ApiKey.API_VERSIONS:
            good = self._api_versions(h.api_version, h.correlation_id)
            mode, self._connect_fault = self._connect_fault, None
        elif h.api_key == ApiKey.PRODUCE:
            self.produce_requests += 1
            return True  # a black hole for records: never answered
        else:
            good = self._metadata(h.api_version, h.correlation_id, req.body)
            evil = any(t.name == "evil" for t in req.body.topics or [])
            mode = self.faults.pop(0) if self.faults and evil else None
        return await self._send(writer, mode, good, h.correlation_id)

    async def _send(self, writer: asyncio.StreamWriter, mode: str | None, good: bytes, corr: int) -> bool:
        """Write the answer ``mode`` makes of ``good``; False: hang up."""
        hang_up = True
        if mode is None:
            out, hang_up = frame_of(good), False
        elif mode == "negative":
            out = struct.pack(">i", -1) + good
        elif mode == "zero":
            out = struct.pack(">i", 0) + good
        elif mode == "2gib":
            out = struct.pack(">i", INT32_MAX) + good
        elif mode == "over-limit":
            out = struct.pack(">i", LIMIT + 1) + good
        elif mode == "wrong-correlation":
            out, hang_up = frame_of(struct.pack(">i", corr ^ 0x5A5A) + good[4:]), False
        elif mode == "stale-correlation":  # an answer to an earlier request, then the right one
            out, hang_up = frame_of(struct.pack(">i", corr - 1) + good[4:]) + frame_of(good), False
        elif mode == "truncated-body":
            out = frame_of(good)[: 4 + len(good) // 2]
        elif mode == "truncated-size":
            out = frame_of(good)[:2]
        elif mode == "short-frame":  # a whole frame too short for a correlation id
            out = frame_of(b"\x00\x01")
        elif mode == "garbled-body":
            out, hang_up = frame_of(good[:4] + random.Random(7).randbytes(len(good) - 4)), False
        else:
            raise AssertionError(mode)
        writer.write(out)
        await writer.drain()
        return not hang_up

    def _api_versions(self, version: int, corr: int) -> bytes:
        keys = [
            ApiVersionsResponse.ApiVersion(api_key=ApiKey.METADATA, min_version=0, max_version=12),
            ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=0, max_version=4),
            ApiVersionsResponse.ApiVersion(api_key=ApiKey.PRODUCE, min_version=3, max_version=9),
        ]
        v = min(version, 4)
        return encode_response(Response(ApiKey.API_VERSIONS, v, corr, ApiVersionsResponse(api_keys=keys)))

    def _metadata(self, version: int, corr: int, body: Any) -> bytes:
        broker = MetadataResponse.MetadataResponseBroker(node_id=NODE, host="127.0.0.1", port=self.port)
        topics = [
            MetadataResponse.MetadataResponseTopic(
                name=t.name,
                partitions=[MetadataResponse.MetadataResponsePartition(partition_index=0, leader_id=NODE)],
            )
            for t in body.topics or []
        ]
        resp = MetadataResponse(brokers=[broker], controller_id=NODE, topics=topics)
        return encode_response(Response(ApiKey.METADATA, version, corr, resp))


def meta(*names: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names])


FAULTS = [
    ("negative", KafkaConnectionError, "-1 bytes"),
    ("zero", KafkaConnectionError, "0 bytes"),
    ("2gib", KafkaConnectionError, f"{INT32_MAX} bytes"),
    ("over-limit", KafkaConnectionError, "max_response_size"),
    ("wrong-correlation", KafkaConnectionError, "correlation id"),
    ("stale-correlation", KafkaConnectionError, "correlation id"),
    ("truncated-body", KafkaConnectionError, "closed the connection"),
    ("truncated-size", KafkaConnectionError, "closed the connection"),
    ("short-frame", KafkaError, "127.0.0.1"),
    ("garbled-body", KafkaError, "garbled"),
]


@pytest.mark.parametrize(("mode", "error", "match"), FAULTS, ids=[f[0] for f in FAULTS])
@aio
async def test_each_fault_fails_the_request_with_a_typed_error_at_once(
    mode: str, error: type[KafkaError], match: str
) -> None:
    async with EvilBroker(faults=[mode]) as broker:
        conn = BrokerConnection("127.0.0.1", broker.port, max_response_size=LIMIT, request_timeout_ms=20_000)
        await conn.connect()
        t0 = time.monotonic()
        with pytest.raises(error, match=match) as info:
            await conn.send(meta("evil"))
        assert not isinstance(info.value, KafkaTimeoutError)
        assert time.monotonic() - t0 < 5  # detected, not waited out (request timeout is 20 s)
        assert not conn.connected
        await conn.close()


@pytest.mark.parametrize("mode", [f[0] for f in FAULTS])
@aio
async def test_the_client_reconnects_after_each_fault(mode: str) -> None:
    async with (
        EvilBroker(faults=[mode]) as broker,
        KafkaClient(
            broker.bootstrap, max_response_size=LIMIT, reconnect_backoff_ms=10, retry_backoff_ms=10
        ) as client,
    ):
        first = await client.connection(NODE)
        with pytest.raises(KafkaError) as info:
            await client.send(NODE, meta("evil"))
        assert not isinstance(info.value, KafkaTimeoutError)
        cluster = await client.metadata(["after"])
        assert [t.name for t in cluster.topics] == ["after"]
        second = await client.connection(NODE)
        assert second is not first and second.connected
        assert broker.connections >= 2


@pytest.mark.parametrize("mode", ["2gib", "negative", "truncated-body", "wrong-correlation"])
@aio
async def test_a_malicious_api_versions_answer_fails_connect_then_the_next_connect_works(mode: str) -> None:
    async with EvilBroker(on_connect=[mode]) as broker:
        conn = BrokerConnection("127.0.0.1", broker.port, max_response_size=LIMIT, connect_timeout_ms=20_000)
        t0 = time.monotonic()
        with pytest.raises(KafkaError) as info:
            await conn.connect()
        assert not isinstance(info.value, KafkaTimeoutError), info.value
        assert time.monotonic() - t0 < 5
        again = BrokerConnection("127.0.0.1", broker.port, max_response_size=LIMIT)
        await again.connect()
        assert (await again.send(meta("ok"))).topics[0].name == "ok"
        await again.close()


@aio
async def test_a_forged_length_within_a_huge_limit_allocates_only_what_arrives() -> None:
    """Even when the user allows 2 GiB responses, a frame claiming 2 GiB whose sender then hangs
    up costs what was received, not what was claimed."""
    async with EvilBroker(faults=["2gib"]) as broker:
        conn = BrokerConnection("127.0.0.1", broker.port, max_response_size=INT32_MAX)
        await conn.connect()
        tracemalloc.start()
        try:
            with pytest.raises(KafkaConnectionError, match="closed the connection"):
                await conn.send(meta("evil"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 << 20, f"{peak:,} bytes allocated for a frame that brought a few hundred"
        await conn.close()


@aio
async def test_send_blocks_then_raises_when_buffer_memory_fills_against_a_black_hole() -> None:
    """Backpressure, small: a broker that never answers Produce fills buffer_memory; then send
    waits max_block_ms and raises KafkaTimeoutError naming the cause (memory stays bounded)."""
    from kafka_core.aio import KafkaProducer

    async with EvilBroker() as broker:
        producer = KafkaProducer(
            broker.bootstrap,
            acks=1,
            buffer_memory=64 << 10,
            batch_size=8 << 10,
            linger_ms=0,
            max_block_ms=1000,
            request_timeout_ms=30_000,
            delivery_timeout_ms=60_000,
        )
        sent = 0
        with pytest.raises(KafkaTimeoutError, match="buffer_memory") as info:
            while sent < 10_000:  # 10 MB of records: far more than 64 KiB can hold
                t0 = time.monotonic()
                await producer.send("sink", b"x" * 1000)
                sent += 1
        waited = time.monotonic() - t0
        assert "max_block_ms" in str(info.value)
        assert 0.9 <= waited < 1.0 + 3  # it blocked, and no longer than max_block_ms (with slack)
        assert 10 < sent < 200  # records were taken until the 64 KiB were used up, then no more
        assert broker.produce_requests >= 1
        t0 = time.monotonic()
        await producer.close(timeout=1)
        assert time.monotonic() - t0 < 1 + 3


# ------------------------------------------------------------------------------------------
# the frame reader itself: a large frame's buffer grows with what arrives
# ------------------------------------------------------------------------------------------
class Sink(FrameSink):
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.ended: list[bool] = []

    def frame_received(self, frame: bytearray | bytes) -> bool:
        self.frames.append(bytes(frame))
        return True

    def bad_frame_size(self, size: int) -> None:
        raise AssertionError(size)

    def stream_ended(self, exc: BaseException | None, mid_frame: bool) -> None:
        self.ended.append(mid_frame)


def _protocol(sink: Sink, max_frame: int) -> FrameProtocol:
    async def make() -> FrameProtocol:
        return FrameProtocol(sink, max_frame)

    return asyncio.run(make())


def _feed(proto: FrameProtocol, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(len(buf), len(data) - pos, rng.randint(1, 300_000))
        buf[:n] = data[pos : pos + n]
        buf.release()
        proto.buffer_updated(n)
        pos += n


def test_a_2gib_claim_allocates_no_2gib() -> None:
    sink = Sink()
    proto = _protocol(sink, INT32_MAX)
    tracemalloc.start()
    try:
        _feed(proto, struct.pack(">i", INT32_MAX) + b"x" * 1000, random.Random(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20
    proto.connection_lost(None)
    assert sink.ended == [True] and sink.frames == []


@pytest.mark.parametrize("size", [100_000, 1_000_003, 3 << 20])
def test_large_frames_arrive_whole_through_a_growing_buffer(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(framing, "PREALLOC", 4096)  # grow from 4 KiB: many growth steps
    rng = random.Random(size)
    payloads = [rng.randbytes(size), b"tail", rng.randbytes(size // 3)]
    sink = Sink()
    proto = _protocol(sink, 1 << 26)
    _feed(proto, b"".join(frame_of(p) for p in payloads), rng)
    assert sink.frames == payloads
