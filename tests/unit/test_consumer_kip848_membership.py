"""The KIP-848 membership (group_protocol="consumer") against a small scripted coordinator:
the heartbeat's fields, reconciliation order (revoke, acknowledge, then assign), fencing,
leaving, typed errors, the missing API, regex subscriptions and the options."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import TP0, TP1, T, fill, run

from kafka_core.client.metadata import ClusterMeta, PartitionMeta, TopicMeta, TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.heartbeat_group import ConsumerGroupMembership
from kafka_core.consumer.outage import OutageTracker
from kafka_core.consumer.policies import GroupProtocol
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import (
    KafkaConfigError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaUnsupportedVersionError,
)
from kafka_core.protocol import ApiKey
from kafka_core.protocol import messages as m

TP2 = TopicPartition(T, 2)
CLEAR = r"does not support the KIP-848 consumer group protocol \(ConsumerGroupHeartbeat\); use group_protocol='classic'"


class FakeCoordinator(FakeClient):
    """One member's KIP-848 coordinator: answers ConsumerGroupHeartbeat as Kafka does (the
    whole assignment when it changed; a revocation first, at the same epoch, and the new
    partitions only once the member acknowledged it), with scripted errors."""

    def __init__(self, partitions: dict[str, int], *, version: int = 1) -> None:
        super().__init__(partitions)
        self.version = version  # None: the API is not offered
        self.requests: list[Any] = []
        self.errors: list[int] = []
        self.epoch = 0
        self.target: set[TopicPartition] = {
            TopicPartition(t, p) for t, n in partitions.items() for p in range(n)
        }
        self.owned: set[TopicPartition] = set()  # as the member last reported it
        self.sent: set[TopicPartition] | None = None
        self.coordinator_errors: list[int] = []
        self.noted: list[tuple[int, Any]] = []

    async def api_version(self, node: int, api_key: int, **kw: Any) -> int:
        assert api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT
        if self.version is None:
            raise KafkaUnsupportedVersionError(
                "broker 1 (127.0.0.1:1) does not support API CONSUMER_GROUP_HEARTBEAT"
            )
        return self.version

    async def metadata(self, topics: Any = None) -> ClusterMeta:
        return self.cached_metadata()

    def note_error(self, code: int, topic: str | None = None, **kw: Any) -> bool:
        self.noted.append((code, kw.get("coordinator_key")))
        return super().note_error(code, topic, **kw)

    def _ids(self, tps: set[TopicPartition]) -> list[Any]:
        by: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by.setdefault(tp.topic, []).append(tp.partition)
        cls = m.ConsumerGroupHeartbeatResponse.TopicPartitions
        return [cls(topic_id=self.topic_ids[t], partitions=ps) for t, ps in by.items()]

    def _names(self, tps: list[Any]) -> set[TopicPartition]:
        names = {tid: n for n, tid in self.topic_ids.items()}
        return {TopicPartition(names[x.topic_id], p) for x in tps for p in x.partitions}

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if not isinstance(body, m.ConsumerGroupHeartbeatRequest):
            return await super().send(node, body, version, **kw)
        self.requests.append(body)
        r = m.ConsumerGroupHeartbeatResponse
        if self.errors:
            return r(error_code=self.errors.pop(0), member_epoch=-1, error_message="scripted")
        if body.member_epoch < 0:
            self.epoch, self.owned, self.sent = 0, set(), None
            return r(member_epoch=body.member_epoch, heartbeat_interval_ms=20)
        if body.member_epoch == 0:
            self.epoch += 1
            self.owned, self.sent = set(), None
        if body.topic_partitions is not None:
            self.owned = self._names(body.topic_partitions)
        answer: set[TopicPartition] | None = None
        if self.owned - self.target:  # revoke first, same epoch
            answer = self.owned & self.target
        elif self.sent != self.target:
            if self.sent is not None:
                self.epoch += 1
            answer = set(self.target)
        if answer is not None and answer == self.sent:
            answer = None
        if answer is not None:
            self.sent = answer
        return r(
            member_id=body.member_id,
            member_epoch=self.epoch,
            heartbeat_interval_ms=20,
            assignment=None if answer is None else r.Assignment(topic_partitions=self._ids(answer)),
        )


def member(client: FakeCoordinator, events: list, **kw: Any) -> KafkaConsumer:
    kw.setdefault("topics", [T])
    return KafkaConsumer(
        group_id="g",
        client=client,
        group_protocol="consumer",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        on_assign=lambda tps: events.append(("assign", sorted(tps))),
        on_revoke=lambda tps: events.append(("revoke", sorted(tps))),
        on_lost=lambda tps: events.append(("lost", sorted(tps))),
        **kw,
    )


async def until(c: KafkaConsumer, cond: Any, rounds: int = 200) -> None:
    for _ in range(rounds):
        await c.poll(10)
        if cond():
            return
    raise AssertionError("condition not reached")


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
        c = member(client, events)
        await until(c, lambda: c.assignment() == {TP0, TP1})
        n = len(client.requests)
        client.target = {TP1, TP2}
        await until(c, lambda: c.assignment() == {TP1, TP2})
        acks = [
            sorted(p for x in r.topic_partitions for p in x.partitions)
            for r in client.requests[n:]
            if r.topic_partitions is not None
        ]
        assert acks[:2] == [[1], [1, 2]]  # TP0 given back (acknowledged) before TP2 came
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


def test_an_assignment_whose_offsets_cannot_be_read_yet_is_retried() -> None:
    class Flaky(FakeCoordinator):
        fails = 2

        async def fetch_committed_offsets(self, group_id: str, partitions: Any = None, **kw: Any) -> dict:
            if self.fails:
                self.fails -= 1
                raise KafkaConnectionError("coordinator unreachable")
            return await super().fetch_committed_offsets(group_id, partitions, **kw)

    client = Flaky({T: 1})
    fill(client, 0, 3)

    async def main() -> list:
        c = member(client, [])
        got: list = []
        for _ in range(300):
            got.extend(await c.poll(10))
            if len(got) >= 3:
                break
        await c.close()
        return got

    assert [m.offset for m in run(main())] == [0, 1, 2]
    assert client.fails == 0


def test_partitions_that_could_not_be_positioned_are_not_kept_once_the_target_drops_them() -> None:
    class Unreadable(FakeCoordinator):
        async def fetch_committed_offsets(self, group_id: str, partitions: Any = None, **kw: Any) -> dict:
            if TP1 in set(partitions or ()):  # TP1's offsets cannot be read
                raise KafkaConnectionError("coordinator unreachable")
            return await super().fetch_committed_offsets(group_id, partitions, **kw)

    client = Unreadable({T: 2})
    events: list = []

    async def main() -> None:
        c = member(client, events, coordinator_ready_timeout_ms=50)
        await until(c, lambda: len([r for r in client.requests if r.member_epoch > 0]) >= 3)
        client.target = {TP0}  # TP1 goes to another member meanwhile
        await until(c, lambda: bool(events))
        for _ in range(10):
            await c.poll(10)
        assert c.assignment() == {TP0}  # TP1 never positioned, never ours: not kept
        await c.close()

    run(main())
    assert events[:2] == [("assign", [TP0]), ("revoke", [TP0])]


def test_raising_rebalance_callbacks_are_reported_by_the_next_poll_and_membership_goes_on() -> None:
    client = FakeCoordinator({T: 3})
    client.target = {TP0, TP1}
    fill(client, 2, 3)
    calls: list = []

    def on_assign(tps: set) -> None:
        calls.append(("assign", sorted(tps)))
        raise ValueError(f"on_assign {sorted(tps)}")

    def on_revoke(tps: set) -> None:
        calls.append(("revoke", sorted(tps)))
        raise RuntimeError(f"on_revoke {sorted(tps)}")

    async def poll_until_raised(c: KafkaConsumer, kind: type) -> BaseException:
        for _ in range(200):
            try:
                await c.poll(10)
            except kind as exc:
                return exc
        raise AssertionError(f"no {kind.__name__} raised")

    async def main() -> list:
        c = KafkaConsumer(
            T,
            group_id="g",
            client=client,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=20,
            on_assign=on_assign,
            on_revoke=on_revoke,
        )
        assert "on_assign" in str(await poll_until_raised(c, ValueError))
        assert c.assignment() == {TP0, TP1}  # assigned all the same
        client.target = {TP1, TP2}
        assert "on_revoke [TopicPartition(topic='t', partition=0)]" in str(
            await poll_until_raised(c, RuntimeError)
        )
        assert "on_assign" in str(await poll_until_raised(c, ValueError))
        got: list = []
        for _ in range(200):  # the new partition is consumed: the member went on
            got.extend(await c.poll(10))
            if len(got) >= 3:
                break
        assert c.assignment() == {TP1, TP2}
        assert client.owned == {TP1, TP2}  # acknowledged to the coordinator
        await c.close()
        return got

    got = run(main())
    assert [(m.partition, m.offset) for m in got] == [(2, 0), (2, 1), (2, 2)]
    assert calls[:3] == [("assign", [TP0, TP1]), ("revoke", [TP0]), ("assign", [TP2])]


def test_fenced_while_a_revocation_commit_waits_for_the_next_epoch_rejoins_without_a_hang() -> None:
    class StaleThenFenced(FakeCoordinator):
        request_timeout_ms = 120_000.0  # what next_epoch would wait for an answer at most

        async def commit_offsets(self, group_id: str, offsets: dict, **kw: Any) -> None:
            if self.target == {TP1} and not self.errors and not getattr(self, "fenced_once", False):
                self.fenced_once = True
                self.errors = [110]  # the heartbeat next_epoch asks for: FENCED_MEMBER_EPOCH
                raise KafkaProtocolError(113, "STALE_MEMBER_EPOCH", False, "scripted")
            await super().commit_offsets(group_id, offsets, **kw)

    client = StaleThenFenced({T: 2})
    events: list = []
    raised: list = []

    async def main() -> None:
        c = member(client, events)
        await until(c, lambda: c.assignment() == {TP0, TP1})
        client.target = {TP1}
        for _ in range(300):
            try:
                await c.poll(10)
            except KafkaProtocolError as exc:
                raised.append(exc.name)
            if len([e for e in events if e[0] == "assign"]) == 2:
                break
        await c.close()

    run(main())
    assert events[:4] == [("assign", [TP0, TP1]), ("revoke", [TP0]), ("lost", [TP1]), ("assign", [TP1])]
    assert raised == ["STALE_MEMBER_EPOCH"]  # the revocation's commit failure, reported by poll
