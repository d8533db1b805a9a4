"""Queue mode (``subscribe(..., share=True)``): the error policy mapped onto share acknowledgements.

A scripted share consumer records what the subscription acknowledged; the broker's side
(redelivery with a raised delivery count) is played by the script. Against Apache Kafka:
tests/integration/test_transport_share.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core.errors import KafkaConfigError
from kafka_core.share import KafkaAcknowledgementError, ShareRecord
from kafka_core.transport.modes import ShareMode, share_action
from kafka_core.transport.options import ErrorPolicy, HandlerError, share_consumer_options
from kafka_core.transport.subscription import Subscription

pytestmark = pytest.mark.timeout(60)


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 30))

    return wrapper


class FakeShareConsumer:
    """poll() hands out the scripted batches, then idles; acknowledge() and close() are recorded."""

    def __init__(self, batches: list[list[ShareRecord]]) -> None:
        self.batches = list(batches)
        self.acks: list[tuple[int, int, str]] = []  # (offset, delivery_count, type)
        self.closed = False

    async def poll(self, timeout_ms: float) -> list[ShareRecord]:
        if self.batches:
            return self.batches.pop(0)
        await asyncio.sleep(timeout_ms / 1000)
        return []

    def acknowledge(self, record: ShareRecord, type: str = "accept") -> None:
        if record.offset < 0:
            raise KafkaAcknowledgementError(f"offset {record.offset} was not delivered to this consumer")
        self.acks.append((record.offset, record.delivery_count, type))

    async def close(self, timeout: float | None = None) -> None:
        self.closed = True

    def metrics(self) -> dict[str, Any]:
        return {}

    def assignment(self) -> set[Any]:
        return set()


def rec(offset: int, delivery_count: int = 1) -> ShareRecord:
    return ShareRecord("t", 0, offset, None, b"v%d" % offset, delivery_count=delivery_count)


def start(
    batches: list[list[ShareRecord]], handler: Any, *, max_deliveries: int = 3, **policy: Any
) -> tuple[Subscription, FakeShareConsumer, list[HandlerError]]:
    consumer = FakeShareConsumer(batches)
    errors: list[HandlerError] = []
    sub = Subscription(
        None,
        "t",
        "g",
        handler,
        policy=ErrorPolicy(**policy),
        on_error=errors.append,  # type: ignore[arg-type]
        poll_timeout_ms=20,
        mode=ShareMode(lambda: consumer, "t", max_deliveries=max_deliveries),
    )
    sub.start()
    return sub, consumer, errors


async def until(cond: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


@pytest.mark.parametrize(
    ("policy", "delivery_count", "max_deliveries", "action"),
    [
        ("retry", 1, 3, "release"),
        ("retry", 2, 3, "release"),
        ("retry", 3, 3, "reject"),
        ("retry", 7, 3, "reject"),
        ("retry", 1, 1, "reject"),
        ("skip", 1, 3, "reject"),
        ("stop", 1, 3, "stop"),
    ],
)
def test_policy_to_acknowledgement(
    policy: str, delivery_count: int, max_deliveries: int, action: str
) -> None:
    assert share_action(ErrorPolicy(policy), delivery_count, max_deliveries) == action


@aio
async def test_handled_records_are_accepted_and_the_consumer_closed() -> None:
    seen: list[tuple[int, int | None]] = []
    sub, consumer, _ = start(
        [[rec(0), rec(1)], [rec(2, delivery_count=2)]], lambda m: seen.append((m.offset, m.delivery_count))
    )
    await until(lambda: len(seen) == 3)
    await sub.unsubscribe(5)
    assert seen == [(0, 1), (1, 1), (2, 2)]
    assert consumer.acks == [(0, 1, "accept"), (1, 1, "accept"), (2, 2, "accept")]
    assert consumer.closed and not sub.running
    assert sub.metrics()["handled"] == 3 and sub.metrics()["share"] is True
    assert sub.committed_offsets() == {}


@aio
async def test_retry_releases_until_the_delivery_bound_then_rejects() -> None:
    def handler(m: Any) -> None:
        if m.offset == 1:
            raise ValueError("poison")

    # the broker delivers offset 1 again after each release, its count raised
    batches = [[rec(0), rec(1)], [rec(1, 2)], [rec(1, 3)]]
    sub, consumer, errors = start(batches, handler, max_deliveries=3)
    await until(lambda: len(consumer.acks) == 4)
    await sub.unsubscribe(5)
    assert consumer.acks == [(0, 1, "accept"), (1, 1, "release"), (1, 2, "release"), (1, 3, "reject")]
    assert [(e.attempt, e.action) for e in errors] == [(1, "release"), (2, "release"), (3, "reject")]
    assert all(isinstance(e.cause, ValueError) for e in errors)
    m = sub.metrics()
    assert (m["released"], m["rejected"], m["failed"], m["retried"]) == (2, 1, 3, 0)
    assert sub.error is None and sub.running is False


@aio
async def test_skip_rejects_at_once() -> None:
    def handler(m: Any) -> None:
        if m.offset == 0:
            raise ValueError("poison")

    sub, consumer, errors = start([[rec(0), rec(1)]], handler, policy="skip")
    await until(lambda: len(consumer.acks) == 2)
    await sub.unsubscribe(5)
    assert consumer.acks == [(0, 1, "reject"), (1, 1, "accept")]
    assert [e.action for e in errors] == ["reject"]


@aio
async def test_stop_leaves_the_record_and_the_rest_unacknowledged_for_the_close_to_release() -> None:
    def handler(m: Any) -> None:
        if m.offset == 1:
            raise ValueError("stop here")

    sub, consumer, errors = start([[rec(0), rec(1), rec(2)]], handler, policy="stop")
    assert await sub.wait(5)
    assert consumer.acks == [(0, 1, "accept")]
    assert consumer.closed
    assert (
        isinstance(sub.error, HandlerError) and sub.error.action == "stop" and sub.error.message.offset == 1
    )
    assert [e.action for e in errors] == ["stop"]


def test_max_deliveries_must_be_a_positive_integer() -> None:
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(KafkaConfigError, match="max_deliveries"):
            ShareMode(FakeShareConsumer, "t", max_deliveries=bad)  # type: ignore[arg-type]


def test_share_consumer_options_keep_connection_and_share_options_only() -> None:
    options = {
        "request_timeout_ms": 5000,
        "security_protocol": "SSL",
        "producer_linger_ms": 5,
        "consumer_max_poll_records": 10,
        "consumer_auto_offset_reset": "earliest",
        "consumer_session_timeout_ms": 6000,
    }
    assert share_consumer_options(options) == {
        "request_timeout_ms": 5000,
        "security_protocol": "SSL",
        "max_poll_records": 10,
    }


def test_transport_options_are_checked() -> None:
    from kafka_core.transport.transport import KafkaStreamTransport

    async def build(**kw: Any) -> None:
        t = KafkaStreamTransport("127.0.0.1:1", **kw)
        with contextlib.suppress(Exception):
            await t.close(0)

    with pytest.raises(KafkaConfigError, match="max_deliveries"):
        asyncio.run(build(max_deliveries=0))
    with pytest.raises(KafkaConfigError, match="share_auto_offset_reset"):
        asyncio.run(build(share_auto_offset_reset="beginning"))


@aio
async def test_a_record_the_consumer_no_longer_holds_is_logged_not_a_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[int] = []
    sub, consumer, _ = start([[rec(-1), rec(1)]], lambda m: seen.append(m.offset))
    await until(lambda: len(seen) == 2)
    await sub.unsubscribe(5)
    assert consumer.acks == [(1, 1, "accept")] and sub.error is None
    assert "could not accept t[0]@-1" in caplog.text
