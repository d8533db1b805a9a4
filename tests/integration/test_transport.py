"""KafkaStreamTransport against the real broker: round trips, error policies, commits, close.

Tansu answers JoinGroup after about half the session timeout, so subscriptions use 6 s sessions.
End offsets come from the publish acknowledgements (Tansu's ListOffsets latest is wrong).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core import KafkaClient, KafkaStreamTransport
from kafka_core.aio import KafkaStreamTransport as AsyncTransport
from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaClosedError, KafkaConfigError, KafkaTimeoutError
from kafka_core.producer.futures import RecordMetadata
from kafka_core.transport import HandlerError, Message

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

GROUP_OPTIONS = {
    "consumer_session_timeout_ms": 6_000,
    "consumer_heartbeat_interval_ms": 500,
    "retry_backoff_ms": 10,
    "retry_backoff_max_ms": 50,
}


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def transport(bootstrap: str, **kw: Any) -> KafkaStreamTransport:
    return KafkaStreamTransport(bootstrap, **{**GROUP_OPTIONS, **kw})


def wait_until(cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def ends(metas: list[RecordMetadata]) -> dict[TopicPartition, int]:
    """One past the last acknowledged offset, per partition."""
    out: dict[TopicPartition, int] = {}
    for m in metas:
        tp = TopicPartition(m.topic, m.partition)
        out[tp] = max(out.get(tp, 0), m.offset + 1)
    return out


def committed(bootstrap: str, group_id: str, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
    with KafkaClient(bootstrap) as client:
        got = client.fetch_committed_offsets(group_id, tps)
    return {tp: (got[tp].offset if tp in got else None) for tp in tps}


def all_tps(topic: str, n: int = 3) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


class Collector:
    """A thread-safe handler that records what it was given."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lock = threading.Lock()

    def __call__(self, m: Message) -> None:
        with self.lock:
            self.messages.append(m)

    def count(self) -> int:
        with self.lock:
            return len(self.messages)


def test_round_trip_of_json_bytes_and_str_with_keys_and_headers(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    gid = group()
    published = [
        ({"order": 1, "items": ["a", "b"]}, "k-json", {"kind": "json"}),
        ([1, 2, 3], b"k-list", [("kind", b"list"), ("n", "3")]),
        (b"\x00\x01raw", None, None),
        ("plain text é", "k-str", {"kind": "str"}),
        (42, "k-int", None),
    ]
    got = Collector()
    with transport(bootstrap_servers) as tr:
        metas = [tr.publish(topic, p, key=k, headers=h) for p, k, h in published]
        assert all(isinstance(m, RecordMetadata) and m.offset >= 0 for m in metas)
        unsubscribe = tr.subscribe(topic, gid, got)
        assert wait_until(lambda: got.count() >= len(published))
        unsubscribe(30)
        assert not unsubscribe.running
    by_key = {m.key: m for m in got.messages}
    assert len(got.messages) == len(published) == len(by_key)  # exactly those, once each
    assert by_key[b"k-json"].json() == {"order": 1, "items": ["a", "b"]}
    assert by_key[b"k-json"].headers == [("kind", b"json")]
    assert by_key[b"k-list"].json() == [1, 2, 3]
    assert by_key[b"k-list"].headers == [("kind", b"list"), ("n", b"3")]
    assert by_key[None].value == b"\x00\x01raw" and by_key[None].headers == []
    assert by_key[b"k-str"].text() == "plain text é"
    assert by_key[b"k-int"].json() == 42
    expected = ends(metas)
    assert committed(bootstrap_servers, gid, list(expected)) == expected


def test_retry_then_success(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    gid = group()
    calls: Counter[int] = Counter()
    errors: list[HandlerError] = []

    def handler(m: Message) -> None:
        calls[m.offset] += 1
        if m.offset == 3 and calls[m.offset] <= 2:
            raise RuntimeError("flaky downstream")

    with transport(bootstrap_servers, error_policy="retry", retry_attempts=3) as tr:
        metas = tr.publish_many(topic, [f"r{i}" for i in range(6)])
        sub = tr.subscribe(topic, gid, handler, on_error=errors.append)
        assert wait_until(lambda: len(calls) == 6)
        sub(30)
    assert calls == {0: 1, 1: 1, 2: 1, 3: 3, 4: 1, 5: 1}
    assert [(e.message.offset, e.attempt, e.action) for e in errors] == [(3, 1, "retry"), (3, 2, "retry")]
    assert isinstance(errors[0].cause, RuntimeError)
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == ends(metas)


def test_skip_commits_past_the_failed_record(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    gid = group()
    handled: list[int] = []
    errors: list[HandlerError] = []

    def handler(m: Message) -> None:
        if m.text() == "poison":
            raise ValueError("cannot parse")
        handled.append(m.offset)

    with transport(bootstrap_servers, error_policy="skip", on_error=errors.append) as tr:
        metas = tr.publish_many(topic, ["a", "poison", "b"])
        sub = tr.subscribe(topic, gid, handler)
        assert wait_until(lambda: len(handled) == 2)
        sub(30)
    assert handled == [0, 2]
    assert [(e.message.offset, e.action) for e in errors] == [(1, "skip")]
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == ends(metas)


def test_stop_stops_reports_and_the_next_subscriber_resumes_at_the_failed_record(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    gid = group()
    handled: list[int] = []

    def handler(m: Message) -> None:
        if m.offset == 4:
            raise RuntimeError("broken record")
        handled.append(m.offset)

    with transport(bootstrap_servers, error_policy="stop") as tr:
        metas = tr.publish_many(topic, [str(i) for i in range(8)])
        sub = tr.subscribe(topic, gid, handler)
        assert sub.wait(60)
        assert not sub.running
        assert isinstance(sub.error, HandlerError) and sub.error.action == "stop"
        assert sub.error.message.offset == 4 and isinstance(sub.error.cause, RuntimeError)
        assert handled == [0, 1, 2, 3]
        assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == {TopicPartition(topic, 0): 4}
        # The record that stopped it was not committed: a fixed handler picks it up.
        again = Collector()
        sub2 = tr.subscribe(topic, gid, again)
        assert wait_until(lambda: again.count() >= 4)
        sub2(30)
    assert [m.offset for m in again.messages] == [4, 5, 6, 7]
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == ends(metas)


def test_close_commits_handled_records_and_a_new_subscriber_resumes_after_them(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    gid = group()
    first = Collector()
    # The loop itself commits nothing within the test: what is committed, close() committed.
    tr = transport(bootstrap_servers, commit_interval_ms=600_000)
    metas = tr.publish_many(topic, [{"n": i} for i in range(30)], keys=[str(i) for i in range(30)])
    tr.subscribe(topic, gid, first)
    assert wait_until(lambda: first.count() >= 30)
    tr.close(30)
    with pytest.raises(KafkaClosedError):
        tr.publish(topic, "after close")
    assert committed(bootstrap_servers, gid, all_tps(topic)) == ends(metas)

    second = Collector()
    with transport(bootstrap_servers) as tr2:
        more = tr2.publish_many(
            topic, [{"n": i} for i in range(30, 40)], keys=[str(i) for i in range(30, 40)]
        )
        sub = tr2.subscribe(topic, gid, second)
        assert wait_until(lambda: second.count() >= 10)
        sub(30)
    # Any redelivered record would come before the new ones of its partition: there are none.
    assert sorted(m.json()["n"] for m in first.messages) == list(range(30))
    assert sorted(m.json()["n"] for m in second.messages) == list(range(30, 40))
    assert committed(bootstrap_servers, gid, all_tps(topic)) == ends(metas + more)


def test_unsubscribe_stops_handling_and_leaves_the_rest_to_the_group(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    gid = group()
    got = Collector()
    with transport(bootstrap_servers) as tr:
        metas = tr.publish_many(topic, ["a", "b"])
        sub = tr.subscribe(topic, gid, got)
        assert wait_until(lambda: got.count() >= 2)
        sub(30)
        assert not sub.running and sub.error is None
        assert tr.subscriptions() == []
        tr.publish_many(topic, ["c", "d"])
        # A later subscriber of the group gets exactly the records published after unsubscribe.
        later = Collector()
        sub2 = tr.subscribe(topic, gid, later)
        assert wait_until(lambda: later.count() >= 2)
        sub2(30)
    assert [m.text() for m in got.messages] == ["a", "b"]
    assert [m.text() for m in later.messages] == ["c", "d"]
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == {
        TopicPartition(topic, 0): ends(metas)[TopicPartition(topic, 0)] + 2
    }


def test_a_second_member_of_the_group_takes_over_without_redelivery(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(4)
    gid = group()
    a, b = Collector(), Collector()
    keys = [str(i) for i in range(80)]
    # A long commit interval: what A handled reaches B only through the commit on revocation.
    with transport(bootstrap_servers, commit_interval_ms=600_000) as tr:
        metas = tr.publish_many(topic, [{"n": i} for i in range(40)], keys=keys[:40])
        tr.subscribe(topic, gid, a)
        assert wait_until(lambda: a.count() >= 40)
        tr.subscribe(topic, gid, b)
        # B joining takes partitions from A: wait until B owns some.
        assert wait_until(lambda: both_own_partitions(tr))
        metas += tr.publish_many(topic, [{"n": i} for i in range(40, 80)], keys=keys[40:])
        assert wait_until(lambda: a.count() + b.count() >= 80)
        time.sleep(1)  # room for a redelivery to show up, which must not come
    handled = [m.json()["n"] for m in a.messages + b.messages]
    assert sorted(handled) == list(range(80))  # each record once: no loss, no redelivery
    assert b.count() > 0
    assert committed(bootstrap_servers, gid, all_tps(topic, 4)) == {
        tp: ends(metas).get(tp) for tp in all_tps(topic, 4)
    }


def both_own_partitions(tr: KafkaStreamTransport) -> bool:
    """Whether both subscriptions own partitions (the rebalance is done)."""
    subs = tr.subscriptions()
    return len(subs) == 2 and all(s.assignment() for s in subs)


def test_a_slow_sync_handler_does_not_block_publishing(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    other = new_topic(1)
    gid = group()
    entered = threading.Event()
    release = threading.Event()

    def slow(m: Message) -> None:
        entered.set()
        release.wait(60)

    with transport(bootstrap_servers) as tr:
        tr.publish(topic, "block me")
        sub = tr.subscribe(topic, gid, slow)
        assert entered.wait(60)
        # The handler is blocked in its own thread: publishing (on the loop) still works.
        meta = tr.publish(other, "still publishing", timeout=20)
        assert meta.offset == 0
        release.set()
        sub(30)
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == {TopicPartition(topic, 0): 1}


def test_close_returns_within_its_timeout_with_a_blocked_handler(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    gid = group()
    handled: list[str] = []
    release = threading.Event()

    def handler(m: Message) -> None:
        if m.text() == "stuck":
            release.wait(120)
        handled.append(m.text() or "")

    tr = transport(bootstrap_servers)
    try:
        tr.publish_many(topic, ["ok", "stuck", "never"])
        tr.subscribe(topic, gid, handler)
        assert wait_until(lambda: handled == ["ok"])
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="did not drain"):
            tr.close(4)
        assert time.monotonic() - start < 15  # the bound, with generous slack
    finally:
        release.set()
    # "ok" was handled and committed; "stuck" was not, so the group resumes there.
    assert committed(bootstrap_servers, gid, all_tps(topic, 1)) == {TopicPartition(topic, 0): 1}


def test_two_subscriptions_on_one_transport_and_metrics(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    t1, t2 = new_topic(2), new_topic(2)
    a, b = Collector(), Collector()
    with transport(bootstrap_servers) as tr:
        tr.publish_many(t1, ["x1", "x2", "x3"])
        tr.publish_many(t2, ["y1", "y2"])
        tr.subscribe(t1, group(), a)
        tr.subscribe(t2, group(), b)
        assert wait_until(lambda: a.count() >= 3 and b.count() >= 2)
        snap = tr.metrics()
        assert snap["published"] == 5
        assert isinstance(snap["producer"], dict) and snap["producer"]
        subs = {s["topic"]: s for s in snap["subscriptions"]}
        assert set(subs) == {t1, t2}
        assert subs[t1]["handled"] == 3 and subs[t2]["handled"] == 2
        assert isinstance(subs[t1]["consumer"], dict) and subs[t1]["consumer"]
    assert sorted(m.text() for m in a.messages) == ["x1", "x2", "x3"]
    assert sorted(m.text() for m in b.messages) == ["y1", "y2"]


def test_bad_input_gives_typed_errors(bootstrap_servers: str) -> None:
    with pytest.raises(KafkaConfigError, match="error_policy"):
        KafkaStreamTransport(bootstrap_servers, error_policy="ignore")
    with pytest.raises(KafkaConfigError, match="consumer_group_id"):
        KafkaStreamTransport(bootstrap_servers, consumer_group_id="g")
    with transport(bootstrap_servers) as tr:
        with pytest.raises(KafkaConfigError, match="JSON"):
            tr.publish("t-never", object())
        with pytest.raises(KafkaConfigError, match="group_id"):
            tr.subscribe("t-never", "", print)
        with pytest.raises(KafkaConfigError, match="retry_fallback"):
            tr.subscribe("t-never", "g", print, retry_fallback="retry")


def test_asyncio_face_async_handler_publish_many_and_two_subscriptions(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    g1, g2 = group(), group()

    async def main() -> tuple[list[Message], list[Message], list[RecordMetadata]]:
        seen1: list[Message] = []
        seen2: list[Message] = []
        attempts: Counter[int] = Counter()

        async def handler(m: Message) -> None:
            await asyncio.sleep(0)
            attempts[m.offset] += 1
            if m.json()["i"] == 5 and attempts[m.offset] == 1:
                raise RuntimeError("once")
            seen1.append(m)

        async with AsyncTransport(bootstrap_servers, **GROUP_OPTIONS) as tr:
            metas = await tr.publish_many(
                topic, [{"i": i} for i in range(12)], keys=[str(i) for i in range(12)]
            )
            meta = await tr.publish(topic, {"i": 12}, key="12", headers={"last": "yes"})
            metas.append(meta)
            sub1 = await tr.subscribe(topic, g1, handler)
            sub2 = await tr.subscribe(topic, g2, seen2.append)  # a plain handler, on the loop
            async with asyncio.timeout(90):
                while len(seen1) < 13 or len(seen2) < 13:
                    await asyncio.sleep(0.05)
            await sub1.unsubscribe(30)
            assert not sub1.running and sub2.running
        assert not sub2.running  # close() unsubscribed it
        return seen1, seen2, metas

    seen1, seen2, metas = asyncio.run(main())
    assert sorted(m.json()["i"] for m in seen1) == list(range(13))
    assert sorted(m.json()["i"] for m in seen2) == list(range(13))
    last = next(m for m in seen2 if m.json()["i"] == 12)
    assert last.key == b"12" and last.header("last") == b"yes"
    expected = ends(metas)
    assert committed(bootstrap_servers, g1, all_tps(topic)) == {tp: expected.get(tp) for tp in all_tps(topic)}
    assert committed(bootstrap_servers, g2, all_tps(topic)) == {tp: expected.get(tp) for tp in all_tps(topic)}
