"""Share-consumer acknowledgements against a scripted broker that holds ShareFetch as Kafka does
(up to its max wait when it has nothing to return; one request per share session at a time):
commit and close are not held up by a long poll, a timeout names its cause and loses nothing,
and RENEW (KIP-1222) renews without releasing, refused clearly by a broker without it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fakes.share_broker import ACQUIRED, DONE, FakeShareBroker
from fakes.share_helpers import TP, T, first_poll, poll_until
from fakes.share_helpers import run as run_within

from kafka_core import KafkaShareConsumer as BlockingShareConsumer
from kafka_core.aio import KafkaShareConsumer
from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaTimeoutError, KafkaUnsupportedVersionError
from kafka_core.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kafka_core.share import AcknowledgeType, KafkaAcknowledgementError

pytestmark = pytest.mark.timeout(60)
RENEW = 4


class HoldingBroker(FakeShareBroker):
    """Holds a ShareFetch with nothing to return for its max wait (as Kafka's purgatory does),
    or until ``gate`` opens when one is set (a broker slower than any max wait); counts RENEWs."""

    def __init__(self, *args: Any, ack_version: int = 2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ack_version = ack_version
        self.gate: asyncio.Event | None = None
        self.held = 0  # ShareFetch requests being held now
        self.renewals: list[tuple[TopicPartition, int]] = []

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        if api_key == ShareAcknowledgeRequest.API_KEY:
            return self.ack_version
        return await super().api_version(node_id, api_key, max_version=max_version)

    async def send(self, node_id: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if isinstance(body, ShareFetchRequest):
            self.held += 1
            try:
                if self.gate is not None:
                    await self.gate.wait()
                elif not any(st[0] == "available" for st in self.state.values()):
                    await asyncio.sleep(body.max_wait_ms / 1000.0)
            finally:
                self.held -= 1
        if isinstance(body, ShareAcknowledgeRequest) and body.is_renew_ack and self.ack_version < 2:
            raise AssertionError("a RENEW sent to a broker without ShareAcknowledge v2")
        return await super().send(node_id, body, version, **kw)

    def _apply_acks(self, member: str, tp: TopicPartition, batches: list[Any]) -> int:
        renew = [b for b in batches if b.acknowledge_types == [RENEW]]
        for b in renew:
            for offset in range(b.first_offset, b.last_offset + 1):
                st = self.state.get((tp, offset))
                if st is None or st[0] != ACQUIRED or st[2] != member:
                    return 33  # INVALID_RECORD_STATE
                self.renewals.append((tp, offset))
        return super()._apply_acks(member, tp, [b for b in batches if b not in renew])


def run(fn: Callable[[], Any]) -> Any:
    """A longer bound than the other share tests': this broker holds fetches as Kafka does."""
    return run_within(fn, timeout=40)


def test_commit_and_close_are_not_held_up_by_a_long_poll() -> None:
    """fetch_max_wait_ms is 60 s: the ShareFetch a poll sends waits no longer than that poll,
    the one sent while the application works not at all, so commit_sync(2) and close(2) return."""
    broker = HoldingBroker({T: 1})
    broker.produce(T, [b"a", b"b"])

    async def main() -> None:
        c = KafkaShareConsumer(
            T, group_id="g", client=broker, share_acknowledgement_mode="explicit", fetch_max_wait_ms=60_000
        )
        got = await poll_until(c, 2)
        assert [r.value for r in got] == [b"a", b"b"]
        await asyncio.sleep(0.3)  # the application works; a prefetch went and came back empty
        for r in got:
            c.acknowledge(r)
        assert await c.commit_sync(timeout=2) == {TP: None}
        assert broker.states(T) == [("done", 1), ("done", 1)]
        assert await c.poll(200) == []  # nothing to read: held for these 200 ms only
        await c.close(timeout=2)

    run(main)
    assert all(r.max_wait_ms <= 200 for r in broker.requests if isinstance(r, ShareFetchRequest))


def test_blocking_face_close_is_not_held_up_by_the_last_poll() -> None:
    broker = HoldingBroker({T: 1})
    broker.produce(T, [b"a"])
    c = BlockingShareConsumer(T, group_id="g", client=broker, fetch_max_wait_ms=60_000)
    try:
        got = first_poll(c, 200)
        assert [r.value for r in got] == [b"a"]
        assert c.poll(200) == []  # accepts "a"; then nothing to read
        assert c.commit_sync(timeout=2) == {}
    finally:
        c.close(timeout=2)  # raised KafkaTimeoutError when the last poll's fetch waited 60 s
    assert broker.states(T) == [("done", 1)]


def test_a_commit_timing_out_behind_a_slow_fetch_names_it_and_loses_nothing() -> None:
    broker = HoldingBroker({T: 1})
    broker.produce(T, [b"a"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        got = await poll_until(c, 1)
        broker.gate = asyncio.Event()  # the broker now holds every ShareFetch ...
        await asyncio.sleep(0.1)  # ... such as the one sent while the application works
        assert broker.held == 1
        c.acknowledge(got[0])
        with pytest.raises(KafkaTimeoutError, match="ShareFetch in flight to broker 1") as info:
            await c.commit_sync(timeout=0.3)
        assert "stay pending" in str(info.value)
        assert broker.states(T) == [("acquired", 1)]
        broker.gate.set()
        assert await c.commit_sync(timeout=5) == {TP: None}  # sent now: not lost
        assert broker.states(T) == [("done", 1)]
        await c.close(timeout=5)

    run(main)


def test_renew_keeps_the_record_acquired_and_acknowledgeable() -> None:
    broker = HoldingBroker({T: 1})
    broker.produce(T, [b"slow", b"quick"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        slow, quick = await poll_until(c, 2)
        c.acknowledge(quick, "accept")
        for _ in range(3):
            c.acknowledge(slow, "renew")
            assert await c.commit_sync(timeout=5) == {TP: None}
        assert broker.states(T) == [("acquired", 1), ("done", 1)]
        assert broker.renewals == [(TP, 0)] * 3
        renew_reqs = [r for r in broker.requests if isinstance(r, ShareAcknowledgeRequest) and r.is_renew_ack]
        assert len(renew_reqs) == 3
        assert c.metrics()["share"]["records_renewed"] == 3
        with pytest.raises(KafkaAcknowledgementError, match="not acknowledged"):
            await c.poll(10)  # renewed is not done: it still needs its final acknowledgement
        c.acknowledge(slow, AcknowledgeType.RENEW)
        c.acknowledge(slow, AcknowledgeType.ACCEPT)  # before the commit: the RENEW is dropped
        assert await c.commit_sync(timeout=5) == {TP: None}
        assert broker.renewals == [(TP, 0)] * 3 and broker.states(T) == [("done", 1), ("done", 1)]
        with pytest.raises(KafkaAcknowledgementError, match="already acknowledged"):
            c.acknowledge(slow, "renew")
        await c.close()

    run(main)


def test_renew_on_a_broker_without_it_is_a_clear_error_and_changes_nothing() -> None:
    broker = HoldingBroker({T: 1}, ack_version=1)
    broker.produce(T, [b"a"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker, share_acknowledgement_mode="explicit")
        (rec,) = await poll_until(c, 1)
        c.acknowledge(rec, "renew")
        err = (await c.commit_sync(timeout=5))[TP]
        assert isinstance(err, KafkaUnsupportedVersionError)
        assert "KIP-1222" in str(err) and "v1" in str(err) and "4.2" in str(err)
        assert broker.states(T) == [("acquired", 1)]  # still this consumer's
        c.acknowledge(rec, "accept")  # and still acknowledgeable
        assert await c.commit_sync(timeout=5) == {TP: None}
        await c.close()

    run(main)
    assert broker.states(T) == [(DONE, 1)]


def test_renew_is_refused_in_implicit_mode() -> None:
    broker = HoldingBroker({T: 1})
    broker.produce(T, [b"a"])

    async def main() -> None:
        c = KafkaShareConsumer(T, group_id="g", client=broker)
        (rec,) = await poll_until(c, 1)
        with pytest.raises(KafkaAcknowledgementError, match="explicit"):
            c.acknowledge(rec, "renew")
        await c.close()

    run(main)
