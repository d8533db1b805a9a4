"""Transactions v2 (KIP-890 part 2) on Apache Kafka (the ``real_kafka`` fixture: the session's
embedded Kafka, or a one-node Kafka started on demand, of ``KAFKA_CORE_KAFKA_VERSION``).

Kafka 4.x formats its storage with ``transaction.version`` 2 finalized, so the producer speaks v2
there: no AddPartitionsToTxn / AddOffsetsToTxn on the wire, the epoch bumped by every EndTxn, a
Produce of an ended transaction's epoch fenced. Kafka 3.9 (the oldest line supported) has no v2:
the same tests then see v1 (the epoch stays, partitions and groups are added first). Whatever the
protocol, read_committed consumers see committed transactions whole and aborted ones never, a
zombie with an older epoch is fenced, and offsets sent to a transaction are the group's exactly
when it commits (consume-transform-produce).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.topics import wait_writable
from test_transactions import by_partition, expected_values, read_topic, send_tagged, txn_producer

from kafka_core.client import KafkaClient
from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import encode_record_batch_columns
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devbroker import KafkaCluster
from kafka_core.errors import KafkaProducerFencedError
from kafka_core.producer import KafkaProducer
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import ProduceRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

V2_SINCE = "4.0"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def expected_protocol(kafka: KafkaCluster) -> int:
    """2 on Kafka 4.0+ (transaction.version 2 finalized at format), 1 before."""
    return 2 if _version(kafka.version) >= _version(V2_SINCE) else 1


@pytest.fixture
def kafka(real_kafka: KafkaCluster) -> Iterator[KafkaCluster]:
    yield real_kafka


def new_topic(kafka: KafkaCluster, partitions: int = 2, prefix: str = "txv2") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions)
    wait_writable(kafka.bootstrap, name, partitions)
    return name


def requests_of(p: KafkaProducer, api: str) -> int:
    """How many ``api`` requests the producer's client sent (its network metrics)."""
    per_node = p.metrics()["network"]["requests"].get(api, {})
    return sum(int(n["count"]) for n in per_node.values())


def txn_metrics(p: KafkaProducer) -> dict[str, Any]:
    metrics: dict[str, Any] = p.metrics()["producer"]["transactions"]
    return metrics


def test_commit_and_abort_are_read_committed_under_the_clusters_protocol(kafka: KafkaCluster) -> None:
    topic = new_topic(kafka)
    with txn_producer(kafka.bootstrap) as p:
        p.init_transactions(30)
        assert p.transaction_version == expected_protocol(kafka)
        assert txn_metrics(p)["transaction_version"] == p.transaction_version
        for tag, commit in (("a", True), ("b", False), ("c", True)):
            p.begin_transaction()
            futures = send_tagged(p, topic, tag, 6, 2)
            p.flush(30)
            assert all(f.exception() is None for f in futures)  # written, then ended
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        adds = requests_of(p, "ADD_PARTITIONS_TO_TXN")
    if p.transaction_version == 2:
        assert adds == 0, "v2 adds partitions by Produce, never by AddPartitionsToTxn"
    else:
        assert adds >= 2
    committed = read_topic(kafka.bootstrap, topic, 2, committed=True, expected=12)
    assert by_partition(committed) == expected_values([("a", 6), ("c", 6)], 2)
    everything = read_topic(kafka.bootstrap, topic, 2, committed=False, expected=18)
    assert by_partition(everything) == expected_values([("a", 6), ("b", 6), ("c", 6)], 2)


def test_the_epoch_is_bumped_by_every_transaction_under_v2_only(kafka: KafkaCluster) -> None:
    topic = new_topic(kafka, 1)
    with txn_producer(kafka.bootstrap) as p:
        p.init_transactions(30)
        seen = [p.producer_id_and_epoch]
        for i, commit in enumerate((True, False, True)):
            p.begin_transaction()
            p.send(topic, b"e%d" % i).result(30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            seen.append(p.producer_id_and_epoch)
        assert (txn_metrics(p)["producer_id"], txn_metrics(p)["producer_epoch"]) == seen[-1]
    pid, epoch = seen[0]
    if expected_protocol(kafka) == 2:
        assert seen == [(pid, epoch + i) for i in range(4)]
    else:
        assert seen == [(pid, epoch)] * 4
    committed = read_topic(kafka.bootstrap, topic, 1, committed=True, expected=2)
    assert [bytes(m.value) for m in committed] == [b"e0", b"e2"]


def test_a_zombie_with_the_older_epoch_is_fenced(kafka: KafkaCluster) -> None:
    topic = new_topic(kafka)
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    with txn_producer(kafka.bootstrap, tid) as zombie, txn_producer(kafka.bootstrap, tid) as successor:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        send_tagged(zombie, topic, "z", 4, 2)
        zombie.commit_transaction(30)
        successor.init_transactions(30)  # fences the zombie
        assert successor.producer_id_and_epoch[1] > zombie.producer_id_and_epoch[1] or (
            successor.producer_id_and_epoch[0] != zombie.producer_id_and_epoch[0]
        )
        zombie.begin_transaction()
        late = send_tagged(zombie, topic, "late", 4, 2)
        with pytest.raises(KafkaProducerFencedError):
            zombie.flush(30)
            zombie.commit_transaction(30)
        assert all(f.exception() is not None for f in late)
        successor.begin_transaction()
        send_tagged(successor, topic, "s", 4, 2)
        successor.commit_transaction(30)
    committed = read_topic(kafka.bootstrap, topic, 2, committed=True, expected=8)
    assert by_partition(committed) == expected_values([("z", 4), ("s", 4)], 2)


async def _produce_raw(bootstrap: str, topic: str, tid: str, pid: int, epoch: int) -> int:
    """A Produce v12 of ``tid`` under (pid, epoch), sequence 0, as a late request of a zombie:
    its error code."""
    async with KafkaClient(bootstrap) as client:
        meta = await client.metadata([topic])
        leader = meta.topics[0].partitions[0].leader
        data = encode_record_batch_columns(
            [None], [b"zombie"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        body = ProduceRequest(
            transactional_id=tid,
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=data)]
                )
            ],
        )
        resp = await client.send(leader, body, max_version=12)
        return int(resp.responses[0].partition_responses[0].error_code)


@pytest.mark.needs_kafka(V2_SINCE, "transactions v2 (an ended transaction's epoch is fenced)")
def test_a_late_produce_of_an_ended_transactions_epoch_is_fenced(kafka: KafkaCluster) -> None:
    """What v2 adds: the epoch bumped by the commit fences a Produce the zombie still had under
    the old one (under v1 it would start a transaction the coordinator aborts only at timeout)."""
    topic = new_topic(kafka, 1)
    tid = f"late-{uuid.uuid4().hex[:8]}"
    with txn_producer(kafka.bootstrap, tid) as p:
        p.init_transactions(30)
        assert p.transaction_version == 2
        old = p.producer_id_and_epoch
        p.begin_transaction()
        p.send(topic, b"in-time").result(30)
        p.commit_transaction(30)
        assert p.producer_id_and_epoch == (old[0], old[1] + 1)
        code = asyncio.run(_produce_raw(kafka.bootstrap, topic, tid, *old))
        assert code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH), code
        p.begin_transaction()
        p.send(topic, b"next").result(30)
        p.commit_transaction(30)
    committed = read_topic(kafka.bootstrap, topic, 1, committed=True, expected=2)
    assert [bytes(m.value) for m in committed] == [b"in-time", b"next"]


def _consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )


def test_consume_transform_produce_commits_offsets_with_the_transaction(kafka: KafkaCluster) -> None:
    source, sink = new_topic(kafka, 2, "eos-in"), new_topic(kafka, 2, "eos-out")
    group = f"eos-g-{uuid.uuid4().hex[:8]}"
    n = 40
    with KafkaProducer(kafka.bootstrap, linger_ms=2) as plain:
        for i in range(n):
            plain.send(source, b"in-%02d" % i, partition=i % 2)
        plain.flush(30)
    tps = [TopicPartition(source, p) for p in range(2)]
    with _consumer(kafka.bootstrap, source, group) as c, txn_producer(kafka.bootstrap) as p:
        p.init_transactions(30)
        done = 0
        aborted_once = False
        while done < n:
            batch = c.poll(500, max_records=7)
            if not batch:
                continue
            p.begin_transaction()
            nxt: dict[TopicPartition, int] = {}
            for m in batch:
                p.send(sink, bytes(m.value).upper(), partition=m.partition)
                nxt[TopicPartition(m.topic, m.partition)] = m.offset + 1
            p.send_offsets_to_transaction(nxt, c.group_metadata(), timeout=30)
            if not aborted_once:  # the first one is aborted: its input is consumed again
                aborted_once = True
                p.abort_transaction(30)
                assert c.committed(tps) == {tp: None for tp in tps}
                for m in sorted(batch, key=lambda m: -m.offset):  # back to each partition's first
                    c.seek(TopicPartition(m.topic, m.partition), m.offset)
                continue
            p.commit_transaction(30)
            done += len(batch)
            assert c.committed(list(nxt)) == nxt
        assert p.transaction_version == expected_protocol(kafka)
        if p.transaction_version == 2:
            assert requests_of(p, "ADD_OFFSETS_TO_TXN") == 0, "v2 adds the group by TxnOffsetCommit"
        else:
            assert requests_of(p, "ADD_OFFSETS_TO_TXN") > 0
        assert c.committed(tps) == {tps[0]: n // 2, tps[1]: n // 2}
    out = read_topic(kafka.bootstrap, sink, 2, committed=True, expected=n)
    want: dict[int, list[bytes]] = {}
    for i in range(n):
        want.setdefault(i % 2, []).append(b"IN-%02d" % i)
    assert by_partition(out) == want


def test_a_producer_held_to_v1_on_a_v2_cluster_still_commits_and_aborts(kafka: KafkaCluster) -> None:
    """``api_version_caps`` holding EndTxn below v5 keeps v1 even where the feature is finalized."""
    topic = new_topic(kafka)
    with txn_producer(kafka.bootstrap, api_version_caps={ApiKey.END_TXN: 4}) as p:
        p.init_transactions(30)
        assert p.transaction_version == 1
        for tag, commit in (("a", True), ("b", False), ("c", True)):
            p.begin_transaction()
            send_tagged(p, topic, tag, 4, 2)
            p.flush(30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        assert requests_of(p, "ADD_PARTITIONS_TO_TXN") >= 2
    committed = read_topic(kafka.bootstrap, topic, 2, committed=True, expected=8)
    assert by_partition(committed) == expected_values([("a", 4), ("c", 4)], 2)
