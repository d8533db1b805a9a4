"""Issue 40 on Apache Kafka: a consumer group holding a 1,000-partition topic across rebalances
while records flow, for the classic protocol (cooperative-sticky, KIP-429) and KIP-848.

A steady stream goes to every partition from a confluent-kafka producer (independent of our
code). Members join one by one and one leaves, each polling in its own thread as an application
would: poll, keep the records, commit them synchronously, poll again; a revocation runs inside
poll, after the commit of what was handed over, so "consumed once" holds exactly by committed
offsets across every handover. Afterwards every acknowledged record was consumed by exactly one
member, each partition in offset order, the group's committed offsets are the partitions' ends
and each live member's position on each partition it holds is that end. Every wait is a hang
guard, none is a timing assertion. Runs on Apache Kafka in every session (``real_kafka``).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.delivery import assert_exact
from fakes.timing import wait_until

from kafka_core import KafkaAdmin, NewTopic
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devbroker import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS = 1_000
# The stream: this many records (one per partition in turn) every STEP_S, a few thousand a second.
BURST = 100
STEP_S = 0.1

Acked = dict[tuple[int, int], bytes]


def _topic(kafka: KafkaCluster) -> str:
    name = f"wide-group-{uuid.uuid4().hex[:10]}"
    with KafkaAdmin(kafka.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)]).values()
        assert result.ok, f"creating {name!r}: {result.error}"
    return name


class Stream:
    """Records to every partition in turn from a thread (confluent-kafka, idempotent) until
    stop(), which returns what the broker acknowledged: ``(partition, offset) -> value``."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: Acked = {}
        self._errors: list[Any] = []
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(err)
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(STEP_S):  # poll() returns at the first delivery: paced here
            for _ in range(BURST):
                self._producer.produce(
                    self.topic, value=b"v%08d" % i, partition=i % PARTITIONS, on_delivery=self._done
                )
                i += 1
            self._producer.poll(0)

    def stop(self) -> Acked:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0 and not self._errors, self._errors[:5]
        return self.acked


class Member:
    """A group member consuming in its own thread: poll, keep, commit synchronously, poll again.
    Rebalance callbacks are recorded in ``events`` as (name, kind, partitions)."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, events: list, **kw: Any) -> None:
        self.name = name
        self.messages: list[Any] = []
        self.error: BaseException | None = None
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            topics=[topic],
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=200,
            on_assign=lambda tps: events.append((name, "assign", frozenset(tps))),
            on_revoke=lambda tps: events.append((name, "revoke", frozenset(tps))),
            on_lost=lambda tps: events.append((name, "lost", frozenset(tps))),
            **kw,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                got = self.consumer.poll(200)
                if got:
                    self.messages.extend(got)
                    self.consumer.commit(got)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def stop(self) -> None:
        """Stop polling (the thread ends after its commit); raise what the loop raised."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop polling"
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.stop()
        self.consumer.close(30)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for m in made:  # every one closed, whatever an assertion or another close raised
        with contextlib.suppress(Exception):
            m.close()


def _dealt(live: list[Member], everything: set[TopicPartition]) -> bool:
    """Each live member holds a share, the shares disjoint, together every partition."""
    shares = [m.assignment() for m in live]
    return all(shares) and sum(map(len, shares)) == len(everything) and set().union(*shares) == everything


def _consumed(ms: list[Member]) -> int:
    return sum(len(m.messages) for m in ms)


def _flowing(ms: list[Member]) -> bool:
    """The members consume on: more records arrive within a while (a hang guard)."""
    before = _consumed(ms)
    return wait_until(lambda: _consumed(ms) > before, timeout=60)


def _ends(acked: Acked) -> dict[int, int]:
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for p, o in acked:
        ends[p] = max(ends[p], o + 1)
    return ends


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offsets, read by a consumer outside the group (no join)."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        partitions={topic: range(PARTITIONS)},
        enable_auto_commit=False,
    )
    try:
        got = c.committed([(topic, p) for p in range(PARTITIONS)])
    finally:
        c.close(10, commit=False)
    return {tp.partition: off for tp, off in got.items()}


@pytest.mark.parametrize(
    "protocol",
    [
        pytest.param(
            {"group_protocol": "classic", "assignors": ["cooperative-sticky"]}, id="classic-cooperative"
        ),
        pytest.param({"group_protocol": "consumer"}, id="kip848"),
    ],
)
def test_a_group_over_a_thousand_partitions_reads_each_record_once_across_joins_and_a_leave(
    real_kafka: KafkaCluster, members: list[Member], protocol: dict[str, Any]
) -> None:
    bootstrap = real_kafka.bootstrap
    topic = _topic(real_kafka)
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    group = f"g-wide-{uuid.uuid4().hex[:8]}"
    events: list = []
    stream = Stream(bootstrap, topic)
    try:
        assert wait_until(lambda: len(stream.acked) >= PARTITIONS, timeout=60), "the stream did not start"
        live: list[Member] = []
        every: list[Member] = []
        for name in ("a", "b", "c"):
            m = Member(bootstrap, group, topic, name, events, **protocol)
            members.append(m)
            live.append(m)
            every.append(m)
            assert wait_until(lambda: _dealt(live, everything), timeout=90), [
                len(x.assignment()) for x in live
            ]
            assert _flowing(every), f"nothing consumed after {name} joined"
        b = live.pop(1)
        b_had = b.assignment()
        b.close()  # revokes after its last commit, then leaves the group
        assert not any(kind == "lost" for who, kind, _ in events if who == "b")
        assert wait_until(lambda: _dealt(live, everything), timeout=90), [len(x.assignment()) for x in live]
        assert b_had <= set().union(*(m.assignment() for m in live))
        assert _flowing(every), "nothing consumed after b left"
    finally:
        acked = stream.stop()
    assert wait_until(lambda: _consumed(every) >= len(acked), timeout=90), (
        f"{_consumed(every)} of {len(acked)}"
    )
    time.sleep(0.5)  # a record read twice would show up now
    # Settled: the live members hold everything between them, no handover pending.
    assert wait_until(lambda: _dealt(live, everything), timeout=60), [len(x.assignment()) for x in live]
    for m in live:
        m.stop()
    got = sorted((msg for m in every for msg in m.messages), key=lambda msg: (msg.partition, msg.offset))
    for m in every:
        for p, offsets in _by_partition(m.messages).items():
            assert offsets == sorted(offsets), f"{m.name}: partition {p} delivered out of order"
    assert_exact(acked, got, PARTITIONS)  # each acknowledged record once, across the members
    assert len({msg.partition for msg in got}) == PARTITIONS  # every partition carried records
    assert not any(kind == "lost" for _, kind, _ in events), "partitions lost instead of revoked"
    ends = _ends(acked)
    assert _committed(bootstrap, group, topic) == ends  # and committed them all
    for m in live:  # each live member's position on what it holds is the partition's end
        positions = {tp.partition: m.consumer.position(tp) for tp in m.assignment()}
        assert positions == {p: ends[p] for p in positions}, f"{m.name}: positions differ from the ends"


def _by_partition(messages: list[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for msg in messages:
        out.setdefault(msg.partition, []).append(msg.offset)
    return out
