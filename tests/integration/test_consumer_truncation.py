"""KIP-320 on real brokers: leader epochs in Fetch, position validation by OffsetForLeaderEpoch
after leader moves, truncation detected and handled per auto_offset_reset.

The mock cluster (librdkafka's) keeps each record batch's leader epoch and answers
OffsetForLeaderEpoch v2 with the end offset of the asked epoch's last batch; every set_leader
bumps the partition's epoch. A divergence is made by a position whose epoch ends below it on the
leader (a seek or a commit with such an epoch), which is what an unclean election leaves behind.
Tansu offers no OffsetForLeaderEpoch: the consumer must work unchanged there. Where the mock
deviates from Kafka (committed epochs), the test is a strict xfail on the mock and a counterpart
asserts the same on the three-node Apache Kafka, whose leader is moved by stopping it.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

import pytest
from fakes.delivery import assert_exact, drain
from fakes.timing import wait_until
from fakes.topics import wait_writable

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devbroker import KafkaCluster
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaLogTruncationError, KafkaProtocolError
from kafka_core.network.connection import BrokerConnection
from kafka_core.producer import KafkaProducer
from kafka_core.protocol import ApiKey
from kafka_core.sync_client import KafkaClient

pytestmark = pytest.mark.timeout(120)

FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
MOCK_COMMIT_FENCES_EPOCH = (
    "librdkafka mock: OffsetCommit v6+ checks committed_leader_epoch against the partition's "
    "current leader epoch and answers FENCED_LEADER_EPOCH; Apache Kafka stores it as given (it is "
    "the epoch of the record before the offset, often older than the leader's)"
)
MOCK_COMMITTED_EPOCH = (
    "librdkafka mock: OffsetFetch answers the partition's current leader epoch as "
    "committed_leader_epoch instead of the committed one (rdkafka_mock_handlers.c, OffsetFetch), "
    "so a committed epoch that ends below its offset is never seen"
)


def produce(bootstrap: str, topic: str, start: int, n: int, partitions: int) -> dict[tuple[int, int], bytes]:
    """Send n records round-robin over the partitions; (partition, offset) -> value of each."""
    with KafkaProducer(bootstrap, linger_ms=2, retry_backoff_ms=50, retry_backoff_max_ms=200) as p:
        futures = [
            (b"v%07d" % i, p.send(topic, b"v%07d" % i, partition=i % partitions))
            for i in range(start, start + n)
        ]
        p.flush(60)
        out: dict[tuple[int, int], bytes] = {}
        for value, fut in futures:
            meta = fut.result(60)
            out[(meta.partition, meta.offset)] = value
        return out


def consumer(bootstrap: str, topic: str, partitions: int, **kw: Any) -> KafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("fetch_max_wait_ms", 100)
    kw.setdefault("reconnect_backoff_max_ms", 200)
    kw.setdefault("retry_backoff_max_ms", 200)
    return KafkaConsumer(bootstrap_servers=bootstrap, partitions={topic: range(partitions)}, **kw)


def leader_epochs(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    with KafkaClient(bootstrap) as client:
        meta = client.metadata([topic]).topic(topic)
        assert meta is not None
        return {p.partition: (p.leader, p.leader_epoch) for p in meta.partitions}


def sent(cluster: MockCluster, api: int) -> int:
    return sum(1 for r in cluster.get_requests() if r.api_key == api)


@pytest.fixture
def fetch_epochs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(partition, current_leader_epoch) of every partition in every Fetch put on the wire."""
    seen: list[tuple[int, int]] = []
    real = BrokerConnection._request

    async def spy(self: BrokerConnection, body: Any, version: int, *args: Any, **kw: Any) -> Any:
        if int(body.API_KEY) == ApiKey.FETCH:
            seen.extend((p.partition, p.current_leader_epoch) for t in body.topics for p in t.partitions)
        return await real(self, body, version, *args, **kw)

    monkeypatch.setattr(BrokerConnection, "_request", spy)
    return seen


@pytest.fixture
def topic3(mock_cluster: MockCluster) -> str:
    return mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 3, 3)


@pytest.fixture
def diverged(mock_cluster: MockCluster) -> tuple[str, TopicPartition]:
    """A partition whose epoch-0 log ends at 30, epoch 1 holding offsets 30..49."""
    topic = mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 1, 3)
    produce(mock_cluster.bootstrap, topic, 0, 30, 1)
    leader, epoch = leader_epochs(mock_cluster.bootstrap, topic)[0]
    assert epoch == 0
    mock_cluster.set_leader(topic, 0, leader % 3 + 1)
    produce(mock_cluster.bootstrap, topic, 30, 20, 1)
    assert leader_epochs(mock_cluster.bootstrap, topic)[0][1] == 1
    return topic, TopicPartition(topic, 0)


# -- leader moves ----------------------------------------------------------------------------


def test_leader_moves_are_validated_and_nothing_is_lost_or_repeated(
    mock_cluster: MockCluster, topic3: str, fetch_epochs: list[tuple[int, int]]
) -> None:
    boot = mock_cluster.bootstrap
    acked = produce(boot, topic3, 0, 300, 3)
    before = leader_epochs(boot, topic3)
    with consumer(boot, topic3, 3, max_poll_records=50) as c:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 150 and time.monotonic() < deadline:
            got.extend(c.poll(200))
        assert len(got) >= 150
        mock_cluster.start_request_tracking()
        for p, (leader, _) in before.items():
            mock_cluster.set_leader(topic3, p, leader % 3 + 1)
        acked.update(produce(boot, topic3, 300, 300, 3))
        rest = drain(c, len(acked) - len(got))
    after = leader_epochs(boot, topic3)
    assert all(after[p][1] == before[p][1] + 1 for p in before)
    assert_exact(acked, got + rest)
    assert sent(mock_cluster, ApiKey.OFFSET_FOR_LEADER_EPOCH) >= 1
    # Fetches went out under each leader's epoch, the new one after the move.
    for p in before:
        assert (p, before[p][1]) in fetch_epochs
        assert (p, after[p][1]) in fetch_epochs


@pytest.mark.parametrize(
    "codes",
    [
        (FENCED_LEADER_EPOCH,),
        (UNKNOWN_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH),
        (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH),
    ],
    ids=["fenced", "unknown-twice", "fenced-then-unknown"],
)
def test_fetch_recovers_from_leader_epoch_errors(
    mock_cluster: MockCluster, topic3: str, codes: tuple[int, ...]
) -> None:
    acked = produce(mock_cluster.bootstrap, topic3, 0, 300, 3)
    mock_cluster.push_request_errors(ApiKey.FETCH, *codes)
    with consumer(mock_cluster.bootstrap, topic3, 3) as c:
        assert_exact(acked, drain(c, len(acked)))


def test_validation_retries_through_leader_epoch_errors(mock_cluster: MockCluster, topic3: str) -> None:
    boot = mock_cluster.bootstrap
    acked = produce(boot, topic3, 0, 150, 3)
    with consumer(boot, topic3, 3) as c:
        got = drain(c, len(acked))
        mock_cluster.start_request_tracking()
        mock_cluster.push_request_errors(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
        )
        for p, (leader, _) in leader_epochs(boot, topic3).items():
            mock_cluster.set_leader(topic3, p, leader % 3 + 1)
        more = produce(boot, topic3, 150, 150, 3)
        got += drain(c, len(more))
    acked.update(more)
    assert_exact(acked, got)
    # The two failed answers and at least one that validated.
    assert sent(mock_cluster, ApiKey.OFFSET_FOR_LEADER_EPOCH) >= 3


# -- divergence ------------------------------------------------------------------------------


def test_truncation_with_earliest_resumes_at_the_divergence_point(
    mock_cluster: MockCluster, diverged: tuple[str, TopicPartition]
) -> None:
    topic, tp = diverged
    mock_cluster.start_request_tracking()
    with consumer(mock_cluster.bootstrap, topic, 1) as c:
        # Stood at 45 under epoch 0, but epoch 0 ends at 30 on the leader: 30..44 diverged.
        c.seek(tp, OffsetAndMetadata(45, "", 0))
        got = drain(c, 20)
        assert [m.offset for m in got] == list(range(30, 50))
        assert c.position(tp) == 50
    assert sent(mock_cluster, ApiKey.OFFSET_FOR_LEADER_EPOCH) >= 1


def test_truncation_with_none_raises_naming_the_range_until_a_seek(
    mock_cluster: MockCluster, diverged: tuple[str, TopicPartition]
) -> None:
    topic, tp = diverged
    with consumer(mock_cluster.bootstrap, topic, 1, auto_offset_reset="none") as c:
        c.seek(tp, OffsetAndMetadata(45, "", 0))
        deadline = time.monotonic() + 30
        err: KafkaLogTruncationError | None = None
        while err is None and time.monotonic() < deadline:
            try:
                assert c.poll(200) == []
            except KafkaLogTruncationError as exc:
                err = exc
        assert err is not None, "no KafkaLogTruncationError within 30 s"
        assert err.divergent == {tp: (45, 30)}
        assert "30..44" in str(err)
        assert c.position(tp) == 45  # not moved
        with pytest.raises(KafkaLogTruncationError):
            c.poll(200)  # again, until the application seeks
        c.seek(tp, 30)
        assert [m.offset for m in drain(c, 20)] == list(range(30, 50))


def test_a_position_within_its_epoch_is_kept(
    mock_cluster: MockCluster, diverged: tuple[str, TopicPartition]
) -> None:
    topic, tp = diverged
    with consumer(mock_cluster.bootstrap, topic, 1, auto_offset_reset="none") as c:
        c.seek(tp, OffsetAndMetadata(20, "", 0))  # epoch 0 ends at 30: 20 is fine
        assert [m.offset for m in drain(c, 30)] == list(range(20, 50))


@pytest.mark.xfail(strict=True, reason=MOCK_COMMITTED_EPOCH)
def test_a_committed_epoch_is_validated(mock_cluster: MockCluster) -> None:
    topic = mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 1, 3)
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(mock_cluster.bootstrap, topic, 0, 30, 1)
    with KafkaClient(mock_cluster.bootstrap) as client:
        # Committed under epoch 0 while it is current (the mock fences other epochs on commit).
        client.commit_offsets(group, {tp: OffsetAndMetadata(45, "", 0)})
    leader, _ = leader_epochs(mock_cluster.bootstrap, topic)[0]
    mock_cluster.set_leader(topic, 0, leader % 3 + 1)
    produce(mock_cluster.bootstrap, topic, 30, 20, 1)
    with KafkaClient(mock_cluster.bootstrap) as client:
        assert client.fetch_committed_offsets(group, [tp])[tp] == OffsetAndMetadata(45, "", 0)
    with consumer(mock_cluster.bootstrap, topic, 1, group_id=group, enable_auto_commit=False) as c:
        assert [m.offset for m in drain(c, 20)][:1] == [30]


def test_a_commit_told_its_leader_epoch_is_stale_refreshes_metadata_and_retries(
    mock_cluster: MockCluster,
) -> None:
    topic = mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 1, 3)
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(mock_cluster.bootstrap, topic, 0, 10, 1)
    with KafkaClient(mock_cluster.bootstrap) as client:
        client.metadata([topic])
        mock_cluster.start_request_tracking()
        mock_cluster.push_request_errors(ApiKey.OFFSET_COMMIT, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH)
        client.commit_offsets(group, {tp: OffsetAndMetadata(10, "", 0)}, timeout_ms=10_000)
        apis = [r.api_key for r in mock_cluster.get_requests()]
        assert client.fetch_committed_offsets(group, [tp])[tp].offset == 10
    commits = [i for i, api in enumerate(apis) if api == ApiKey.OFFSET_COMMIT]
    assert len(commits) == 3  # two answered with a leader epoch error, the third stored
    for before, after in itertools.pairwise(commits):
        assert ApiKey.METADATA in apis[before:after], apis  # each retry after a metadata refresh


def test_a_commit_fenced_again_after_the_refresh_raises_the_typed_error(mock_cluster: MockCluster) -> None:
    # A broker that fences committed_leader_epoch (the mock; Apache Kafka stores it as given)
    # refuses the same epoch whatever the metadata says: one refresh and retry, then the error,
    # not retries until the timeout while the application's commit() hangs.
    topic = mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 1, 3)
    tp = TopicPartition(topic, 0)
    produce(mock_cluster.bootstrap, topic, 0, 10, 1)
    leader, _ = leader_epochs(mock_cluster.bootstrap, topic)[0]
    mock_cluster.set_leader(topic, 0, leader % 3 + 1)  # epoch 1; the records are of epoch 0
    with KafkaClient(mock_cluster.bootstrap) as client:
        mock_cluster.start_request_tracking()
        with pytest.raises(KafkaProtocolError, match=r"FENCED_LEADER_EPOCH.*not committed") as err:
            client.commit_offsets(
                f"g-{uuid.uuid4().hex[:8]}", {tp: OffsetAndMetadata(10, "", 0)}, timeout_ms=30_000
            )
        apis = [r.api_key for r in mock_cluster.get_requests()]
    assert err.value.code == FENCED_LEADER_EPOCH
    assert apis.count(ApiKey.OFFSET_COMMIT) == 2  # the first, and one after the metadata refresh


@pytest.mark.xfail(strict=True, reason=MOCK_COMMIT_FENCES_EPOCH)
def test_a_commit_under_an_older_epoch_is_stored(mock_cluster: MockCluster) -> None:
    topic = mock_cluster.create_topic(f"kip320-{uuid.uuid4().hex[:10]}", 1, 3)
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(mock_cluster.bootstrap, topic, 0, 10, 1)
    leader, _ = leader_epochs(mock_cluster.bootstrap, topic)[0]
    mock_cluster.set_leader(topic, 0, leader % 3 + 1)  # epoch 1; the records are of epoch 0
    with KafkaClient(mock_cluster.bootstrap) as client:
        client.commit_offsets(group, {tp: OffsetAndMetadata(10, "", 0)}, timeout_ms=5_000)
        assert client.fetch_committed_offsets(group, [tp])[tp].offset == 10


# -- the same two on Apache Kafka, whose leader moves for real --------------------------------


@pytest.fixture
def moved_on_kafka(kafka_three: KafkaCluster) -> tuple[str, TopicPartition, int]:
    """On the three-node Apache Kafka: a partition whose first leader epoch ends at 30 and whose
    next holds offsets 30..49 (its leader was stopped, a follower took over, and it came back).
    Returns (bootstrap, partition, the first epoch)."""
    cluster = kafka_three
    boot = cluster.bootstrap
    topic = f"kip320-{uuid.uuid4().hex[:10]}"
    cluster.create_topic(topic, 1, 3)
    wait_writable(boot, topic, 1)
    produce(boot, topic, 0, 30, 1)
    leader, epoch = leader_epochs(boot, topic)[0]
    cluster.stop_node(leader)
    try:
        assert wait_until(lambda: leader_epochs(boot, topic)[0][0] not in (leader, -1))
        produce(boot, topic, 30, 20, 1)
    finally:
        cluster.start_node(leader)
    assert leader_epochs(boot, topic)[0][1] > epoch
    return boot, TopicPartition(topic, 0), epoch


def test_a_commit_under_an_older_epoch_is_stored_on_kafka(
    moved_on_kafka: tuple[str, TopicPartition, int],
) -> None:
    """Kafka's side of test_a_commit_under_an_older_epoch_is_stored (MOCK_COMMIT_FENCES_EPOCH)."""
    boot, tp, first_epoch = moved_on_kafka
    group = f"g-{uuid.uuid4().hex[:8]}"
    with KafkaClient(boot) as client:
        client.commit_offsets(group, {tp: OffsetAndMetadata(10, "", first_epoch)}, timeout_ms=10_000)
        assert client.fetch_committed_offsets(group, [tp])[tp] == OffsetAndMetadata(10, "", first_epoch)


def test_a_committed_epoch_is_validated_on_kafka(moved_on_kafka: tuple[str, TopicPartition, int]) -> None:
    """Kafka's side of test_a_committed_epoch_is_validated (MOCK_COMMITTED_EPOCH): 45 committed
    under the first epoch, which ends at 30 on the leader, so 30..44 diverged; the consumer
    starting from the commit validates it and resumes at 30 (auto_offset_reset earliest)."""
    boot, tp, first_epoch = moved_on_kafka
    group = f"g-{uuid.uuid4().hex[:8]}"
    with KafkaClient(boot) as client:
        client.commit_offsets(group, {tp: OffsetAndMetadata(45, "", first_epoch)}, timeout_ms=10_000)
        assert client.fetch_committed_offsets(group, [tp])[tp] == OffsetAndMetadata(45, "", first_epoch)
    with consumer(boot, tp.topic, 1, group_id=group, enable_auto_commit=False) as c:
        assert [m.offset for m in drain(c, 20)] == list(range(30, 50))


# -- a broker without OffsetForLeaderEpoch ---------------------------------------------------


def test_without_offset_for_leader_epoch_the_consumer_works_unchanged(
    bootstrap_servers: str, new_topic: Any, on_tansu: bool
) -> None:
    topic = new_topic(2)
    acked = produce(bootstrap_servers, topic, 0, 200, 2)
    with consumer(bootstrap_servers, topic, 2) as c:
        # A position with an epoch asks for validation; a broker without the API skips it.
        c.seek((topic, 0), OffsetAndMetadata(0, "", 0))
        got = drain(c, len(acked))
    assert_exact(acked, got)
