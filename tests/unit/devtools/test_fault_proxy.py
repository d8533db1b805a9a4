"""The fault proxy with plain sockets: each fault does what the chaos harness relies on.

The upstream is a tiny Kafka-framed server of the test's own: it answers every request frame
with one response frame carrying the same correlation id (and, for a Fetch, a real record batch).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from fakes.framed_upstream import FramedUpstream, recv_exact

import kafka_core.codec as K
from kafka_core.devtools.chaos.proxy import FaultProxy, find_record_batch
from kafka_core.errors import KafkaCodecError

pytestmark = pytest.mark.timeout(60)

BATCH = bytes(
    K.encode_record_batch([(b"key-%d" % i, b"value-%03d" % i * 8) for i in range(20)], base_offset=7)
)
PRODUCE, FETCH = 0, 1


def request(api_key: int, corr: int, body: bytes = b"") -> bytes:
    head = struct.pack(">hhi", api_key, 0, corr) + b"\x00\x00" + body  # null client id
    return struct.pack(">i", len(head)) + head


def response_body(api_key: int) -> bytes:
    # A Fetch answer: a few bytes of "response" around a record batch, as in the real thing.
    return b"\x00" * 10 + struct.pack(">i", len(BATCH)) + BATCH + b"\x00\x00" if api_key == FETCH else b"ok"


class Upstream(FramedUpstream):
    """Answers every request at once (a Fetch with a real record batch)."""

    def body(self, api_key: int) -> bytes:
        return response_body(api_key)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    frame = recv_exact(sock, size)
    return struct.unpack(">i", frame[:4])[0], frame[4:]


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", upstream.port, seed=1) as p:
        yield p


def connect(proxy: FaultProxy, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def roundtrip(sock: socket.socket, api_key: int = PRODUCE, corr: int = 1) -> bytes:
    sock.sendall(request(api_key, corr))
    got_corr, body = read_response(sock)
    assert got_corr == corr
    return body


def test_forwards_both_ways_untouched(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert roundtrip(sock, PRODUCE, 1) == b"ok"
        assert roundtrip(sock, FETCH, 2) == response_body(FETCH)
    assert proxy.connections == 1


def test_reset_all_cuts_open_connections_with_an_rst(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        roundtrip(sock)
        assert proxy.reset_all() == 1
        with pytest.raises(ConnectionResetError):
            sock.sendall(request(PRODUCE, 2))
            sock.recv(1)  # an RST, not an orderly end of stream (which would return b"")
    with connect(proxy) as sock:  # new connections still work
        assert roundtrip(sock) == b"ok"


def test_refuse_turns_new_connections_away_for_the_window(proxy: FaultProxy) -> None:
    with connect(proxy) as kept:
        roundtrip(kept)  # accepted by the proxy, not just queued by the kernel
        proxy.refuse(1.0)
        with pytest.raises(ConnectionRefusedError):
            connect(proxy)
        assert roundtrip(kept) == b"ok"  # open connections are left alone
    time.sleep(1.3)
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ok"


def test_stall_stops_bytes_without_closing_then_resumes(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        roundtrip(sock)
        proxy.stall(1.5)
        started = time.monotonic()
        sock.sendall(request(PRODUCE, 2))
        sock.settimeout(0.8)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # nothing comes back, and nothing is closed
        sock.settimeout(5)
        assert read_response(sock) == (2, b"ok")
        assert time.monotonic() - started >= 1.4


def test_stall_also_holds_requests(proxy: FaultProxy, upstream: Upstream) -> None:
    with connect(proxy) as sock:
        roundtrip(sock)
        proxy.stall(1.0)
        sock.sendall(request(PRODUCE, 2))
        time.sleep(0.5)
        assert upstream.received == 1  # the second request has not reached the broker
        sock.settimeout(5)
        assert read_response(sock) == (2, b"ok")


def test_delay_holds_every_response_and_keeps_order(proxy: FaultProxy) -> None:
    proxy.delay_responses(0.7)
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(request(PRODUCE, 1) + request(PRODUCE, 2))
        assert read_response(sock)[0] == 1
        assert read_response(sock)[0] == 2
        elapsed = time.monotonic() - started
        assert 0.65 <= elapsed < 1.3  # delayed, and pipelined rather than one after the other
        proxy.delay_responses(0)
        started = time.monotonic()
        roundtrip(sock, corr=3)
        assert time.monotonic() - started < 0.5


def test_find_record_batch_by_layout_and_crc() -> None:
    frame = b"\x00" * 8 + b"\x02" * 30 + BATCH + b"\x02\x00"
    assert find_record_batch(frame) == (38, 38 + len(BATCH))
    broken = bytearray(frame)
    broken[38 + 70] ^= 1
    assert find_record_batch(broken) is None  # the checksum no longer proves it
    assert find_record_batch(b"\x00" * 200) is None


def test_corrupt_flips_a_byte_inside_a_fetch_batch_only(proxy: FaultProxy) -> None:
    proxy.corrupt_fetches(1.0, limit=1)
    with connect(proxy) as sock:
        assert roundtrip(sock, PRODUCE, 1) == b"ok"  # not a Fetch: untouched
        body = roundtrip(sock, FETCH, 2)
        clean = response_body(FETCH)
        diff = [i for i in range(len(clean)) if body[i] != clean[i]]
        assert len(body) == len(clean) and len(diff) == 1
        start = 14  # where BATCH sits in the body
        assert start + 61 <= diff[0] < start + len(BATCH)
        with pytest.raises(KafkaCodecError):
            K.decode_record_batches(body[start : start + len(BATCH)], check_crc=True)
        assert roundtrip(sock, FETCH, 3) == clean  # the limit is reached
    assert len(proxy.flips) == 1
    assert proxy.flips[0]["correlation_id"] == 2
    assert proxy.flips[0]["batch_base_offset"] == 7


def test_corruption_is_reproducible_from_the_seed() -> None:
    upstream = Upstream()
    bodies = []
    try:
        for _ in range(2):
            with FaultProxy("127.0.0.1", upstream.port, seed=42) as p:
                p.corrupt_fetches(0.5)
                with connect(p) as sock:
                    bodies.append([roundtrip(sock, FETCH, i) for i in range(12)])
    finally:
        upstream.close()
    assert bodies[0] == bodies[1]
    assert any(b != response_body(FETCH) for b in bodies[0])
    assert any(b == response_body(FETCH) for b in bodies[0])


def test_heal_ends_every_fault_at_once(proxy: FaultProxy) -> None:
    proxy.refuse(30)
    proxy.delay_responses(5)
    proxy.stall(30)
    proxy.heal()
    with connect(proxy) as sock:
        started = time.monotonic()
        assert roundtrip(sock) == b"ok"
        assert time.monotonic() - started < 1


def test_a_dead_upstream_resets_the_client() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
        dead_port = holder.getsockname()[1]
        # The proxy resets as soon as the upstream refuses: on a loaded machine that RST can come
        # before the client's own connect() has returned, and is raised there.
        with FaultProxy("127.0.0.1", dead_port) as p, pytest.raises(ConnectionResetError), connect(p) as sock:
            sock.settimeout(5)
            sock.sendall(request(PRODUCE, 1))
            sock.recv(1)


# --- the Produce capture, and what it says about a DUPLICATE_SEQUENCE_NUMBER answer ---


def produce_frame(corr: int, batches: dict[int, bytes], topic: str = "t") -> bytes:
    """A real Produce v9 request frame (size prefix included), one batch per partition."""
    from kafka_core.protocol import Request, RequestHeader, encode_request
    from kafka_core.protocol.messages import ProduceRequest

    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=b) for p, b in batches.items()
                ],
            )
        ],
    )
    frame = encode_request(Request(RequestHeader(PRODUCE, 9, corr, "test"), body))
    return struct.pack(">i", len(frame)) + frame


def produce_answer(corr: int, answers: dict[int, tuple[int, int]], topic: str = "t") -> bytes:
    from kafka_core.protocol import Response, encode_response
    from kafka_core.protocol.messages import ProduceResponse

    body = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=topic,
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(index=p, error_code=e, base_offset=o)
                    for p, (e, o) in answers.items()
                ],
            )
        ],
        throttle_time_ms=0,
    )
    frame = encode_response(Response(PRODUCE, 9, corr, body))
    return struct.pack(">i", len(frame)) + frame


def chaos_batch(numbers: list[int], sequence: int, epoch: int = 0) -> bytes:
    from kafka_core.devtools.chaos.values import record_value

    return bytes(
        K.encode_record_batch_columns(
            None,
            [record_value(n) for n in numbers],
            base_timestamp=1_700_000_000_000,
            producer_id=7,
            producer_epoch=epoch,
            base_sequence=sequence,
        )
    )


def test_capture_records_each_partitions_batch_and_its_answer() -> None:
    from kafka_core.devtools.chaos.capture import ProduceCapture

    cap = ProduceCapture()
    frame = produce_frame(5, {0: chaos_batch([10, 11, 12], 40), 2: chaos_batch([13], 3)})
    for i in range(0, len(frame), 7):  # arrives in pieces, as from a socket
        cap.from_client(1, frame[i : i + 7])
    cap.from_broker(1, produce_answer(5, {0: (0, 100), 2: (46, -1)}))
    a, b = cap.writes
    assert (a.partition, a.producer_id, a.producer_epoch, a.base_sequence, a.count) == (0, 7, 0, 40, 3)
    assert a.numbers == [10, 11, 12] and (a.error, a.base_offset) == (0, 100)
    assert (b.partition, b.base_sequence, b.numbers, b.error, b.base_offset) == (2, 3, [13], 46, -1)
    assert a.digest != b.digest


def test_capture_leaves_a_request_cut_off_unanswered() -> None:
    from kafka_core.devtools.chaos.capture import ProduceCapture

    cap = ProduceCapture()
    cap.from_client(1, produce_frame(5, {0: chaos_batch([1, 2], 0)}))
    cap.closed(1)
    cap.from_broker(1, produce_answer(5, {0: (0, 0)}))  # a stray frame: matched to nothing
    (w,) = cap.writes
    assert w.error is None and w.answered_at is None


def test_the_proxy_captures_produce_requests_when_asked(upstream: Upstream) -> None:
    with FaultProxy("127.0.0.1", upstream.port, capture=True) as prox:
        sock = connect(prox)
        with sock:
            sock.sendall(produce_frame(9, {1: chaos_batch([5, 6], 2)}))
            read_response(sock)
        assert prox.capture is not None
        (w,) = prox.capture.writes
        assert (w.partition, w.base_sequence, w.numbers) == (1, 2, [5, 6])
    with FaultProxy("127.0.0.1", upstream.port) as prox:
        assert prox.capture is None  # off unless asked: no cost


def _writes(*sent: tuple[list[int], int, int | None]) -> list:
    """(record numbers, base sequence, error or None) per request, in order, on partition 0."""
    from kafka_core.devtools.chaos.capture import ProduceCapture

    cap = ProduceCapture()
    for corr, (numbers, sequence, error) in enumerate(sent):
        cap.from_client(1, produce_frame(corr, {0: chaos_batch(numbers, sequence)}))
        if error is not None:
            cap.from_broker(1, produce_answer(corr, {0: (error, -1 if error else 500)}))
    return cap.writes


def test_a_sequence_reused_for_other_records_is_the_clients_bug() -> None:
    from kafka_core.devtools.chaos.capture import explain_duplicate

    writes = _writes(([1, 2], 10, None), ([3, 4], 10, 46))
    got = explain_duplicate(writes, "t", 0, [3, 4], in_log={1, 2})
    assert got["verdict"] == "client" and "sequence 10" in got["reason"]


def test_the_same_records_never_given_an_offset_are_the_brokers_loss() -> None:
    from kafka_core.devtools.chaos.capture import explain_duplicate

    writes = _writes(([1, 2], 10, None), ([1, 2], 10, 46), ([3, 4], 12, 0))
    got = explain_duplicate(writes, "t", 0, [1, 2], in_log={3, 4})
    assert got["verdict"] == "broker" and len(got["writes"]) == 2
    assert got["next_sequence_accepted"]["records"] == [3, 4]  # the broker took 12 as next


def test_what_the_capture_cannot_settle_stays_unexplained() -> None:
    from kafka_core.devtools.chaos.capture import explain_duplicate

    acked_before = _writes(([1, 2], 10, 0), ([1, 2], 10, 46))
    assert explain_duplicate(acked_before, "t", 0, [1, 2], set())["verdict"] == "unexplained"
    never_sent_before = _writes(([1, 2], 10, 46))
    assert explain_duplicate(never_sent_before, "t", 0, [1, 2], set())["verdict"] == "unexplained"
    in_the_log = _writes(([1, 2], 10, None), ([1, 2], 10, 46))
    assert explain_duplicate(in_the_log, "t", 0, [1, 2], {1})["verdict"] == "unexplained"
