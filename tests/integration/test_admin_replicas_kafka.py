"""Partition reassignments, leader elections and log dirs on a three-node Apache Kafka
(``kafka_three``): a partition moved from one node to another while a producer and a consumer
run loses nothing and reads nothing twice; a preferred election moves the leader to the first
replica; the log dirs show where the data went.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from fakes.timing import wait_until
from fakes.topics import wait_writable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, TopicPartition
from kafka_core.aio import KafkaAdmin as AsyncKafkaAdmin
from kafka_core.devbroker import KafkaCluster
from kafka_core.errors import KafkaConfigError, KafkaProtocolError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


@pytest.fixture
def admin(kafka_three: KafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kafka_three.bootstrap, api_timeout_ms=30_000) as a:
        yield a


def new_topic(cluster: KafkaCluster, replication: int, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(name, 1, replication, {"min.insync.replicas": "1"})
    wait_writable(cluster.bootstrap, name, 1)
    return name


def placement(admin: KafkaAdmin, tp: TopicPartition) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, replicas, isr) of the partition, from fresh metadata."""
    (p,) = [
        p
        for p in admin.describe_topics([tp.topic])[tp.topic].result().partitions
        if p.partition == tp.partition
    ]
    return p.leader, tuple(p.replicas), tuple(p.isr)


class Traffic:
    """A producer sending numbered records one after another and a consumer reading them, each
    in its own thread, until stopped: what was acknowledged and what was read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()  # the producer's
        self.done = threading.Event()  # the consumer's
        self.acked: list[int] = []
        self.failed: list[BaseException] = []
        self.read: list[int] = []
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.done.set()
        for t in self.threads:
            t.join(90)

    def stop_producing(self) -> None:
        self.stop.set()
        self.threads[0].join(90)

    def _produce(self) -> None:
        with KafkaProducer(self.bootstrap, acks="all", linger_ms=1, request_timeout_ms=20_000) as producer:
            i = 0
            while not self.stop.is_set():
                try:
                    producer.send(self.topic, str(i).encode(), partition=0).result(60)
                    self.acked.append(i)
                except Exception as exc:  # what the test reports: a record lost to the move
                    self.failed.append(exc)
                i += 1

    def _consume(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, topics=[self.topic], group_id=None, auto_offset_reset="earliest"
        )
        try:
            while not self.done.is_set():
                self.read.extend(int(m.value) for m in consumer.poll(timeout_ms=200))
        finally:
            consumer.close()


def test_a_partition_moved_between_two_nodes_under_traffic_loses_nothing(
    kafka_three: KafkaCluster, admin: KafkaAdmin
) -> None:
    topic = new_topic(kafka_three, 1, "move")
    tp = TopicPartition(topic, 0)
    _, (source,), _ = placement(admin, tp)
    target = next(n.node_id for n in kafka_three.nodes if n.node_id != source)
    with Traffic(kafka_three.bootstrap, topic) as traffic:
        assert wait_until(lambda: len(traffic.acked) >= 200, 60), traffic.failed[:3]
        moved = admin.alter_partition_reassignments({tp: [target]})
        moved[tp].result()
        assert wait_until(lambda: admin.list_partition_reassignments([tp]) == {}, 120)
        assert wait_until(lambda: placement(admin, tp) == (target, (target,), (target,)), 60)
        before = len(traffic.acked)
        assert wait_until(lambda: len(traffic.acked) >= before + 200, 60), traffic.failed[:3]
        traffic.stop_producing()
        assert wait_until(lambda: len(traffic.read) >= len(traffic.acked), 60)
    assert traffic.failed == []
    assert traffic.read[: len(traffic.acked)] == traffic.acked == list(range(len(traffic.acked)))
    assert len(set(traffic.read)) == len(traffic.read)  # nothing read twice

    # The data now lives on the target's log dir only.
    dirs = admin.describe_log_dirs([source, target], topics=[topic])
    on = {node: [tp in d.replicas for d in res.result().values()] for node, res in dirs.items()}
    assert any(on[target]) and not any(on[source])
    (where,) = [d for d in dirs[target].result().values() if tp in d.replicas]
    assert where.replicas[tp].size > 0 and where.error is None
    assert where.total_bytes is not None and where.usable_bytes is not None


def test_reassignment_errors_by_name(admin: KafkaAdmin, kafka_three: KafkaCluster) -> None:
    topic = new_topic(kafka_three, 1, "badmove")
    tp = TopicPartition(topic, 0)
    result = admin.alter_partition_reassignments({tp: [99], (topic, 5): [1]})
    assert isinstance(result[tp].error, KafkaProtocolError)
    assert result[tp].error.name in ("INVALID_REPLICA_ASSIGNMENT", "INVALID_REQUEST")
    assert result[TopicPartition(topic, 5)].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    cancel = admin.alter_partition_reassignments({tp: None})  # nothing under way to cancel
    assert cancel[tp].error.name == "NO_REASSIGNMENT_IN_PROGRESS"
    with pytest.raises(KafkaConfigError):
        admin.alter_partition_reassignments({tp: [1, 1]})


def test_a_preferred_election_moves_the_leader_to_the_first_replica(
    admin: KafkaAdmin, kafka_three: KafkaCluster
) -> None:
    topic = new_topic(kafka_three, 3, "elect")
    tp = TopicPartition(topic, 0)
    leader, replicas, _ = placement(admin, tp)
    # The same replicas in an order that puts another node first: the leader stays until elected.
    order = [n for n in replicas if n != leader] + [leader]
    admin.alter_partition_reassignments({tp: order})[tp].result()
    assert wait_until(lambda: placement(admin, tp)[1] == tuple(order), 60)
    assert placement(admin, tp)[0] == leader

    elected = admin.elect_leaders("preferred", [tp])
    assert elected[tp].ok, elected[tp]
    assert wait_until(lambda: placement(admin, tp)[0] == order[0], 30)
    again = admin.elect_leaders("preferred", [tp])
    assert again[tp].error.name == "ELECTION_NOT_NEEDED"
    # An unclean election where the leader is alive and in sync is not needed either.
    unclean = admin.elect_leaders("unclean", [tp])
    assert unclean[tp].error.name == "ELECTION_NOT_NEEDED"
    missing = admin.elect_leaders("preferred", [(topic, 7)])
    assert missing[TopicPartition(topic, 7)].error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    with pytest.raises(KafkaConfigError):
        admin.elect_leaders("fastest", [tp])


def test_the_asyncio_face_describes_log_dirs_and_lists_reassignments(kafka_three: KafkaCluster) -> None:
    import asyncio

    async def main() -> None:
        async with AsyncKafkaAdmin(kafka_three.bootstrap) as admin:
            dirs = await admin.describe_log_dirs()
            assert sorted(dirs) == [n.node_id for n in kafka_three.nodes]
            assert all(len(r.result()) >= 1 for r in dirs.values())
            assert isinstance(await admin.list_partition_reassignments(), dict)

    asyncio.run(main())


def test_an_unclean_election_lets_a_replica_out_of_sync_lead_and_loses_what_it_lacks(
    kafka_three: KafkaCluster,
) -> None:
    """The leader crashes while its only follower is out of the ISR (it was stopped while
    records were written): nobody may lead until an unclean election lets the follower, which
    lacks those records."""
    cluster = kafka_three
    topic = new_topic(cluster, 2, "unclean")
    tp = TopicPartition(topic, 0)
    with KafkaAdmin(cluster.bootstrap, api_timeout_ms=30_000) as admin:
        leader, replicas, _ = placement(admin, tp)
    follower = next(r for r in replicas if r != leader)
    third = next(n.node_id for n in cluster.nodes if n.node_id not in replicas)
    with KafkaProducer(cluster.bootstrap, acks="all") as producer:
        for i in range(5):
            producer.send(topic, b"both %d" % i, partition=0).result(30)
    stopped: list[int] = []
    try:
        cluster.stop_node(follower)  # a clean shutdown: out of the ISR at once
        stopped.append(follower)
        with KafkaProducer(cluster.bootstrap, acks="all", request_timeout_ms=15_000) as producer:
            for i in range(5):
                producer.send(topic, b"leader only %d" % i, partition=0).result(60)
        cluster.kill_node(leader)  # the quorum is lost until the follower is back
        stopped.append(leader)
        cluster.start_node(follower)
        stopped.remove(follower)
        alive = cluster.addresses().split(",")
        survivors = ",".join(a for a in alive if not a.endswith(f":{cluster.node(leader).port}"))
        with KafkaAdmin(survivors, api_timeout_ms=60_000) as admin:
            assert wait_until(lambda: placement(admin, tp)[0] < 0, 90), placement(admin, tp)
            refused = admin.elect_leaders("preferred", [tp])
            assert refused[tp].error.name in (
                "PREFERRED_LEADER_NOT_AVAILABLE",
                "ELIGIBLE_LEADERS_NOT_AVAILABLE",
            )
            elected = admin.elect_leaders("unclean", [tp])
            assert elected[tp].ok, elected[tp]
            assert wait_until(lambda: placement(admin, tp)[0] == follower, 60)
            end = admin.list_offsets({tp: "latest"})[tp].result().offset
            assert end == 5  # the five written while it was away are gone with the old leader
        assert third in cluster.running_nodes()
    finally:
        for node_id in stopped:
            cluster.start_node(node_id)
