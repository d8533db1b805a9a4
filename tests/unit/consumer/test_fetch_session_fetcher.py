"""The fetcher over brokers that keep fetch sessions (KIP-227), in a fake: leader moves, lost
sessions and idle rounds, with every record delivered once.

``SessionBroker`` gives the shared fake a broker's session cache per (node, connection): a full
Fetch opens a session, an incremental one updates it (changed partitions, forgotten ones) and is
answered for every partition of the session, listing only those with records or an error, as
Apache Kafka's FetchSession does. A partition whose leader is another node is answered
NOT_LEADER_OR_FOLLOWER. A Fetch of FINAL_EPOCH closes its session. ``batches_per_answer`` makes
it answer a partition with only its first few batches (as ``partition_max_bytes`` would), so
that a partition can be behind after an answer.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import check_once_in_order, fill_each, read

from kafka_core.client.metadata import ClusterMeta, PartitionMeta, TopicMeta, TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.fetch.fetcher import PARK_LANE
from kafka_core.consumer.fetch.results import scan_batches
from kafka_core.protocol import ErrorCode
from kafka_core.protocol.messages import FetchRequest, FetchResponse

pytestmark = pytest.mark.timeout(60)

T = "t"
PARTITIONS = 40


class SessionBroker(FakeClient):
    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.leaders = dict.fromkeys(range(partitions[T]), 1)
        self.sessions: dict[int, dict[TopicPartition, FetchRequest.FetchPartition]] = {}
        self.epochs: dict[int, int] = {}
        self.ids = itertools.count(1000)
        self.lose_sessions = False  # every incremental Fetch: FETCH_SESSION_ID_NOT_FOUND
        self.batches_per_answer: int | None = None
        self.wire: list[tuple[int, FetchRequest, FetchResponse]] = []
        self.lanes: list[int] = []  # the lane of each request of ``wire``
        self.closed_sessions: list[int] = []
        self._meta: ClusterMeta | None = None

    def move(self, partitions: range, node: int) -> None:
        for p in partitions:
            self.leaders[p] = node
        self._meta = None

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        return self.leaders[partition]

    def cached_metadata(self) -> ClusterMeta:
        if self._meta is None:
            parts = [PartitionMeta(p, self.leaders[p]) for p in range(self.topics[T])]
            self._meta = ClusterMeta(brokers=[], topics=[TopicMeta(T, parts, topic_id=self.topic_ids[T])])
        return self._meta

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        assert isinstance(body, FetchRequest)
        resp = await self._answer(node, body, version, **kw)
        self.wire.append((node, body, resp))
        self.lanes.append(kw.get("lane", 0))
        return resp

    async def _answer(self, node: int, body: FetchRequest, version: int | None, **kw: Any) -> Any:
        names = {tid: name for name, tid in self.topic_ids.items()}
        if body.session_epoch == -1:  # FINAL_EPOCH: a sessionless Fetch, closing the session named
            if self.sessions.pop(body.session_id, None) is not None:
                self.closed_sessions.append(body.session_id)
            sid, cache, full = 0, {}, True
        elif body.session_epoch == 0 or body.session_id == 0:
            sid, cache, full = next(self.ids) if body.session_epoch == 0 else 0, {}, True
        else:
            sid = body.session_id
            if self.lose_sessions or sid not in self.sessions:
                return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, responses=[])
            if body.session_epoch != self.epochs[sid]:
                return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, responses=[])
            cache, full = self.sessions[sid], False
        for t in body.topics:
            for p in t.partitions:
                cache[TopicPartition(names[t.topic_id], p.partition)] = p
        for t in body.forgotten_topics_data:
            for i in t.partitions:
                assert cache.pop(TopicPartition(names[t.topic_id], i), None) is not None, "forgot an unknown"
        if sid:
            self.sessions[sid] = cache
            self.epochs[sid] = body.session_epoch + 1 if body.session_epoch > 0 else 1
        mine = [tp for tp in cache if self.leaders[tp.partition] == node]
        everything = FetchRequest(
            max_wait_ms=body.max_wait_ms,
            topics=[
                FetchRequest.FetchTopic(topic_id=self.topic_ids[T], partitions=[cache[tp] for tp in mine])
            ],
        )
        answer = await super().send(node, everything, version, **kw) if mine else FetchResponse(responses=[])
        parts = [p for t in answer.responses for p in t.partitions]
        if self.batches_per_answer is not None:
            for p in parts:
                if p.records:
                    kept = scan_batches(p.records)[: self.batches_per_answer]
                    p.records = bytes(p.records[: kept[-1].end])
        parts += [
            FetchResponse.PartitionData(
                partition_index=tp.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            for tp in cache
            if self.leaders[tp.partition] != node
        ]
        if not full:
            parts = [p for p in parts if p.records or p.error_code]
        return FetchResponse(
            session_id=sid,
            responses=[FetchResponse.FetchableTopicResponse(topic_id=self.topic_ids[T], partitions=parts)]
            if parts
            else [],
        )


def named(body: FetchRequest) -> set[int]:
    return {p.partition for t in body.topics for p in t.partitions}


def forgotten(body: FetchRequest) -> set[int]:
    return {i for t in body.forgotten_topics_data for i in t.partitions}


def test_a_leader_move_takes_partitions_from_one_session_to_the_other_and_loses_nothing() -> None:
    async def main() -> None:
        client = SessionBroker({T: PARTITIONS})
        fill_each(client, PARTITIONS, 5)
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        got: list[Any] = []
        try:
            await read(c, 5 * PARTITIONS, got)
            mark = len(client.wire)
            client.move(range(10), 2)  # their leader is now node 2; node 1 answers NOT_LEADER
            fill_each(client, PARTITIONS, 5, start=5)
            await read(c, 5 * PARTITIONS, got)
            for _ in range(10):
                assert await c.poll(30) == []
            after = client.wire[mark:]
            # The sessions node 1 still uses hold none of them (one it no longer uses may keep
            # them: it fetches nothing until used again, and then forgets them first).
            used = {b.session_id for n, b, _ in client.wire[-6:] if n == 1}
            assert used and all(tp.partition >= 10 for sid in used for tp in client.sessions[sid])
            to_two = [(b, r) for n, b, r in after if n == 2]
            assert to_two and set().union(*(named(b) for b, _ in to_two)) == set(range(10))
            assert any(b.session_epoch > 0 and b.session_id for b, _ in to_two), "node 2 kept no session"
            # The last rounds are idle: no partition named on either node, sessions kept.
            for n, b, _ in client.wire[-4:]:
                assert b.session_id and b.session_epoch > 0 and not named(b), (n, b)
        finally:
            await c.close()
        check_once_in_order(got, PARTITIONS, 10)

    asyncio.run(asyncio.wait_for(main(), 50))


def test_lost_sessions_fall_back_to_full_fetches_and_lose_nothing() -> None:
    async def main() -> None:
        client = SessionBroker({T: PARTITIONS})
        fill_each(client, PARTITIONS, 3)
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        got: list[Any] = []
        try:
            await read(c, 3 * PARTITIONS, got)
            client.lose_sessions = True
            fill_each(client, PARTITIONS, 3, start=3)
            await read(c, 3 * PARTITIONS, got)  # from full Fetches only
            client.lose_sessions = False
            fill_each(client, PARTITIONS, 3, start=6)
            await read(c, 3 * PARTITIONS, got)
            for _ in range(5):
                assert await c.poll(30) == []
        finally:
            await c.close()
        codes = [r.error_code for _, _, r in client.wire]
        assert ErrorCode.FETCH_SESSION_ID_NOT_FOUND in codes
        last = [b for _, b, _ in client.wire if b.session_epoch != -1][-1]  # before the close
        assert last.session_epoch > 0, "no session after the broker kept them again"
        check_once_in_order(got, PARTITIONS, 9)

    asyncio.run(asyncio.wait_for(main(), 50))


def test_idle_rounds_look_at_no_partition_whatever_the_assignment() -> None:
    async def main(partitions: int) -> int:
        client = SessionBroker({T: partitions})
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        try:
            for _ in range(10):
                await c.poll(30)  # assigned, positions looked up, sessions opened
            fetcher = c._fetcher
            touched, rounds = fetcher.touched, len(client.wire)
            for _ in range(10):
                assert await c.poll(30) == []
            assert len(client.wire) - rounds >= 3, "no fetch rounds while idle"
            assert all(not named(b) for _, b, _ in client.wire[rounds:])
            return fetcher.touched - touched
        finally:
            await c.close()

    for n in (10, 1_000):
        assert asyncio.run(asyncio.wait_for(main(n), 40)) == 0


def fill_batches(client: FakeClient, batches: int, per_batch: int, start: int) -> None:
    """``batches`` batches of ``per_batch`` records on every partition, from offset ``start``."""
    for p in range(PARTITIONS):
        log = client.log(T, p)
        for b in range(batches):
            first = start + b * per_batch
            log.append([(None, b"%d-%d" % (p, i), []) for i in range(first, first + per_batch)])


def test_caught_up_partitions_wait_on_one_lane_and_spread_again_with_data() -> None:
    """An idle consumer long-polls each broker on one connection (one session), not one per lane
    (issue 40: 6 Fetch/s at 1,000 partitions where librdkafka sends 2); partitions with records
    to read are fetched on every lane again, moved between the sessions with nothing lost or
    read twice; close closes every session the broker gave (FINAL_EPOCH)."""

    async def main() -> None:
        client = SessionBroker({T: PARTITIONS})
        client.batches_per_answer = 1  # a partition with 3 batches is behind after an answer
        fill_batches(client, 3, 2, 0)
        c = KafkaConsumer(
            T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20, fetch_concurrency=3
        )
        got: list[Any] = []
        try:
            await read(c, 6 * PARTITIONS, got)
            busy_lanes = {lane for lane, (_, b, _) in zip(client.lanes, client.wire, strict=True) if named(b)}
            assert len(busy_lanes) == 3, busy_lanes
            for _ in range(3):
                assert await c.poll(30) == []  # the last moves to the parking lane go out
            mark = len(client.wire)
            for _ in range(10):
                assert await c.poll(30) == []
            idle = list(zip(client.lanes[mark:], client.wire[mark:], strict=True))
            assert len(idle) >= 5, "no long polls while idle"
            assert {lane for lane, _ in idle} == {PARK_LANE}, [lane for lane, _ in idle]
            assert len({b.session_id for _, (_, b, _) in idle}) == 1
            assert all(b.session_epoch > 0 and not named(b) for _, (_, b, _) in idle)
            parked = next(sid for _, (_, b, _) in idle for sid in [b.session_id])
            assert {tp.partition for tp in client.sessions[parked]} == set(range(PARTITIONS))

            mark = len(client.wire)
            fill_batches(client, 3, 2, 6)
            await read(c, 6 * PARTITIONS, got)
            again = {
                lane
                for lane, (_, b, _) in zip(client.lanes[mark:], client.wire[mark:], strict=True)
                if named(b)
            }
            assert len(again) == 3, f"records fetched on lanes {again} only"
            for _ in range(3):
                assert await c.poll(30) == []
            mark = len(client.wire)
            for _ in range(5):
                assert await c.poll(30) == []
            assert set(client.lanes[mark:]) == {PARK_LANE}
        finally:
            await c.close()
        check_once_in_order(got, PARTITIONS, 12)
        given = {r.session_id for _, _, r in client.wire if r.session_id}
        assert len(given) == 3 and set(client.closed_sessions) == given, (given, client.closed_sessions)
        assert not client.sessions

    asyncio.run(asyncio.wait_for(main(), 50))


def test_a_bounded_partition_is_fetched_up_to_its_bound_and_no_further() -> None:
    """fetch_until (a Spark task's offset range): no Fetch asks for an offset at or past the
    bound, none is left out once the range is buffered (a long poll there would hold up the
    next range's first Fetch), and a new bound starts fetching again at once."""

    async def main() -> None:
        client = SessionBroker({T: 1})
        client.batches_per_answer = 1
        log = client.log(T, 0)
        for b in range(8):
            log.append([(None, b"0-%d" % i, []) for i in range(10 * b, 10 * b + 10)])
        tp = TopicPartition(T, 0)
        c = KafkaConsumer(
            client=client, partitions={T: [0]}, auto_offset_reset="earliest", fetch_max_wait_ms=20
        )
        try:
            c.fetch_until(tp, 25)
            got: list[Any] = []
            while len(got) < 25:
                got += await c.poll(50)
            mark = len(client.wire)
            for _ in range(5):
                got += await c.poll(30)
            asked = [p.fetch_offset for _, b, _ in client.wire for t in b.topics for p in t.partitions]
            assert asked and max(asked) < 25, asked
            assert all(not named(b) for _, b, _ in client.wire[mark:]), "fetched past the bound"
            assert [r.offset for r in got] == list(range(30))  # the batch holding 24 came whole
            c.fetch_until(tp, 50)
            while len(got) < 50:
                got += await c.poll(50)
            assert [r.offset for r in got][:50] == list(range(50))
            c.fetch_until(tp, None)
            while len(got) < 80:
                got += await c.poll(50)
            assert [r.offset for r in got] == list(range(80))
        finally:
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 30))
