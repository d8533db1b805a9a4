"""Batches refused by a leader move are resent to the new leader together, up to ``max_in_flight``
(as librdkafka does once the old leader's requests have drained), not one at a time each behind
the previous one's acknowledgement (issue 42: the election and rolling-restart stall). Sequence
order stays exact through it: duplicates, sequence errors and epoch bumps mid-pipeline; without
idempotence a partition still has one batch in flight.

The broker is the producer's in-memory fake (fakes.produce_broker, Kafka's sequence checks) with
partition leaders that move: a node that no longer leads a partition refuses it
NOT_LEADER_OR_FOLLOWER naming the new leader (KIP-951). Each node serves its requests one at a
time in arrival order, as a broker serves one connection, and holds them while the test says so,
so the test counts the requests in flight on each node.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker
from fakes.timing import aio, outcomes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.client.hints import LeaderHint
from kafka_core.client.metadata import ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.errors import KafkaConnectionError
from kafka_core.producer import AsyncKafkaProducer
from kafka_core.producer.futures import RecordMetadata
from kafka_core.producer.partitioner import murmur2_partition
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

T = "t"
OLD, NEW = 0, 1


class MovingBroker(ProduceBroker):
    """See the module docstring. ``arrivals`` lists each Produce request as it reaches a node:
    (node, requests in flight on that node then, [(partition, epoch, sequence)])."""

    def __init__(self, partitions: int = 1, **kw: Any) -> None:
        super().__init__(partitions, **kw)
        self.leader = dict.fromkeys(range(partitions), OLD)
        self.epoch = dict.fromkeys(range(partitions), 1)
        self.client_epoch = dict(self.epoch)  # what the client's cache knows
        self.arrivals: list[tuple[int, int, list[tuple[int, int, int]]]] = []
        self.in_flight: Counter[int] = Counter()  # node -> requests taken and not answered
        self.in_flight_p: Counter[int] = Counter()  # partition -> requests holding it, any node
        self.peak_p: Counter[int] = Counter()  # partition -> the most requests it was in at once
        self.in_flight_np: Counter[tuple[int, int]] = Counter()  # (node, partition) -> requests
        # Requests that reached a node while a partition of theirs was in flight on another.
        self.crossed: list[tuple[int, int]] = []
        self.metadata_calls = 0
        self.gates: dict[int, asyncio.Event] = {}
        self.turns: dict[int, asyncio.Lock] = {}
        self.serving = -1  # the node whose request is being answered (set while it is)
        # (node, partition, sequence) -> the answer it gets once, before any other check.
        self.once: dict[tuple[int, int, int], int] = {}
        self.duplicates_as_error = False  # answer DUPLICATE_SEQUENCE_NUMBER, as older brokers
        self.written_on_refusal = 0  # refused batches the old leader still wrote (replicated)
        self.lose: Counter[int] = Counter()  # sequence -> answers to lose after it is handled
        # Called as each Produce request arrives: (its number, node, its batches).
        self.on_arrival: Callable[[int, int, list[tuple[int, int, int]]], None] = lambda n, node, b: None

    def move(self, partition: int, node: int) -> None:
        self.leader[partition] = node
        self.epoch[partition] += 1

    def hold(self, node: int) -> None:
        self._gate(node).clear()

    def release(self, node: int) -> None:
        self._gate(node).set()

    def _gate(self, node: int) -> asyncio.Event:
        if node not in self.gates:
            self.gates[node] = asyncio.Event()
            self.gates[node].set()
        return self.gates[node]

    # -- the client surface ----------------------------------------------------------------------

    async def metadata(self, topics: list[str]) -> ClusterMeta:
        self.metadata_calls += 1
        parts = [
            PartitionMeta(partition=p, leader=self.leader[p], leader_epoch=self.epoch[p])
            for p in range(self.partitions)
        ]
        return ClusterMeta(brokers=[], topics=[TopicMeta(name=t, partitions=parts) for t in topics])

    def take_leader_hint(self, topic: str, partition: int, hint: LeaderHint) -> bool:
        """As the client's cache: a newer epoch is taken, the one it holds is confirmed."""
        known = self.client_epoch[partition]
        if hint.epoch < known or (hint.epoch == known and hint.leader != self.leader[partition]):
            return False
        self.client_epoch[partition] = hint.epoch
        return True

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if body.API_KEY != ApiKey.PRODUCE:
            return await super().send(node, body, version, **kw)
        batches = []
        for td in body.topic_data:
            for pd in td.partition_data:
                _pid, epoch, seq = struct.unpack_from(">qhi", bytes(pd.records), 43)
                batches.append((pd.index, epoch, seq))
        self.in_flight[node] += 1
        for p, _, _ in batches:
            if self.in_flight_p[p] > self.in_flight_np[(node, p)]:
                self.crossed.append((node, p))
            self.in_flight_np[(node, p)] += 1
            self.in_flight_p[p] += 1
            self.peak_p[p] = max(self.peak_p[p], self.in_flight_p[p])
        self.arrivals.append((node, self.in_flight[node], batches))
        self.on_arrival(len(self.arrivals) - 1, node, batches)
        try:
            lock = self.turns.setdefault(node, asyncio.Lock())
            async with lock:  # one at a time, in arrival order (asyncio.Lock is first come first served)
                await self._gate(node).wait()
                self.serving = node
                resp = await super().send(node, body, version, **kw)
        finally:
            self.in_flight[node] -= 1
            for p, _, _ in batches:
                self.in_flight_p[p] -= 1
                self.in_flight_np[(node, p)] -= 1
        for _, _, seq in batches:
            if self.lose[seq] > 0:
                self.lose[seq] -= 1
                raise KafkaConnectionError("injected: the answer was lost")
        for t in resp.responses if resp is not None else ():
            for pr in t.partition_responses:
                if pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    pr.current_leader = SimpleNamespace(
                        leader_id=self.leader[pr.index], leader_epoch=self.epoch[pr.index]
                    )
        return resp

    def append(self, p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        """Runs within ``super().send`` before its first await, so ``serving`` is this request's node."""
        injected = self.once.pop((self.serving, p, seq), None)
        if injected is not None:
            return injected, -1
        if self.leader[p] != self.serving:
            if self.written_on_refusal > 0:  # written and replicated, then leadership was lost
                self.written_on_refusal -= 1
                super().append(p, data, pid, epoch, seq, count)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        if self.duplicates_as_error:
            cur = self.state.get((pid, p))
            if cur is not None and cur[0] == epoch and any(s == seq for s, _ in cur[2]):
                return ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1
        return super().append(p, data, pid, epoch, seq, count)

    def at(self, node: int) -> list[tuple[int, list[tuple[int, int, int]]]]:
        """(requests in flight on arrival, batches) of each request ``node`` took, in order."""
        return [(depth, batches) for n, depth, batches in self.arrivals if n == node]


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def _producer(broker: MovingBroker, **options: Any) -> AsyncKafkaProducer:
    settings: dict[str, Any] = {
        "linger_ms": 0,
        "batch_size": 64,  # each record (40 bytes of value) is a batch of its own
        "retry_backoff_ms": 50,
        "delivery_timeout_ms": 30_000,
        "request_timeout_ms": 20_000,
        "produce_concurrency": 1,
        "max_in_flight": 5,
    }
    return AsyncKafkaProducer(client=broker, **{**settings, **options})


def _value(i: int) -> bytes:
    return b"r%039d" % i


async def _move_with_full_pipeline(
    broker: MovingBroker,
    producer: AsyncKafkaProducer,
    *,
    n: int,
    before_move: Callable[[], None] = lambda: None,
) -> tuple[list[Any], bool]:
    """One record acknowledged at the old leader, then ``n`` more while it holds five batches in
    flight; the leader moves, the old one answers (refusing them, naming the new one) while the
    new one holds its requests until five are in flight there or 3 s pass. Returns the records'
    outcomes and whether five were in flight on the new leader at once."""
    futures = [await producer.send(T, _value(0), partition=0)]
    await futures[0]
    broker.hold(OLD)
    for i in range(1, n + 1):
        futures.append(await producer.send(T, _value(i), partition=0))
        await asyncio.sleep(0)
    assert await _until(lambda: broker.in_flight[OLD] == 5)
    broker.hold(NEW)
    broker.move(0, NEW)
    before_move()
    broker.release(OLD)
    five = await _until(lambda: broker.in_flight[NEW] >= 5, 3.0)
    broker.release(NEW)
    return await outcomes(futures, 20), five


def _assert_once_in_order(broker: MovingBroker, n: int, results: list[Any]) -> None:
    assert broker.logs[0] == [_value(i) for i in range(n + 1)]  # none lost, none twice, in order
    for i, meta in enumerate(results):
        assert isinstance(meta, RecordMetadata), (i, meta)
        if meta.offset >= 0:  # -1: acknowledged as a duplicate, its offset not told
            assert broker.logs[0][meta.offset] == _value(i)


def _sequences(batches: list[tuple[int, list[tuple[int, int, int]]]]) -> list[tuple[int, int]]:
    return [(epoch, seq) for _, parts in batches for _, epoch, seq in parts]


@aio
async def test_batches_refused_by_a_leader_move_are_resent_together() -> None:
    broker = MovingBroker()
    async with _producer(broker) as producer:
        results, five = await _move_with_full_pipeline(broker, producer, n=12)
    assert five, f"the refused batches reached the new leader one at a time: {broker.at(NEW)}"
    refused = _sequences([(d, b) for d, b in broker.at(OLD) if any(s > 0 for _, _, s in b)])
    resent = broker.at(NEW)
    assert [depth for depth, _ in resent[:5]] == [1, 2, 3, 4, 5]  # all five out at once
    assert _sequences(resent[:5]) == refused[:5]  # in sequence order, none skipped
    assert _sequences(resent) == sorted(_sequences(resent))
    assert broker.init_calls == [(-1, -1)]  # no epoch bump was needed
    _assert_once_in_order(broker, 12, results)


@pytest.mark.parametrize("as_error", [False, True], ids=["duplicate-acknowledged", "DUPLICATE_SEQUENCE"])
@aio
async def test_resent_batches_the_old_leader_had_written_are_not_written_twice(as_error: bool) -> None:
    broker = MovingBroker()
    broker.duplicates_as_error = as_error
    broker.written_on_refusal = 2  # the first two refused batches had reached the new leader
    async with _producer(broker) as producer:
        results, five = await _move_with_full_pipeline(broker, producer, n=10)
    assert five
    assert broker.init_calls == [(-1, -1)]
    codes = [a.get(0) for a in broker.answers]
    assert (ErrorCode.DUPLICATE_SEQUENCE_NUMBER in codes) is as_error
    _assert_once_in_order(broker, 10, results)


@aio
async def test_out_of_order_behind_a_resent_batch_refused_again_is_retried_in_order() -> None:
    """The new leader refuses the first resent batch (NOT_ENOUGH_REPLICAS: not written), so the
    four behind it are OUT_OF_ORDER_SEQUENCE_NUMBER: all five go again, in order, same epoch."""
    broker = MovingBroker()

    def refuse_first() -> None:
        first = min(s for _, b in broker.at(OLD) for _, _, s in b if s > 0)
        broker.once[(NEW, 0, first)] = ErrorCode.NOT_ENOUGH_REPLICAS

    async with _producer(broker) as producer:
        results, five = await _move_with_full_pipeline(broker, producer, n=10, before_move=refuse_first)
    assert five
    codes = [a.get(0) for a in broker.answers]
    assert ErrorCode.NOT_ENOUGH_REPLICAS in codes and ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER in codes
    assert broker.init_calls == [(-1, -1)]  # an earlier batch was unresolved: no bump
    resent = _sequences(broker.at(NEW))
    assert resent[:5] == resent[5:10]  # the same five again, in the same order
    _assert_once_in_order(broker, 10, results)


@pytest.mark.parametrize("answer", ["OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"])
@aio
async def test_a_sequence_gap_at_the_new_leader_bumps_the_epoch_and_loses_nothing(answer: str) -> None:
    """The new leader refuses the very next sequence it should take (it lost the producer's
    state): a real gap, so the epoch is bumped (KIP-360) and every unacknowledged batch is
    renumbered from 0, in order, written once."""
    broker = MovingBroker()

    def gap() -> None:
        if answer == "UNKNOWN_PRODUCER_ID":
            broker.forget_producers()  # the fake then answers UNKNOWN_PRODUCER_ID to seq > 0
        else:
            first = min(s for _, b in broker.at(OLD) for _, _, s in b if s > 0)
            broker.once[(NEW, 0, first)] = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    async with _producer(broker) as producer:
        results, _five = await _move_with_full_pipeline(broker, producer, n=10, before_move=gap)
    assert len(broker.init_calls) == 2 and broker.init_calls[1][0] >= 0  # one bump, same id
    renumbered = [(e, s) for e, s in _sequences(broker.at(NEW)) if e > 0]
    assert renumbered and renumbered[0] == (1, 0)
    _assert_once_in_order(broker, 10, results)


@aio
async def test_without_idempotence_a_partition_keeps_one_batch_in_flight_through_a_move() -> None:
    """Without idempotence nothing tells a reordered batch from a new one: each partition has
    one batch in flight, before, across and after the move (max_in_flight counts requests per
    connection, over all its partitions)."""
    broker = MovingBroker(partitions=2)
    n = 12
    async with _producer(broker, acks=1, idempotent=False) as producer:
        await (await producer.send(T, _value(0), partition=0))
        broker.hold(OLD)
        futures = []
        for i in range(1, n + 1):
            futures.extend([await producer.send(T, _value(i), partition=p) for p in (0, 1)])
            await asyncio.sleep(0)
        assert await _until(lambda: broker.in_flight_p[0] == 1 and broker.in_flight_p[1] == 1)
        broker.move(0, NEW)
        broker.release(OLD)
        results = await outcomes(futures, 20)
    assert all(isinstance(r, RecordMetadata) for r in results), results
    assert broker.peak_p == {0: 1, 1: 1}
    assert broker.logs[0] == [_value(i) for i in range(n + 1)]
    assert broker.logs[1] == [_value(i) for i in range(1, n + 1)]
    assert any(node == NEW for node, _, _ in broker.arrivals)


@aio
async def test_nothing_goes_to_a_new_leader_while_the_old_one_holds_batches_of_the_partition() -> None:
    """Metadata moves the leader (no hint yet) while two batches are out to the old one: the next
    batches wait for its answers (it could still write them, or another could pass them), then
    go to the new leader in order (librdkafka waits for the old leader's requests likewise)."""
    broker = MovingBroker()
    broker.metadata_max_age = 0.02  # the producer asks for metadata again every 20 ms
    async with _producer(broker) as producer:
        futures = [await producer.send(T, _value(0), partition=0)]
        await futures[0]
        broker.hold(OLD)
        futures.extend([await producer.send(T, _value(i), partition=0) for i in (1, 2)])
        assert await _until(lambda: broker.in_flight[OLD] == 2)
        broker.move(0, NEW)
        asked = broker.metadata_calls
        i = 3
        while broker.metadata_calls < asked + 2:  # sends wake the loop, which asks again
            futures.append(await producer.send(T, _value(i), partition=0))
            i += 1
            await asyncio.sleep(0.03)
        for _ in range(3):
            futures.append(await producer.send(T, _value(i), partition=0))
            i += 1
        await _until(lambda: broker.in_flight[NEW] > 0, 0.5)  # the chance to go wrong
        assert broker.in_flight[NEW] == 0 and not broker.crossed
        broker.release(OLD)
        results = await outcomes(futures, 20)
    assert not broker.crossed, broker.crossed
    assert broker.logs[0] == [_value(k) for k in range(i)]
    assert all(isinstance(r, RecordMetadata) for r in results), results
    assert broker.init_calls == [(-1, -1)]


@aio
async def test_no_new_batch_passes_a_resent_one_until_it_is_answered() -> None:
    """A batch written whose answer is lost while the four behind it are acknowledged, then the
    answer to its resend lost too: had new batches gone right behind the resend, they would be
    written past it and push it out of the broker's window of five, and its third try could no
    longer be told from a new batch (it would be written twice). New batches wait for it."""
    broker = MovingBroker()
    async with _producer(broker, retry_backoff_ms=1) as producer:
        futures = [await producer.send(T, _value(0), partition=0)]
        await futures[0]
        broker.hold(OLD)
        for i in range(1, 16):
            futures.append(await producer.send(T, _value(i), partition=0))
            await asyncio.sleep(0)
        assert await _until(lambda: broker.in_flight[OLD] == 5)
        first = min(s for _, b in broker.at(OLD) for _, _, s in b if s > 0)
        broker.lose[first] = 2
        broker.release(OLD)
        results = await outcomes(futures, 20)
    assert broker.lose[first] == 0  # both answers were lost
    assert broker.init_calls == [(-1, -1)]
    _assert_once_in_order(broker, 15, results)


# What happens as a Produce request arrives: a partition's leader moves to the other node (the
# old one refusing it from now on, naming the new one), the same with the refused batch written
# all the same (it reached the new leader before the old one lost its leadership), or the
# request is handled and its answer lost (the connection dropped).
EVENTS = st.sampled_from(["move", "move-written", "lose"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(0, 120), st.tuples(EVENTS, st.integers(0, 2)), max_size=12))
def test_leader_moves_and_lost_answers_never_lose_duplicate_or_reorder(
    plan: dict[int, tuple[str, int]],
) -> None:
    broker = MovingBroker(partitions=3)

    def arrival(n: int, node: int, batches: list[tuple[int, int, int]]) -> None:
        event = plan.get(n)
        if event is None:
            return
        kind, p = event
        if kind == "lose":
            for _, _, seq in batches:
                broker.lose[seq] += 1
            return
        broker.move(p, 1 - broker.leader[p])
        if kind == "move-written":
            broker.written_on_refusal += 1

    broker.on_arrival = arrival
    n = 900

    async def main() -> list[Any]:
        futures = []
        async with _producer(broker, batch_size=400, retry_backoff_ms=1, produce_concurrency=2) as producer:
            for i in range(n):
                futures.append(await producer.send(T, _value(i), key=b"k%d" % (i % 7)))
                if i % 30 == 0:
                    await asyncio.sleep(0.002)
            return await outcomes(futures, 30)

    results = asyncio.run(main())
    expected: dict[int, list[bytes]] = {p: [] for p in range(3)}
    for i in range(n):
        expected[murmur2_partition(b"k%d" % (i % 7), 3)].append(_value(i))
    assert broker.logs == expected  # nothing lost, nothing twice, each partition in order
    for i, meta in enumerate(results):
        assert isinstance(meta, RecordMetadata), (i, meta)
        assert meta.offset < 0 or broker.logs[meta.partition][meta.offset] == _value(i)
