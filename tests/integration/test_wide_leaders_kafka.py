"""Issue 40 on the three-node Apache Kafka: a producer and a group consumer over a 1,000-partition
topic (replication factor 3) while a third of the leaderships move away and back.

Records flow the whole time (our idempotent producer, acks=all). One node is shut down (a
controlled shutdown hands its leaderships to the others), started again, and a preferred-leader
election (ElectLeaders) gives them back: two moves of every partition that node leads, under
load. The consumer, a group member, commits what each poll handed over before polling again.
Afterwards every acknowledged record was consumed exactly once and nothing else was (an
idempotent producer's retry that doubled a record would show up here too), the group's
committed offsets and the consumer's positions are the partitions' ends, and the consumer has
fetch sessions again on every broker: its idle Fetches name no partition and get none back.
Every wait is a hang guard, none is a timing assertion.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from fakes.delivery import assert_exact

from kafka_core import KafkaAdmin
from kafka_core.aio import KafkaClient
from kafka_core.aio import KafkaConsumer as AsyncKafkaConsumer
from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.client.metadata import TopicPartition
from kafka_core.devbroker import KafkaCluster
from kafka_core.protocol import ApiKey, ErrorCode
from kafka_core.protocol.messages import ElectLeadersRequest, FetchRequest

# The bound takes in the cluster's start when this test is the first to use it (70 s at a load of 50).
pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

PARTITIONS = 1_000
BURST = 100  # records every STEP_S, one partition after another: about a thousand a second
STEP_S = 0.1
GUARD_S = 120.0  # hang guard for each phase, not a timing assertion
PREFERRED = 0  # ElectLeaders' election_type

Acked = dict[tuple[int, int], bytes]


class WireClient(KafkaClient):
    """A client that keeps every Fetch the consumer sends and the answer it got."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fetches: list[tuple[int, FetchRequest, Any]] = []

    async def send(self, node_id: int, request_body: Any, *args: Any, **kwargs: Any) -> Any:
        resp = await super().send(node_id, request_body, *args, **kwargs)
        if request_body.API_KEY == ApiKey.FETCH:
            self.fetches.append((node_id, request_body, resp))
        return resp


async def _until(cond: Any, what: str, timeout: float = GUARD_S) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.2)


async def _leaders(control: KafkaClient, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """partition -> (leader, replicas), fresh from the brokers."""
    meta = (await control.metadata([topic])).topic(topic)
    assert meta is not None
    return {p.partition: (p.leader, tuple(p.replicas)) for p in meta.partitions}


class Flow:
    """The producer's and the consumer's loops, side by side on this event loop."""

    def __init__(self, producer: AsyncKafkaProducer, consumer: AsyncKafkaConsumer, topic: str) -> None:
        self.producer, self.consumer, self.topic = producer, consumer, topic
        self.futures: list[tuple[bytes, Any]] = []
        self.got: list[Any] = []
        self.stopping = asyncio.Event()
        self.tasks = [asyncio.create_task(self._produce()), asyncio.create_task(self._consume())]

    async def _produce(self) -> None:
        i = 0
        while not self.stopping.is_set():
            for _ in range(BURST):
                value = b"v%08d" % i
                self.futures.append(
                    (value, await self.producer.send(self.topic, value, partition=i % PARTITIONS))
                )
                i += 1
            await asyncio.sleep(STEP_S)

    async def _consume(self) -> None:
        while not self.stopping.is_set() or len(self.got) < len(self.futures):
            got = await self.consumer.poll(200)
            if got:
                self.got.extend(got)
                await self.consumer.commit(got)

    async def flowing(self, what: str) -> None:
        """Both sides move on: records acknowledged and consumed after this point."""
        sent, read = len(self.futures), len(self.got)

        async def moved() -> bool:
            self._raise()
            done = sum(1 for _, f in self.futures[sent:] if f.done())
            return done > 0 and len(self.got) > read

        try:
            await _until(moved, f"records produced and consumed after {what}")
        except AssertionError as exc:
            later = self.futures[sent:]
            failed = [f.exception() for _, f in later if f.done() and f.exception() is not None]
            raise AssertionError(
                f"{exc}: {sum(1 for _, f in later if f.done())} of {len(later)} records sent since "
                f"settled ({len(failed)} failed, first {failed[:1]}), {len(self.got) - read} consumed"
            ) from None

    def _raise(self) -> None:
        for task in self.tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def stop(self) -> Acked:
        """Stop producing; every record's outcome (all must be acknowledged); the consumer reads on."""
        self.stopping.set()
        await self.tasks[0]
        acked: Acked = {}
        for value, fut in self.futures:
            meta = await fut
            acked[(meta.partition, meta.offset)] = value
        return acked


async def _elect_preferred(control: KafkaClient, topic: str, node: int) -> None:
    """Give ``node`` back the leaderships it prefers: ElectLeaders until it leads them all (it
    must first be back in their in-sync replicas, which the broker says per partition)."""

    async def led_back() -> bool:
        leaders = await _leaders(control, topic)
        behind = sorted(
            p for p, (leader, replicas) in leaders.items() if replicas[0] == node and leader != node
        )
        if not behind:
            return True
        req = ElectLeadersRequest(
            election_type=PREFERRED,
            topic_partitions=[ElectLeadersRequest.TopicPartitions(topic=topic, partitions=behind)],
            timeout_ms=30_000,
        )
        resp = await control.send(node, req, timeout_ms=40_000)
        assert resp.error_code == ErrorCode.NONE, f"ElectLeaders: {resp.error_code}"
        return False

    await _until(led_back, f"node {node} leading its preferred partitions again")


def test_a_producer_and_a_group_consumer_over_a_thousand_partitions_across_leader_moves(
    kafka_three: KafkaCluster,
) -> None:
    cluster = kafka_three
    bootstrap = cluster.bootstrap
    topic = f"wide-leaders-{uuid.uuid4().hex[:10]}"
    group = f"g-wide-leaders-{uuid.uuid4().hex[:8]}"
    # Not waited for partition by partition (20 s at 1,000): the producer retries a partition
    # whose leader is not ready yet, and the first phase waits for records to flow.
    cluster.create_topic(topic, PARTITIONS, 3)
    victim = 2

    async def main() -> None:
        control = KafkaClient(bootstrap)
        wire = WireClient(bootstrap)
        producer = AsyncKafkaProducer(bootstrap, linger_ms=20, retry_backoff_max_ms=500)
        consumer = AsyncKafkaConsumer(
            client=wire,
            group_id=group,
            topics=[topic],
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=200,
        )
        flow = Flow(producer, consumer, topic)
        try:
            await flow.flowing("the start")
            before = await _leaders(control, topic)
            moved = {p for p, (leader, _) in before.items() if leader == victim}
            assert len(moved) > PARTITIONS // 10, f"node {victim} leads only {len(moved)} partitions"

            # First move: a controlled shutdown hands the node's leaderships to the other two.
            await asyncio.to_thread(cluster.stop_node, victim)

            async def handed_over() -> bool:
                return all(
                    leader not in (victim, -1) for leader, _ in (await _leaders(control, topic)).values()
                )

            await _until(handed_over, f"node {victim}'s partitions led by the others")
            await flow.flowing(f"node {victim} stopped")

            # Second move: the node is back, and a preferred-leader election returns them.
            await asyncio.to_thread(cluster.start_node, victim)
            await _elect_preferred(control, topic, victim)
            after = await _leaders(control, topic)
            assert {p for p, (leader, _) in after.items() if leader == victim} >= moved
            await flow.flowing("the preferred leaders' election")

            acked = await flow.stop()
            await _until(_all_read(flow, len(acked)), "every acknowledged record consumed")
            await flow.tasks[1]  # done: it ends once it has read what was produced
            # Nothing more comes: a record read twice would arrive now.
            mark = len(wire.fetches)
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                extra = await consumer.poll(200)
                flow.got.extend(extra)
            idle = wire.fetches[mark:]

            assert_exact(acked, sorted(flow.got, key=lambda m: (m.partition, m.offset)), PARTITIONS)
            assert len({p for p, _ in acked}) == PARTITIONS
            ends = dict.fromkeys(range(PARTITIONS), 0)
            for p, o in acked:
                ends[p] = max(ends[p], o + 1)
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            assert set(consumer.assignment()) == set(tps)
            positions = {tp.partition: await consumer.position(tp) for tp in tps}
            assert positions == ends, "positions differ from the partitions' ends"
            committed = await consumer.committed(tps)
            assert {tp.partition: off for tp, off in committed.items()} == ends, "committed offsets differ"
            _sessions_kept(idle, {leader for leader, _ in after.values()})
        finally:
            flow.stopping.set()
            for task in flow.tasks:
                task.cancel()
            await asyncio.gather(*flow.tasks, return_exceptions=True)
            await producer.close()
            await consumer.close()
            await wire.close()
            await control.close()

    try:
        asyncio.run(main())
    finally:
        if victim not in cluster.running_nodes():
            cluster.start_node(victim)
        # 3,000 replicas would slow every restart of the tests that share the cluster after this.
        with KafkaAdmin(bootstrap) as admin:
            admin.delete_topics([topic])


def _all_read(flow: Flow, n: int) -> Any:
    async def cond() -> bool:
        if flow.tasks[1].done():
            flow.tasks[1].result()
        return len(flow.got) >= n

    return cond


def _sessions_kept(idle: list[tuple[int, FetchRequest, Any]], leaders: set[int]) -> None:
    """An idle consumer fetches from every leader in sessions, naming and receiving no partition;
    each session's epochs follow one another."""
    assert {node for node, _, _ in idle} == leaders, "not fetching from every leader"
    epochs: dict[int, list[int]] = defaultdict(list)
    for node, req, resp in idle:
        # The first idle Fetch of a lane may still carry the last positions' updates.
        if sum(len(t.partitions) for t in req.topics):
            continue
        assert req.session_id != 0 and req.session_epoch > 0, (
            f"an idle Fetch to node {node} without a session"
        )
        assert resp.error_code == ErrorCode.NONE and resp.session_id == req.session_id
        assert sum(len(t.partitions) for t in resp.responses) == 0, "an idle answer carried partitions"
        epochs[req.session_id].append(req.session_epoch)
    assert {node for node, req, _ in idle if req.session_id in epochs} == leaders, (
        "a leader without a session"
    )
    for seq in epochs.values():
        assert seq == list(range(seq[0], seq[0] + len(seq))), f"session epochs skip: {seq}"
