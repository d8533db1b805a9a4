"""The KIP-848 consumer group protocol (``group_protocol="consumer"``) against real brokers.

librdkafka's mock cluster runs ConsumerGroupHeartbeat with its own range assignor (and lets a
test force the next target assignment); Tansu does not offer the API, so there the broker test
asserts Apache Kafka 4's behaviour under a ``tansu_deviation`` mark, and a second test asserts
the clear error a broker without the API gives. Where the mock deviates from Kafka, the test is
a strict xfail on the mock and runs for real on the session's Apache Kafka (mock_or_kafka).
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes.real_broker import RealKafka, mock_or_kafka, real_or_mock
from test_consumer import drain, produce
from test_consumer_group import Poller, wait_until

from kafka_core import KafkaAdmin
from kafka_core.admin import GroupDescription
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaProtocolError, KafkaTimeoutError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import ApiVersionsRequest
from kafka_core.sync_client import KafkaClient

pytestmark = pytest.mark.timeout(180)

FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
OFFSET_COMMIT = 8
CLEAR_ERROR = r"does not support the KIP-848 consumer group protocol \(ConsumerGroupHeartbeat\); use group_protocol='classic'"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> MockCluster | RealKafka:
    """The mock; for the tests marked mock_or_kafka, also the session's Apache Kafka."""

    def mock() -> MockCluster:
        cluster: MockCluster = request.getfixturevalue("mock_cluster")
        # A long session: a member that left must be seen to leave, not to time out.
        cluster.set_group_consumer_timeouts(session_timeout_ms=60_000, heartbeat_interval_ms=200)
        return cluster

    return real_or_mock(request, mock)  # type: ignore[no-any-return]


def mock_topic(cluster: MockCluster | RealKafka, partitions: int, prefix: str = "kip848") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(name, partitions, 3)
    return name


def member(bootstrap: str, group: str, events: list, name: str, **kw: Any) -> KafkaConsumer:
    kw.setdefault("topics", None)
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol="consumer",
        auto_offset_reset="earliest",
        on_assign=lambda tps: events.append((name, "assign", frozenset(tps))),
        on_revoke=lambda tps: events.append((name, "revoke", frozenset(tps))),
        on_lost=lambda tps: events.append((name, "lost", frozenset(tps))),
        **kw,
    )


def tps(topic: str, partitions: Any) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def stable(*members: KafkaConsumer) -> bool:
    """Every member at the same epoch: the mock's group has no epoch bump pending."""
    return len({m.group_metadata().generation_id for m in members}) == 1


def of(events: list, name: str, kind: str) -> list[frozenset]:
    return [e[2] for e in events if e[0] == name and e[1] == kind]


def told(events: list, name: str, m: KafkaConsumer) -> bool:
    """``m``'s callbacks have caught up with its assignment (assigned minus taken away)."""
    held: set[TopicPartition] = set()
    for who, kind, parts in list(events):
        if who == name:
            held = held | parts if kind == "assign" else held - parts
    return held == m.assignment()


@pytest.fixture
def closing() -> Iterator[list[KafkaConsumer]]:
    made: list[KafkaConsumer] = []
    yield made
    errors = []
    # Every one closed, whatever the others raise, each with its final commit: closing one member
    # moves the others' epochs, and a commit racing that heartbeat meets STALE_MEMBER_EPOCH,
    # which the consumer retries once the next heartbeat brought the new epoch.
    for c in made:
        try:
            c.close(10)
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def test_second_member_takes_partitions_incrementally_and_each_record_is_consumed_once(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    topic = mock_topic(cluster, 6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, topic, 600, partitions=6)
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic])
    closing.append(a)
    pa = Poller(a)
    assert wait_until(lambda: len(pa.messages) >= 300 and a.assignment() == tps(topic, range(6)))
    b = member(cluster.bootstrap, group, events, "b", topics=[topic])
    closing.append(b)
    pb = Poller(b)
    assert wait_until(
        lambda: (
            bool(a.assignment())
            and bool(b.assignment())
            and not of(events, "b", "assign")[1:]
            and len(a.assignment() | b.assignment()) == 6
        )
    )
    assert not a.assignment() & b.assignment()
    produce(cluster.bootstrap, topic, 600, partitions=6, start=600)
    assert wait_until(lambda: len(pa.messages) + len(pb.messages) >= 1200)
    pa.stop()
    pb.stop()
    got = [(m.partition, m.offset) for m in pa.messages + pb.messages]
    assert len(got) == len(set(got)) == 1200  # every record once, across both, with the commits
    moved = frozenset(b.assignment())
    # Incremental: a was assigned everything once, then revoked exactly what b got, before b had it.
    assert of(events, "a", "assign") == [frozenset(tps(topic, range(6)))]
    assert of(events, "a", "revoke") == [moved]
    assert of(events, "b", "assign") == [moved]
    assert events.index(("a", "revoke", moved)) < events.index(("b", "assign", moved))
    assert not of(events, "a", "lost") and not of(events, "b", "lost")
    # Commits carry the member epoch (group_metadata's generation); b's partitions were read
    # from where a committed them, none twice.
    assert a.group_metadata().generation_id > 0 and b.group_metadata().member_id


def test_forced_target_assignment_is_reconciled(cluster: MockCluster, closing: list[KafkaConsumer]) -> None:
    topic = mock_topic(cluster, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic])
    b = member(cluster.bootstrap, group, events, "b", topics=[topic])
    closing.extend([a, b])
    pa, pb = Poller(a), Poller(b)
    assert wait_until(lambda: bool(a.assignment()) and bool(b.assignment()) and stable(a, b))
    ida, idb = a.group_metadata().member_id, b.group_metadata().member_id
    cluster.set_consumer_target_assignment(
        group, {ida: [(topic, 3)], idb: [(topic, 0), (topic, 1), (topic, 2)]}
    )
    assert wait_until(lambda: a.assignment() == tps(topic, [3]) and b.assignment() == tps(topic, [0, 1, 2]))
    assert wait_until(lambda: stable(a, b))
    pa.stop()
    pb.stop()


def test_fenced_member_loses_its_partitions_and_rejoins(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    topic = mock_topic(cluster, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic])
    closing.append(a)
    pa = Poller(a)
    everything = frozenset(tps(topic, range(3)))
    assert wait_until(lambda: a.assignment() == everything)
    cluster.push_request_errors(ApiKey.CONSUMER_GROUP_HEARTBEAT, FENCED_MEMBER_EPOCH)
    assert wait_until(lambda: of(events, "a", "assign") == [everything, everything])
    pa.stop()
    assert of(events, "a", "lost") == [everything]  # lost (no commit, no revoke), then back
    assert not of(events, "a", "revoke")
    assert a.assignment() == everything and a.group_metadata().generation_id > 0


def test_close_leaves_and_the_other_member_takes_over(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    topic = mock_topic(cluster, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic])
    b = member(cluster.bootstrap, group, events, "b", topics=[topic])
    closing.append(a)
    pa, pb = Poller(a), Poller(b)
    assert wait_until(
        lambda: bool(a.assignment()) and bool(b.assignment()) and len(a.assignment() | b.assignment()) == 4
    )
    assert wait_until(lambda: stable(a, b))
    pb.stop()
    b_had = frozenset(b.assignment())
    b.close(10)
    assert of(events, "b", "revoke")[-1] == b_had
    # The session is 60 s: only the leave (epoch -1) hands b's partitions over within this wait.
    assert wait_until(lambda: a.assignment() == tps(topic, range(4)), timeout=30)
    pa.stop()


def test_static_member_rejoins_to_the_same_assignment(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    topic = mock_topic(cluster, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic], group_instance_id="static-a")
    b = member(cluster.bootstrap, group, events, "b", topics=[topic], group_instance_id="static-b")
    closing.append(b)
    pa, pb = Poller(a), Poller(b)
    assert wait_until(
        lambda: bool(a.assignment()) and bool(b.assignment()) and len(a.assignment() | b.assignment()) == 4
    )
    # Stable, and each member's on_assign has run for what it holds: assignment() shows the new
    # partitions before the next poll runs the callback, and at load 12 b's came after the snapshot.
    assert wait_until(lambda: stable(a, b) and told(events, "a", a) and told(events, "b", b))
    a_had, b_had = frozenset(a.assignment()), frozenset(b.assignment())
    b_events = [e for e in events if e[0] == "b"]
    pa.stop()
    a.close(10)  # a static leave (epoch -2): the broker keeps a's partitions for it
    a2 = member(cluster.bootstrap, group, events, "a2", topics=[topic], group_instance_id="static-a")
    closing.append(a2)
    pa2 = Poller(a2)
    assert wait_until(lambda: a2.assignment() == a_had)
    pa2.stop()
    pb.stop()
    assert b.assignment() == b_had
    assert [e for e in events if e[0] == "b"] == b_events  # b saw no rebalance


def test_regex_subscription_is_evaluated_by_the_broker(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    prefix = f"kip848re{uuid.uuid4().hex[:6]}"
    t1, t2 = mock_topic(cluster, 2, prefix), mock_topic(cluster, 1, prefix)
    other = mock_topic(cluster, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", pattern=re.compile(f"^{prefix}-.*"))
    closing.append(a)
    pa = Poller(a)
    assert wait_until(lambda: a.assignment() == tps(t1, [0, 1]) | tps(t2, [0]))
    pa.stop()
    assert not any(tp.topic == other for tp in a.assignment())


def test_commit_meeting_a_stale_member_epoch_is_never_lost_silently(
    cluster: MockCluster, closing: list[KafkaConsumer]
) -> None:
    """STALE_MEMBER_EPOCH on a commit: retried after the next heartbeat (once the consumer's
    commit path retries through the group's next_epoch), else raised naming it; the offsets
    are either committed or the caller is told, never neither."""
    topic = mock_topic(cluster, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, topic, 10, partitions=1)
    c = member(cluster.bootstrap, group, [], "c", topics=[topic], enable_auto_commit=False)
    closing.append(c)
    assert len(drain(c, 10)) == 10
    cluster.push_request_errors(OFFSET_COMMIT, STALE_MEMBER_EPOCH)
    try:
        c.commit()
    except KafkaProtocolError as exc:
        assert (exc.code, exc.name) == (STALE_MEMBER_EPOCH, "STALE_MEMBER_EPOCH")
        assert c.committed([(topic, 0)]) == {TopicPartition(topic, 0): None}
        c.commit()  # the epoch is current again
    assert c.committed([(topic, 0)]) == {TopicPartition(topic, 0): 10}


def test_a_broker_without_the_api_gives_the_clear_error(cluster: MockCluster) -> None:
    cluster.set_apiversion(ApiKey.CONSUMER_GROUP_HEARTBEAT, -1, -1)
    topic = mock_topic(cluster, 1)
    c = member(cluster.bootstrap, "g-none", [], "c", topics=[topic])
    try:
        with pytest.raises(KafkaUnsupportedVersionError, match=CLEAR_ERROR):
            c.poll(10_000)
        with pytest.raises(KafkaUnsupportedVersionError, match=CLEAR_ERROR):
            c.poll(10_000)  # every poll says so, none hangs
    finally:
        c.close(10)


# -- the broker of the test session (Tansu embedded, or Apache Kafka from the environment) ----


@pytest.mark.seaweed_deviation("no KIP-848 (ConsumerGroupHeartbeat not in ApiVersions)")
@pytest.mark.broker
@pytest.mark.tansu_deviation("no ConsumerGroupHeartbeat (KIP-848 consumer groups)")
@pytest.mark.needs_kafka("4.0", "KIP-848 consumer groups")
def test_consumer_protocol_on_the_broker(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    produce(bootstrap_servers, topic, 30, partitions=3)
    events: list = []
    c = member(bootstrap_servers, f"g-{uuid.uuid4().hex[:8]}", events, "c", topics=[topic])
    try:
        got = drain(c, 30)
        assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in range(3) for o in range(10)]
        assert of(events, "c", "assign") == [frozenset(tps(topic, range(3)))]
        c.commit()
        assert c.committed([(topic, p) for p in range(3)]) == {TopicPartition(topic, p): 10 for p in range(3)}
    finally:
        c.close(10)


def kip848_enabled(bootstrap: str) -> bool:
    """The broker's own word on whether it runs KIP-848 groups: ConsumerGroupHeartbeat offered
    and the ``group.version`` feature finalized at level 1 or more. Apache Kafka 3.9 offers the
    API but leaves group.version at 0 (it answers every heartbeat UNSUPPORTED_VERSION); Kafka 4
    finalizes it; Tansu offers no such API."""
    with KafkaClient(bootstrap) as client:
        versions = client.negotiated_versions()
        if not any(ApiKey.CONSUMER_GROUP_HEARTBEAT in v for v in versions.values()):
            return False
        node = next(iter(versions))
        hello = ApiVersionsRequest(client_software_name="kafka-core-test", client_software_version="0")
        answer = client.send(node, hello, 3)
    return any(f.name == "group.version" and f.max_version_level >= 1 for f in answer.finalized_features)


@pytest.mark.broker
def test_broker_without_the_api_says_so(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    """A broker without KIP-848 groups (Tansu: no API; Kafka 3.9: the API listed, but
    group.version not enabled): the clear error. A broker that runs them (Kafka 4): a member."""
    enabled = kip848_enabled(bootstrap_servers)
    topic = new_topic(1)
    c = member(bootstrap_servers, f"g-{uuid.uuid4().hex[:8]}", [], "c", topics=[topic])
    try:
        if enabled:
            assert wait_until(lambda: c.poll(500) == [] and c.group_metadata().generation_id > 0, timeout=30)
        else:
            with pytest.raises(KafkaUnsupportedVersionError, match=CLEAR_ERROR):
                c.poll(10_000)
    finally:
        c.close(10)


@pytest.mark.seaweed_deviation("no KIP-848 (ConsumerGroupHeartbeat not in ApiVersions)")
@pytest.mark.broker
@pytest.mark.tansu_deviation("no ConsumerGroupHeartbeat (KIP-848 consumer groups)")
@pytest.mark.needs_kafka("4.0", "KIP-848 consumer groups")
def test_admin_describes_a_live_kip848_group(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    """Kafka 4 does not describe a KIP-848 group by DescribeGroups (GROUP_ID_NOT_FOUND, "not a
    classic group"): describe_groups asks ConsumerGroupDescribe, and gives its members, their
    epochs and assignments; list_groups types it "consumer"."""
    topic = new_topic(4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = member(bootstrap_servers, group, [], "a", topics=[topic])
    b = member(bootstrap_servers, group, [], "b", topics=[topic])
    pollers = [Poller(a), Poller(b)]
    try:
        assert wait_until(
            lambda: (
                bool(a.assignment()) and bool(b.assignment()) and len(a.assignment() | b.assignment()) == 4
            ),
            timeout=60,
        )
        with KafkaAdmin(bootstrap_servers) as admin:

            def settled() -> GroupDescription | None:
                desc = admin.describe_groups([group])[group].result()
                steady = desc.state == "Stable" and all(
                    m.assignment and m.assignment == m.target_assignment for m in desc.members
                )
                return desc if steady and len(desc.members) == 2 else None

            desc = None
            deadline = time.monotonic() + 60  # a hang guard: the last acknowledgement may be on its way
            while desc is None and time.monotonic() < deadline:
                desc = settled()
            assert desc is not None, admin.describe_groups([group])[group].result()
            listing = {g.group_id: g for g in admin.list_groups()}[group]
        for p in pollers:
            p.stop()
        assert (desc.group_type, desc.protocol_type, desc.state) == ("consumer", "consumer", "Stable")
        assert desc.protocol in ("uniform", "range")  # the broker's assignor
        assert desc.group_epoch is not None and desc.assignment_epoch is not None
        assert desc.group_epoch >= desc.assignment_epoch > 0
        by_id = {m.member_id: m for m in desc.members}
        assert set(by_id) == {a.group_metadata().member_id, b.group_metadata().member_id}
        for c in (a, b):
            m = by_id[c.group_metadata().member_id]
            assert m.assignment == sorted(c.assignment())
            assert m.member_epoch == c.group_metadata().generation_id > 0
            assert m.subscribed_topics == [topic] and m.subscribed_pattern is None
        assert (listing.group_type, listing.protocol_type) == ("consumer", "consumer")
    finally:
        for p in pollers:
            with contextlib.suppress(Exception):  # stopped above unless an assertion failed first
                p.stop()
        a.close(10)
        b.close(10)


def test_coordinator_move_keeps_the_membership(cluster: MockCluster, closing: list[KafkaConsumer]) -> None:
    topic = mock_topic(cluster, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, topic, 30, partitions=3)
    events: list = []
    c = member(cluster.bootstrap, group, events, "c", topics=[topic])
    closing.append(c)
    assert len(drain(c, 30)) == 30
    epoch = c.group_metadata().generation_id
    cluster.start_request_tracking()
    for broker in cluster.broker_ids:  # every broker in turn: NOT_COORDINATOR, found again
        cluster.coordinator_set("group", group, broker)
        # NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS
        cluster.push_request_errors(ApiKey.CONSUMER_GROUP_HEARTBEAT, 16, 14)
        produce(cluster.bootstrap, topic, 30, partitions=3, start=30 * broker)
        assert len(drain(c, 30)) == 30
        cluster.clear_requests()
        # Heartbeats reach the new coordinator (the membership found it again).
        assert wait_until(
            lambda b=broker: any(
                r.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and r.broker_id == b
                for r in cluster.get_requests()
            ),
            timeout=30,
        )
    assert c.group_metadata().generation_id == epoch  # the same member throughout
    assert of(events, "c", "assign") == [frozenset(tps(topic, range(3)))] and not of(events, "c", "lost")


def test_close_with_the_coordinator_down_ends_in_its_timeout_naming_the_cause(cluster: MockCluster) -> None:
    topic = mock_topic(cluster, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.coordinator_set("group", group, 1)
    produce(cluster.bootstrap, topic, 20, partitions=2)
    c = member(cluster.bootstrap, group, [], "a", topics=[topic], reconnect_backoff_max_ms=200)
    assert len(drain(c, 20)) == 20
    cluster.broker_down(1)
    try:
        with pytest.raises(
            KafkaTimeoutError, match="close did not finish within 2s: the final commit was cut short"
        ):
            c.close(2)
    finally:
        cluster.broker_up(1)
    assert c.closed


def test_close_whose_leave_cannot_reach_the_coordinator_still_revokes_and_returns(
    cluster: MockCluster,
) -> None:
    # As Java's consumer: a leave that fails is logged, not raised (the broker drops the member
    # after its session timeout); the partitions are revoked (on_revoke) all the same.
    topic = mock_topic(cluster, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.coordinator_set("group", group, 1)
    produce(cluster.bootstrap, topic, 20, partitions=2)
    events: list = []
    c = member(
        cluster.bootstrap,
        group,
        events,
        "a",
        topics=[topic],
        enable_auto_commit=False,
        reconnect_backoff_max_ms=200,
    )
    assert len(drain(c, 20)) == 20
    cluster.broker_down(1)
    try:
        c.close()
    finally:
        cluster.broker_up(1)
    assert c.closed
    assert of(events, "a", "revoke") == [frozenset(tps(topic, range(2)))]


MOCK_REGEX_ANYWHERE = (
    "librdkafka mock: a subscribed regex matches anywhere in a topic name (rdkafka_mock_cgrp.c uses "
    "a search), where Kafka matches the whole name (RE2/J matches()), so 'T' also takes 'T-more'"
)


@pytest.mark.seaweed_deviation("no KIP-848 (ConsumerGroupHeartbeat not in ApiVersions)")
@pytest.mark.needs_kafka("4.0", "KIP-848 consumer groups")
@mock_or_kafka(MOCK_REGEX_ANYWHERE)
def test_a_regex_must_match_the_whole_topic_name(
    cluster: MockCluster | RealKafka, closing: list[KafkaConsumer]
) -> None:
    exact = f"kip848whole{uuid.uuid4().hex[:6]}"
    cluster.create_topic(exact, 1, 3)
    longer = mock_topic(cluster, 1, exact)  # f"{exact}-<hex>": the pattern matches only a part of it
    events: list = []
    a = member(cluster.bootstrap, f"g-{uuid.uuid4().hex[:8]}", events, "a", pattern=re.compile(exact))
    closing.append(a)
    pa = Poller(a)
    assert wait_until(lambda: bool(a.assignment()), timeout=30)
    wait_until(lambda: longer in {tp.topic for tp in a.assignment()}, timeout=3)  # give it the chance
    pa.stop()
    assert a.assignment() == tps(exact, [0])


MOCK_HELD_INSTANCE = (
    "librdkafka mock: a member joining with a group_instance_id another live member holds gets "
    "UNKNOWN_MEMBER_ID (it then rejoins again and again), where Kafka answers UNRELEASED_INSTANCE_ID"
)


@pytest.mark.seaweed_deviation("no KIP-848 (ConsumerGroupHeartbeat not in ApiVersions)")
@pytest.mark.needs_kafka("4.0", "KIP-848 consumer groups")
@mock_or_kafka(MOCK_HELD_INSTANCE)
def test_a_held_instance_id_is_refused_as_unreleased(
    cluster: MockCluster | RealKafka, closing: list[KafkaConsumer]
) -> None:
    topic = mock_topic(cluster, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list = []
    a = member(cluster.bootstrap, group, events, "a", topics=[topic], group_instance_id="held")
    closing.append(a)
    pa = Poller(a)
    assert wait_until(lambda: a.assignment() == tps(topic, [0, 1]))
    b = member(cluster.bootstrap, group, events, "b", topics=[topic], group_instance_id="held")
    closing.append(b)
    try:
        with pytest.raises(KafkaProtocolError) as err:
            for _ in range(50):  # about 10 s of polls
                b.poll(200)
        assert err.value.code == 111  # UNRELEASED_INSTANCE_ID
    finally:
        pa.stop()
