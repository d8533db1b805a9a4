"""The KIP-848 reconciliation's unhappy paths against the scripted coordinator: partitions that
cannot be positioned, rebalance callbacks that raise, and a fencing while a revocation's commit
waits for the next member epoch."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.consumer_helpers import TP0, TP1, T, fill, run
from fakes.kip848_coordinator import TP2, FakeCoordinator, member, until

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import KafkaConnectionError, KafkaProtocolError
from kafka_core.protocol import messages as m


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

    async def poll_until_raised(c: KafkaConsumer, kind: type[BaseException]) -> BaseException:
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


def test_a_heartbeat_loop_that_breaks_unexpectedly_is_raised_by_poll_not_a_silent_stall() -> None:
    class Broken(FakeCoordinator):
        async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
            if isinstance(body, m.ConsumerGroupHeartbeatRequest) and len(self.requests) >= 2:
                raise RuntimeError("a bug in the heartbeat path")
            return await super().send(node, body, version, **kw)

    client = Broken({T: 1})

    async def main() -> None:
        c = member(client, [])
        with pytest.raises(RuntimeError, match="a bug in the heartbeat path"):
            for _ in range(200):
                await c.poll(10)
        with pytest.raises(RuntimeError, match="a bug in the heartbeat path"):  # every poll
            await c.poll(10)
        await c.close()

    run(main())


def test_a_reconciliation_that_breaks_unexpectedly_is_raised_by_poll_not_a_silent_stall() -> None:
    class Broken(FakeCoordinator):
        async def fetch_committed_offsets(self, group_id: str, partitions: Any = None, **kw: Any) -> dict:
            raise RuntimeError("a bug in positioning")

    client = Broken({T: 1})

    async def main() -> None:
        c = member(client, [])
        with pytest.raises(RuntimeError, match="a bug in positioning"):
            for _ in range(200):
                await c.poll(10)
        await c.close()

    run(main())
