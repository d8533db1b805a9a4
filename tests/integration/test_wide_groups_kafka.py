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

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.group_members import (
    Member,
    Stream,
    closing_members,
    committed,
    consumed,
    dealt,
    ends,
    exactly_once,
    missing,
)
from fakes.timing import wait_until

from kafka_core import KafkaAdmin, NewTopic
from kafka_core.client.metadata import TopicPartition
from kafka_core.devbroker import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS = 1_000
# The stream: this many records (one per partition in turn) every STEP_S, a few thousand a second.
BURST = 100
STEP_S = 0.1


def _topic(kafka: KafkaCluster) -> str:
    name = f"wide-group-{uuid.uuid4().hex[:10]}"
    with KafkaAdmin(kafka.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)]).values()
        assert result.ok, f"creating {name!r}: {result.error}"
    return name


@pytest.fixture
def members() -> Iterator[list[Member]]:
    with closing_members() as made:
        yield made


def _flowing(ms: list[Member]) -> bool:
    """The members consume on: more records arrive within a while (a hang guard)."""
    before = len(consumed(ms))
    return wait_until(lambda: len(consumed(ms)) > before, timeout=60)


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
    stream = Stream(bootstrap, topic, PARTITIONS, burst=BURST, step_s=STEP_S, linger_ms=20)
    try:
        assert wait_until(lambda: len(stream.acked) >= PARTITIONS, timeout=60), "the stream did not start"
        live: list[Member] = []
        every: list[Member] = []
        for name in ("a", "b", "c"):
            m = Member(bootstrap, group, name, events, topics=[topic], fetch_max_wait_ms=200, **protocol)
            members.append(m)
            live.append(m)
            every.append(m)
            assert wait_until(lambda: dealt(live, everything), timeout=90), [
                len(x.assignment()) for x in live
            ]
            assert _flowing(every), f"nothing consumed after {name} joined"
        b = live.pop(1)
        b_had = b.assignment()
        b.close()  # revokes after its last commit, then leaves the group
        assert not any(kind == "lost" for who, kind, _ in events if who == "b")
        assert wait_until(lambda: dealt(live, everything), timeout=90), [len(x.assignment()) for x in live]
        assert b_had <= set().union(*(m.assignment() for m in live))
        assert _flowing(every), "nothing consumed after b left"
    finally:
        acked = stream.stop()
    assert wait_until(lambda: len(consumed(every)) >= len(acked), timeout=90), missing(acked, every, topic)
    time.sleep(0.5)  # a record read twice would show up now
    # Settled: the live members hold everything between them, no handover pending.
    assert wait_until(lambda: dealt(live, everything), timeout=60), [len(x.assignment()) for x in live]
    for m in live:
        m.stop()
    exactly_once(acked, every, PARTITIONS)  # each acknowledged record once, across the members
    assert len({msg.partition for msg in consumed(every)}) == PARTITIONS  # every partition carried records
    assert not any(kind == "lost" for _, kind, _ in events), "partitions lost instead of revoked"
    end = ends(acked, PARTITIONS)
    assert committed(bootstrap, group, topic, PARTITIONS) == end  # and committed them all
    for m in live:  # each live member's position on what it holds is the partition's end
        positions = {tp.partition: m.consumer.position(tp) for tp in m.assignment()}
        assert positions == {p: end[p] for p in positions}, f"{m.name}: positions differ from the ends"
