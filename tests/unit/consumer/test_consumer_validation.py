"""KIP-320 in the consumer, on the in-memory client: leader epochs in metadata and Fetch, the
validation state machine (awaiting validation blocks fetching that partition only; divergence
resets or raises; an undefined answer resets; a broker without the API is skipped), Fetch's
diverging_epoch, and the committed leader epoch's round trip."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import TP0, TP1, T, consume, run

from kafka_core.client.metadata import (
    ClusterMeta,
    EpochEndOffset,
    OffsetAndMetadata,
    PartitionMeta,
    TopicMeta,
    TopicPartition,
)
from kafka_core.client.metadata_cache import MetadataCache
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.fetch.validation import PositionValidator
from kafka_core.consumer.policies import OffsetReset
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import KafkaLogTruncationError, KafkaProtocolError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for
from kafka_core.protocol.messages import FetchResponse


class EpochClient(FakeClient):
    """The fake with leader epochs: in metadata, in OffsetForLeaderEpoch, optionally in Fetch."""

    def __init__(self) -> None:
        super().__init__({T: 2})
        self.leader_epochs: dict[TopicPartition, int] = {TP0: 0, TP1: 0}
        self.epoch_ends: dict[tuple[TopicPartition, int], tuple[int, int]] = {}  # asked -> answer
        self.asked: list[dict[TopicPartition, int]] = []
        self.supports_ofle = True
        self.gate: asyncio.Event | None = None  # holds OffsetForLeaderEpoch answers while unset
        self.diverging: dict[TopicPartition, tuple[int, int]] = {}  # one Fetch answer each
        self.fail_validation: BaseException | None = None  # raised by OffsetForLeaderEpoch

    def cached_metadata(self) -> ClusterMeta:
        meta = super().cached_metadata()
        return ClusterMeta(
            brokers=meta.brokers,
            topics=[
                TopicMeta(
                    t.name,
                    [
                        PartitionMeta(
                            p.partition,
                            1,
                            leader_epoch=self.leader_epochs.get(TopicPartition(t.name, p.partition), -1),
                        )
                        for p in t.partitions
                    ],
                    topic_id=t.topic_id,
                )
                for t in meta.topics
            ],
        )

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        assert api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH
        if not self.supports_ofle:
            raise KafkaUnsupportedVersionError("broker 1 does not support API OffsetForLeaderEpoch")
        return 4

    async def offsets_for_leader_epochs(self, epochs: dict, *, timeout_ms: float | None = None) -> dict:
        self.asked.append(dict(epochs))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_validation is not None:
            raise self.fail_validation
        out = {}
        for tp, epoch in epochs.items():
            default = (epoch, self.logs[tp].end)  # nothing diverged
            out[tp] = EpochEndOffset(*self.epoch_ends.get((tp, epoch), default))
        return out

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        resp = await super().send(node, body, version, **kw)
        for t in resp.responses:
            name = t.topic or next(n for n, i in self.topic_ids.items() if i == t.topic_id)
            for p in t.partitions:
                div = self.diverging.pop(TopicPartition(name, p.partition_index), None)
                if div is not None:
                    p.diverging_epoch = FetchResponse.EpochEndOffset(epoch=div[0], end_offset=div[1])
                    p.records = b""
        return resp


def fill_epochs(client: FakeClient, partition: int, epochs: list[tuple[int, int]]) -> None:
    """Batches of 10 records, ``count`` batches in each leader ``epoch``."""
    log = client.log(T, partition)
    for epoch, count in epochs:
        for _ in range(count):
            base = log.end
            log.append([(None, b"v%d" % i, []) for i in range(base, base + 10)], partition_leader_epoch=epoch)


def consumer(client: FakeClient, **kw: Any) -> KafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    return KafkaConsumer(partitions={T: [0, 1]}, client=client, fetch_max_wait_ms=20, **kw)


async def until(cond: Any, polls: int = 200, c: KafkaConsumer | None = None) -> None:
    for _ in range(polls):
        if cond():
            return
        if c is not None:
            await c.poll(10)
        else:
            await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def fetched(client: FakeClient, tp: TopicPartition) -> int:
    return sum(1 for r in client.fetch_requests if tp in r)


# -- metadata --------------------------------------------------------------------------------


def _answer(epoch: int, leader: int, topic_id: uuid.UUID) -> ClusterMeta:
    return ClusterMeta(
        brokers=[], topics=[TopicMeta("a", [PartitionMeta(0, leader, leader_epoch=epoch)], topic_id=topic_id)]
    )


def test_metadata_leader_epoch_never_goes_back() -> None:
    cache = MetadataCache(60.0)
    tid = uuid.uuid4()
    cache.update(_answer(5, 2, tid), full=False)
    cache.update(_answer(3, 1, tid), full=False)  # a stale broker: ignored, leader too
    p = cache.topic("a").partition(0)  # type: ignore[union-attr]
    assert (p.leader, p.leader_epoch) == (2, 5)
    cache.invalidate("a")  # an error named it: still no going back
    cache.update(_answer(4, 1, tid), full=True)
    assert cache.topic("a").partition(0).leader_epoch == 5  # type: ignore[union-attr]
    cache.update(_answer(6, 3, tid), full=False)
    assert cache.topic("a").partition(0).leader == 3  # type: ignore[union-attr]
    cache.update(_answer(0, 1, uuid.uuid4()), full=False)  # recreated: its epochs start afresh
    assert cache.topic("a").partition(0).leader_epoch == 0  # type: ignore[union-attr]


# -- fetch carries epochs ----------------------------------------------------------------------


def test_fetch_sends_the_leader_epoch_and_the_last_fetched_epoch() -> None:
    client = EpochClient()
    client.leader_epochs = {TP0: 3, TP1: 3}
    fill_epochs(client, 0, [(2, 2)])

    async def main() -> None:
        async with consumer(client) as c:
            assert len(await consume(c, 20)) == 20
            await until(lambda: any(r.get(TP0) == 20 for r in client.fetch_requests), c=c)

    run(main())
    body = next(
        b for b, r in zip(client.fetch_bodies, client.fetch_requests, strict=True) if r.get(TP0) == 20
    )
    part = next(p for t in body.topics for p in t.partitions if p.partition == 0)
    assert (part.current_leader_epoch, part.last_fetched_epoch) == (3, 2)


# -- the validation state machine --------------------------------------------------------------


def test_a_leader_change_holds_that_partition_until_validated_and_only_it() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 2)])
    fill_epochs(client, 1, [(0, 2)])

    async def main() -> None:
        async with consumer(client) as c:
            assert len(await consume(c, 40)) == 40
            client.gate = asyncio.Event()
            client.leader_epochs[TP0] = 1
            client.invalidate_metadata()
            await until(lambda: client.asked, c=c)
            assert client.asked[0] == {TP0: 0}
            fill_epochs(client, 0, [(1, 1)])
            fill_epochs(client, 1, [(1, 1)])
            tp0_before = fetched(client, TP0)
            got = await consume(c, 10)  # tp1 goes on meanwhile
            assert {(m.partition, m.offset) for m in got} == {(1, o) for o in range(20, 30)}
            assert fetched(client, TP0) == tp0_before  # awaiting validation: not fetched
            client.gate.set()
            got = await consume(c, 10)
            assert [(m.partition, m.offset) for m in got] == [(0, o) for o in range(20, 30)]

    run(main())


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_divergence_with_a_reset_policy_seeks_to_the_divergence_point(reset: str) -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    client.leader_epochs[TP0] = 1
    client.epoch_ends[(TP0, 0)] = (0, 30)  # the leader's epoch 0 ends at 30

    async def main() -> None:
        async with consumer(client, auto_offset_reset=reset) as c:
            c.seek(TP0, OffsetAndMetadata(45, "", 0))
            got = [m for m in await consume(c, 20) if m.partition == 0]
            assert [m.offset for m in got] == list(range(30, 50))

    run(main())
    assert client.asked[0] == {TP0: 0}


def test_divergence_with_none_raises_until_a_seek_and_keeps_the_position() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    fill_epochs(client, 1, [(0, 1)])
    client.epoch_ends[(TP0, 0)] = (0, 30)

    async def main() -> None:
        async with consumer(client, auto_offset_reset="none") as c:
            c.seek(TP0, OffsetAndMetadata(45, "", 0))
            c.seek(TP1, 0)
            errors: list[KafkaLogTruncationError] = []
            got: list[Any] = []
            for _ in range(200):
                try:
                    got.extend(await c.poll(10))
                except KafkaLogTruncationError as exc:
                    errors.append(exc)
                    if len(errors) == 2:
                        break
            assert errors[0].divergent == {TP0: (45, 30)}
            assert "30..44" in str(errors[0])
            assert await c.position(TP0) == 45
            c.seek(TP0, 30)
            got.extend(await consume(c, 30 - len(got)))
            assert sorted((m.partition, m.offset) for m in got) == [(0, o) for o in range(30, 50)] + [
                (1, o) for o in range(10)
            ]

    run(main())


@pytest.mark.parametrize(("reset", "first"), [("earliest", 0), ("latest", 50)])
def test_an_undefined_answer_resets_per_policy(reset: str, first: int) -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    client.epoch_ends[(TP0, 7)] = (-1, -1)

    async def main() -> None:
        async with consumer(client, auto_offset_reset=reset) as c:
            c.seek(TP0, OffsetAndMetadata(45, "", 7))
            for _ in range(200):  # the fetcher works on behind poll: no poll needed
                if await c.position(TP0) == first:
                    break
                await asyncio.sleep(0.01)
            assert client.asked == [{TP0: 7}]
            fill_epochs(client, 0, [(0, 1)])
            got = [m for m in await consume(c, 60 - first) if m.partition == 0]
            assert got[0].offset == first

    run(main())


def test_an_undefined_answer_with_none_raises_offset_out_of_range() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    client.epoch_ends[(TP0, 7)] = (-1, -1)

    async def main() -> None:
        async with consumer(client, auto_offset_reset="none") as c:
            c.seek(TP0, OffsetAndMetadata(45, "", 7))
            c.seek(TP1, 0)
            for _ in range(200):
                try:
                    await c.poll(10)
                except KafkaProtocolError as exc:
                    assert exc.name == "OFFSET_OUT_OF_RANGE"
                    assert "leader epoch 7" in str(exc)
                    return
            raise AssertionError("no error raised")

    run(main())


def test_a_broker_without_the_api_skips_validation() -> None:
    client = EpochClient()
    client.supports_ofle = False
    fill_epochs(client, 0, [(0, 5)])
    client.epoch_ends[(TP0, 0)] = (0, 30)  # would be a divergence, if asked

    async def main() -> None:
        async with consumer(client) as c:
            c.seek(TP0, OffsetAndMetadata(45, "", 0))
            got = [m for m in await consume(c, 5) if m.partition == 0]
            assert [m.offset for m in got] == list(range(45, 50))

    run(main())
    assert client.asked == []


def test_a_position_without_an_epoch_is_not_validated() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(-1, 3)])  # batches without a leader epoch

    async def main() -> None:
        async with consumer(client) as c:
            assert len([m for m in await consume(c, 30) if m.partition == 0]) == 30
            client.leader_epochs[TP0] = 4
            client.invalidate_metadata()
            fill_epochs(client, 0, [(-1, 1)])
            got = [m for m in await consume(c, 10) if m.partition == 0]
            assert [m.offset for m in got] == list(range(30, 40))

    run(main())
    assert client.asked == []


def test_a_diverging_epoch_in_a_fetch_answer_is_a_truncation() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 3), (1, 2)])

    async def main() -> None:
        async with consumer(client, auto_offset_reset="none") as c:
            c.seek(TP0, 40)
            c.seek(TP1, 0)
            client.diverging[TP0] = (0, 25)
            for _ in range(200):
                try:
                    await c.poll(10)
                except KafkaLogTruncationError as exc:
                    assert exc.divergent == {TP0: (40, 25)}
                    return
            raise AssertionError("no truncation raised")

    run(main())
    assert client.asked == []  # no extra request needed


# -- committed epochs ----------------------------------------------------------------------------


def test_commits_carry_the_leader_epoch_and_committed_epochs_are_validated() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 1), (2, 2)])

    async def main() -> None:
        async with consumer(client, group_id="g", enable_auto_commit=False) as c:
            c.seek(TP1, 0)
            assert len([m for m in await consume(c, 30) if m.partition == 0]) == 30
            await c.commit()
        assert client.committed["g"][TP0] == OffsetAndMetadata(30, "", 2)
        client.epoch_ends[(TP0, 2)] = (2, 25)  # the new leader's epoch 2 ends at 25
        async with consumer(client, group_id="g", enable_auto_commit=False) as c:
            got = [m for m in await consume(c, 5) if m.partition == 0]
            assert [m.offset for m in got] == list(range(25, 30))

    run(main())
    assert client.asked[-1] == {TP0: 2}


def test_a_plain_seek_keeps_its_offset_and_drops_the_epoch() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 2)])

    async def main() -> None:
        async with consumer(client, group_id="g", enable_auto_commit=False) as c:
            c.seek(TP0, 5)
            c.seek(TP1, 0)
            await c.commit({TP0: 5})
        assert client.committed["g"][TP0] == OffsetAndMetadata(5, "", -1)

    run(main())
    assert client.asked == []


# -- a partition revoked (and assigned again) while its validation is in flight ------------------


def _validator(client: EpochClient, subs: SubscriptionState, errors: dict) -> PositionValidator:
    return PositionValidator(
        client,
        subs,
        auto_offset_reset=OffsetReset.EARLIEST,
        errors=errors,
        drop=lambda tp: None,
        wake=lambda: None,
        outage=OutageTracker(30.0),
    )


def test_an_answer_for_a_revoked_partition_is_not_applied_to_its_new_assignment() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    client.epoch_ends[(TP0, 0)] = (0, 30)  # epoch 0 ends at 30: position 45 of epoch 0 diverged
    client.epoch_ends[(TP0, 1)] = (1, 50)  # epoch 1 holds 45

    async def main() -> None:
        subs = SubscriptionState()
        subs.assign([TP0])
        subs.seek(TP0, 45, 0)
        validator = _validator(client, subs, {})
        client.gate = asyncio.Event()
        validator.start()
        await until(lambda: client.asked)
        subs.remove([TP0])  # revoked while the answer is on its way, then assigned again
        subs.add([TP0])
        subs.seek(TP0, 45, 1)  # its new committed offset, of epoch 1
        client.gate.set()
        await until(lambda: len(client.asked) == 1 and validator.retry_in is not None)
        assert subs.state(TP0).position == 45  # the stale answer (about epoch 0) not applied
        assert subs.state(TP0).awaiting_validation
        validator.start()
        await until(lambda: not subs.state(TP0).awaiting_validation)
        assert subs.state(TP0).position == 45
        assert client.asked[-1] == {TP0: 1}
        await validator.close()

    run(main())


def test_a_failed_validation_of_a_revoked_partition_leaves_its_new_assignment_alone() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    refused = error_for(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "OffsetForLeaderEpoch")

    async def main() -> None:
        subs = SubscriptionState()
        subs.assign([TP0])
        subs.seek(TP0, 45, 0)
        errors: dict = {}
        validator = _validator(client, subs, errors)
        client.gate = asyncio.Event()
        validator.start()
        await until(lambda: client.asked)
        subs.remove([TP0])
        subs.add([TP0])
        subs.seek(TP0, 45, 0)
        client.fail_validation = refused
        client.gate.set()
        await until(lambda: validator.retry_in is not None)
        assert errors == {}  # the refusal was about the old assignment's request
        assert subs.state(TP0).awaiting_validation
        await validator.close()

    run(main())


def test_a_paused_partition_whose_leader_changed_hands_nothing_over_until_validated() -> None:
    client = EpochClient()
    fill_epochs(client, 0, [(0, 5)])
    fill_epochs(client, 1, [(0, 1)])

    async def main() -> None:
        async with consumer(client, max_poll_records=10) as c:
            got = [m for m in await consume(c, 20)]
            assert {(m.partition, m.offset) for m in got} >= {(0, o) for o in range(5)}
            c.pause([TP0])  # records fetched from the old leader stay buffered meanwhile
            client.gate = asyncio.Event()
            client.leader_epochs[TP0] = 1
            client.invalidate_metadata()
            fill_epochs(client, 1, [(1, 1)])  # TP1 goes on: fetch rounds see the new metadata
            more = await consume(c, 10)
            assert {m.partition for m in more} == {1}
            await until(lambda: client.asked, c=c)  # validated although paused
            c.resume([TP0])
            for _ in range(20):  # awaiting validation: nothing of the old leader's handed over
                assert not [m for m in await c.poll(10) if m.partition == 0]
            client.gate.set()
            rest = [m for m in await consume(c, 50 - len([m for m in got if m.partition == 0]))]
            assert [m.offset for m in rest if m.partition == 0][:1] == [
                max(m.offset for m in got if m.partition == 0) + 1
            ]

    run(main())
    assert client.asked[0] == {TP0: 0}
