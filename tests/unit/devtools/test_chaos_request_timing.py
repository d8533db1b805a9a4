"""The proxy's per-request timing: every API, answered, cut off, and what a request queued behind.

The upstream is a Kafka-framed server of the test's own that answers one connection's requests
in order, as Kafka does, and can hold one request's answer: the request sent behind it on the
same connection is held too, which is what the timing record must show.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from fakes.framed_upstream import FramedUpstream, recv_exact

from kafka_core.devtools.chaos.capture import RequestLog
from kafka_core.devtools.chaos.proxy import FaultProxy

pytestmark = pytest.mark.timeout(60)

HEARTBEAT, FETCH, OFFSET_COMMIT = 12, 1, 8


def request(api_key: int, version: int, corr: int) -> bytes:
    head = struct.pack(">hhi", api_key, version, corr) + b"\x00\x00"
    return struct.pack(">i", len(head)) + head


class InOrderBroker(FramedUpstream):
    """Answers each connection's requests one at a time, in order; an OffsetCommit's answer
    waits until :attr:`release` is set (as a coordinator write waits for its high watermark)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__()

    def body(self, api_key: int) -> bytes:
        if api_key == OFFSET_COMMIT:
            self.release.wait(20)
        return b"ok"

    def close(self) -> None:
        self.release.set()
        super().close()


@pytest.fixture
def broker() -> Iterator[InOrderBroker]:
    b = InOrderBroker()
    yield b
    b.close()


def read_corr(sock: socket.socket) -> int:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return int(struct.unpack(">i", recv_exact(sock, size)[:4])[0])


def test_log_records_answers_and_closes_by_connection() -> None:
    log = RequestLog()
    log.sent(1, HEARTBEAT, 4, 7)
    log.sent(1, FETCH, 16, 8)
    log.sent(2, FETCH, 16, 7)  # the same correlation id on another connection
    log.answered(1, 7)
    log.answered(1, 999)  # not ours: ignored
    log.closed(2)
    by = {(t.conn, t.correlation_id): t for t in log.requests}
    assert by[(1, 7)].answered_at is not None and by[(1, 7)].closed_at is None
    assert by[(1, 8)].answered_at is None and by[(1, 8)].closed_at is None  # still in flight
    assert by[(2, 7)].answered_at is None and by[(2, 7)].closed_at is not None
    assert (by[(1, 7)].api_key, by[(1, 7)].api_version) == (HEARTBEAT, 4)


def test_a_request_behind_a_held_one_on_its_connection_is_shown_queued_behind_it(
    broker: InOrderBroker,
) -> None:
    with FaultProxy("127.0.0.1", broker.port, timing=True) as prox:
        assert prox.requests is not None
        with (
            socket.create_connection(("127.0.0.1", prox.port), timeout=10) as a,
            socket.create_connection(("127.0.0.1", prox.port), timeout=10) as b,
        ):
            a.sendall(request(OFFSET_COMMIT, 9, 1) + request(HEARTBEAT, 4, 2) + request(FETCH, 16, 3))
            b.sendall(request(FETCH, 16, 1))
            assert read_corr(b) == 1  # another connection is served meanwhile
            broker.release.set()
            assert [read_corr(a) for _ in range(3)] == [1, 2, 3]
        timings = prox.requests.requests
        assert len(timings) == 4 and all(t.answered_at is not None for t in timings)
        fetch = next(t for t in timings if (t.api_key, t.correlation_id) == (FETCH, 3))
        behind = prox.requests.before_on_conn(fetch)
        assert [(t.api_key, t.correlation_id) for t in behind] == [(OFFSET_COMMIT, 1), (HEARTBEAT, 2)]
        other = next(t for t in timings if t.conn != fetch.conn)
        assert prox.requests.before_on_conn(other) == []
        assert fetch in prox.requests.slow(0.0)


def test_a_request_cut_off_with_its_connection_is_closed_not_answered(broker: InOrderBroker) -> None:
    with FaultProxy("127.0.0.1", broker.port, timing=True) as prox:
        assert prox.requests is not None
        with socket.create_connection(("127.0.0.1", prox.port), timeout=10) as a:
            a.sendall(request(OFFSET_COMMIT, 9, 5))
            for _ in range(200):
                if prox.requests.requests:
                    break
                threading.Event().wait(0.01)
            prox.reset_all()
        (t,) = prox.requests.requests
        assert t.answered_at is None and t.closed_at is not None
        assert t.waited() == t.closed_at - t.sent_at


def test_timing_is_off_unless_asked(broker: InOrderBroker) -> None:
    with FaultProxy("127.0.0.1", broker.port) as prox:
        assert prox.requests is None


def test_answers_of_the_apis_asked_for_are_kept_whole() -> None:
    log = RequestLog(keep={HEARTBEAT})
    log.sent(1, HEARTBEAT, 4, 7)
    log.sent(1, FETCH, 16, 8)
    answer = struct.pack(">i", 7) + b"\x00" + struct.pack(">ih", 0, 15)  # COORDINATOR_NOT_AVAILABLE
    log.answered(1, 7, struct.pack(">i", len(answer)) + answer)
    fetch_answer = struct.pack(">i", 8) + b"data"
    log.answered(1, 8, struct.pack(">i", len(fetch_answer)) + fetch_answer)
    by = {t.correlation_id: t for t in log.requests}
    assert by[7].answer == answer
    assert by[8].answer is None and by[8].answered_at is not None
