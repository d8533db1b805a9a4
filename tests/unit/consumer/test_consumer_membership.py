"""Group membership against a scripted coordinator: join, errors that force a rejoin, leave."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fakes.consumer_client import FakeGroupClient
from fakes.consumer_helpers import TP0, TP1, T, fill, run

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import KafkaAuthenticationError, KafkaProtocolError, KafkaTimeoutError


def member(client: FakeGroupClient, events: list, **kw: Any) -> KafkaConsumer:
    return KafkaConsumer(
        topics=[T],
        group_id="g",
        client=client,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        session_timeout_ms=1_000,
        heartbeat_interval_ms=20,
        on_assign=lambda tps: events.append(("assign", sorted(tps))),
        on_revoke=lambda tps: events.append(("revoke", sorted(tps))),
        **kw,
    )


async def poll_until(c: KafkaConsumer, cond: Any, rounds: int = 100) -> list:
    got: list = []
    for _ in range(rounds):
        got.extend(await c.poll(20))
        if cond(got):
            break
    return got


def test_join_assigns_everything_and_consumes():
    client = FakeGroupClient({T: 2})
    fill(client, 0, 5)
    fill(client, 1, 5)
    events: list = []

    async def main():
        c = member(client, events)
        got = await poll_until(c, lambda g: len(g) >= 10)
        assert c.assignment() == {TP0, TP1}
        await c.close()
        return got

    assert len(run(main())) == 10
    assert events[0] == ("assign", [TP0, TP1])
    assert events[-1] == ("revoke", [TP0, TP1])
    # Joined with the member id the coordinator required, left on close, committed on close.
    assert client.joins[0].member_id == "" and client.joins[1].member_id == "member-1"
    assert len(client.leaves) == 1
    assert {tp: om.offset for tp, om in client.committed["g"].items()} == {TP0: 5, TP1: 5}


@pytest.mark.parametrize("code", [22, 25, 27, 82])
def test_heartbeat_errors_lead_to_a_rejoin(code: int):
    client = FakeGroupClient({T: 1})
    fill(client, 0, 3)
    events: list = []

    async def main():
        c = member(client, events, assignors=("cooperative-sticky",))
        await poll_until(c, lambda g: len(g) >= 3)
        gen = c.group_metadata().generation_id
        client.heartbeat_errors = [code]
        for _ in range(100):
            await c.poll(20)
            if c.group_metadata().generation_id > gen:
                break
        assert c.group_metadata().generation_id > gen
        assert c.assignment() == {TP0}
        await c.close()

    run(main())
    if code == 27:
        # A plain rebalance with the cooperative protocol keeps the partition throughout.
        assert [e for e in events if e[0] == "revoke"] == [("revoke", [TP0])]  # only the final close
    else:
        # Membership lost: the partition was given up (without a commit) and assigned again.
        assert events.count(("assign", [TP0])) == 2


@pytest.mark.parametrize("where", ["join", "sync"])
def test_join_and_sync_errors_are_retried(where: str):
    client = FakeGroupClient({T: 1})
    fill(client, 0, 3)
    (client.join_errors if where == "join" else client.sync_errors).extend([27, 16, 25])
    events: list = []

    async def main():
        c = member(client, events)
        got = await poll_until(c, lambda g: len(g) >= 3)
        await c.close()
        return got

    assert len(run(main())) == 3


def test_fatal_join_error_surfaces():
    client = FakeGroupClient({T: 1})
    client.join_errors = [23]  # INCONSISTENT_GROUP_PROTOCOL

    async def main():
        c = member(client, [])
        with pytest.raises(KafkaProtocolError):
            await c.poll(20)
        await c.close()

    run(main())


def test_static_member_does_not_leave_on_close():
    client = FakeGroupClient({T: 1})
    fill(client, 0, 2)

    async def main():
        c = member(client, [], group_instance_id="inst")
        await poll_until(c, lambda g: len(g) >= 2)
        await c.close()

    run(main())
    assert client.joins[0].group_instance_id == "inst"
    assert client.leaves == []


def test_max_poll_interval_exceeded_leaves_and_rejoins():
    client = FakeGroupClient({T: 1})
    fill(client, 0, 2)
    events: list = []

    async def main():
        c = member(client, events, max_poll_interval_ms=100)
        await poll_until(c, lambda g: len(g) >= 2)
        for _ in range(500):  # the application is "busy": no poll meanwhile
            if client.leaves:
                break
            await asyncio.sleep(0.01)
        assert len(client.leaves) == 1
        assert c.group_metadata().generation_id == -1  # left: no longer a member
        for _ in range(100):  # the next polls join again (a short poll may return before the join ends)
            await c.poll(20)
            if c.group_metadata().generation_id != -1:
                break
        assert c.group_metadata().generation_id == client.generation >= 2  # joined again
        assert c.group_metadata().member_id and c.assignment() == {TP0}
        await c.close()

    run(main())
    assert ("revoke", [TP0]) in events


def test_coordinator_never_ready_gives_up_on_cold_start():
    client = FakeGroupClient({T: 1})
    client.coordinator_error = KafkaTimeoutError("coordinator not available")

    async def main():
        c = member(client, [], coordinator_ready_timeout_ms=300)
        with pytest.raises(KafkaTimeoutError, match="not consuming"):
            for _ in range(200):  # polls return empty while the join tries; then its error
                assert await c.poll(20) == []
        await c.close()

    run(main())
    assert client.fetch_requests == [] and client.committed["g"] == {}


class _ParkedJoin(FakeGroupClient):
    """A coordinator that holds a JoinGroup with a member id (a rebalance that never ends)."""

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        from kafka_core.protocol import messages as m

        if isinstance(body, m.JoinGroupRequest) and body.member_id:
            self.joins.append(body)
            await asyncio.sleep(3600)
        return await super().send(node, body, version, **kw)


def test_closed_mid_join_leaves_with_its_member_id():
    """Issue 22: the broker knows the member id from MEMBER_ID_REQUIRED; a close before the join
    completed must leave with it, or the member stays in the group as a zombie."""
    client = _ParkedJoin({T: 1})

    async def main():
        c = member(client, [])
        for _ in range(100):
            await c.poll(20)
            if client.joins and client.joins[-1].member_id:
                break
        assert c.group_metadata().member_id == "member-1"
        assert c.group_metadata().generation_id == -1
        await asyncio.wait_for(c.close(), 30)

    run(main())
    assert [m.member_id for leave in client.leaves for m in leave.members] == ["member-1"]


def test_sync_rounds_that_keep_failing_are_reported(caplog: pytest.LogCaptureFixture):
    """SyncGroup REBALANCE_IN_PROGRESS, round after round: each is a rejoin via JoinGroup, and a
    run of them is logged at WARNING (naming the code) instead of retried silently."""
    client = FakeGroupClient({T: 1})
    fill(client, 0, 3)
    client.sync_errors.extend([27] * 4)

    async def main():
        c = member(client, [])
        got = await poll_until(c, lambda g: len(g) >= 3, rounds=500)
        await c.close()
        return got

    with caplog.at_level("INFO", logger="kafka_core.consumer"):
        assert len(run(main())) == 3
    with_id = [j for j in client.joins if j.member_id]
    assert len(with_id) == 5  # one JoinGroup per failed SyncGroup, then the one that synced
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("REBALANCE_IN_PROGRESS" in w and "join rounds in a row" in w for w in warnings), warnings


class _DeniedTopic(FakeGroupClient):
    """A broker whose ACLs deny this consumer the topic: Metadata answers TOPIC_AUTHORIZATION_FAILED."""

    async def metadata(self, topics: Any = None, **kw: Any) -> Any:
        from kafka_core.client.metadata import ClusterMeta, TopicMeta

        return ClusterMeta(brokers=[], topics=[TopicMeta(t, [], error_code=29) for t in topics or []])


def test_a_topic_the_consumer_may_not_read_is_named_by_every_poll():
    """Taken as absent, the group assigned [] and poll returned [] for ever; Java's poll raises
    TopicAuthorizationException naming the topic."""
    client = _DeniedTopic({T: 1})

    async def main():
        c = member(client, [])
        for _ in range(2):  # not a one-off: every poll says it until an ACL allows the topic
            with pytest.raises(KafkaProtocolError, match="TOPIC_AUTHORIZATION_FAILED") as info:
                await c.poll(2_000)
            assert info.value.code == 29 and repr(T) in str(info.value) and "'g'" in str(info.value)
        assert c.assignment() == set()
        await c.close()

    run(main())
    assert client.joins == []  # refused before joining: no member that can never consume


class _RefusedLogin(FakeGroupClient):
    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.logins = 0

    async def find_coordinator(self, key: str, key_type: int = 0, **kw: Any) -> Any:
        self.logins += 1
        raise KafkaAuthenticationError("SASL SCRAM-SHA-256 authentication failed: Authentication failed")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_refused_login_is_raised_by_the_first_poll_and_not_retried(protocol: str):
    """Not an outage retried until request_timeout_ms: poll raises KafkaAuthenticationError at
    once (the producer's rule, Java's AuthenticationException), and again from every poll
    without logging in again (a login storm with the same credentials)."""
    client = _RefusedLogin({T: 1})

    async def main():
        kw: dict[str, Any] = {"group_protocol": protocol}
        if protocol == "consumer":
            c = KafkaConsumer(topics=[T], group_id="g", client=client, **kw)
        else:
            c = member(client, [], **kw)
        for _ in range(3):
            with pytest.raises(KafkaAuthenticationError, match="SASL SCRAM-SHA-256"):
                await c.poll(5_000)
        await c.close()

    run(main())
    assert client.logins == 1


def test_leader_rebalances_when_a_subscribed_topic_appears_and_when_it_grows():
    """The subscribed topic does not exist at the join: the leader assigns nothing and watches
    it (at the retry backoff, retry_backoff_ms here), rebalances once it appears, and again
    when it gains a partition."""
    client = FakeGroupClient({})
    events: list = []

    async def main():
        c = member(client, events, metadata_max_age_ms=50)
        await poll_until(c, lambda g: c.group_metadata().generation_id >= 0)
        assert c.assignment() == set()
        client.topics[T] = 1
        client.topic_ids[T] = uuid.uuid4()
        fill(client, 0, 3)
        got = await poll_until(c, lambda g: len(g) >= 3)
        assert c.assignment() == {TP0} and len(got) == 3
        client.topics[T] = 2
        fill(client, 1, 2)
        got = await poll_until(c, lambda g: len(g) >= 2)
        assert c.assignment() == {TP0, TP1} and len(got) == 2
        await c.close()

    run(main())
    assert ("assign", [TP0]) in events


def test_consumer_without_group_takes_in_a_topic_created_after_its_start():
    from fakes.consumer_client import FakeClient

    client = FakeClient({})

    async def main():
        c = KafkaConsumer(
            topics=[T], group_id=None, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20
        )
        assert await c.poll(50) == [] and c.assignment() == set()  # started: nothing to read yet
        client.topics[T] = 2
        client.topic_ids[T] = uuid.uuid4()
        fill(client, 0, 2)
        fill(client, 1, 3)
        got = await poll_until(c, lambda g: len(g) >= 5)
        assert c.assignment() == {TP0, TP1}
        await c.close()
        return got

    assert len(run(main())) == 5
