"""The producer against a slow, stuck or garbling broker: batches keep filling while they wait,
every record is settled by its delivery deadline, a garbled answer is retried, bad options are
named. An in-memory broker with Kafka's idempotence rules stands in for the wire (the real
broker's side is in tests/integration/test_producer_fail_fast.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker
from fakes.timing import outcomes

from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.producer.futures import RecordMetadata

SLACK = 3.0


# -- defect 1: batches keep filling while requests are slow ---------------------------------------


@pytest.mark.parametrize("idempotent", [True, False])
def test_batches_grow_while_requests_are_slow(idempotent: bool) -> None:
    """With 0.4 s per request and linger 5 ms, what waits behind a request keeps filling its
    batch: the requests after the first carry many records each, not one linger's worth."""
    broker = ProduceBroker(delay=lambda n: 0.4)

    async def main() -> list[Any]:
        async with AsyncKafkaProducer(
            client=broker,
            linger_ms=5,
            max_in_flight=1,
            idempotent=idempotent,
            acks=-1 if idempotent else 1,
            delivery_timeout_ms=30_000,
            request_timeout_ms=10_000,
        ) as p:
            futures = []
            start = time.monotonic()
            while time.monotonic() - start < 2.0:
                futures.append(await p.send("t", b"x" * 20))
                await asyncio.sleep(0.005)
            await p.flush(30)
            return await outcomes(futures, 5)

    results = asyncio.run(main())
    assert all(isinstance(r, RecordMetadata) for r in results)
    assert broker.logs[0] == [b"x" * 20] * len(results)
    sizes = [c[0] for c in broker.requests]
    # One request at a time, 0.4 s each, a record every ~5 ms: about 80 records wait per request.
    # On a loaded machine the loop sends fewer than that, so the bar is half of what the rate it
    # reached puts behind one request (at 5 ms per record, 40).
    assert len(sizes) <= 10, sizes
    assert max(sizes[1:]) >= min(30, 0.4 * len(results) / 2.0 / 2), (sizes, len(results))


def test_a_batch_fills_only_up_to_batch_size_while_it_waits() -> None:
    broker = ProduceBroker(delay=lambda n: 0.3)

    async def main() -> None:
        async with AsyncKafkaProducer(
            client=broker, linger_ms=0, max_in_flight=1, batch_size=2_000, request_timeout_ms=10_000
        ) as p:
            futures = [await p.send("t", b"y" * 100) for _ in range(200)]
            await p.flush(30)
            assert all(isinstance(r, RecordMetadata) for r in await outcomes(futures, 5))

    asyncio.run(main())
    assert sum(c[0] for c in broker.requests) == 200
    assert max(c[0] for c in broker.requests) <= 2_000 // 100


# -- defect 2: every record settled by its delivery deadline --------------------------------------


@pytest.mark.parametrize("idempotent", [True, False])
def test_records_behind_a_stuck_request_fail_at_their_deadline(idempotent: bool) -> None:
    """The broker never answers in time: queued and in-flight records alike fail with a
    KafkaTimeoutError naming the cause by delivery_timeout_ms, and flush returns by then."""
    broker = ProduceBroker(delay=lambda n: 60.0, write_late=False)

    async def main() -> tuple[list[Any], float, float]:
        p = AsyncKafkaProducer(
            client=broker,
            linger_ms=0,
            max_in_flight=1,
            idempotent=idempotent,
            acks=-1 if idempotent else 1,
            delivery_timeout_ms=2_500,
            request_timeout_ms=1_000,
            retry_backoff_ms=50,
        )
        await p.start()
        t0 = time.monotonic()
        futures = []
        for i in range(50):
            futures.append(await p.send("t", b"r%d" % i))
            await asyncio.sleep(0.01)
        await p.flush(10)
        flushed = time.monotonic() - t0
        results = await outcomes(futures, 0.1)
        settled = time.monotonic() - t0
        await p.close(5)
        return results, flushed, settled

    results, flushed, settled = asyncio.run(main())
    assert flushed < 2.5 + SLACK and settled < 2.5 + SLACK
    assert all(isinstance(r, KafkaTimeoutError) for r in results), results
    assert all("delivery_timeout_ms" in str(r) for r in results)
    assert any("timed out after 1000 ms" in str(r) for r in results), results  # the real cause


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_backlog_behind_busy_requests_settles_by_the_deadline(idempotent: bool) -> None:
    """Requests are slow (0.6 s) but never idle, and records come faster than they drain: each
    record is settled, delivered or failed, within delivery_timeout_ms of its send."""
    broker = ProduceBroker(partitions=1, delay=lambda n: 0.6)
    settled: dict[int, float] = {}

    async def main() -> tuple[list[Any], list[float]]:
        p = AsyncKafkaProducer(
            client=broker,
            linger_ms=5,
            batch_size=1_000,
            max_in_flight=5,
            idempotent=idempotent,
            acks=-1 if idempotent else 1,
            delivery_timeout_ms=1_500,
            request_timeout_ms=1_000,
        )
        await p.start()
        futures, sent_at = [], []
        start = time.monotonic()
        while time.monotonic() - start < 3.0:
            for _ in range(4):  # bursts: on a loaded machine the loop still outruns the broker
                f = await p.send("t", b"z" * 20)
                i = len(futures)
                f.add_done_callback(lambda _f, i=i: settled.setdefault(i, time.monotonic()))
                futures.append(f)
                sent_at.append(time.monotonic())
            await asyncio.sleep(0.002)  # 2,000 records/s, many times what the slow broker takes
        await p.flush(20)
        results = await outcomes(futures, 1)
        await p.close(5)
        return results, sent_at

    results, sent_at = asyncio.run(main())
    assert all(isinstance(r, RecordMetadata | KafkaTimeoutError) for r in results), results
    assert any(isinstance(r, KafkaTimeoutError) for r in results)  # the backlog really outgrew them
    late = [i for i, t in enumerate(sent_at) if settled[i] - t > 1.5 + SLACK]
    assert not late, (len(late), max(settled[i] - sent_at[i] for i in late))


def test_flush_and_close_honour_their_timeouts_behind_a_stuck_request() -> None:
    broker = ProduceBroker(delay=lambda n: 60.0, write_late=False)

    async def main() -> tuple[float, float, int]:
        p = AsyncKafkaProducer(client=broker, linger_ms=0, request_timeout_ms=30_000)
        await p.start()
        futures = [await p.send("t", b"r%d" % i) for i in range(10)]
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="flush"):
            await p.flush(1.0)
        flushed = time.monotonic() - t0
        t0 = time.monotonic()
        abandoned = await p.close(1.0)
        closed = time.monotonic() - t0
        assert all(f.done() for f in futures)
        return flushed, closed, abandoned

    flushed, closed, abandoned = asyncio.run(main())
    assert flushed < 1.0 + SLACK and closed < 1.0 + SLACK
    assert abandoned == 10


@pytest.mark.parametrize("written", [True, False])
def test_an_in_flight_batch_past_its_deadline_leaves_sequences_consistent(written: bool) -> None:
    """The first request outlives the records' deadline (the broker may or may not have written
    it): its records fail at the deadline, and what is sent afterwards is delivered exactly once,
    in order, with no sequence error left behind."""
    broker = ProduceBroker(delay=lambda n: 5.0 if n < 2 else 0.0, write_late=written)

    async def main() -> tuple[list[Any], list[Any]]:
        p = AsyncKafkaProducer(
            client=broker,
            linger_ms=0,
            delivery_timeout_ms=1_500,
            request_timeout_ms=1_200,
            retry_backoff_ms=20,
        )
        await p.start()
        t0 = time.monotonic()
        first = [await p.send("t", b"early-%d" % i) for i in range(5)]
        early = await outcomes(first, 1.5 + SLACK)
        assert time.monotonic() - t0 < 1.5 + SLACK
        await asyncio.sleep(1.5)  # the stuck request has timed out by now
        later = [await p.send("t", b"late-%d" % i) for i in range(20)]
        await p.flush(10)
        late = await outcomes(later, 1)
        await p.close(5)
        return early, late

    early, late = asyncio.run(main())
    assert all(isinstance(r, KafkaTimeoutError) for r in early), early
    assert all(isinstance(r, RecordMetadata) for r in late), late
    lates = [v for v in broker.logs[0] if v is not None and v.startswith(b"late")]
    assert lates == [b"late-%d" % i for i in range(20)]  # once each, in order
    assert all(r.offset == broker.logs[0].index(b"late-%d" % i) for i, r in enumerate(late))
    assert all(code == 0 for a in broker.answers[1:] for code in a.values()), broker.answers
    assert all("in flight" in str(r) for r in early), early  # outcome unknown, said so


# -- defect 3: a garbled Produce response is retried ----------------------------------------------


def test_a_garbled_produce_response_is_retried_and_deduplicated() -> None:
    """The broker wrote the batch but its answer cannot be read: the outcome is unknown, so the
    batch is retried with the same sequence numbers and the broker drops the duplicate."""
    broker = ProduceBroker(partitions=2, garble=lambda n: n in (1, 4))

    async def main() -> list[Any]:
        async with AsyncKafkaProducer(client=broker, linger_ms=2, retry_backoff_ms=10) as p:
            futures = []
            for i in range(300):
                futures.append(await p.send("t", b"g%03d" % i, partition=i % 2))
                if i % 20 == 0:
                    await asyncio.sleep(0.005)
            await p.flush(30)
            return await outcomes(futures, 5)

    results = asyncio.run(main())
    assert all(isinstance(r, RecordMetadata) for r in results), [
        r for r in results if not isinstance(r, RecordMetadata)
    ]
    for p in (0, 1):
        assert broker.logs[p] == [b"g%03d" % i for i in range(300) if i % 2 == p]


# -- defect 4: each option validated on its own ---------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"acks": 2}, "acks"),
        ({"acks": "some"}, "acks"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": -5}, "batch_size"),
        ({"buffer_memory": 0}, "buffer_memory"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"produce_concurrency": 0}, "produce_concurrency"),
        ({"produce_concurrency": 1.5}, "produce_concurrency"),
        ({"delivery_timeout_ms": -1}, "delivery_timeout_ms"),
        ({"delivery_timeout_ms": 5_000}, "delivery_timeout_ms"),  # < linger + request timeout
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
        ({"request_timeout_ms": -3}, "request_timeout_ms"),
        ({"max_block_ms": -1}, "max_block_ms"),
        ({"retry_backoff_ms": -1}, "retry_backoff_ms"),
        ({"linger_ms": float("nan")}, "linger_ms"),
        ({"batch_size": "big"}, "batch_size"),
        ({"compression": "brotli"}, "compression"),
        ({"idempotent": True, "acks": 1}, "idempotent"),
        ({"idempotent": True, "max_in_flight": 6}, "max_in_flight"),
    ],
)
def test_each_bad_option_is_named_with_its_value(options: dict[str, Any], named: str) -> None:
    with pytest.raises(KafkaConfigError) as info:
        AsyncKafkaProducer(client=ProduceBroker(), **options)
    message = str(info.value)
    assert message.startswith(named), message
    bad = options[named]
    assert repr(bad) in message or str(bad) in message, message


def test_sound_options_pass_validation() -> None:
    AsyncKafkaProducer(
        client=ProduceBroker(), delivery_timeout_ms=3_000, request_timeout_ms=2_000, linger_ms=1000
    )
    AsyncKafkaProducer(client=ProduceBroker(), acks="all", max_block_ms=0, linger_ms=0)


def test_the_sync_face_validates_the_same_way() -> None:
    from kafka_core import KafkaProducer

    with pytest.raises(KafkaConfigError, match="request_timeout_ms"):
        KafkaProducer("127.0.0.1:1", request_timeout_ms=-1)


def late(acc: Any, now: float, can_send: Any) -> list[Any]:
    """One loop of the sender over ``acc`` whose partitions ``can_send`` or not (every slot
    drained, a partition that cannot send passed over): returns the batches taken."""
    lingered = acc.due(now)
    acc.poke()
    taken: list[Any] = []

    def pick(q: Any, room: int | None) -> Any:
        if not can_send(q) or acc.head(q) is None:
            return None
        taken.append(acc.take_head(q))
        return taken[-1]

    acc.drain_ready(lambda slot: 1, pick, 1 << 30)
    acc.stamp_late(lingered, now)
    return taken


def test_a_batch_waiting_past_its_linger_stays_open_and_stamps_each_record() -> None:
    """The accumulator's side of the ready check: past its linger, a partition that cannot send
    keeps its batch open (records join it, up to batch_size, on the fast path) and records carry
    the time they were added (within a tick), not the batch's."""
    import random

    from kafka_core.producer.accumulator import Accumulator
    from kafka_core.producer.partitioner import DefaultPartitioner

    acc = Accumulator(
        batch_size=1_000,
        buffer_memory=1 << 20,
        max_block_ms=1000,
        linger_ms=5,
        delivery_timeout_ms=120_000,
        partitioner=DefaultPartitioner(random.Random(1)),
        wakeup=lambda: None,
    )
    acc.set_partitions("t", 1)
    q = acc.topics["t"].queues[0]  # type: ignore[index]
    first = acc.append("t", b"a")
    b = q.open
    assert b is not None
    late(acc, b.created + 1.0, lambda q: False)
    assert q.open is b and not q.sealed and b.stamps is not None
    time.sleep(0.01)
    second = acc.append("t", b"b")
    assert q.open is b and b.count == 2
    assert acc.fast.get("t") is b  # a late batch keeps the values-only fast path
    assert late(acc, b.created + 1.0, lambda q: True) == [b]
    assert q.open is None
    stamped = b.settle_timestamps()  # as the sender does when it encodes the batch
    assert stamped is not None and stamped[0] is None and stamped[1] is not None
    assert stamped[1] >= b.result.base_timestamp + 5
    b.result.set_result(0)
    assert second.result(0).timestamp > first.result(0).timestamp


def test_late_stamps_resolve_to_per_record_times_and_caller_timestamps_win() -> None:
    from kafka_core.producer.batches import ProducerBatch

    b = ProducerBatch("t", 0, 0.0, 1.0)
    b.values = [b"v"] * 2
    b.count = 2
    b.stamps = [(2, None)]  # late with two records: they keep the batch's time
    b.values.append(b"v")
    b.count = 3
    b.stamp()
    b.stamp()  # nothing new since: no point added
    assert b.stamps is not None and len(b.stamps) == 2
    b.timestamps = [None, 7, None, 9]
    b.values.append(b"v")
    b.count = 4
    out = b.settle_timestamps()
    assert out is not None and out[:2] == [None, 7] and out[3] == 9
    assert out[2] is not None and out[2] >= b.result.base_timestamp
    assert b.stamps is None and b.result.timestamps is out
    assert b.settle_timestamps() is out  # settled once


# -- request_timeout_ms reaches the wire (found by tests/integration/test_stall_bounds.py) ----------


class TimeoutRecordingBroker(ProduceBroker):
    """Notes the ``timeout_ms`` each Produce is sent with: the real client drops a request's
    connection at that bound, or at its own default (30 s) when none is given."""

    def __init__(self) -> None:
        super().__init__(1)
        self.timeouts: list[float | None] = []

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        self.timeouts.append(kw.get("timeout_ms"))
        return await super().send(node, body, version, **kw)


def test_a_produce_request_is_bounded_by_the_producers_request_timeout() -> None:
    broker = TimeoutRecordingBroker()

    async def main() -> None:
        async with AsyncKafkaProducer(client=broker, request_timeout_ms=1_500) as p:
            await (await p.send("t", b"x"))

    asyncio.run(main())
    assert broker.timeouts == [1_500]


def test_the_producers_own_client_waits_no_longer_than_its_request_timeout() -> None:
    async def main() -> float:
        p = AsyncKafkaProducer("127.0.0.1:1", request_timeout_ms=1_500, delivery_timeout_ms=2_000)
        try:
            return float(p.client.request_timeout_ms)
        finally:
            await p.close(0)

    assert asyncio.run(main()) == 1_500


def test_null_keys_leave_a_partition_whose_leader_is_failing() -> None:
    """KIP-794's point: with one leader down, keyless records go to the partitions that work
    (before, the sticky partition stayed on the failing one until its 1 MiB batch filled)."""
    import random

    from kafka_core.producer.accumulator import Accumulator
    from kafka_core.producer.partitioner import DefaultPartitioner

    acc = Accumulator(
        batch_size=1 << 20,
        buffer_memory=1 << 24,
        max_block_ms=1000,
        linger_ms=5,
        delivery_timeout_ms=120_000,
        partitioner=DefaultPartitioner(random.Random(7)),
        wakeup=lambda: None,
    )
    acc.set_partitions("t", 3)
    t = acc.topics["t"]
    queues = t.queues
    assert queues is not None
    down = {t.sticky}  # the leader of the partition keyless records stick to goes down
    acc.available = lambda q: q.partition not in down
    acc.append("t", b"before")
    stuck = queues[next(iter(down))].open
    assert stuck is not None
    late(acc, stuck.created + 1.0, lambda q: q.partition not in down)
    assert t.sticky not in down, "null keys still go to the partition whose leader is down"
    for _ in range(200):  # batch after batch: the partitioner never comes back to it meanwhile
        acc.append("t", b"x" * 100)
        late(acc, time.monotonic() + 1.0, lambda q: q.partition not in down)
        assert t.sticky not in down
    assert stuck.count == 1  # only the record placed before the outage was seen
    down.clear()  # back up: it may be chosen again
    seen = set()
    for _ in range(200):
        acc.append("t", b"y")
        late(acc, time.monotonic() + 1.0, lambda q: True)
        seen.add(t.sticky)
    assert seen == {0, 1, 2}
