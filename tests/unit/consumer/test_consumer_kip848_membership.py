"""The KIP-848 membership (group_protocol="consumer") against a small scripted coordinator:
the heartbeat's fields, reconciliation order (revoke, acknowledge, then assign), fencing,
leaving, typed errors, the missing API, regex subscriptions and the options."""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest
from fakes.consumer_helpers import TP0, TP1, T, fill, run
from fakes.kip848_coordinator import TP2, FakeCoordinator, member, until

from kafka_core.client.metadata import ClusterMeta, PartitionMeta, TopicMeta, TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.group.kip848 import ConsumerGroupMembership
from kafka_core.consumer.policies import GroupProtocol
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaConfigError,
    KafkaProtocolError,
    KafkaUnsupportedVersionError,
)

CLEAR = r"does not support the KIP-848 consumer group protocol \(ConsumerGroupHeartbeat\); use group_protocol='classic'"


def test_join_sends_every_field_then_only_what_changed() -> None:
    client = FakeCoordinator({T: 2})
    events: list = []

    async def main() -> None:
        c = member(
            client, events, max_poll_interval_ms=60_000, group_remote_assignor="uniform", client_rack="r1"
        )
        await until(c, lambda: c.assignment() == {TP0, TP1} and len(client.requests) >= 3)
        join, ack = client.requests[0], client.requests[1]
        assert join.member_epoch == 0 and len(join.member_id) == 22  # a client-made UUID (KIP-1082)
        assert join.rebalance_timeout_ms == 60_000 and join.server_assignor == "uniform"
        assert join.rack_id == "r1" and join.instance_id is None
        assert join.subscribed_topic_names == [T] and join.subscribed_topic_regex == ""
        assert join.topic_partitions == []
        # The acknowledgement: the same member, its epoch, what it owns now; nothing else.
        assert ack.member_id == join.member_id and ack.member_epoch == 1
        assert [(x.topic_id, x.partitions) for x in ack.topic_partitions] == [(client.topic_ids[T], [0, 1])]
        assert ack.subscribed_topic_names is None and ack.rebalance_timeout_ms == -1
        assert ack.server_assignor is None and ack.rack_id is None
        later = client.requests[-1]
        assert later.topic_partitions is None and later.subscribed_topic_names is None
        meta = c.group_metadata()
        assert (meta.generation_id, meta.member_id) == (1, join.member_id)
        await c.close()

    run(main())
    assert events == [("assign", [TP0, TP1]), ("revoke", [TP0, TP1])]
    assert client.requests[-1].member_epoch == -1  # left on close


def test_revocation_comes_first_is_acknowledged_then_only_new_partitions_are_assigned() -> None:
    client = FakeCoordinator({T: 3})
    client.target = {TP0, TP1}
    events: list = []

    async def main() -> None:
        def acks(since: int = 0) -> list[list[int]]:
            return [
                sorted(p for x in r.topic_partitions for p in x.partitions)
                for r in client.requests[since:]
                if r.topic_partitions is not None
            ]

        c = member(client, events)
        # The assignment is in place before its acknowledgement goes: wait for both.
        await until(c, lambda: c.assignment() == {TP0, TP1} and [0, 1] in acks())
        n = len(client.requests)
        client.target = {TP1, TP2}
        await until(c, lambda: c.assignment() == {TP1, TP2})
        assert acks(n)[:2] == [[1], [1, 2]]  # TP0 given back (acknowledged) before TP2 came
        await c.close()

    run(main())
    assert events[:3] == [("assign", [TP0, TP1]), ("revoke", [TP0]), ("assign", [TP2])]


def test_revoked_partitions_are_committed_before_their_callback() -> None:
    client = FakeCoordinator({T: 2})
    fill(client, 0, 5)
    fill(client, 1, 5)
    seen: list = []

    async def main() -> None:
        c = KafkaConsumer(
            T,
            group_id="g",
            client=client,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=20,
            on_revoke=lambda tps: seen.append((sorted(tps), dict(client.committed["g"]))),
        )
        got: list = []
        for _ in range(200):
            got.extend(await c.poll(10))
            if len(got) >= 10:
                break
        client.target = {TP1}
        await until(c, lambda: c.assignment() == {TP1})
        await c.close()

    run(main())
    revoked, committed = seen[0]
    assert revoked == [TP0] and committed[TP0].offset == 5  # committed before on_revoke ran


def test_fenced_member_loses_its_partitions_and_rejoins_at_epoch_zero() -> None:
    client = FakeCoordinator({T: 2})
    events: list = []

    async def main() -> None:
        c = member(client, events)
        await until(c, lambda: c.assignment() == {TP0, TP1})
        member_id = client.requests[0].member_id
        n = len(client.requests)
        client.errors = [110]  # FENCED_MEMBER_EPOCH
        await until(c, lambda: len([e for e in events if e[0] == "assign"]) == 2)
        rejoin = next(r for r in client.requests[n + 1 :] if r.member_epoch == 0)
        assert rejoin.member_id == member_id and rejoin.subscribed_topic_names == [T]
        assert rejoin.rebalance_timeout_ms > 0 and rejoin.topic_partitions == []
        await c.close()

    run(main())
    assert events[:3] == [("assign", [TP0, TP1]), ("lost", [TP0, TP1]), ("assign", [TP0, TP1])]


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("static-1", -2)])
def test_close_leaves_with_the_dynamic_or_static_epoch(instance: str | None, epoch: int) -> None:
    client = FakeCoordinator({T: 1})

    async def main() -> None:
        c = member(client, [], group_instance_id=instance)
        await until(c, lambda: c.assignment() == {TP0})
        assert client.requests[0].instance_id == instance
        await c.close()

    run(main())
    leave = client.requests[-1]
    assert (leave.member_epoch, leave.instance_id) == (epoch, instance)


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (111, "UNRELEASED_INSTANCE_ID"),
        (81, "GROUP_MAX_SIZE_REACHED"),
        (112, "UNSUPPORTED_ASSIGNOR"),
        (42, "INVALID_REQUEST"),
        (30, "GROUP_AUTHORIZATION_FAILED"),
    ],
)
def test_refusals_are_typed_errors_raised_by_every_poll(code: int, name: str) -> None:
    client = FakeCoordinator({T: 1})
    client.errors = [code]

    async def main() -> None:
        c = member(client, [])
        for _ in range(2):
            with pytest.raises(
                KafkaProtocolError, match=rf"\[Error {code}\] {name}: ConsumerGroupHeartbeat"
            ) as info:
                await c.poll(5_000)
            assert info.value.code == code
        await c.close()

    run(main())


def test_broker_without_the_api_is_a_clear_error_not_a_hang() -> None:
    client = FakeCoordinator({T: 1}, version=None)

    async def main() -> None:
        c = member(client, [])
        for _ in range(2):
            with pytest.raises(KafkaUnsupportedVersionError, match=CLEAR):
                await c.poll(5_000)
        await c.close()

    run(main())
    assert client.requests == []


def test_unsupported_version_answer_is_the_same_clear_error() -> None:
    client = FakeCoordinator({T: 1})
    client.errors = [35]

    async def main() -> None:
        c = member(client, [])
        with pytest.raises(KafkaUnsupportedVersionError, match=CLEAR):
            await c.poll(5_000)
        await c.close()

    run(main())


def test_coordinator_errors_find_it_again_and_retry_with_every_field() -> None:
    client = FakeCoordinator({T: 1})
    client.errors = [16, 14]  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS

    async def main() -> None:
        c = member(client, [])
        await until(c, lambda: c.assignment() == {TP0})
        await c.close()

    run(main())
    assert (16, "g") in client.noted and (14, "g") in client.noted
    assert all(r.subscribed_topic_names == [T] for r in client.requests[:3])


@pytest.mark.parametrize("version", [1, 0])
def test_regex_goes_to_the_broker_with_v1_and_is_resolved_here_with_v0(version: int) -> None:
    client = FakeCoordinator({T: 1, "other": 1, "t-2": 1}, version=version)

    async def main() -> None:
        c = member(client, [], topics=None, pattern=re.compile(r"t(-\d)?"))
        await until(c, lambda: bool(client.requests))
        await c.close()

    run(main())
    join = client.requests[0]
    if version == 1:
        assert (join.subscribed_topic_names, join.subscribed_topic_regex) == ([], r"t(-\d)?")
    else:
        assert join.subscribed_topic_names == ["t", "t-2"]  # fullmatch: not "other"


def test_unknown_topic_ids_stay_pending_until_the_metadata_knows_them() -> None:
    client = FakeCoordinator({T: 1})
    late = uuid.uuid4()
    real_metadata = client.cached_metadata

    known = {"late": False}

    def cached() -> ClusterMeta:
        meta = real_metadata()
        if known["late"]:
            meta.topics.append(TopicMeta("late", [PartitionMeta(0, 1)], topic_id=late))
        return meta

    client.cached_metadata = cached  # type: ignore[method-assign]
    client.topic_ids["late"] = late
    client.target = {TP0, TopicPartition("late", 0)}

    async def main() -> None:
        c = member(client, [], topics=[T, "late"])
        await until(c, lambda: c.assignment() == {TP0})
        known["late"] = True
        await until(c, lambda: c.assignment() == {TP0, TopicPartition("late", 0)})
        await c.close()

    run(main())


def test_no_poll_for_max_poll_interval_leaves_then_rejoins_at_the_next_poll() -> None:
    client = FakeCoordinator({T: 1})
    events: list = []

    async def main() -> None:
        c = member(client, events, max_poll_interval_ms=100)
        await until(c, lambda: c.assignment() == {TP0})
        for _ in range(100):
            await asyncio.sleep(0.02)
            if any(r.member_epoch == -1 for r in client.requests):
                break
        assert any(r.member_epoch == -1 for r in client.requests)
        await until(c, lambda: len([e for e in events if e[0] == "assign"]) == 2)
        await c.close()

    run(main())
    assert events[:3] == [("assign", [TP0]), ("lost", [TP0]), ("assign", [TP0])]


class Listener:
    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None: ...


def test_a_stale_commit_can_wait_for_the_next_heartbeat() -> None:
    """next_epoch: the hook a commit that met STALE_MEMBER_EPOCH retries through."""
    client = FakeCoordinator({T: 1})

    async def main() -> None:
        g = ConsumerGroupMembership(
            client,
            SubscriptionState(),
            Listener(),
            "g",
            outage=OutageTracker(30),
            wake=lambda: None,
            topics=[T],
            pattern=None,
            max_poll_interval_ms=60_000,
            group_instance_id=None,
        )
        assert not await g.next_epoch()  # not started: no heartbeat to wait for
        await g.start()
        assert await g.wait_active(5)
        n = len(client.requests)
        assert await g.next_epoch()
        assert len(client.requests) > n and g.commit_args()["generation_id"] == 1
        await g.close()
        assert not await g.next_epoch()
        assert g.commit_args() == {"generation_id": -1, "member_id": "", "group_instance_id": None}

    run(main())


def test_options_the_broker_owns_are_refused_with_the_consumer_protocol() -> None:
    client = FakeCoordinator({T: 1})
    for opt in ({"session_timeout_ms": 10_000}, {"heartbeat_interval_ms": 1_000}, {"assignors": ("range",)}):
        with pytest.raises(
            KafkaConfigError, match=f"{next(iter(opt))} cannot be set with group_protocol='consumer'"
        ):
            KafkaConsumer(T, group_id="g", client=client, group_protocol="consumer", **opt)
    with pytest.raises(KafkaConfigError, match="group_remote_assignor needs group_protocol='consumer'"):
        KafkaConsumer(T, group_id="g", client=client, group_remote_assignor="uniform")
    with pytest.raises(KafkaConfigError, match="group_protocol must be one of"):
        KafkaConsumer(T, group_id="g", client=client, group_protocol="eager")
    # The classic protocol keeps its options.
    classic = KafkaConsumer(T, group_id="g", client=client, session_timeout_ms=10_000, assignors=("range",))
    asyncio.run(classic.close())


def test_from_config_maps_the_java_names() -> None:
    client = FakeCoordinator({T: 1})

    async def main() -> None:
        c = KafkaConsumer.from_config(
            {
                "group.id": "g",
                "group.protocol": "consumer",
                "group.remote.assignor": "range",
                "client.rack": "r",
            },
            topics=[T],
            client=client,
        )
        await until(c, lambda: bool(client.requests))
        await c.close()

    run(main())
    join = client.requests[0]
    assert (join.server_assignor, join.rack_id) == ("range", "r")
    assert GroupProtocol("consumer") is GroupProtocol.CONSUMER
    with pytest.raises(KafkaConfigError, match="session_timeout_ms cannot be set"):
        KafkaConsumer.from_config(
            {"group.id": "g", "group.protocol": "consumer", "session.timeout.ms": 10_000},
            topics=[T],
            client=client,
        )


def test_v0_regex_picks_up_new_topics_from_the_metadata() -> None:
    client = FakeCoordinator({T: 1}, version=0)
    new = TopicPartition("t-3", 0)

    async def main() -> None:
        c = member(client, [], topics=None, pattern=re.compile(r"t(-\d)?"), metadata_max_age_ms=0)
        await until(c, lambda: c.assignment() == {TP0})
        client.topics["t-3"] = 1
        client.topic_ids["t-3"] = uuid.uuid4()
        client.invalidate_metadata()
        client.target = {TP0, new}
        await until(c, lambda: c.assignment() == {TP0, new})
        await c.close()

    run(main())
    sent = [r.subscribed_topic_names for r in client.requests if r.subscribed_topic_names is not None]
    assert sent[0] == ["t"] and ["t", "t-3"] in sent
