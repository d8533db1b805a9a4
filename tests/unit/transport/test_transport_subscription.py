"""The subscription loop against a fake consumer: policies, handled-only commits, drain, stop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.errors import KafkaConfigError, KafkaConnectionError, KafkaTimeoutError
from kafka_core.transport.options import ErrorPolicy, HandlerError, split_options
from kafka_core.transport.payload import Message, encode_headers, encode_value
from kafka_core.transport.subscription import Subscription

TP = TopicPartition("t", 0)
pytestmark = pytest.mark.timeout(60)


def aio(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 30))

    return wrapper


class FakeConsumer:
    """poll() hands out the queued batches, then waits (like an idle topic) until stop()."""

    def __init__(self, batches: list[list[ConsumedMessage] | BaseException], **callbacks: Any) -> None:
        self.batches = list(batches)
        self.callbacks = callbacks
        self.commits: list[dict[TopicPartition, int]] = []
        self.closed = False
        self._stop = asyncio.Event()

    async def poll(self, timeout_ms: float) -> list[ConsumedMessage]:
        if self.batches:
            item = self.batches.pop(0)
            if isinstance(item, BaseException):
                raise item
            return item
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout_ms / 1000)
        return []

    def stop(self) -> None:
        self._stop.set()

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))

    async def close(self, timeout: float | None = None, *, commit: bool = True) -> None:
        self.closed = True

    def metrics(self) -> dict[str, Any]:
        return {"fake": True}

    @property
    def last_commit(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for c in self.commits:
            out.update(c)
        return out


def records(offsets: range | list[int], partition: int = 0) -> list[ConsumedMessage]:
    return [ConsumedMessage("t", partition, o, None, str(o).encode()) for o in offsets]


def make(batches: list[Any], handler: Any, **kw: Any) -> tuple[Subscription, list[FakeConsumer]]:
    made: list[FakeConsumer] = []

    def factory(**callbacks: Any) -> FakeConsumer:
        made.append(FakeConsumer(batches, **callbacks))
        return made[0]

    kw.setdefault("policy", ErrorPolicy(retry_backoff_ms=1, retry_backoff_max_ms=2))
    sub = Subscription(factory, "t", "g", handler, poll_timeout_ms=20, **kw)
    sub.start()
    return sub, made


async def until(cond: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


@aio
async def test_commits_each_handled_batch_and_closes_on_unsubscribe() -> None:
    seen: list[int] = []
    sub, [consumer] = make([records(range(3)), records(range(3, 5))], lambda m: seen.append(m.offset))
    await until(lambda: len(seen) == 5)
    await sub.unsubscribe(5)
    assert seen == [0, 1, 2, 3, 4]
    assert consumer.last_commit == {TP: 5}
    assert consumer.closed and not sub.running


@aio
async def test_retry_then_success_commits_once_handled() -> None:
    calls: list[int] = []
    errors: list[HandlerError] = []

    def handler(m: Message) -> None:
        calls.append(m.offset)
        if m.offset == 1 and calls.count(1) < 3:
            raise RuntimeError("flaky")

    sub, [consumer] = make([records(range(3))], handler, on_error=errors.append)
    await until(lambda: len(calls) == 5)
    await sub.unsubscribe(5)
    assert calls == [0, 1, 1, 1, 2]
    assert [(e.attempt, e.action) for e in errors] == [(1, "retry"), (2, "retry")]
    assert isinstance(errors[0].cause, RuntimeError)
    assert consumer.last_commit == {TP: 3}


@aio
async def test_retry_exhausted_falls_back_to_stop_and_keeps_the_record_uncommitted() -> None:
    errors: list[HandlerError] = []

    def handler(m: Message) -> None:
        if m.offset == 2:
            raise ValueError("poison")

    policy = ErrorPolicy("retry", retry_attempts=2, retry_backoff_ms=1, retry_backoff_max_ms=1)
    sub, [consumer] = make([records(range(5))], handler, policy=policy, on_error=errors.append)
    assert await sub.wait(5)
    assert [e.action for e in errors] == ["retry", "retry", "stop"]
    assert isinstance(sub.error, HandlerError) and sub.error.message.offset == 2
    assert consumer.last_commit == {TP: 2}  # 0 and 1 handled; never past 2
    assert consumer.closed


@aio
async def test_skip_commits_past_the_failed_record() -> None:
    errors: list[HandlerError] = []
    seen: list[int] = []

    def handler(m: Message) -> None:
        if m.offset == 1:
            raise ValueError("bad")
        seen.append(m.offset)

    sub, [consumer] = make([records(range(3))], handler, policy=ErrorPolicy("skip"), on_error=errors.append)
    await until(lambda: seen == [0, 2])
    await sub.unsubscribe(5)
    assert [(e.message.offset, e.action) for e in errors] == [(1, "skip")]
    assert consumer.last_commit == {TP: 3}


@aio
async def test_async_handler_and_async_on_error() -> None:
    seen: list[int] = []
    reported: list[str] = []

    async def handler(m: Message) -> None:
        await asyncio.sleep(0)
        if m.offset == 0:
            raise KeyError("x")
        seen.append(m.offset)

    async def on_error(err: HandlerError) -> None:
        reported.append(err.action)

    sub, [consumer] = make([records(range(2))], handler, policy=ErrorPolicy("stop"), on_error=on_error)
    assert await sub.wait(5)
    assert seen == [] and reported == ["stop"]
    assert consumer.commits == []


@aio
async def test_threaded_handler_runs_off_the_loop_thread() -> None:
    threads: list[int] = []
    sub, [consumer] = make(
        [records(range(2))], lambda m: threads.append(threading.get_ident()), threaded=True
    )
    await until(lambda: len(threads) == 2)
    await sub.unsubscribe(5)
    assert set(threads) and threading.get_ident() not in threads
    assert consumer.last_commit == {TP: 2}


@aio
async def test_unsubscribe_drains_the_fetched_batch() -> None:
    seen: list[int] = []
    started = asyncio.Event()

    async def handler(m: Message) -> None:
        started.set()
        await asyncio.sleep(0.02)
        seen.append(m.offset)

    sub, [consumer] = make([records(range(5))], handler)
    await started.wait()
    await sub.unsubscribe(10)
    assert seen == [0, 1, 2, 3, 4]
    assert consumer.last_commit == {TP: 5}


@aio
async def test_unsubscribe_cut_short_commits_only_handled_and_says_so() -> None:
    seen: list[int] = []
    release = asyncio.Event()

    async def handler(m: Message) -> None:
        if m.offset == 2:
            await release.wait()  # hangs past the timeout
        seen.append(m.offset)

    sub, [consumer] = make([records(range(4))], handler)
    await until(lambda: seen == [0, 1])
    with pytest.raises(KafkaTimeoutError, match="did not drain"):
        await sub.unsubscribe(0.5)
    assert consumer.last_commit == {TP: 2}
    assert consumer.closed and not sub.running


@aio
async def test_a_blocked_threaded_handler_does_not_hold_unsubscribe_past_its_timeout() -> None:
    release = threading.Event()
    seen: list[int] = []

    def handler(m: Message) -> None:
        if m.offset == 1:
            release.wait(30)
        seen.append(m.offset)

    sub, [consumer] = make([records(range(3))], handler, threaded=True)
    await until(lambda: seen == [0])
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(KafkaTimeoutError, match="did not drain"):
        await sub.unsubscribe(0.5)
    assert loop.time() - start < 5  # the bound, with generous slack
    release.set()
    await until(lambda: seen == [0, 1])  # the thread finished its call on its own...
    assert consumer.last_commit == {TP: 1}  # ...but its record was not committed
    assert consumer.closed


@aio
async def test_transient_poll_errors_are_retried_and_others_stop() -> None:
    seen: list[int] = []
    sub, _ = make([KafkaConnectionError("down"), records([0])], lambda m: seen.append(m.offset))
    await until(lambda: seen == [0])
    assert sub.running
    await sub.unsubscribe(5)
    sub2, [consumer2] = make([KafkaConfigError("fatal")], lambda m: None)
    assert await sub2.wait(5)
    assert isinstance(sub2.error, KafkaConfigError) and consumer2.closed


@aio
async def test_revocation_commits_handled_records_of_revoked_partitions() -> None:
    seen: list[int] = []
    batches = [records(range(2)), records(range(3), partition=1)]
    # A long commit interval: the loop commits nothing itself, the revocation must.
    sub, [consumer] = make(batches, lambda m: seen.append(m.offset), commit_interval_ms=600_000)
    await until(lambda: len(seen) == 5)
    assert consumer.commits == []
    tp1 = TopicPartition("t", 1)
    await consumer.callbacks["on_revoke"]({tp1})
    assert consumer.commits == [{tp1: 3}]
    assert sub.committed_offsets() == {}  # tp1 forgotten: the next owner starts from the commit
    await sub.unsubscribe(5)  # the final commit: what is still owned and handled
    assert consumer.commits == [{tp1: 3}, {TP: 2}]


@aio
async def test_metrics_counts_and_the_consumers_snapshot() -> None:
    sub, _ = make([records(range(3))], lambda m: None)
    await until(lambda: sub.metrics()["handled"] == 3)
    snap = sub.metrics()
    assert snap["consumer"] == {"fake": True} and snap["committed"] == {"t[0]": 3}
    await sub.unsubscribe(5)


def test_payload_encoding() -> None:
    assert encode_value(b"x") == b"x"
    assert encode_value(bytearray(b"y")) == b"y"
    assert encode_value("é") == "é".encode()
    assert encode_value(None) is None
    assert encode_value({"a": [1, 2]}) == b'{"a":[1,2]}'
    with pytest.raises(KafkaConfigError, match="not bytes, str or JSON"):
        encode_value(object())
    assert encode_headers({"a": "b", "c": b"d", "e": None}) == [("a", b"b"), ("c", b"d"), ("e", None)]
    with pytest.raises(KafkaConfigError):
        encode_headers([("a", 1)])
    msg = Message("t", 0, 1, None, b'{"k":1}', [("h", b"1"), ("h", b"2")], 0)
    assert msg.json() == {"k": 1} and msg.header("h") == b"2" and msg.header("x") is None


def test_options_and_policy_checks() -> None:
    producer, consumer = split_options(
        {"producer_linger_ms": 1, "consumer_max_poll_records": 5, "client_id": "c"}
    )
    assert producer == {"linger_ms": 1, "client_id": "c"}
    assert consumer == {"max_poll_records": 5, "client_id": "c"}
    with pytest.raises(KafkaConfigError, match="consumer_enable_auto_commit"):
        split_options({"consumer_enable_auto_commit": True})
    with pytest.raises(KafkaConfigError, match="error_policy"):
        ErrorPolicy("ignore")
    with pytest.raises(KafkaConfigError, match="retry_attempts"):
        ErrorPolicy(retry_attempts=-1)
    assert [ErrorPolicy(retry_attempts=1).action_after(n) for n in (1, 2)] == ["retry", "stop"]
    assert ErrorPolicy("skip").action_after(1) == "skip"
