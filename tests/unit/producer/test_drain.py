"""The drain (as the Java client's ``RecordAccumulator.drain``): once anything of a broker
connection (slot) is due, one request takes the first batch of every partition it leads, up to
``max_request_size``, the next request starting where the last stopped; nothing goes before a
linger passes or a batch fills; and a drain touches only partitions that hold records."""

from __future__ import annotations

import time
from collections.abc import Hashable

from fakes.accumulator import make_accumulator

from kafka_core.producer.accumulator import (
    BATCH_OVERHEAD,
    FULL,
    PARTITION_OVERHEAD,
    RECORD_OVERHEAD,
    Accumulator,
    PartitionQueue,
    ProducerBatch,
)


class Picks:
    """A sender's ``pick`` that takes every first batch that fits, counting the partitions it
    is asked about."""

    def __init__(self, acc: Accumulator, blocked: set[int] | None = None) -> None:
        self.acc = acc
        self.asked: list[int] = []
        self.blocked = blocked if blocked is not None else set()

    def __call__(self, q: PartitionQueue, room: int | None) -> ProducerBatch | object | None:
        self.asked.append(q.partition)
        first = self.acc.head(q)
        if first is None or q.partition in self.blocked:
            return None
        if room is not None and first.size + PARTITION_OVERHEAD > room:
            return FULL
        return self.acc.take_head(q)


class Muted(Picks):
    """A pick that passes over a partition in its retry backoff at ``at``, as the sender's."""

    def __init__(self, acc: Accumulator, at: float) -> None:
        super().__init__(acc)
        self.at = at

    def __call__(self, q: PartitionQueue, room: int | None) -> ProducerBatch | object | None:
        return None if q.muted_until > self.at else super().__call__(q, room)


def drain(
    acc: Accumulator,
    now: float,
    *,
    room: int = 5,
    max_request_size: int = 1 << 30,
    picks: Picks | None = None,
) -> list[tuple[Hashable, list[list[int]]]]:
    """One loop of the sender: what is due, then the drain; the requests as partition lists."""
    acc.due(now)
    out = acc.drain_ready(lambda slot: room, picks or Picks(acc), max_request_size)
    return [(slot, [[b.partition for _, b in items] for items in requests]) for slot, requests in out]


def opened(acc: Accumulator, partition: int) -> float:
    b = acc.topics["t"].queues[partition].open  # type: ignore[index]
    assert b is not None
    return b.created


def test_one_due_batch_sends_every_partitions_batch_in_one_request() -> None:
    acc = make_accumulator(linger_ms=5)
    acc.set_partitions("t", 300)
    for p in range(300):
        acc.append("t", b"v", partition=p)
    first = opened(acc, 0)
    assert drain(acc, first + 0.001) == []  # nothing is due yet
    sent = drain(acc, first + 0.005)  # partition 0's linger passed: the others go with it
    assert len(sent) == 1 and len(sent[0][1]) == 1
    assert sorted(sent[0][1][0]) == list(range(300))
    assert drain(acc, first + 1.0) == []  # nothing left


def test_a_full_batch_makes_its_slot_ready_at_once() -> None:
    acc = make_accumulator(batch_size=BATCH_OVERHEAD + 2 * (RECORD_OVERHEAD + 10), linger_ms=1000)
    acc.set_partitions("t", 2)
    acc.append("t", b"x" * 10, partition=1)
    created = opened(acc, 1)
    for _ in range(2):
        acc.append("t", b"x" * 10, partition=0)
    assert drain(acc, created) == []  # not full yet, linger far away
    acc.append("t", b"x" * 10, partition=0)  # partition 0's first batch is full
    [(_slot, [request])] = drain(acc, created)
    assert sorted(request) == [0, 1]  # partition 1's open batch goes along


def test_requests_stop_at_max_request_size_and_the_next_starts_where_it_stopped() -> None:
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 10)
    for p in range(10):
        acc.append("t", b"x" * 100, partition=p)
    size = BATCH_OVERHEAD + RECORD_OVERHEAD + 100 + PARTITION_OVERHEAD  # a batch's share of a request
    now = opened(acc, 9)
    first = drain(acc, now, room=1, max_request_size=3 * size)
    second = drain(acc, now, room=1, max_request_size=3 * size)
    assert first == [(0, [[0, 1, 2]])] and second == [(0, [[3, 4, 5]])]
    rest = drain(acc, now, room=5, max_request_size=3 * size)  # room for more: several requests
    assert rest == [(0, [[6, 7, 8], [9]])]


def test_a_batch_larger_than_max_request_size_goes_alone() -> None:
    acc = make_accumulator(linger_ms=0, batch_size=1 << 20)
    acc.set_partitions("t", 3)
    acc.append("t", b"x" * 5000, partition=0)
    acc.append("t", b"y", partition=1)
    now = opened(acc, 1)
    assert drain(acc, now, room=1, max_request_size=1000) == [(0, [[0]])]
    assert drain(acc, now, room=1, max_request_size=1000) == [(0, [[1]])]


def test_the_drain_rotates_so_no_partition_waits_behind_the_others() -> None:
    size = BATCH_OVERHEAD + RECORD_OVERHEAD + 100
    acc = make_accumulator(linger_ms=0, batch_size=size)  # a batch per record
    size += PARTITION_OVERHEAD  # its share of a request
    acc.set_partitions("t", 4)
    for _ in range(3):
        for p in range(4):
            acc.append("t", b"x" * 100, partition=p)
    now = opened(acc, 3)
    requests = []
    for _ in range(6):  # a request holds two batches: the next starts after the last
        [(_, [request])] = drain(acc, now, room=1, max_request_size=2 * size)
        requests.append(request)
    assert requests == [[0, 1], [2, 3]] * 3
    assert drain(acc, now) == []


def test_a_slot_without_room_stays_ready_until_a_request_ends() -> None:
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 2)
    acc.append("t", b"v", partition=0)
    now = opened(acc, 0)
    assert drain(acc, now, room=0) == []  # every request of the slot is in flight
    assert drain(acc, now, room=1) == [(0, [[0]])]  # one ended: what was due goes


def test_a_drain_touches_only_partitions_that_hold_records() -> None:
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 3000)
    for p in range(3000):
        acc.append("t", b"v", partition=p)
    picks = Picks(acc)
    drain(acc, opened(acc, 2999), picks=picks)
    assert sorted(picks.asked) == list(range(3000))
    picks = Picks(acc)
    for p in (7, 2500):
        acc.append("t", b"w", partition=p)
    sent = drain(acc, max(opened(acc, 7), opened(acc, 2500)), picks=picks)
    assert sent == [(0, [[7, 2500]])]
    assert sorted(picks.asked) == [7, 2500]  # not the 2,998 partitions with nothing


def test_slots_drain_apart_and_queues_follow_their_leaders() -> None:
    acc = make_accumulator(linger_ms=1000)
    leaders = {p: p % 2 for p in range(4)}
    acc.slot_of = lambda q: leaders[q.partition]
    acc.set_partitions("t", 4)
    for p in range(4):
        acc.append("t", b"v", partition=p)
    acc.append("t", b"x" * 2000, partition=1)  # larger than batch_size: partition 1's batch is full
    now = opened(acc, 0)
    assert drain(acc, now) == [(1, [[1, 3]])]  # only the slot with something due
    leaders[2] = 1  # partition 2's leader moved
    acc.refile()
    assert drain(acc, now) == [(1, [[1, 2]])]  # it went to its new slot, which it made ready
    leaders[0] = None  # type: ignore[assignment]  # unknown leader: never drained
    acc.refile()
    acc.flushing += 1
    assert drain(acc, now) == []
    assert acc.topics["t"].queues[0].open is not None  # type: ignore[index]
    leaders[0] = 1  # its leader is known again
    acc.refile()
    assert drain(acc, now) == [(1, [[0]])]


def test_a_partition_that_cannot_send_keeps_its_batch_and_is_asked_again_later() -> None:
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 2)
    acc.append("t", b"v", partition=0)
    acc.append("t", b"v", partition=1)
    now = opened(acc, 1)
    picks = Picks(acc, blocked={1})
    assert drain(acc, now, picks=picks) == [(0, [[0]])]
    q = acc.topics["t"].queues[1]  # type: ignore[index]
    assert q.open is not None and q.open.count == 1
    acc.settle(q, ProducerBatch("t", 1, now, now + 60))  # a request of it ended: asked again
    assert drain(acc, now) == [(0, [[1]])]


def test_a_retry_goes_once_its_backoff_is_over() -> None:
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 1)
    acc.append("t", b"v", partition=0)
    now = opened(acc, 0)
    [(_, [[_]])] = drain(acc, now)
    q = acc.topics["t"].queues[0]  # type: ignore[index]
    batch = ProducerBatch("t", 0, now, now + 60)  # the batch that went, as the sender holds it
    batch.count = 1
    q.in_flight.append(batch)
    acc.park_retry(q, batch, now + 0.1)
    acc.settle(q, batch)  # nothing in flight: the retry is first in line, after its backoff

    picks = Muted(acc, now + 0.05)
    assert drain(acc, picks.at, picks=picks) == []
    picks.at = now + 0.1
    assert drain(acc, picks.at, picks=picks) == [(0, [[0]])]  # its timer made the slot ready


def test_late_batches_share_one_tick_and_a_tick_makes_no_slot_ready() -> None:
    """Batches past their linger that their partition cannot send yet ("late") have their
    records' time noted at a tick: one timer for them all, and the tick files nothing ready (a
    timer per batch, each marking its slot ready, cost O(partitions) every 10 ms)."""
    acc = make_accumulator(linger_ms=5)
    acc.set_partitions("t", 500)
    for p in range(500):
        acc.append("t", b"v", partition=p)
    now = opened(acc, 499) + 0.005  # every batch's linger has passed
    picks = Picks(acc, blocked=set(range(500)))  # every partition has its requests out
    lingered = acc.due(now)
    acc.drain_ready(lambda slot: 5, picks, 1 << 30)
    acc.stamp_late(lingered, now)
    assert len(acc.late) == 500
    assert sum(1 for _, _, q, _ in acc.timers if q is None) == 1  # one tick for them all
    assert len(acc.timers) <= 501  # and no new timer per batch (their linger timers are spent)
    for p in range(500):
        acc.append("t", b"w", partition=p)  # records join the open batches
    picks.asked.clear()
    for tick in range(1, 4):
        at = now + tick * acc.tick
        lingered = acc.due(at)
        assert not acc.ready  # the tick made no slot ready: nothing is drained
        assert acc.drain_ready(lambda slot: 5, picks, 1 << 30) == []
        acc.stamp_late(lingered, at)
        assert sum(1 for _, _, q, _ in acc.timers if q is None) == 1
    assert picks.asked == []  # no drain walked the partitions
    b = acc.topics["t"].queues[7].open  # type: ignore[index]
    assert b is not None and b.stamps is not None and b.stamps[-1][0] == 2  # the second record's time
    q = acc.topics["t"].queues[7]  # type: ignore[index]
    while time.monotonic() < b.created + acc.linger:  # settle reads the clock: the linger has passed
        time.sleep(0.001)
    acc.settle(q, ProducerBatch("t", 7, now, now + 60))  # its request ended: its slot is asked again
    lingered = acc.due(now + 1.0)  # (the tick is due too)
    sent = acc.drain_ready(lambda slot: 5, Picks(acc), 1 << 30)
    acc.stamp_late(lingered, now + 1.0)
    assert len(sent) == 1 and len(sent[0][1][0]) == 500  # the slot's drain takes every partition's batch
    assert not acc.late  # sent: no longer late


def test_a_drain_that_takes_a_batch_looks_again_if_the_next_one_has_lingered() -> None:
    """One request takes one batch per partition; a partition whose next batch is already past
    its linger keeps its slot ready, for the next request (no tick will ask for it)."""
    acc = make_accumulator(linger_ms=0, batch_size=BATCH_OVERHEAD + RECORD_OVERHEAD + 1)
    acc.set_partitions("t", 1)
    acc.append("t", b"v", partition=0)
    acc.append("t", b"w", partition=0)  # a batch of its own: the first is sealed
    now = opened(acc, 0)
    assert drain(acc, now, room=1) == [(0, [[0]])]  # room for one request: the second waits...
    assert acc.ready  # ...with its slot still ready
    assert drain(acc, now, room=1) == [(0, [[0]])]


def test_a_retry_backoff_that_held_back_a_lingered_batch_makes_its_slot_ready_when_over() -> None:
    """A partition in its retry backoff whose retried batch is gone (failed at its deadline) still
    has a lingered open batch: the backoff's end looks at it again (no tick will)."""
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 1)
    acc.append("t", b"v", partition=0)
    now = opened(acc, 0)
    q = acc.topics["t"].queues[0]  # type: ignore[index]
    retried = ProducerBatch("t", 0, now, now + 60)
    q.in_flight.append(retried)
    acc.park_retry(q, retried, now + 0.1)
    q.retry.clear()  # its deadline passed meanwhile: failed, no longer waiting
    acc.settle(q, retried)

    picks = Muted(acc, now + 0.05)
    assert drain(acc, picks.at, picks=picks) == []  # muted: the open batch waits
    picks.at = now + 0.1
    assert drain(acc, picks.at, picks=picks) == [(0, [[0]])]  # the backoff's timer made the slot ready


def test_an_epoch_bump_makes_the_slot_of_a_lingered_batch_ready() -> None:
    """A partition whose unresolved sequence asked for a new epoch keeps its lingered open batch
    back; once sequences restart, its slot is looked at again (no tick will)."""
    acc = make_accumulator(linger_ms=0)
    acc.set_partitions("t", 1)
    acc.append("t", b"v", partition=0)
    now = opened(acc, 0)
    picks = Picks(acc, blocked={0})  # the sender's pick: nothing new is numbered before the bump
    assert drain(acc, now, picks=picks) == []
    acc.restart_sequences()  # the new epoch
    assert drain(acc, now) == [(0, [[0]])]
