"""The admin client against the real broker (Tansu, or Apache Kafka from KAFKA_BOOTSTRAP_SERVERS).

Records are produced one acknowledged send at a time, so every batch holds one record and Tansu's
"latest" offset (last batch's base + 1) is the true end. Where Tansu differs from Apache Kafka the
test asserts Kafka's behaviour and is marked ``tansu_deviation``; what only a multi-broker
cluster can show (routing per leader and coordinator, retries) is in test_admin_mock.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from fakes.stamps import RECENT_MS
from fakes.topics import listing_with

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from kafka_core.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclResourceType,
    ConfigResource,
    GroupLag,
    OffsetAndMetadata,
    Result,
    TopicDescription,
)
from kafka_core.aio import KafkaAdmin as AsyncKafkaAdmin
from kafka_core.devbroker import KafkaCluster
from kafka_core.errors import KafkaConfigError, KafkaProtocolError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
SECURITY_DISABLED = 54
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


@pytest.fixture
def admin(bootstrap_servers: str) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(bootstrap_servers) as a:
        yield a


def name(prefix: str = "adm") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def produce_one_by_one(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` records into partition ``p``, each acknowledged before the next is sent."""
    with KafkaProducer(bootstrap) as producer:
        for partition, n in counts.items():
            for i in range(n):
                producer.send(topic, b"v%d" % i, key=b"k", partition=partition).result()


def group_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
    )


def consume(consumer: KafkaConsumer, n: int, timeout: float = 40.0) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        got += len(consumer.poll(500, max_records=n - got))
    return got


# -- topics ------------------------------------------------------------------------------------


@pytest.mark.seaweed_deviation(
    "DescribeCluster names node 1 while Metadata names another node id (a large per-run number)"
)
def test_create_topic_with_configs_then_describe(admin: KafkaAdmin) -> None:
    topic = name()
    res = admin.create_topics([NewTopic(topic, 3, 1, {"retention.ms": "123456"})])
    assert list(res) == [topic]
    assert res[topic].ok and res[topic].result() is None
    desc = described(admin, topic, partitions=3)
    assert desc.name == topic and not desc.internal
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.leader in p.replicas for p in desc.partitions)
    cluster = admin.describe_cluster()
    assert {p.leader for p in desc.partitions} <= {b.node_id for b in cluster.brokers}
    configs = admin.describe_configs([ConfigResource.topic(topic)])[ConfigResource.topic(topic)].result()
    assert configs["retention.ms"].value == "123456"
    assert topic in admin.list_topics()


def not_there_yet(result: Result[TopicDescription], partitions: int) -> bool:
    """Apache Kafka answers CreateTopics and CreatePartitions once the controller has them, and
    the broker's metadata has them a moment later (Java's admin is as eventually consistent):
    Kafka 3.9.2 in CI answered UNKNOWN_TOPIC_OR_PARTITION right after both calls had answered."""
    if result.error is not None:
        return (
            isinstance(result.error, KafkaProtocolError) and result.error.code == UNKNOWN_TOPIC_OR_PARTITION
        )
    return len(result.result().partitions) < partitions


def described(admin: KafkaAdmin, topic: str, partitions: int = 1) -> TopicDescription:
    """The topic's description once the broker's metadata has it with ``partitions`` or more
    (:func:`not_there_yet`; 30 s hang guard), or its error raised."""
    deadline = time.monotonic() + 30
    result = admin.describe_topics([topic])[topic]
    while not_there_yet(result, partitions) and time.monotonic() < deadline:
        time.sleep(0.1)
        result = admin.describe_topics([topic])[topic]
    return result.result()


@pytest.mark.seaweed_deviation("CreateTopics accepts a topic that already exists (no TOPIC_ALREADY_EXISTS)")
def test_duplicate_topic_gets_its_own_error_while_others_succeed(admin: KafkaAdmin) -> None:
    existing, fresh = name(), name()
    assert admin.create_topics([NewTopic(existing, 1, 1)])[existing].ok
    res = admin.create_topics([NewTopic(existing, 1, 1), NewTopic(fresh, 2, 1)])
    assert res[fresh].ok
    err = res[existing].error
    assert isinstance(err, KafkaProtocolError)
    assert (err.code, err.name) == (TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS")
    with pytest.raises(KafkaProtocolError) as raised:
        res[existing].result()
    assert raised.value.code == TOPIC_ALREADY_EXISTS
    listing_with(admin, [fresh])
    assert len(described(admin, fresh, partitions=2).partitions) == 2


@pytest.mark.seaweed_deviation("CreateTopics ignores validate_only and creates the topic")
@pytest.mark.tansu_deviation("CreateTopics validate_only creates the topic anyway")
def test_validate_only_creates_nothing(admin: KafkaAdmin) -> None:
    topic = name()
    res = admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True)
    assert res[topic].ok
    assert topic not in admin.list_topics()


@pytest.mark.seaweed_deviation(
    "advertises DeleteTopics v4 but encodes its answer non-flexible (garbled response)"
)
def test_delete_topics_per_topic_results(admin: KafkaAdmin) -> None:
    a, b, missing = name(), name(), name("missing")
    admin.create_topics([NewTopic(a, 1, 1), NewTopic(b, 1, 1)])
    res = admin.delete_topics([a, b, missing])
    assert res[a].ok and res[b].ok
    assert res[missing].error.code == UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]
    # Apache Kafka answers once the controller has deleted them; the broker's metadata drops them a
    # moment later (seen under load in CI), so the listing is read until they go.
    deadline = time.monotonic() + 30  # a hang guard
    while {a, b} & set(admin.list_topics()) and time.monotonic() < deadline:
        time.sleep(0.1)
    topics = admin.list_topics()
    assert a not in topics and b not in topics


@pytest.mark.seaweed_deviation(
    "creates unknown topics on Metadata: describing a missing topic answers it, no UNKNOWN_TOPIC_OR_PARTITION"
)
def test_list_and_describe_topics(admin: KafkaAdmin) -> None:
    names = sorted(name() for _ in range(3))
    admin.create_topics([NewTopic(n, 1, 1) for n in names])
    listed = listing_with(admin, names)
    assert listed == sorted(listed) and set(names) <= set(listed)
    missing = name("missing")
    desc = admin.describe_topics([names[0], missing])
    assert desc[names[0]].ok and desc[names[0]].value.name == names[0]  # type: ignore[union-attr]
    assert desc[missing].error.code == UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]
    assert missing not in admin.list_topics()  # asking about it did not auto-create it
    everything = admin.describe_topics(None)
    assert set(names) <= set(everything)


def test_describe_cluster(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    cluster = admin.describe_cluster()
    assert cluster.brokers
    ids = [b.node_id for b in cluster.brokers]
    assert cluster.controller in ids
    ports = {int(s.rsplit(":", 1)[1]) for s in bootstrap_servers.split(",")}
    assert ports & {b.port for b in cluster.brokers}


@pytest.mark.seaweed_deviation("no IncrementalAlterConfigs (not in ApiVersions)")
def test_incremental_alter_configs(admin: KafkaAdmin) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1, {"retention.ms": "100000"})])
    res = admin.incremental_alter_configs({ConfigResource.topic(topic): {"retention.ms": "5000"}})
    assert res[ConfigResource.topic(topic)].ok
    # KRaft answers the alter once the controller has it; the broker that answers DescribeConfigs
    # applies it when it reads the metadata log, a moment later (seen: the old value 0.5 s on).
    deadline = time.monotonic() + 30
    while True:
        configs = admin.describe_configs([("topic", topic)])[ConfigResource.topic(topic)].result()
        if configs["retention.ms"].value == "5000" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert configs["retention.ms"].value == "5000"


@pytest.mark.seaweed_deviation(
    "DescribeCluster names node 1, which Metadata does not know (its node id differs), so no broker to ask"
)
def test_broker_configs_go_to_that_broker(admin: KafkaAdmin) -> None:
    node = admin.describe_cluster().brokers[0].node_id
    res = admin.describe_configs([ConfigResource.broker(node)])
    assert isinstance(res[ConfigResource.broker(node)].result(), dict)
    with pytest.raises(KafkaConfigError):
        admin.describe_configs([("no-such-kind", "x")])


# -- offsets -----------------------------------------------------------------------------------


def test_list_offsets_each_spec(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 2, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 4})
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert admin.list_offsets({p0: "earliest", p1: "earliest"}) == {
        p0: admin.list_offsets({p0: "earliest"})[p0],
        p1: admin.list_offsets({p1: "earliest"})[p1],
    }
    assert admin.list_offsets({p0: "earliest"})[p0].result().offset == 0
    latest = admin.list_offsets({p0: "latest", p1: "latest"})
    assert latest[p0].result().offset == 4 and latest[p1].result().offset == 0
    assert admin.list_offsets({p0: 0})[p0].result().offset == 0  # first record at or after t=0
    bad = admin.list_offsets({p0: "latest", (topic, 7): "latest"})
    assert bad[p0].ok and bad[TopicPartition(topic, 7)].error.code == UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[union-attr]
    with pytest.raises(KafkaConfigError):
        admin.list_offsets({p0: "newest"})


@pytest.mark.seaweed_deviation("ListOffsets for a timestamp past the end answers offset 0, not -1")
@pytest.mark.tansu_deviation("ListOffsets by timestamp uses write time and never answers -1 for a future one")
def test_list_offsets_future_timestamp_finds_nothing(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 2})
    future = int(time.time() * 1000) + 3_600_000
    assert admin.list_offsets({(topic, 0): future})[TopicPartition(topic, 0)].result().offset == -1


@pytest.mark.seaweed_deviation("ListOffsets only to v2: no max timestamp (v7)")
@pytest.mark.tansu_deviation("ListOffsets max_timestamp (-3) makes the broker drop the connection")
def test_list_offsets_max_timestamp(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    with KafkaProducer(bootstrap_servers) as producer:
        for i, ts in enumerate([1_000, 9_000, 5_000]):
            producer.send(topic, b"%d" % i, partition=0, timestamp_ms=RECENT_MS + ts).result()
    got = admin.list_offsets({(topic, 0): "max_timestamp"}, timeout_ms=5_000)[TopicPartition(topic, 0)]
    assert got.result().offset == 1 and got.result().timestamp == RECENT_MS + 9_000


@pytest.mark.tansu_deviation("ListOffsets latest is the last batch's base offset + 1")
def test_latest_after_a_multi_record_batch(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    with KafkaProducer(bootstrap_servers, linger_ms=50) as producer:
        futures = [producer.send(topic, b"x", partition=0) for _ in range(10)]
        producer.flush()
        assert all(f.result().offset >= 0 for f in futures)
    assert admin.list_offsets({(topic, 0): "latest"})[TopicPartition(topic, 0)].result().offset == 10


@pytest.mark.seaweed_deviation(
    "an OffsetCommit from outside a group (generation -1) answers without the committed partition"
)
@pytest.mark.tansu_deviation(
    "ListOffsets latest is the last batch's base offset + 1: after one 100-record batch Tansu answers "
    "offset 1 with the batch's timestamp where Kafka answers 100 with timestamp -1 (same v9+ request, "
    "timestamp -1, read_uncommitted), so the lag of a group 60 behind reads 0"
)
def test_lag_after_a_multi_record_batch(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic, group = name(), name("grp")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with KafkaProducer(bootstrap_servers, linger_ms=100) as producer:
        futures = [producer.send(topic, b"v%d" % i, partition=0) for i in range(100)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(100))
    assert admin.alter_group_offsets(group, {(topic, 0): 40})[TopicPartition(topic, 0)].ok
    part = admin.consumer_group_lag(group)[(topic, 0)]
    assert (part.committed, part.end, part.lag) == (40, 100, 60)  # type: ignore[union-attr]


@pytest.mark.seaweed_deviation("no DeleteRecords (not in ApiVersions)")
@pytest.mark.tansu_deviation("DeleteRecords panics a broker worker (the connection drops)")
def test_delete_records(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 5})
    tp = TopicPartition(topic, 0)
    started = time.monotonic()
    res = admin.delete_records({tp: 3}, timeout_ms=5_000)
    assert time.monotonic() - started < 5.0 + 10.0  # the call honours its timeout
    assert res[tp].result() == 3
    assert admin.list_offsets({tp: "earliest"})[tp].result().offset == 3


@pytest.mark.seaweed_deviation("no CreatePartitions (not in ApiVersions)")
@pytest.mark.tansu_deviation("CreatePartitions is not offered (KafkaUnsupportedVersionError)")
def test_create_partitions(admin: KafkaAdmin) -> None:
    topic = name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    res = admin.create_partitions({topic: 3, name("missing"): 2})
    assert res[topic].ok
    assert len(described(admin, topic, partitions=3).partitions) == 3


# -- groups ------------------------------------------------------------------------------------


@pytest.mark.seaweed_deviation(
    "advertises ListGroups v4 but encodes its answer non-flexible (garbled response)"
)
def test_group_lifecycle_with_a_real_consumer(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic, group = name(), name("grp")
    admin.create_topics([NewTopic(topic, 3, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 5, 1: 3, 2: 2})
    consumer = group_consumer(bootstrap_servers, topic, group)
    try:
        assert consume(consumer, 10) == 10
        consumer.commit()
        listing = {g.group_id: g for g in admin.list_groups()}
        assert group in listing and listing[group].protocol_type == "consumer"
        desc = admin.describe_groups([group])[group].result()
        assert desc.protocol_type == "consumer" and desc.state == "Stable"
        assert len(desc.members) == 1 and desc.members[0].member_id
    finally:
        consumer.close()
    offsets = admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in offsets.items()} == {
        TopicPartition(topic, 0): 5,
        TopicPartition(topic, 1): 3,
        TopicPartition(topic, 2): 2,
    }
    assert admin.consumer_group_lag(group).total == 0
    # Rewind two partitions; the lag follows.
    res = admin.alter_group_offsets(group, {(topic, 0): 1, TopicPartition(topic, 1): OffsetAndMetadata(0)})
    assert all(r.ok for r in res.values()) and len(res) == 2
    lag = admin.consumer_group_lag(group)
    assert isinstance(lag, GroupLag)
    assert lag.total == lag["total"] == 4 + 3
    assert lag[(topic, 0)].lag == 4 and lag[(topic, 0)].end == 5  # type: ignore[union-attr]
    assert [p.partition for p in lag] == [0, 1, 2]
    assert admin.delete_groups([group])[group].ok
    assert admin.list_group_offsets(group) == {}


@pytest.mark.tansu_deviation(
    "DescribeGroups answers members with empty assignment and metadata; DeleteGroups deletes an active group"
)
@pytest.mark.seaweed_deviation(
    "advertises DescribeGroups v5 but encodes its answer non-flexible (garbled response)"
)
def test_active_group_assignment_and_no_delete(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic, group = name(), name("grp")
    admin.create_topics([NewTopic(topic, 3, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 1})
    consumer = group_consumer(bootstrap_servers, topic, group)
    try:
        assert consume(consumer, 1) == 1
        [member] = admin.describe_groups([group])[group].result().members
        busy = admin.delete_groups([group])[group].error
        assert isinstance(busy, KafkaProtocolError) and busy.code == NON_EMPTY_GROUP
        assert sorted(member.assignment) == [TopicPartition(topic, p) for p in range(3)]
    finally:
        consumer.close()


@pytest.mark.seaweed_deviation(
    "an OffsetCommit from outside a group (generation -1) answers without the committed partition"
)
def test_lag_reports_partitions_without_a_commit(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic, group = name(), name("grp")
    admin.create_topics([NewTopic(topic, 2, 1)])
    produce_one_by_one(bootstrap_servers, topic, {0: 3, 1: 4})
    assert admin.alter_group_offsets(group, {(topic, 0): 1})[TopicPartition(topic, 0)].ok
    lag = admin.consumer_group_lag(group)
    uncommitted = lag[(topic, 1)]
    assert (uncommitted.committed, uncommitted.end, uncommitted.lag) == (None, 4, None)  # type: ignore[union-attr]
    assert lag.total == 2


@pytest.mark.seaweed_deviation(
    "advertises DescribeGroups v5 but encodes its answer non-flexible (garbled response)"
)
@pytest.mark.tansu_deviation("an unknown group is described as Empty and deleted without error")
def test_unknown_group(admin: KafkaAdmin) -> None:
    ghost = name("ghost")
    err = admin.describe_groups([ghost])[ghost].error
    assert isinstance(err, KafkaProtocolError) and err.code == GROUP_ID_NOT_FOUND
    err = admin.delete_groups([ghost])[ghost].error
    assert isinstance(err, KafkaProtocolError) and err.code == GROUP_ID_NOT_FOUND


@pytest.mark.seaweed_deviation("no OffsetDelete (not in ApiVersions)")
@pytest.mark.tansu_deviation("OffsetDelete is not offered (KafkaUnsupportedVersionError)")
def test_delete_group_offsets(admin: KafkaAdmin, bootstrap_servers: str) -> None:
    topic, group = name(), name("grp")
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.alter_group_offsets(group, {(topic, 0): 0, (topic, 1): 0})
    res = admin.delete_group_offsets(group, [(topic, 0)])
    assert res[TopicPartition(topic, 0)].ok
    assert set(admin.list_group_offsets(group)) == {TopicPartition(topic, 1)}


# -- ACLs, metrics, the asyncio face -----------------------------------------------------------


@pytest.fixture
def admin_without_authorizer(
    bootstrap_servers: str, kafka_cluster: KafkaCluster | None
) -> Iterator[KafkaAdmin]:
    """An admin on a broker that has no authorizer. The session's embedded Apache Kafka has one
    (StandardAuthorizer, for the security tests), so a one-node cluster of the test's own is
    started without it; Tansu has none, and an external broker is taken as it is."""
    if kafka_cluster is None:
        with KafkaAdmin(bootstrap_servers) as a:
            yield a
        return
    own = KafkaCluster(1, version=kafka_cluster.version, overrides={"authorizer.class.name": ""})
    try:
        own.start()
        with KafkaAdmin(own.bootstrap) as a:
            yield a
    finally:
        own.close()


@pytest.mark.tansu_deviation(
    "no authorizer: DescribeAcls answers an empty list, CreateAcls a null result array"
)
@pytest.mark.seaweed_deviation("no ACL APIs (DescribeAcls not in ApiVersions)")
def test_acls_without_an_authorizer_say_security_disabled(admin_without_authorizer: KafkaAdmin) -> None:
    """ACL calls on a broker without an authorizer: SECURITY_DISABLED (the same calls against an
    authorizing broker are in test_kafka_security.py and test_acls_on_an_authorizing_broker)."""
    admin = admin_without_authorizer
    with pytest.raises(KafkaProtocolError) as raised:
        admin.describe_acls()
    assert raised.value.code == SECURITY_DISABLED
    binding = AclBinding(AclResourceType.TOPIC, name(), "User:alice", AclOperation.READ)
    err = admin.create_acls([binding])[binding].error
    assert isinstance(err, KafkaProtocolError) and err.code == SECURITY_DISABLED


def test_acls_on_an_authorizing_broker(real_kafka: KafkaCluster) -> None:
    """The companion of the test above: Apache Kafka with its StandardAuthorizer (the session's
    own, or one started for it), where the same calls create, describe and delete an ACL."""
    with KafkaAdmin(real_kafka.bootstrap) as admin:
        _acls_round_trip(admin)


def _acls_round_trip(admin: KafkaAdmin) -> None:
    topic = name()
    binding = AclBinding(AclResourceType.TOPIC, topic, "User:alice", AclOperation.READ)
    assert admin.create_acls([binding])[binding].error is None
    mine = AclBindingFilter(resource_name=topic)
    deadline = time.monotonic() + 30  # a hang guard: the ACL reaches the broker's cache a moment later
    while binding not in admin.describe_acls(mine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert admin.describe_acls(mine) == [binding]
    [deleted] = admin.delete_acls([mine]).values()
    assert deleted.result() == [binding]
    # The deletion reaches the authorizer's cache through the metadata log a moment later, as the
    # creation did: Kafka 3.9 answered the next DescribeAcls with the deleted binding still there.
    deadline = time.monotonic() + 30
    while admin.describe_acls(mine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert admin.describe_acls(mine) == []


def test_metrics_count_admin_requests(admin: KafkaAdmin) -> None:
    admin.create_topics([NewTopic(name(), 1, 1)])
    snapshot = admin.metrics()
    assert isinstance(snapshot, dict)
    assert snapshot["network"]["requests"]["CREATE_TOPICS"]


@pytest.mark.seaweed_deviation("CreateTopics accepts a topic that already exists (no TOPIC_ALREADY_EXISTS)")
def test_asyncio_face(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    async def main() -> None:
        async with AsyncKafkaAdmin(bootstrap_servers) as admin:
            topic, dup = name(), new_topic(1)
            res = await admin.create_topics([NewTopic(topic, 2, 1), NewTopic(dup, 1, 1)])
            assert res[topic].ok and res[dup].error.code == TOPIC_ALREADY_EXISTS  # type: ignore[union-attr]
            deadline = time.monotonic() + 30  # a hang guard
            desc = await admin.describe_topics([topic])
            while not_there_yet(desc[topic], 2) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                desc = await admin.describe_topics([topic])
            assert len(desc[topic].result().partitions) == 2
            group = name("grp")
            await admin.alter_group_offsets(group, {(topic, 0): 0})
            assert (await admin.list_group_offsets(group))[TopicPartition(topic, 0)].offset == 0
            assert (await admin.consumer_group_lag(group))["total"] == 0
            assert (await admin.delete_topics([topic]))[topic].ok

    asyncio.run(main())
