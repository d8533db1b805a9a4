"""The admin client on librdkafka's 3-broker mock cluster: what one Tansu broker cannot show.

Requests go to each partition's leader and to the group's coordinator (checked with the mock's
request tracking), injected retriable errors are retried, a bad topic or a dead broker fails only
its own resources, within the call's timeout, and APIs the cluster does not offer raise
KafkaUnsupportedVersionError naming the API.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from kafka_core import KafkaAdmin, KafkaProducer, TopicPartition
from kafka_core.admin import ConfigResource
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaProtocolError, KafkaTimeoutError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey

pytestmark = pytest.mark.timeout(90)

NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture
def cluster(mock_cluster: MockCluster) -> MockCluster:
    mock_cluster.set_group_initial_rebalance_delay_ms(0)
    return mock_cluster


@pytest.fixture
def admin(cluster: MockCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(cluster.bootstrap, retry_backoff_max_ms=200, reconnect_backoff_max_ms=200) as a:
        yield a


def spread_topic(cluster: MockCluster, counts: list[int]) -> str:
    """A topic whose partition p is led by broker p+1, with ``counts[p]`` records in it."""
    topic = cluster.create_topic(f"m-{uuid.uuid4().hex[:10]}", len(counts), 3)
    for p in range(len(counts)):
        cluster.set_leader(topic, p, cluster.broker_ids[p % len(cluster.broker_ids)])
    with KafkaProducer(cluster.bootstrap, linger_ms=2) as producer:
        futures = [producer.send(topic, b"x", partition=p) for p, n in enumerate(counts) for _ in range(n)]
        producer.flush()
        assert all(f.result().offset >= 0 for f in futures)
    return topic


def requests_by_broker(cluster: MockCluster, api_key: int) -> Counter[int]:
    return Counter(r.broker_id for r in cluster.get_requests() if r.api_key == api_key)


def test_list_offsets_asks_each_leader_once(cluster: MockCluster, admin: KafkaAdmin) -> None:
    topic = spread_topic(cluster, [3, 5, 7])
    admin.describe_cluster()  # connect first, so only the ListOffsets below are counted
    cluster.start_request_tracking()
    res = admin.list_offsets({(topic, p): "latest" for p in range(3)})
    assert [res[TopicPartition(topic, p)].result().offset for p in range(3)] == [3, 5, 7]
    assert requests_by_broker(cluster, ApiKey.LIST_OFFSETS) == Counter({1: 1, 2: 1, 3: 1})
    earliest = admin.list_offsets({(topic, p): "earliest" for p in range(3)})
    assert {r.result().offset for r in earliest.values()} == {0}


def test_list_offsets_retries_a_moved_leader(cluster: MockCluster, admin: KafkaAdmin) -> None:
    topic = spread_topic(cluster, [4, 2])
    cluster.start_request_tracking()
    cluster.push_request_errors(ApiKey.LIST_OFFSETS, NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER)
    res = admin.list_offsets({(topic, 0): "latest", (topic, 1): "latest"}, timeout_ms=20_000)
    assert res[TopicPartition(topic, 0)].result().offset == 4
    assert res[TopicPartition(topic, 1)].result().offset == 2
    # Two answers carried the error, then each leader was asked again.
    assert sum(requests_by_broker(cluster, ApiKey.LIST_OFFSETS).values()) >= 4


def test_a_bad_topic_does_not_hide_the_others(cluster: MockCluster, admin: KafkaAdmin) -> None:
    good = spread_topic(cluster, [2])
    bad = spread_topic(cluster, [1])
    cluster.set_topic_error(bad, TOPIC_AUTHORIZATION_FAILED)
    res = admin.list_offsets({(good, 0): "latest", (bad, 0): "latest"}, timeout_ms=10_000)
    assert res[TopicPartition(good, 0)].result().offset == 2
    err = res[TopicPartition(bad, 0)].error
    assert isinstance(err, KafkaProtocolError)
    assert (err.code, err.name) == (TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED")
    described = admin.describe_topics([good, bad])
    assert described[good].ok and described[bad].error.code == TOPIC_AUTHORIZATION_FAILED  # type: ignore[union-attr]


def test_a_dead_leader_fails_only_its_partitions_within_the_timeout(
    cluster: MockCluster, admin: KafkaAdmin
) -> None:
    topic = spread_topic(cluster, [1, 2, 3])
    admin.describe_cluster()
    cluster.broker_down(2)
    started = time.monotonic()
    res = admin.list_offsets({(topic, p): "latest" for p in range(3)}, timeout_ms=2_000)
    took = time.monotonic() - started
    assert took < 2.0 + 5.0
    assert res[TopicPartition(topic, 0)].result().offset == 1
    assert res[TopicPartition(topic, 2)].result().offset == 3
    assert isinstance(res[TopicPartition(topic, 1)].error, KafkaTimeoutError)
    assert "still failing" in str(res[TopicPartition(topic, 1)].error)


def test_group_offsets_go_to_the_coordinator(cluster: MockCluster, admin: KafkaAdmin) -> None:
    topic = spread_topic(cluster, [5, 5, 5])
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.coordinator_set("group", group, 3)
    cluster.start_request_tracking()
    cluster.push_request_errors(ApiKey.OFFSET_COMMIT, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
    res = admin.alter_group_offsets(group, {(topic, 0): 1, (topic, 1): 4}, timeout_ms=20_000)
    assert all(r.ok for r in res.values()) and len(res) == 2
    assert set(requests_by_broker(cluster, ApiKey.OFFSET_COMMIT)) == {3}
    # Named partitions: the mock answers an all-partitions OffsetFetch (null topics) with a null
    # topic array, which no version allows (so consumer_group_lag is tested on the real broker).
    offsets = admin.list_group_offsets(group, [(topic, p) for p in range(3)])
    assert {tp: om.offset for tp, om in offsets.items()} == {
        TopicPartition(topic, 0): 1,
        TopicPartition(topic, 1): 4,
    }
    assert set(requests_by_broker(cluster, ApiKey.OFFSET_FETCH)) == {3}


def test_apis_the_cluster_lacks_raise_a_typed_error(cluster: MockCluster, admin: KafkaAdmin) -> None:
    topic = spread_topic(cluster, [1])
    cases = [
        ("CREATE_PARTITIONS", lambda: admin.create_partitions({topic: 3})),
        ("DELETE_RECORDS", lambda: admin.delete_records({(topic, 0): 1})),
        ("OFFSET_DELETE", lambda: admin.delete_group_offsets("g", [(topic, 0)])),
        ("DESCRIBE_CONFIGS", lambda: admin.describe_configs([ConfigResource.topic(topic)])),
    ]
    for api, call in cases:
        started = time.monotonic()
        with pytest.raises(KafkaUnsupportedVersionError, match=api):
            call()
        assert time.monotonic() - started < 10.0  # at once, not after the retry deadline
