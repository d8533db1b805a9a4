"""Share group administration (KIP-932) on Apache Kafka 4.4: list, describe, delete, start offsets,
lag, alter; and the clear error from a broker without share groups (Tansu).

The group's member is confluent-kafka's ShareConsumer, so what the admin reports is checked
against a client independent of ours.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.share_groups import (
    broker_without_share_groups,
    from_earliest,
    make_topic,
    produce,
    run_share_examples,
    unique,
    wait_for,
)

from kafka_core import KafkaAdmin, TopicPartition
from kafka_core.aio import KafkaAdmin as AsyncKafkaAdmin
from kafka_core.devbroker import KafkaCluster, TansuBroker
from kafka_core.errors import KafkaProtocolError, KafkaUnsupportedVersionError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


@pytest.fixture
def admin(real_kafka: KafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(real_kafka.bootstrap) as a:
        yield a


def share_member(bootstrap: str, group: str, topic: str) -> Any:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([topic])
    return consumer


def accept(consumer: Any, n: int, timeout: float = 60.0) -> list[bytes]:
    """Poll and accept until ``n`` records arrived; commit the acknowledgements."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for msg in consumer.poll(1.0):
            if msg.error() is None:
                got.append(msg.value())
                consumer.acknowledge(msg)
    consumer.commit_sync()
    return got


def test_share_group_lifecycle(admin: KafkaAdmin, real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    group = unique("sg")
    from_earliest(bootstrap, group)
    produce(bootstrap, topic, [b"r%d" % i for i in range(6)])
    tp = TopicPartition(topic, 0)

    member = share_member(bootstrap, group, topic)
    try:
        assert sorted(accept(member, 6)) == sorted(b"r%d" % i for i in range(6))
        listed = {g.group_id: g for g in admin.list_share_groups()}
        assert listed[group].group_type == "share" and listed[group].protocol_type == "share"
        assert listed[group].state == "Stable"
        assert group in {g.group_id for g in admin.list_share_groups(states=["Stable"])}
        assert group not in {g.group_id for g in admin.list_share_groups(states=["Empty"])}
        every = {g.group_id: g for g in admin.list_groups()}
        assert every[group].group_type == "share"

        desc = admin.describe_share_groups([group])[group].result()
        assert (desc.group_type, desc.state, desc.protocol) == ("share", "Stable", "simple")
        assert desc.group_epoch is not None and desc.assignment_epoch is not None
        [m] = desc.members
        assert m.assignment == [tp] and m.subscribed_topics == [topic]

        # everything accepted: nothing left to deliver
        wait_for(lambda: admin.share_group_lag(group).total == 0, "the lag to reach 0")
        lag = admin.share_group_lag(group)
        assert lag[tp].end == 6  # type: ignore[union-attr]

        busy = admin.alter_share_group_offsets(group, {tp: 0})
        assert busy[tp].error.name == "NON_EMPTY_GROUP"  # type: ignore[union-attr]
        deleting = admin.delete_share_groups([group])
        assert deleting[group].error.name == "NON_EMPTY_GROUP"  # type: ignore[union-attr]
    finally:
        member.close()

    wait_for(
        lambda: admin.describe_share_groups([group])[group].result().state == "Empty", "the group to empty"
    )
    assert admin.describe_share_groups([group])[group].result().members == []

    # back to offset 2: four records to deliver again
    assert admin.alter_share_group_offsets(group, {tp: 2})[tp].ok
    offsets = admin.list_share_group_offsets(group)
    assert offsets[tp].start_offset == 2 and offsets[tp].error is None
    lag = admin.share_group_lag(group)
    assert (lag[tp].committed, lag[tp].end, lag[tp].lag) == (2, 6, 4)  # type: ignore[union-attr]

    again = share_member(bootstrap, group, topic)
    try:
        assert sorted(accept(again, 4)) == [b"r2", b"r3", b"r4", b"r5"]
    finally:
        again.close()

    assert admin.delete_share_group_offsets(group, [topic])[topic].ok
    assert admin.list_share_group_offsets(group) == {}
    assert admin.delete_share_groups([group])[group].ok
    gone = admin.describe_share_groups([group])[group].error
    assert isinstance(gone, KafkaProtocolError) and gone.name == "GROUP_ID_NOT_FOUND"
    assert group not in {g.group_id for g in admin.list_share_groups()}


def test_an_unknown_group(admin: KafkaAdmin) -> None:
    missing = unique("none")
    res = admin.describe_share_groups([missing])
    assert res[missing].error.name == "GROUP_ID_NOT_FOUND"  # type: ignore[union-attr]
    # Kafka answers DescribeShareGroupOffsets for a group it does not know with no partitions
    assert admin.list_share_group_offsets(missing) == {}
    assert admin.share_group_lag(missing).total == 0
    assert admin.delete_share_groups([missing])[missing].error.name == "GROUP_ID_NOT_FOUND"  # type: ignore[union-attr]


def test_asyncio_face(real_kafka: KafkaCluster) -> None:
    import asyncio

    async def main() -> list[str]:
        async with AsyncKafkaAdmin(real_kafka.bootstrap) as admin:
            return [g.group_id for g in await admin.list_share_groups()]

    assert isinstance(asyncio.run(main()), list)


def test_a_broker_without_share_groups_says_so(tansu: TansuBroker | None) -> None:
    with broker_without_share_groups(tansu) as bootstrap, KafkaAdmin(bootstrap) as admin:
        for call in (
            admin.list_share_groups,
            lambda: admin.describe_share_groups(["g"]),
            lambda: admin.share_group_lag("g"),
        ):
            with pytest.raises(KafkaUnsupportedVersionError, match="no share groups"):
                call()


def test_the_guide_example_runs(real_kafka: KafkaCluster, tmp_path: Path) -> None:
    run_share_examples("docs/admin.md", real_kafka.bootstrap, tmp_path)
