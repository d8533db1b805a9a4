"""FrameProtocol cuts Kafka's size-prefixed frames out of whatever the socket delivers: every
frame whole and in order, however the bytes are split, with large frames read in place."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.network.framing import SCRATCH, FrameProtocol, FrameSink, open_frames


class Sink(FrameSink):
    def __init__(self, stop_after: int | None = None) -> None:
        self.frames: list[bytes] = []
        self.bad_sizes: list[int] = []
        self.ended: list[tuple[Any, bool]] = []
        self.stop_after = stop_after

    def frame_received(self, frame: bytearray | bytes) -> bool:
        self.frames.append(bytes(frame))
        return self.stop_after is None or len(self.frames) < self.stop_after

    def bad_frame_size(self, size: int) -> None:
        self.bad_sizes.append(size)

    def stream_ended(self, exc: BaseException | None, mid_frame: bool) -> None:
        self.ended.append((exc, mid_frame))


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in payloads)


def feed(proto: FrameProtocol, data: bytes, chunks: list[int]) -> None:
    """Deliver data as the transport would: into get_buffer(), at most each chunk size a read."""
    pos = 0
    i = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, chunks[i % len(chunks)] if chunks else len(data))
        buf[:n] = data[pos : pos + n]
        buf.release()
        proto.buffer_updated(n)
        pos += n
        i += 1


def protocol(sink: Sink, max_frame: int = 1 << 24) -> FrameProtocol:
    async def make() -> FrameProtocol:
        return FrameProtocol(sink, max_frame)

    return asyncio.run(make())


big_st = st.builds(
    lambda n, seed: (bytes([seed]) + bytes(range(256)) * (n // 256 + 1))[:n],
    st.integers(SCRATCH - 10, 2 * SCRATCH + 10),
    st.integers(0, 255),
)
payload_st = st.binary(min_size=4, max_size=300) | big_st


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payloads=st.lists(payload_st, min_size=1, max_size=6),
    chunks=st.lists(st.integers(1, 9) | st.integers(500, 3 * SCRATCH), min_size=1, max_size=5).filter(
        lambda cs: any(c >= 500 for c in cs)
    ),
)
def test_frames_come_out_whole_however_the_bytes_are_split(payloads: list[bytes], chunks: list[int]) -> None:
    sink = Sink()
    proto = protocol(sink)
    feed(proto, framed(payloads), chunks)
    assert sink.frames == payloads
    assert sink.bad_sizes == [] and sink.ended == []


def test_byte_at_a_time() -> None:
    payloads = [b"a" * 10, b"1234", b"b" * 5000, b"cdef"]
    sink = Sink()
    feed(protocol(sink), framed(payloads), [1])
    assert sink.frames == payloads


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    big = bytes(range(256)) * 4096  # 1 MiB: read in place, not through the scratch buffer
    sink = Sink()
    proto = protocol(sink)
    data = framed([b"small", big, b"after"])
    feed(proto, data, [100, 70_000])
    assert sink.frames == [b"small", big, b"after"]
    assert len(proto._scratch) == SCRATCH  # no growth left behind


@pytest.mark.parametrize("size", [-1, 0, 3, (1 << 24) + 1])
def test_an_impossible_frame_size_stops_the_stream(size: int) -> None:
    sink = Sink()
    proto = protocol(sink)
    feed(proto, framed([b"okay"]) + size.to_bytes(4, "big", signed=True) + b"xxxx", [])
    assert sink.frames == [b"okay"] and sink.bad_sizes == [size]
    feed(proto, framed([b"ignored"]), [])
    assert sink.frames == [b"okay"]


def test_the_sink_can_stop_reading() -> None:
    sink = Sink(stop_after=1)
    proto = protocol(sink)
    feed(proto, framed([b"one!", b"two!", b"three"]), [])
    assert sink.frames == [b"one!"]


@pytest.mark.parametrize(
    "tail, mid",
    [
        (b"", False),
        (b"\x00\x00", True),
        (b"\x00\x00\x00\x09abc", True),
        (b"\x00\x10\x00\x00" + b"z" * 100, True),
    ],
)
def test_end_of_stream_says_whether_a_frame_was_cut_off(tail: bytes, mid: bool) -> None:
    sink = Sink()
    proto = protocol(sink)
    feed(proto, framed([b"whole"]) + tail, [])
    proto.connection_lost(None)
    assert sink.frames == [b"whole"]
    assert sink.ended == [(None, mid)]


def test_drain_waits_while_paused_and_fails_once_lost() -> None:
    async def scenario() -> None:
        proto = FrameProtocol(Sink(), 1 << 20)
        await proto.drain()  # not paused: returns at once
        proto.pause_writing()
        waiter = asyncio.ensure_future(proto.drain())
        await asyncio.sleep(0)
        assert not waiter.done()
        proto.resume_writing()
        await waiter
        proto.pause_writing()
        waiter = asyncio.ensure_future(proto.drain())
        await asyncio.sleep(0)
        proto.connection_lost(ConnectionResetError("reset"))
        with pytest.raises(ConnectionResetError):
            await waiter
        with pytest.raises(ConnectionResetError):
            await proto.drain()
        assert proto.closed.done()

    asyncio.run(scenario())


def test_a_write_after_the_connection_is_lost_is_dropped_and_drain_raises() -> None:
    """The peer went away: the write is dropped, drain() says so. CPython 3.12+'s selector
    transport raised TypeError from writelines here (gh-136234); 3.11's dropped the bytes."""

    async def scenario() -> None:
        async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            proto = await open_frames("127.0.0.1", port, Sink, max_frame=1 << 20)
            await asyncio.wait_for(proto.closed, 10)  # connection_lost has run
            proto.write([b"\x00\x00\x00\x01", b"x"])
            with pytest.raises(ConnectionResetError):
                await proto.drain()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def test_a_write_after_close_is_dropped() -> None:
    """Closed by us, connection_lost not yet run: CPython 3.13's transport raised TypeError."""

    async def scenario() -> None:
        async def keep(_reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(5)

        server = await asyncio.start_server(keep, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            proto = await open_frames("127.0.0.1", port, Sink, max_frame=1 << 20)
            proto.close()
            proto.write([b"\x00\x00\x00\x01", b"x"])
            await asyncio.wait_for(proto.closed, 10)
            with pytest.raises(ConnectionResetError):
                await proto.drain()
        finally:
            server.close()

    asyncio.run(scenario())
