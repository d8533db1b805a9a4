"""The fetch session handler (KIP-227), without I/O: what each Fetch names, and how answers and
failures move the session on."""

from __future__ import annotations

import uuid

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.fetch.session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    PartitionData,
)
from kafka_core.consumer.policies import OffsetReset
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.protocol import ErrorCode

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


def data(offset: int, version: int = 1, leader_epoch: int = 0) -> PartitionData:
    return PartitionData(offset, leader_epoch, -1, 1 << 20, version)


def opened(*tps: TopicPartition, session_id: int = 7) -> FetchSession:
    s = FetchSession(node=1)
    for tp in tps:
        s.want(tp, data(0))
    req = s.next_request(by_id=True)
    assert req.full and req.session_id == 0 and req.epoch == INITIAL_EPOCH
    assert set(req.partitions) == set(tps)
    assert s.answered(req, 0, session_id)
    return s


def test_a_full_fetch_opens_the_session_and_idle_fetches_name_nothing() -> None:
    s = opened(A0, A1, A2)
    assert (s.session_id, s.epoch) == (7, 1)
    for epoch in (1, 2, 3):
        req = s.next_request(by_id=True)
        assert not req.full
        assert (req.session_id, req.epoch) == (7, epoch)
        assert req.partitions == {} and req.forgotten == []
        assert s.answered(req, 0, 7)
    assert s.full_requests == 1 and s.incremental_requests == 3


def test_only_changed_partitions_are_sent_and_unchanged_wants_are_not() -> None:
    s = opened(A0, A1, A2)
    s.want(A0, data(0))  # same as before: nothing to say
    s.want(A1, data(5))  # records came: a new fetch offset
    req = s.next_request(by_id=True)
    assert req.partitions == {A1: data(5)}
    assert s.sent(A1) == data(5) and s.sent(A0) == data(0)
    s.answered(req, 0, 7)
    s.want(A1, data(5, version=2))  # a seek to the same offset: a new position version
    s.want(A2, data(0, leader_epoch=3))  # a new leader epoch
    req = s.next_request(by_id=True)
    assert req.partitions == {A1: data(5, version=2), A2: data(0, leader_epoch=3)}


def test_dropped_partitions_are_forgotten_once_and_added_back_in_full() -> None:
    s = opened(A0, A1)
    s.drop(A1)
    s.drop(A1)
    req = s.next_request(by_id=True)
    assert req.partitions == {} and req.forgotten == [A1]
    assert s.sent(A1) is None and A1 not in s
    s.answered(req, 0, 7)
    s.want(A1, data(0))
    req = s.next_request(by_id=True)
    assert req.partitions == {A1: data(0)} and req.forgotten == []


def test_a_partition_dropped_and_wanted_again_before_the_next_request_is_sent_only_if_changed() -> None:
    s = opened(A0)
    s.drop(A0)
    s.want(A0, data(0))
    req = s.next_request(by_id=True)
    assert req.partitions == {} and req.forgotten == []
    s.drop(A0)
    s.want(A0, data(9))
    assert s.next_request(by_id=True).partitions == {A0: data(9)}


def test_session_not_found_starts_over_with_a_new_session_in_full() -> None:
    s = opened(A0, A1)
    s.want(A0, data(3))
    req = s.next_request(by_id=True)
    assert not s.answered(req, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    req = s.next_request(by_id=True)
    assert req.full and (req.session_id, req.epoch) == (0, INITIAL_EPOCH)
    assert req.partitions == {A0: data(3), A1: data(0)}
    assert s.answered(req, 0, 8)
    assert (s.session_id, s.epoch) == (8, 1)


def test_an_invalid_epoch_or_a_lost_answer_closes_the_session_and_opens_another() -> None:
    for fail in ("epoch", "topic-id", "connection"):
        s = opened(A0, A1)
        req = s.next_request(by_id=True)
        if fail == "epoch":
            assert not s.answered(req, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        elif fail == "topic-id":
            assert not s.answered(req, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0)
        else:
            s.failed()
        req = s.next_request(by_id=True)
        # epoch 0 with the old id: the broker closes that session and opens a new one
        assert req.full and (req.session_id, req.epoch) == (7, INITIAL_EPOCH)
        assert set(req.partitions) == {A0, A1}


def test_a_broker_without_sessions_is_asked_in_full_every_time() -> None:
    s = opened(A0, A1, session_id=0)
    for _ in range(3):
        req = s.next_request(by_id=False)
        assert req.full and req.session_id == 0
        assert set(req.partitions) == {A0, A1}
        assert s.answered(req, 0, 0)
    assert s.incremental_requests == 0


def test_fetch_before_v7_is_sessionless() -> None:
    s = FetchSession(node=1)
    s.want(A0, data(0))
    req = s.next_request(by_id=False, sessions=False)
    assert req.full and (req.session_id, req.epoch) == (0, FINAL_EPOCH)
    assert req.forgotten == []


def test_the_broker_closing_the_session_starts_over() -> None:
    s = opened(A0)
    req = s.next_request(by_id=True)
    assert s.answered(req, 0, 0)
    assert s.next_request(by_id=True).full


def test_switching_between_topic_names_and_ids_needs_a_new_session() -> None:
    s = opened(A0, A1)
    req = s.next_request(by_id=False)  # a topic without an id joined: Fetch by name (v12)
    assert req.full and req.epoch == INITIAL_EPOCH and set(req.partitions) == {A0, A1}


def test_topic_ids_of_a_session_name_its_answers() -> None:
    s = FetchSession(node=1)
    tid = uuid.uuid4()
    s.note_topic_ids({"a": tid})
    assert s.topic_name(tid) == "a" and s.topic_id("a") == tid


def test_subscription_notes_each_change_and_indexes_resets_and_validations() -> None:
    subs = SubscriptionState()
    subs.assign([A0, A1, A2])
    assert subs.take_changed() == {A0, A1, A2}
    assert subs.take_changed() == set()
    subs.seek(A0, 5)
    subs.state(A1).high_watermark = 10  # not a fetch state change
    assert subs.take_changed() == {A0}
    subs.pause([A2])
    assert subs.paused() == {A2} and subs.take_changed() == {A2}
    subs.request_reset(A1, OffsetReset.EARLIEST)
    assert subs.resets() == [A1]
    subs.seek(A1, 3, offset_epoch=4)
    assert subs.resets() == []
    assert subs.awaiting_validation() == [A1]
    subs.state(A1).awaiting_validation = False
    assert subs.awaiting_validation() == []
    subs.remove([A2])
    assert A2 in subs.take_changed() and subs.paused() == set()


def test_uncommitted_positions_are_those_moved_or_marked_since() -> None:
    import asyncio
    from typing import Any

    from kafka_core.consumer.offsets import ConsumerOffsets

    async def main() -> None:
        subs = SubscriptionState()
        subs.assign([A0, A1, A2])
        for tp in (A0, A1, A2):
            subs.seek(tp, 0)
        nothing: Any = None
        offsets = ConsumerOffsets(
            nothing,
            subs,
            nothing,
            nothing,
            group_id="g",
            auto_offset_reset=OffsetReset.EARLIEST,
            isolation_level=nothing,
            auto_commit=True,
            auto_commit_interval_s=5.0,
            coordinator_ready_timeout_ms=1_000,
            report=lambda exc: None,
        )
        assert offsets.uncommitted() == {A0: 0, A1: 0, A2: 0}
        offsets._committed_positions.update({A0: 0, A1: 0, A2: 0})  # as a commit leaves them
        assert offsets.uncommitted() == {}
        subs.state(A1).position = 7  # records handed over
        assert offsets.uncommitted() == {A1: 7}
        assert offsets.uncommitted([A0, A1]) == {A1: 7}
        subs.remove([A1])
        assert offsets.uncommitted() == {}

    asyncio.run(main())
