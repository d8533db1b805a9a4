"""The sender against the in-memory broker with faults on demand: nothing lost, nothing twice,
per-partition order kept, through retries, epoch bumps and MESSAGE_TOO_LARGE splits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakes import timing
from fakes.produce_broker import ProduceBroker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec import decode_record_batches
from kafka_core.producer.futures import RecordMetadata
from kafka_core.producer.partitioner import murmur2_partition
from kafka_core.protocol.errors import ErrorCode


def _run_producer(broker: ProduceBroker, n: int, **options: Any) -> tuple[list[Any], list[Any]]:
    from kafka_core.producer import AsyncKafkaProducer

    async def main() -> tuple[list[Any], list[Any]]:
        settings: dict[str, Any] = {
            "linger_ms": 0,
            "batch_size": 400,
            "retry_backoff_ms": 1,
            "delivery_timeout_ms": 20_000,
            "request_timeout_ms": 10_000,
        }
        p = AsyncKafkaProducer(client=broker, **{**settings, **options})
        await p.start()
        futures = []
        for i in range(n):
            futures.append(await p.send("t", b"r%05d" % i, key=b"k%d" % (i % 7)))
            if i % 50 == 0:
                await asyncio.sleep(0.002)
        await p.flush(30)
        results = await timing.outcomes(futures, 30)
        await p.close()
        return futures, results

    return asyncio.run(main())


def _assert_exactly_once_in_order(broker: ProduceBroker, n: int, outcomes: list[Any]) -> None:
    expected: dict[int, list[bytes]] = {p: [] for p in range(broker.partitions)}
    for i in range(n):
        expected[murmur2_partition(b"k%d" % (i % 7), broker.partitions)].append(b"r%05d" % i)
    assert broker.logs == expected  # nothing lost, nothing twice, per-partition order kept
    for i, meta in enumerate(outcomes):
        assert isinstance(meta, RecordMetadata), meta
        assert broker.logs[meta.partition][meta.offset] == b"r%05d" % i


def test_sender_clean_run_pipelines_and_numbers_sequences() -> None:
    broker = ProduceBroker(3)
    _futures, outcomes = _run_producer(broker, 600)
    _assert_exactly_once_in_order(broker, 600, outcomes)
    assert broker.init_calls == [(-1, -1)]


# A Produce request's fault: the connection lost before it, or after it was written (the
# producer cannot know it was), or a retriable error for a partition in it (NOT_LEADER,
# REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS).
FAULTS = st.sampled_from(
    [
        ("before", "disconnect"),
        ("after", "lose-response"),
        ("partition", str(int(ErrorCode.NOT_LEADER_OR_FOLLOWER))),
        ("partition", str(int(ErrorCode.REQUEST_TIMED_OUT))),
        ("partition", str(int(ErrorCode.NOT_ENOUGH_REPLICAS))),
    ]
)
FAULT_PLANS = st.dictionaries(st.integers(0, 399), FAULTS, max_size=80)
FAULT_RUNS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _broker_with(plan: dict[int, tuple[str, str]]) -> ProduceBroker:
    faults = {(n, where): fault for n, (where, fault) in plan.items()}
    return ProduceBroker(3, faults=lambda n, where, p: faults.get((n, where)))


@FAULT_RUNS
@given(FAULT_PLANS)
def test_idempotent_retries_never_duplicate_or_reorder(plan: dict[int, tuple[str, str]]) -> None:
    broker = _broker_with(plan)
    _futures, outcomes = _run_producer(broker, 1500, max_in_flight=5)
    _assert_exactly_once_in_order(broker, 1500, outcomes)


def test_unknown_producer_id_bumps_epoch_and_continues() -> None:
    broker = ProduceBroker(3)
    original = broker.append

    def forgetful(p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        if len(broker.requests) == 30 and broker.state:
            broker.forget_producers()  # e.g. the broker expired our producer state
        return original(p, data, pid, epoch, seq, count)

    broker.append = forgetful  # type: ignore[method-assign]
    _futures, outcomes = _run_producer(broker, 800)
    _assert_exactly_once_in_order(broker, 800, outcomes)
    assert len(broker.init_calls) >= 2 and broker.init_calls[1][0] >= 0  # a KIP-360 bump, same id


def test_non_retriable_error_fails_that_batch_only() -> None:
    failed_once: list[int] = []

    def faults(n: int, kind: str, p: int) -> str | None:
        if kind == "partition" and n == 12 and not failed_once:
            failed_once.append(p)
            return "87"  # INVALID_RECORD: not retriable
        return None

    broker = ProduceBroker(3, faults=faults)
    _futures, outcomes = _run_producer(broker, 600)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert errors and all(getattr(e, "code", None) == 87 for e in errors)
    delivered = [i for i, o in enumerate(outcomes) if isinstance(o, RecordMetadata)]
    assert len(delivered) + len(errors) == 600
    for p, log in broker.logs.items():  # the rest arrived once each, in order
        sent = [b"r%05d" % i for i in delivered if murmur2_partition(b"k%d" % (i % 7), 3) == p]
        assert log == sent


@FAULT_RUNS
@given(st.dictionaries(st.integers(0, 299), FAULTS.filter(lambda f: f[0] != "after"), max_size=60))
def test_non_idempotent_keeps_order_through_retries(plan: dict[int, tuple[str, str]]) -> None:
    # Without idempotence a lost answer may duplicate a batch (at-least-once): not planned here.
    broker = _broker_with(plan)
    _futures, outcomes = _run_producer(broker, 700, acks=1)
    _assert_exactly_once_in_order(broker, 700, outcomes)


@pytest.mark.parametrize("acks", [1, "all"])
def test_message_too_large_splits_the_batch(acks: object) -> None:
    broker = ProduceBroker(3, max_records=2)
    _futures, outcomes = _run_producer(broker, 300, acks=acks)
    _assert_exactly_once_in_order(broker, 300, outcomes)


@pytest.mark.parametrize("acks", [1, "all"])
def test_oversized_record_fails_alone(acks: object) -> None:
    from kafka_core.producer import AsyncKafkaProducer

    broker = ProduceBroker(1, max_bytes=2000)

    async def main() -> list[Any]:
        async with AsyncKafkaProducer(
            client=broker, linger_ms=0, batch_size=1500, retry_backoff_ms=1, acks=acks
        ) as p:
            futures = [await p.send("t", b"small-%03d" % i) for i in range(40)]
            futures.insert(20, await p.send("t", b"B" * 5000))
            futures += [await p.send("t", b"small-%03d" % i) for i in range(40, 80)]
            await p.flush(30)
            return await timing.outcomes(futures, 30)

    outcomes = asyncio.run(main())
    big = outcomes.pop(20)
    assert getattr(big, "code", None) == 10
    assert all(isinstance(o, RecordMetadata) for o in outcomes)
    assert broker.logs[0] == [b"small-%03d" % i for i in range(80)]


def test_new_partitions_whose_first_batch_is_refused_keep_order() -> None:
    # Issue 21: Kafka names a new partition's leader a moment before that broker leads it, so the
    # first batch (sequence 0) gets NOT_LEADER_OR_FOLLOWER; a later batch already in flight would
    # be taken as the producer's first (Kafka accepts any first sequence from a producer it has
    # no state for), leaving 0.. unwritable under this epoch: the producer stalled on it. Each
    # partition's first batch now goes alone, so the later ones never pass it.
    broker = ProduceBroker(3, kafka_sequences=True, leads_late=True)
    _futures, outcomes = _run_producer(
        broker, 1200, max_in_flight=5, delivery_timeout_ms=8_000, request_timeout_ms=5_000
    )
    _assert_exactly_once_in_order(broker, 1200, outcomes)
    assert broker.led == {0, 1, 2}  # every partition refused its first batch once
    assert broker.init_calls == [(-1, -1)]  # no hole, so no epoch bump


def test_a_batch_written_past_a_refused_one_is_followed_by_it_after_a_bump() -> None:
    # The hole can still open if a partition's broker forgets the producer mid-stream (its state
    # expired or was deleted with the log): a refused batch, then the next one taken as the first.
    # The refused batch can never be written under this epoch: the epoch is bumped and it is
    # renumbered, so it lands (once) after the batches that passed it; the rest keep their order.
    broker = ProduceBroker(3, kafka_sequences=True)
    original = broker.append
    refused: list[tuple[int, int, int]] = []  # (partition, epoch, sequence) refused, not yet resent
    holes: list[tuple[int, int, int]] = []  # refused batches a later one was written past
    moved: set[bytes] = set()  # the records of the refused batch

    def forgetful(p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        if refused:
            r_partition, r_epoch, r_seq = refused[0]
            if p == r_partition and epoch == r_epoch:
                if seq != r_seq:  # a later batch reaches the broker before the retry: a hole
                    holes.append(refused.pop())
                else:  # the retry came first: no hole; try again on a later batch
                    refused.clear()
                    moved.clear()
        elif not holes and len(broker.requests) > 20 and seq > 0 and (pid, p) in broker.state:
            broker.state.pop((pid, p))  # the broker forgets us, and refuses this batch
            refused.append((p, epoch, seq))
            moved.update(r.value for r in decode_record_batches(data) if r.value is not None)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        return original(p, data, pid, epoch, seq, count)

    broker.append = forgetful  # type: ignore[method-assign]
    n = 3000
    _futures, outcomes = _run_producer(
        broker, n, max_in_flight=5, delivery_timeout_ms=8_000, request_timeout_ms=5_000
    )
    assert holes, "the scenario did not happen: no batch was written past a refused one"
    assert len(broker.init_calls) == 2 and broker.init_calls[1][0] >= 0  # one KIP-360 bump
    hole_partition = holes[0][0]
    expected: dict[int, list[bytes]] = {p: [] for p in range(3)}
    for i in range(n):
        expected[murmur2_partition(b"k%d" % (i % 7), 3)].append(b"r%05d" % i)
    for p, log in broker.logs.items():
        assert sorted(log) == sorted(expected[p]) and len(set(log)) == len(log)  # none lost or twice
        if p != hole_partition:
            assert log == expected[p]
    log = broker.logs[hole_partition]
    assert moved and [v for v in log if v not in moved] == [
        v for v in expected[hole_partition] if v not in moved
    ]
    start = log.index(min(moved))
    assert log[start : start + len(moved)] == sorted(moved)  # the refused batch whole, in order
    assert start > expected[hole_partition].index(min(moved))  # ...after the batches that passed it
    for i, meta in enumerate(outcomes):
        assert isinstance(meta, RecordMetadata), meta
        assert broker.logs[meta.partition][meta.offset] == b"r%05d" % i


@pytest.mark.parametrize("concurrency", [1, 3])
def test_sender_keeps_each_partition_on_one_lane(concurrency: int) -> None:
    """Produce requests go out on ``produce_concurrency`` connections per broker, partitions
    dealt among them, each partition always on the same one (its batches stay in order)."""
    broker = ProduceBroker(3)
    _futures, outcomes = _run_producer(broker, 900, produce_concurrency=concurrency)
    _assert_exactly_once_in_order(broker, 900, outcomes)
    lane_of: dict[int, set[int]] = {}
    for counts, lane in zip(broker.requests, broker.lanes, strict=True):
        for p in counts:
            lane_of.setdefault(p, set()).add(lane)
    assert sorted(lane_of) == [0, 1, 2]
    assert all(len(lanes) == 1 for lanes in lane_of.values()), lane_of
    used = set().union(*lane_of.values())
    assert len(used) == concurrency
    assert (0 in used) and (used == {0} or concurrency > 1)
    if concurrency > 1:  # every request holds the partitions of one lane only
        for counts, lane in zip(broker.requests, broker.lanes, strict=True):
            assert {next(iter(lane_of[p])) for p in counts} == {lane}


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_due_batch_takes_every_partitions_open_batch_into_one_request(idempotent: bool) -> None:
    """As the Java client's drain: partition 0's full batch makes its broker ready, and the one
    request then carries the open batches of the 299 others, which would each wait out a minute
    of linger on their own (issue 40)."""
    from kafka_core.producer import AsyncKafkaProducer

    broker = ProduceBroker(300, kafka_sequences=True)

    async def main() -> None:
        p = AsyncKafkaProducer(
            client=broker,
            linger_ms=60_000,
            batch_size=4096,
            produce_concurrency=1,
            idempotent=idempotent,
            delivery_timeout_ms=200_000,
        )
        await p.start()
        futures = [await p.send("t", b"v%d" % i, partition=i) for i in range(1, 300)]
        filler = [await p.send("t", b"x" * 3000, partition=0) for _ in range(2)]
        await timing.outcomes([*futures, filler[0]], 30)  # a hang guard far below the linger
        await p.close()

    asyncio.run(main())
    assert sorted(broker.requests[0]) == list(range(300))
    assert all(count == 1 for count in broker.requests[0].values())
