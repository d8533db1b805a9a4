"""Every bound holds through a TCP stall, and both sides resume by themselves when it ends.

A Tansu of this module's own advertises the port of a fault proxy (kafka_core.devtools.chaos.proxy), so
every connection a client makes goes through it. Clients make progress first; then the proxy
stalls: no byte moves either way and nothing is closed, for longer than every bound under test.
That is the case a closed port or a refused connection cannot show: a socket that looks alive
and answers nothing. Bounds are asserted with SLACK seconds of slack: they check that a timeout
was honoured, never a speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.timing import atimed, timed

from kafka_core import KafkaConsumer
from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.devbroker import BrokerStartError, TansuBroker, free_port
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.errors import KafkaError, KafkaTimeoutError
from kafka_core.producer import KafkaProducer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

PARTITIONS = 3
STALL_S = 12.0  # longer than every bound below
SLACK = 3.0
MAX_BLOCK_MS = 2_000
REQUEST_TIMEOUT_MS = 2_000
DELIVERY_TIMEOUT_MS = 7_000  # records sent as the stall starts must fail inside it
CLOSE_S = 2.0
FLUSH_S = 2.0
POLL_MS = 1_000
CONSUMER_REQUEST_TIMEOUT_MS = 5_000
FETCH_MAX_WAIT_MS = 500
CLOSE_AT_S = 8.0  # the spare consumer is closed this far into the stall
# What a request lost in the stall is failed with (the connection's own words).
STALLED = re.compile(r"got no response within|timed out after")
# ... and a Produce request, at the producer's request_timeout_ms (not the client's default 30 s).
PRODUCE_STALLED = f"PRODUCE v%d to %s got no response within {REQUEST_TIMEOUT_MS / 1000:.1f}s"

PRODUCER_OPTIONS: dict[str, Any] = {
    "acks": "all",
    "idempotent": True,
    "linger_ms": 5,
    "max_block_ms": MAX_BLOCK_MS,
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
    "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
}


@pytest.fixture(scope="module")
def stall_bed() -> Iterator[tuple[FaultProxy, TansuBroker]]:
    """A Tansu of our own behind the fault proxy, whatever broker the session uses (a broker must
    advertise the proxy's port, which an external cluster does not): never skipped."""
    port = free_port()
    proxy = FaultProxy("127.0.0.1", port).start()
    broker = TansuBroker(port, advertised_port=proxy.port)
    try:
        broker.start()
    except BrokerStartError as exc:
        proxy.close()
        pytest.fail(f"Tansu behind the fault proxy did not start: {exc}", pytrace=False)
    try:
        yield proxy, broker
    finally:
        broker.close()
        proxy.close()


@pytest.fixture
def bed(stall_bed: tuple[FaultProxy, TansuBroker]) -> Iterator[tuple[FaultProxy, TansuBroker]]:
    proxy, _ = stall_bed
    proxy.heal()  # whatever an earlier failed test left
    try:
        yield stall_bed
    finally:
        proxy.heal()


def new_topic(broker: TansuBroker) -> str:
    topic = f"stall-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, PARTITIONS)
    return topic


def start_stall(proxy: FaultProxy) -> float:
    """Stall the proxy for STALL_S; returns when (monotonic) the bytes flow again."""
    proxy.stall(STALL_S)
    return time.monotonic() + STALL_S


def sleep_until(at: float) -> None:
    time.sleep(max(0.0, at - time.monotonic()))


def assert_names_the_stall(exc: BaseException | None, proxy: FaultProxy, what: str) -> None:
    """A KafkaError whose message names the broker and the request timeout that cut it off."""
    assert isinstance(exc, KafkaError), f"{what}: {exc!r}"
    msg = str(exc)
    assert proxy.address in msg and STALLED.search(msg), f"{what} does not name the cause: {msg}"


def assert_request_timeout_named(exc: BaseException | None, proxy: FaultProxy) -> None:
    """The stalled Produce was given up at request_timeout_ms (its connection dropped, the batch
    retried): the record's failure quotes that request's timeout."""
    msg = str(exc)
    shown = re.search(r"PRODUCE v(\d+) to ", msg)
    assert shown, f"no stalled Produce request named: {msg}"
    assert PRODUCE_STALLED % (int(shown.group(1)), proxy.address) in msg, msg


def read_everything(
    bootstrap: str, topic: str, wanted: set[bytes], timeout: float = 30.0
) -> dict[bytes, int]:
    """Every value in the topic (with how often it is there), read by a fresh consumer without a
    group: until every wanted value came, then until the log has nothing more."""
    counts: dict[bytes, int] = {}
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline and quiet < 3:
            batch = consumer.poll(500)
            for m in batch:
                counts[m.value] = counts.get(m.value, 0) + 1
            quiet = quiet + 1 if not batch and wanted <= counts.keys() else 0
    finally:
        consumer.close(timeout=5)
    return counts


def check_exactly_once(bootstrap: str, topic: str, acked: set[bytes], failed: set[bytes]) -> None:
    """Every acknowledged record is in the log once; a failed one at most once (a record that
    timed out in flight may have been written: its outcome is unknown, never doubled)."""
    counts = read_everything(bootstrap, topic, acked)
    missing = acked - counts.keys()
    doubled = {v: n for v, n in counts.items() if n > 1}
    strangers = counts.keys() - acked - failed
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert not doubled, f"{len(doubled)} records written more than once, e.g. {list(doubled.items())[:5]}"
    assert not strangers, f"records nobody sent: {sorted(strangers)[:5]}"


# --- the producer -----------------------------------------------------------------------------


def values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i:05d}".encode() for i in range(n)]


def test_sync_producer_keeps_every_bound_through_a_stall(bed: tuple[FaultProxy, TansuBroker]) -> None:
    proxy, broker = bed
    topic = new_topic(broker)
    p = KafkaProducer(proxy.address, **PRODUCER_OPTIONS)
    spare = KafkaProducer(proxy.address, **PRODUCER_OPTIONS)  # closed during the stall
    acked: set[bytes] = set()
    failed: set[bytes] = set()

    def settle(futures: dict[bytes, Any], timeout: float) -> dict[bytes, BaseException | None]:
        out = {v: f.exception(timeout) for v, f in futures.items()}
        acked.update(v for v, e in out.items() if e is None)
        failed.update(v for v, e in out.items() if e is not None)
        return out

    try:
        # Progress first: metadata known, producer id held, connections open.
        # Every partition, so that each of the producer's connections (produce_concurrency
        # lanes, partitions dealt among them) is open before the stall.
        warm = {v: p.send(topic, v, partition=i % PARTITIONS) for i, v in enumerate(values("warm", 300))}
        p.flush(30)
        assert not any(settle(warm, 0).values())
        spare.send(topic, b"spare-warm").result(30)
        acked.add(b"spare-warm")
        connections_before = proxy.connections

        stall_ends = start_stall(proxy)
        early: dict[bytes, Any] = {}
        sent_at = time.monotonic()
        for v in values("early", 50):
            fut, took = timed(lambda v=v: p.send(topic, v))
            assert took < MAX_BLOCK_MS / 1000 + SLACK, f"send took {took:.1f}s during the stall"
            assert not isinstance(fut, BaseException), fut
            early[v] = fut
        out, took = timed(lambda: p.flush(FLUSH_S))
        assert took < FLUSH_S + SLACK, f"flush({FLUSH_S}) took {took:.1f}s"
        assert out is None or isinstance(out, KafkaTimeoutError), repr(out)
        assert out is None or f"{topic}[" in str(out), out  # names a partition still waiting
        spare_fut = spare.send(topic, b"spare-stalled")
        out, took = timed(lambda: spare.close(CLOSE_S))
        assert took < CLOSE_S + SLACK, f"close({CLOSE_S}) took {took:.1f}s"
        assert not isinstance(out, BaseException), repr(out)
        failed.add(b"spare-stalled")  # abandoned by close: its outcome is unknown
        assert spare_fut.done()

        # Deadlines inside the stall: each record fails by delivery_timeout_ms, saying why.
        errors = settle(early, DELIVERY_TIMEOUT_MS / 1000 + SLACK - (time.monotonic() - sent_at))
        assert time.monotonic() - sent_at < DELIVERY_TIMEOUT_MS / 1000 + SLACK
        assert time.monotonic() < stall_ends, "the stall ended before the early records settled"
        for v, exc in errors.items():
            assert isinstance(exc, KafkaTimeoutError), f"{v!r} during the stall: {exc!r}"
            assert "delivery_timeout_ms" in str(exc)
            assert_names_the_stall(exc, proxy, f"the failure of {v!r}")
            assert_request_timeout_named(exc, proxy)
        # request_timeout_ms: the stalled request was given up and the connection dropped, and
        # the producer tried again on a new one (the proxy counts connections accepted).
        assert proxy.connections > connections_before, "no new connection after a stalled request"

        # Deadlines past the stall: delivered once the bytes flow again.
        late_sent = max(time.monotonic(), stall_ends - 3.0)
        sleep_until(late_sent)
        late = {v: p.send(topic, v) for v in values("late", 50)}
        errors = settle(late, DELIVERY_TIMEOUT_MS / 1000 + SLACK)
        assert time.monotonic() - late_sent < DELIVERY_TIMEOUT_MS / 1000 + SLACK
        assert not any(errors.values()), f"late records failed: {next(e for e in errors.values() if e)!r}"

        after = {v: p.send(topic, v) for v in values("after", 300)}
        p.flush(30)
        assert not any(settle(after, 0).values())
    finally:
        p.close(10)
        spare.close(0)
    check_exactly_once(proxy.address, topic, acked, failed)


def test_async_producer_keeps_every_bound_through_a_stall(bed: tuple[FaultProxy, TansuBroker]) -> None:
    proxy, broker = bed
    topic = new_topic(broker)
    acked: set[bytes] = set()
    failed: set[bytes] = set()

    async def settle(futures: dict[bytes, Any], timeout: float) -> dict[bytes, BaseException | None]:
        async def one(fut: Any) -> BaseException | None:
            try:
                await fut
            except Exception as exc:
                return exc
            return None

        outs = await asyncio.wait_for(asyncio.gather(*(one(f) for f in futures.values())), timeout)
        out = dict(zip(futures, outs, strict=True))
        acked.update(v for v, e in out.items() if e is None)
        failed.update(v for v, e in out.items() if e is not None)
        return out

    async def main() -> None:
        p = AsyncKafkaProducer(proxy.address, **PRODUCER_OPTIONS)
        spare = AsyncKafkaProducer(proxy.address, **PRODUCER_OPTIONS)
        try:
            await p.start()
            await spare.start()
            warm = {
                v: await p.send(topic, v, partition=i % PARTITIONS) for i, v in enumerate(values("warm", 300))
            }
            await p.flush(30)
            assert not any((await settle(warm, 1)).values())
            await (await spare.send(topic, b"spare-warm"))
            acked.add(b"spare-warm")
            connections_before = proxy.connections

            stall_ends = start_stall(proxy)
            early: dict[bytes, Any] = {}
            sent_at = time.monotonic()
            for v in values("early", 50):
                fut, took = await atimed(p.send(topic, v))
                assert took < MAX_BLOCK_MS / 1000 + SLACK, f"send took {took:.1f}s during the stall"
                assert not isinstance(fut, BaseException), fut
                early[v] = fut
            out, took = await atimed(p.flush(FLUSH_S))
            assert took < FLUSH_S + SLACK, f"flush({FLUSH_S}) took {took:.1f}s"
            assert out is None or isinstance(out, KafkaTimeoutError), repr(out)
            assert out is None or f"{topic}[" in str(out), out
            spare_fut = await spare.send(topic, b"spare-stalled")
            out, took = await atimed(spare.close(CLOSE_S))
            assert took < CLOSE_S + SLACK, f"close({CLOSE_S}) took {took:.1f}s"
            assert not isinstance(out, BaseException), repr(out)
            failed.add(b"spare-stalled")
            assert spare_fut.done()

            errors = await settle(early, DELIVERY_TIMEOUT_MS / 1000 + SLACK - (time.monotonic() - sent_at))
            assert time.monotonic() < stall_ends, "the stall ended before the early records settled"
            for v, exc in errors.items():
                assert isinstance(exc, KafkaTimeoutError), f"{v!r} during the stall: {exc!r}"
                assert "delivery_timeout_ms" in str(exc)
                assert_names_the_stall(exc, proxy, f"the failure of {v!r}")
                assert_request_timeout_named(exc, proxy)
            assert proxy.connections > connections_before, "no new connection after a stalled request"

            late_sent = max(time.monotonic(), stall_ends - 3.0)
            await asyncio.sleep(max(0.0, late_sent - time.monotonic()))
            late = {v: await p.send(topic, v) for v in values("late", 50)}
            errors = await settle(late, DELIVERY_TIMEOUT_MS / 1000 + SLACK)
            assert not any(errors.values()), f"late records failed: {next(e for e in errors.values() if e)!r}"

            after = {v: await p.send(topic, v) for v in values("after", 300)}
            await p.flush(30)
            assert not any((await settle(after, 1)).values())
        finally:
            await p.close(10)
            await spare.close(0)

    asyncio.run(main())
    check_exactly_once(proxy.address, topic, acked, failed)


# --- the consumer -----------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, numbers: range) -> None:
    """Numbered records written with confluent-kafka (an independent client), all acknowledged."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in numbers:
        producer.produce(topic, b"rec-%08d" % i, on_delivery=lambda err, _msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert not errors, errors[:3]


class Reader:
    """Polls, checks that each poll returned within its timeout, tallies what came."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.seen: dict[int, int] = {}  # record number -> times delivered
        self.errors: list[KafkaError] = []

    def poll(self) -> None:
        messages, took = timed(lambda: self.consumer.poll(POLL_MS))
        assert took < POLL_MS / 1000 + SLACK, f"poll({POLL_MS}) took {took:.1f}s"
        if isinstance(messages, KafkaError):  # reported, and retriable: keep polling
            self.errors.append(messages)
            return
        assert not isinstance(messages, BaseException), repr(messages)
        for m in messages:
            n = int(m.value[4:])
            self.seen[n] = self.seen.get(n, 0) + 1

    def read_until(self, total: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.seen) < total and time.monotonic() < deadline:
            self.poll()
        missing = sorted(set(range(total)) - set(self.seen))
        assert not missing, (
            f"{len(missing)} of {total} records never delivered (e.g. {missing[:5]}); "
            f"errors raised by poll: {[str(e) for e in self.errors[-3:]]}"
        )


def consumer_options(group: bool) -> dict[str, Any]:
    options: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "request_timeout_ms": CONSUMER_REQUEST_TIMEOUT_MS,
        "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
    }
    if group:
        options.update(
            group_id=f"stall-{uuid.uuid4().hex[:8]}", session_timeout_ms=6_000, heartbeat_interval_ms=1_000
        )
    return options


@pytest.mark.parametrize("group", [pytest.param(False, id="no-group"), pytest.param(True, id="group")])
def test_consumer_keeps_every_bound_through_a_stall(bed: tuple[FaultProxy, TansuBroker], group: bool) -> None:
    proxy, broker = bed
    topic = new_topic(broker)
    before, after = 1_000, 1_000
    produce(proxy.address, topic, range(before))
    consumer = KafkaConsumer(topic, bootstrap_servers=proxy.address, **consumer_options(group))
    spare = KafkaConsumer(topic, bootstrap_servers=proxy.address, **consumer_options(group))
    reader, spare_reader = Reader(consumer), Reader(spare)
    try:
        reader.read_until(before, timeout=60)
        spare_reader.read_until(before, timeout=60)

        stall_began = time.monotonic()
        stall_ends = start_stall(proxy)
        first_error_at: float | None = None
        spare_closed = False
        while time.monotonic() < stall_ends:  # polling right through the stall
            reader.poll()
            if reader.errors and first_error_at is None:
                first_error_at = time.monotonic() - stall_began
            if not spare_closed and time.monotonic() - stall_began >= CLOSE_AT_S:
                out, took = timed(lambda: spare.close(timeout=CLOSE_S))
                assert took < CLOSE_S + SLACK, f"close({CLOSE_S}) took {took:.1f}s during the stall"
                assert out is None or isinstance(out, KafkaError), repr(out)
                spare_closed = True
        assert spare_closed
        # Longer than request_timeout_ms: poll said so, naming the broker and the cause, once
        # the stalled fetch timed out (request_timeout_ms + fetch_max_wait_ms), at the next poll;
        # not another request_timeout_ms later, when it would have outlasted it twice.
        assert reader.errors, "a stall longer than request_timeout_ms went by without poll reporting it"
        assert_names_the_stall(reader.errors[0], proxy, "poll's error during the stall")
        bound = (CONSUMER_REQUEST_TIMEOUT_MS + FETCH_MAX_WAIT_MS + POLL_MS) / 1000 + SLACK
        assert first_error_at is not None and first_error_at < bound, (
            f"the stall was first reported {first_error_at:.1f}s in (bound {bound:.1f}s)"
        )

        produce(proxy.address, topic, range(before, before + after))
        reader.read_until(before + after, timeout=40)
        if not group:  # positions only move on hand-over: nothing twice either
            doubled = {n: k for n, k in reader.seen.items() if k > 1}
            assert not doubled, f"{len(doubled)} records delivered twice, e.g. {list(doubled.items())[:5]}"
    finally:
        _, took = timed(lambda: consumer.close(timeout=10))
        with contextlib.suppress(KafkaError):
            spare.close(timeout=0)
    assert took < 10 + SLACK
