"""The transaction admin calls on Apache Kafka (``real_kafka``): list, describe, the producers of
a partition, and finding and aborting a hanging transaction as ``kafka-transactions.sh`` does.

A truly hanging transaction is made as the bug that motivated KIP-664 made them: a transactional
batch written to a partition the coordinator never added to the transaction (partition
verification, KIP-890, switched off for the write), so no marker will ever close it there and
read_committed readers stop at its first offset.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from fakes.timing import wait_until
from fakes.topics import wait_writable

from kafka_core import KafkaAdmin, KafkaProducer, TopicPartition
from kafka_core.admin import ConfigResource, HangingTransaction
from kafka_core.aio import KafkaAdmin as AsyncKafkaAdmin
from kafka_core.client import KafkaClient
from kafka_core.codec import encode_record_batch_columns
from kafka_core.devbroker import KafkaCluster
from kafka_core.errors import KafkaConfigError, KafkaProtocolError
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import ProduceRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

VERIFICATION = "transaction.partition.verification.enable"


@pytest.fixture
def kafka(real_kafka: KafkaCluster) -> Iterator[KafkaCluster]:
    yield real_kafka


@pytest.fixture
def admin(kafka: KafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kafka.bootstrap, api_timeout_ms=30_000) as a:
        yield a


def new_topic(kafka: KafkaCluster, partitions: int = 2) -> str:
    name = f"txadm-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions)
    wait_writable(kafka.bootstrap, name, partitions)
    return name


def verification(admin: KafkaAdmin, kafka: KafkaCluster) -> set[str | None]:
    """Each broker's partition verification setting, as it applies it (a cluster-wide change
    reaches the brokers through the metadata log, a moment later)."""
    brokers = [ConfigResource.broker(n.node_id) for n in kafka.nodes]
    return {r.result()[VERIFICATION].value for r in admin.describe_configs(brokers).values()}


def stable_and_end(admin: KafkaAdmin, tp: TopicPartition) -> tuple[int, int]:
    """The partition's last stable offset (where read_committed readers stop) and its end."""
    stable = admin.list_offsets({tp: "latest"}, isolation_level="read_committed")[tp].result().offset
    end = admin.list_offsets({tp: "latest"})[tp].result().offset
    return stable, end


def test_an_open_transaction_is_listed_described_and_aborted_on_its_partition(
    kafka: KafkaCluster, admin: KafkaAdmin
) -> None:
    topic = new_topic(kafka)
    tp = TopicPartition(topic, 0)
    tid = f"adm-open-{uuid.uuid4().hex[:8]}"
    with KafkaProducer(kafka.bootstrap, transactional_id=tid, transaction_timeout_ms=120_000) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0).result(30)
        pid, epoch = producer.producer_id_and_epoch

        listed = {t.transactional_id: t for t in admin.list_transactions(states=["Ongoing"])}
        assert listed[tid].producer_id == pid and listed[tid].state == "Ongoing"
        assert tid in {t.transactional_id for t in admin.list_transactions(producer_ids=[pid])}

        described = admin.describe_transactions([tid, f"no-such-{tid}"])
        d = described[tid].result()
        assert (d.state, d.producer_id, d.producer_epoch, d.partitions) == ("Ongoing", pid, epoch, [tp])
        assert d.timeout_ms == 120_000 and d.start_time_ms is not None
        missing = described[f"no-such-{tid}"].error
        assert isinstance(missing, KafkaProtocolError) and missing.name == "TRANSACTIONAL_ID_NOT_FOUND"

        states = admin.describe_producers([tp, TopicPartition(topic, 1)])
        (mine,) = [s for s in states[tp].result() if s.producer_id == pid]
        assert mine.current_txn_start_offset == 0 and mine.producer_epoch == epoch
        assert states[TopicPartition(topic, 1)].result() == []

        # Live and owned by its coordinator: not hanging, however old it is taken to be.
        assert admin.find_hanging_transactions(topics=[topic], max_transaction_timeout_ms=0) == []
        assert stable_and_end(admin, tp) == (0, 1)

        with pytest.raises(KafkaProtocolError) as wrong:
            admin.abort_transaction(tp, start_offset=7)
        assert wrong.value.name == "INVALID_TXN_STATE" and "start at [0]" in str(wrong.value)
        with pytest.raises(KafkaConfigError):
            admin.abort_transaction(tp)

        aborted = admin.abort_transaction(tp, start_offset=0)
        assert (aborted.producer_id, aborted.producer_epoch) == (pid, epoch)
        stable, end = stable_and_end(admin, tp)
        assert stable == end == 2  # the record and the abort marker: readers go on
        assert all(s.current_txn_start_offset is None for s in admin.describe_producers([tp])[tp].result())
        producer.abort_transaction(30)


async def _write_outside_the_transaction(bootstrap: str, topic: str, tid: str) -> tuple[int, int]:
    """A transactional batch of ``tid`` on partition 0, never added to its transaction: the
    hanging kind. Returns the producer id and epoch."""
    async with KafkaClient(bootstrap) as client:
        ids = await client.init_producer_id(tid, 60_000)
        leader = await client.leader_for(topic, 0)
        data = encode_record_batch_columns(
            [None],
            [b"hanging"],
            producer_id=ids.producer_id,
            producer_epoch=ids.epoch,
            base_sequence=0,
            transactional=True,
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
        # v11: the leader would ask the coordinator to verify (not add) the partition; with
        # verification off it does not ask at all.
        resp = await client.send(leader, body, max_version=11)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        return ids.producer_id, ids.epoch


def test_a_hanging_transaction_is_found_and_aborted_so_readers_go_on(
    kafka: KafkaCluster, admin: KafkaAdmin
) -> None:
    topic = new_topic(kafka)
    tp = TopicPartition(topic, 0)
    tid = f"adm-hang-{uuid.uuid4().hex[:8]}"
    cluster = ConfigResource.broker("")
    admin.incremental_alter_configs({cluster: {VERIFICATION: "false"}})[cluster].result()
    try:
        assert wait_until(lambda: verification(admin, kafka) == {"false"}, 30)
        pid, epoch = asyncio.run(_write_outside_the_transaction(kafka.bootstrap, topic, tid))
    finally:
        admin.incremental_alter_configs({cluster: {VERIFICATION: None}})[cluster].result()
    assert stable_and_end(admin, tp) == (0, 1)  # read_committed readers are stuck before it

    # Not older than the default 15 minutes yet: not a candidate.
    assert admin.find_hanging_transactions(topics=[topic]) == []
    (hanging,) = admin.find_hanging_transactions([tp, TopicPartition(topic, 1)], max_transaction_timeout_ms=0)
    assert isinstance(hanging, HangingTransaction)
    assert (hanging.topic, hanging.partition, hanging.start_offset) == (topic, 0, 0)
    assert (hanging.producer_id, hanging.producer_epoch, hanging.transactional_id) == (pid, epoch, tid)
    assert "no open transaction" in hanging.reason and "Empty" in hanging.reason

    admin.abort_transaction(
        tp,
        producer_id=hanging.producer_id,
        producer_epoch=hanging.producer_epoch,
        coordinator_epoch=hanging.coordinator_epoch,
    )
    stable, end = stable_and_end(admin, tp)
    assert stable == end == 2
    assert admin.find_hanging_transactions(topics=[topic], max_transaction_timeout_ms=0) == []


def test_the_asyncio_face_lists_and_describes(kafka: KafkaCluster) -> None:
    async def main() -> None:
        async with AsyncKafkaAdmin(kafka.bootstrap) as admin:
            listed = await admin.list_transactions()
            assert all(t.transactional_id for t in listed)
            gone = await admin.describe_transactions(["never-seen-" + uuid.uuid4().hex])
            (res,) = gone.values()
            assert not res.ok and res.error.name == "TRANSACTIONAL_ID_NOT_FOUND"  # type: ignore[union-attr]

    asyncio.run(main())
