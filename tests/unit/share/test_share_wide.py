"""Issue 40: a share consumer's poll works on the records it moves, not on the partitions it holds.

Over 1,000 assigned partitions on the scripted share broker, once the share session is open:
idle polls route no partition to its leader, keep no per-partition outage books, and send
ShareFetches that name no partition (the broker's share session holds them, as KIP-227's fetch
sessions do); a poll with records on a few partitions names only those, for their
acknowledgements. Counted on the structures and on the wire, never timed: a per-poll pass over
the assignment, were it back, fails these counts whatever the machine's speed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fakes.share_broker import FakeShareBroker
from fakes.share_helpers import T, poll_until, run

import kafka_core.share.consumer as share_consumer
from kafka_core.aio import KafkaShareConsumer
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.protocol.messages import ShareFetchRequest

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 1_000


def _named(req: ShareFetchRequest) -> list[tuple[int, bool]]:
    """(partition, carries acknowledgements) of each partition a ShareFetch names."""
    return [(p.partition_index, bool(p.acknowledgement_batches)) for t in req.topics for p in t.partitions]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a partition is routed to its leader, and how often an outage book is touched
    for one, by the share consumer."""
    counts = {"routed": 0, "outage": 0}
    leader_of = share_consumer.leader_of

    def routing(meta: Any, tp: TopicPartition) -> int | None:
        counts["routed"] += 1
        return leader_of(meta, tp)

    ok, failed = OutageTracker.ok, OutageTracker.failed

    def ok_counted(self: OutageTracker, key: Any) -> None:
        counts["outage"] += isinstance(key, TopicPartition)  # not the group's own (a heartbeat)
        ok(self, key)

    def failed_counted(self: OutageTracker, key: Any, *args: Any, **kw: Any) -> None:
        counts["outage"] += isinstance(key, TopicPartition)
        failed(self, key, *args, **kw)

    monkeypatch.setattr(share_consumer, "leader_of", routing)
    monkeypatch.setattr(OutageTracker, "ok", ok_counted)
    monkeypatch.setattr(OutageTracker, "failed", failed_counted)
    return counts


async def _idle(c: KafkaShareConsumer, polls: int = 10) -> int:
    """Records returned by ``polls`` polls of 20 ms (counted in polls: a loaded machine still
    runs them all)."""
    got = 0
    for _ in range(polls):
        got += len(await c.poll(20))
    return got


def test_idle_and_busy_polls_over_a_thousand_partitions_touch_only_what_moves(
    counted: dict[str, int],
) -> None:
    broker = FakeShareBroker({T: PARTITIONS})

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, fetch_max_wait_ms=10)
        try:
            deadline = time.monotonic() + 10
            while len(c.assignment()) < PARTITIONS and time.monotonic() < deadline:
                await c.poll(20)
            assert len(c.assignment()) == PARTITIONS
            await _idle(c)  # the session is open: its first ShareFetch named everything
            opening = [r for r in broker.requests if isinstance(r, ShareFetchRequest)]
            assert opening[0].share_session_epoch == 0 and len(_named(opening[0])) == PARTITIONS

            mark, routed, outage = len(broker.requests), counted["routed"], counted["outage"]
            assert await _idle(c) == 0
            idle = [r for r in broker.requests[mark:] if isinstance(r, ShareFetchRequest)]
            assert idle, "the consumer stopped fetching"
            assert all(r.share_session_epoch > 0 for r in idle), "the share session was reopened"
            assert [n for r in idle for n in _named(r)] == [], "an idle ShareFetch named partitions"
            assert counted["routed"] == routed, f"idle polls routed {counted['routed'] - routed} partitions"
            assert counted["outage"] == outage, f"idle polls kept {counted['outage'] - outage} outage books"

            # Records on three partitions: fetched from the session, then acknowledged by name.
            busy = (7, 500, 999)
            for p in busy:
                broker.produce(T, [b"a", b"b"], partition=p)
            mark = len(broker.requests)
            got = await poll_until(c, 2 * len(busy), timeout_ms=20)
            assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in busy for o in (0, 1)]
            assert await _idle(c) == 0  # accepts them, piggybacked on the next ShareFetch
            sent = [r for r in broker.requests[mark:] if isinstance(r, ShareFetchRequest)]
            named = {p for r in sent for p, _ in _named(r)}
            acked = {p for r in sent for p, with_acks in _named(r) if with_acks}
            assert named == acked == set(busy), f"named {sorted(named)[:10]}, acknowledged {sorted(acked)}"
            assert all(broker.states(T, p) == [("done", 1)] * 2 for p in busy)
            assert counted["routed"] == routed and counted["outage"] == outage
        finally:
            await c.close()

    run(main)


def test_assignment_changes_are_sent_as_changes_and_routed_once(counted: dict[str, int]) -> None:
    """The routes follow the assignment: a topic assigned later is added to the open share
    session by name, one taken away is forgotten by name, and each change (of the metadata, of
    the assignment) is routed once, not at every poll after."""
    other = "more"
    broker = FakeShareBroker({T: 50, other: 50})
    del broker.partitions[other]  # assigned (and in metadata) only later

    def fetched_since(mark: int) -> list[ShareFetchRequest]:
        return [r for r in broker.requests[mark:] if isinstance(r, ShareFetchRequest)]

    async def settle(c: KafkaShareConsumer, n: int) -> None:
        deadline = time.monotonic() + 10
        while len(c.assignment()) != n and time.monotonic() < deadline:
            await c.poll(20)
        assert len(c.assignment()) == n
        await _idle(c)

    async def main() -> None:
        c = KafkaShareConsumer(T, other, group_id="g", client=broker, fetch_max_wait_ms=10)
        try:
            await settle(c, 50)
            mark, routed = len(broker.requests), counted["routed"]
            broker.partitions[other] = 50
            await settle(c, 100)
            sent = fetched_since(mark)
            changes = [r for r in sent if r.topics or r.forgotten_topics_data]
            assert len(changes) == 1 and changes[0].share_session_epoch > 0
            assert sorted(p for p, _ in _named(changes[0])) == list(range(50))
            assert not changes[0].forgotten_topics_data
            # routed when the metadata changed and when the assignment did, not at every poll
            assert counted["routed"] - routed <= 50 + 100
            routed = counted["routed"]
            await _idle(c)
            assert counted["routed"] == routed, "idle polls routed the new assignment again"

            mark, routed = len(broker.requests), counted["routed"]
            del broker.partitions[T]
            await settle(c, 50)
            changes = [r for r in fetched_since(mark) if r.topics or r.forgotten_topics_data]
            assert len(changes) == 1 and not changes[0].topics
            assert [sorted(t.partitions) for t in changes[0].forgotten_topics_data] == [list(range(50))]
            assert counted["routed"] - routed <= 100 + 50

            broker.produce(other, [b"x"], partition=42)
            got = await poll_until(c, 1, timeout_ms=20)
            assert [(r.topic, r.partition, r.value) for r in got] == [(other, 42, b"x")]
        finally:
            await c.close()

    run(main)
