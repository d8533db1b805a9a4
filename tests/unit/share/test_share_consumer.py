"""The asyncio KafkaShareConsumer against a scripted share broker (tests/fakes/share_broker.py):
joining, share-session epochs, acknowledgements piggybacked and committed, the callback,
session loss, a broker without share groups, close, and the blocking face's arguments."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fakes.share_broker import FakeShareBroker
from fakes.share_helpers import TP, T, first_poll, poll_until, run

from kafka_core.aio import KafkaShareConsumer
from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaClosedError, KafkaConfigError, KafkaProtocolError
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from kafka_core.share import AcknowledgeType, KafkaAcknowledgementError, KafkaShareGroupsUnsupportedError

pytestmark = pytest.mark.timeout(60)


def fetches(broker: FakeShareBroker) -> list[ShareFetchRequest]:
    return [r for r in broker.requests if isinstance(r, ShareFetchRequest)]


def test_implicit_mode_accepts_at_the_next_poll_piggybacked() -> None:
    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"a", b"b", b"c"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        got = await poll_until(c, 3)
        assert [(r.value, r.delivery_count) for r in got] == [(b"a", 1), (b"b", 1), (b"c", 1)]
        assert broker.states(T) == [("acquired", 1)] * 3
        await c.poll(50)  # accepts them, on the next ShareFetch
        deadline = time.monotonic() + 5
        while broker.states(T) != [("done", 1)] * 3 and time.monotonic() < deadline:
            await c.poll(50)
        assert broker.states(T) == [("done", 1)] * 3
        epochs = [r.share_session_epoch for r in fetches(broker)]
        assert epochs[0] == 0 and epochs[1:4] == [1, 2, 3]  # opened, then in step
        first_with_acks = next(
            r for r in fetches(broker) if r.topics and r.topics[0].partitions[0].acknowledgement_batches
        )
        assert first_with_acks.share_session_epoch > 0  # never on the opening request
        assert c.metrics()["share"]["records_accepted"] == 3
        await c.close()

    run(main)
    assert broker.closed is False  # a client passed in stays its owner's
    hb = [r for r in broker.requests if isinstance(r, ShareGroupHeartbeatRequest)]
    assert hb[0].member_epoch == 0 and hb[0].subscribed_topic_names == [T] and hb[-1].member_epoch == -1


def test_explicit_release_and_reject_then_commit_sync_reports_per_partition() -> None:
    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"a", b"b", b"c"])
    outcomes: list[tuple[dict[TopicPartition, set[int]], Any]] = []

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        c.set_acknowledgement_commit_callback(lambda offsets, exc: outcomes.append((offsets, exc)))
        got = await poll_until(c, 3)
        c.acknowledge(got[0], "accept")
        c.acknowledge(got[1], AcknowledgeType.RELEASE)
        c.acknowledge(got[2], "reject")
        assert await c.commit_sync() == {TP: None}
        assert broker.states(T) == [("done", 1), ("available", 1), ("done", 1)]
        again = await poll_until(c, 1)
        assert [(r.value, r.delivery_count) for r in again] == [(b"b", 2)]
        assert c.metrics()["share"]["records_redelivered"] == 1
        c.acknowledge(again[0])
        await c.close()
        assert broker.states(T)[1] == ("done", 2)

    run(main)
    assert outcomes[0] == ({TP: {0, 1, 2}}, None)
    assert any(
        isinstance(r, ShareAcknowledgeRequest) and r.share_session_epoch == -1 for r in broker.requests
    )


def test_refused_acknowledgements_reach_commit_sync_and_the_callback() -> None:
    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"a"])
    seen: list[Any] = []

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        c.set_acknowledgement_commit_callback(lambda offsets, exc: seen.append(exc))
        got = await poll_until(c, 1)
        c.acknowledge(got[0])
        broker.ack_error = ErrorCode.INVALID_RECORD_STATE  # e.g. its lock expired meanwhile
        err = (await c.commit_sync())[TP]
        assert isinstance(err, KafkaProtocolError) and err.name == "INVALID_RECORD_STATE"
        assert c.metrics()["share"]["lock_expiries"] == 1
        broker.ack_error = 0
        await c.close()

    run(main)
    assert isinstance(seen[0], KafkaProtocolError)


def test_a_lost_share_session_opens_again_at_epoch_zero() -> None:
    broker = FakeShareBroker({T: 1})

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        await c.poll(200)
        broker.fetch_error = ErrorCode.SHARE_SESSION_NOT_FOUND
        broker.produce(T, [b"x"])
        got = await poll_until(c, 1)
        assert [r.value for r in got] == [b"x"]
        epochs = [r.share_session_epoch for r in fetches(broker)]
        assert epochs.count(0) >= 2  # reopened after the error
        await c.close()

    run(main)


def test_a_broker_without_share_groups_is_a_clear_error() -> None:
    broker = FakeShareBroker({T: 1}, share_groups=False)

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        with pytest.raises(
            KafkaShareGroupsUnsupportedError, match=r"does not support share groups \(KIP-932\)"
        ):
            await c.poll(100)
        await c.close()

    run(main)


def test_closed_consumer_and_bad_options() -> None:
    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"a"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        got = await poll_until(c, 1)
        await c.close()
        with pytest.raises(KafkaClosedError):
            c.acknowledge(got[0])
        with pytest.raises(KafkaClosedError):
            await c.poll(10)
        assert broker.states(T) == [("available", 1)]  # released on close: nothing lost
        with pytest.raises(KafkaConfigError, match="group_id"):
            KafkaShareConsumer(T, client=broker)
        with pytest.raises(KafkaConfigError, match="share_acknowledgement_mode"):
            KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="auto")
        with pytest.raises(KafkaConfigError, match="max_poll_records"):
            KafkaShareConsumer(T, group_id="g", client=broker, max_poll_records=0)
        idle = KafkaShareConsumer(group_id="g", client=broker)
        with pytest.raises(KafkaConfigError, match="subscribe"):
            await idle.poll(10)
        await idle.subscribe([T])
        assert idle.subscription() == [T]
        with pytest.raises(KafkaAcknowledgementError, match="explicit"):
            idle.acknowledge(got[0])
        await idle.close()

    run(main)


def test_deserializers_apply_to_poll() -> None:
    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"7"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, value_deserializer=int)
        got = await poll_until(c, 1)
        assert got[0].value == 7 and got[0].delivery_count == 1
        await c.close()

    run(main)


def test_a_refused_fetch_is_raised_by_poll() -> None:
    broker = FakeShareBroker({T: 1})

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        await c.poll(200)
        broker.fetch_error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        with pytest.raises(KafkaProtocolError, match="GROUP_AUTHORIZATION_FAILED"):
            for _ in range(50):
                await c.poll(100)
        broker.produce(T, [b"after"])
        assert [r.value for r in await poll_until(c, 1)] == [b"after"]  # goes on once allowed
        await c.close()

    run(main)


def test_blocking_face_hands_out_held_records_and_releases_the_rest_on_close() -> None:
    from kafka_core import KafkaShareConsumer as BlockingShareConsumer

    broker = FakeShareBroker({T: 1})
    broker.produce(T, [b"a", b"b", b"c", b"d"])
    c = BlockingShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
    try:
        first = first_poll(c, 100, max_records=1)
        assert [r.value for r in first] == [b"a"]
        with pytest.raises(KafkaAcknowledgementError, match="not acknowledged"):
            c.poll(100, max_records=1)  # held records too: the last poll's first
        c.acknowledge(first[0], "accept")
        second = c.poll(100, max_records=2)
        assert [r.value for r in second] == [b"b", b"c"]  # from the records held here
        for r in second:
            c.acknowledge(r, "accept")
    finally:
        c.close()
    # b"d" was taken but never handed out: released, not lost
    assert broker.states(T) == [("done", 1), ("done", 1), ("done", 1), ("available", 1)]


def test_acknowledge_batch_takes_a_whole_columnar_batch_as_ranges() -> None:
    broker = FakeShareBroker({T: 2})
    broker.produce(T, [b"a", b"b", b"c"], partition=0)
    broker.produce(T, [b"x", b"y"], partition=1)

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        rows = 0
        batches = []
        deadline = time.monotonic() + 10
        while rows < 5 and time.monotonic() < deadline:
            batch = await c.poll_columns(100)
            if batch is not None:
                c.acknowledge_batch(batch, "reject")  # each poll's rows, before the next poll
                batches.append(batch)
                rows += batch.num_rows
        assert rows == 5
        with pytest.raises(KafkaAcknowledgementError, match="already acknowledged"):
            c.acknowledge_batch(batches[0])  # nothing changes: it goes offset by offset
        assert c.metrics()["share"]["records_rejected"] == 5
        await c.commit_sync()
        assert broker.states(T, 0) == [("done", 1)] * 3
        assert broker.states(T, 1) == [("done", 1)] * 2
        await c.close()

    run(main)


def test_poll_says_cut_off_when_no_broker_answers_for_request_timeout() -> None:
    from kafka_core.errors import KafkaConnectionError

    broker = FakeShareBroker({T: 1})
    broker.request_timeout_ms = 300  # the bound (the client's request_timeout_ms)
    broker.produce(T, [b"a"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        assert [r.value for r in await poll_until(c, 1)] == [b"a"]
        broker.down = True
        deadline = time.monotonic() + 20
        with pytest.raises(KafkaConnectionError, match="cut off") as info:
            while time.monotonic() < deadline:
                assert await c.poll(100) == []  # quiet until the bound has passed
        assert "request_timeout_ms=300" in str(info.value)
        broker.down = False  # it retried all along: records flow again
        broker.produce(T, [b"b"])
        assert [r.value for r in await poll_until(c, 1)] == [b"b"]
        await c.close()

    run(main)


def test_the_share_consumer_builds_on_consumer_base_not_on_the_consumer() -> None:
    """kafka_core.share shares only kafka_core.consumer_base with the consumer: loading the share
    consumer (both faces) loads no module of kafka_core.consumer."""
    import subprocess
    import sys

    code = (
        "import sys, kafka_core.share.sync, kafka_core.share.consumer\n"
        "print(sorted(m for m in sys.modules if m == 'kafka_core.consumer' or m.startswith('kafka_core.consumer.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
