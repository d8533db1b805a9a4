"""Fail fast, honour every bound: the producer against a closed port, a listener that accepts and
never answers (a black hole), and the real broker. Each bound is asserted with generous slack."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes.timing import black_hole as black_hole_port
from fakes.timing import timed

from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.devbroker import free_port
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.producer import KafkaProducer, RecordMetadata
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

SLACK = 3.0
REFUSED = re.compile(r"refused|Errno 111|Connect call failed")


@pytest.fixture
def closed_port() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def black_hole() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) and never reads or answers."""
    with black_hole_port() as port:
        yield f"127.0.0.1:{port}"


@pytest.mark.parametrize("where", ["closed_port", "black_hole"])
def test_sync_producer_against_no_broker_keeps_every_bound(
    where: str, request: pytest.FixtureRequest
) -> None:
    """As the Java client's waitOnMetadata: a record whose topic's metadata cannot be had within
    max_block_ms fails then, naming the cause (before: it waited out delivery_timeout_ms too)."""
    address = request.getfixturevalue(where)
    p, took = timed(
        lambda: KafkaProducer(
            address, max_block_ms=2_000, delivery_timeout_ms=30_000, request_timeout_ms=1_000, linger_ms=5
        )
    )
    assert isinstance(p, KafkaProducer), p
    assert took < SLACK  # construction does not wait for the broker
    try:
        fut, took = timed(lambda: p.send("t", b"nowhere"))
        assert took < 2.0 + SLACK, took  # send: max_block_ms at most
        assert fut.done()  # failed by then, not 30 s (delivery_timeout_ms) later
        exc = fut.exception(0)
        assert isinstance(exc, KafkaTimeoutError), exc
        assert "max_block_ms (2000 ms)" in str(exc) and "'t'" in str(exc), exc
        if where == "closed_port":
            assert REFUSED.search(str(exc)), exc  # the real cause, not just "timed out"
        else:
            assert "no broker has answered" in str(exc) or "timed out" in str(exc), exc
        _, took = timed(lambda: p.flush(1.0))
        assert took < 1.0 + SLACK
    finally:
        _, took = timed(lambda: p.close(1.0))
        assert took < 1.0 + SLACK


def test_the_issue_scenario_fails_the_record_at_max_block_ms(closed_port: str) -> None:
    """The reported case: max_block_ms=3000, delivery_timeout_ms=5000: send gives up on the
    metadata by max_block_ms and its future has failed by then, naming the refused connection;
    the callbacks run (errback). Before, the record waited until delivery_timeout_ms."""
    errors: list[BaseException] = []
    with KafkaProducer(
        closed_port, max_block_ms=3_000, delivery_timeout_ms=5_000, request_timeout_ms=4_000
    ) as p:
        fut, took = timed(lambda: p.send("t", b"x").add_errback(errors.append))
        assert took < 3.0 + SLACK
        assert fut.done()
        with pytest.raises(KafkaTimeoutError, match=REFUSED):
            fut.result(0)
        assert errors == [fut.exception(0)]


def test_java_rule_on_delivery_timeout_is_explained() -> None:
    with pytest.raises(KafkaConfigError, match=r"delivery_timeout_ms must be >= .*5000"):
        KafkaProducer("127.0.0.1:1", max_block_ms=3_000, delivery_timeout_ms=5_000)


@pytest.mark.parametrize("where", ["closed_port", "black_hole"])
def test_async_start_gives_up_after_max_block_ms_with_the_cause(
    where: str, request: pytest.FixtureRequest
) -> None:
    address = request.getfixturevalue(where)

    async def main() -> tuple[BaseException | None, float, BaseException | None, float]:
        p = AsyncKafkaProducer(
            address, max_block_ms=1_500, delivery_timeout_ms=3_000, request_timeout_ms=1_000
        )
        t0 = time.monotonic()
        try:
            await p.start()
            error: BaseException | None = None
        except KafkaTimeoutError as exc:
            error = exc
        took = time.monotonic() - t0
        fut = await p.send("t", b"x")
        t1 = time.monotonic()
        failure = await asyncio.wait_for(_exception(fut), 3.0 + SLACK)
        settled = time.monotonic() - t1
        await asyncio.wait_for(p.close(1.0), 1.0 + SLACK)
        return error, took, failure, settled

    error, took, failure, settled = asyncio.run(main())
    assert isinstance(error, KafkaTimeoutError) and took < 1.5 + SLACK, (error, took)
    assert "max_block_ms" in str(error)
    assert isinstance(failure, KafkaTimeoutError) and settled < 3.0 + SLACK, (failure, settled)
    if where == "closed_port":
        assert REFUSED.search(str(error)) and REFUSED.search(str(failure)), (error, failure)


async def _exception(fut: Any) -> BaseException | None:
    try:
        await fut
    except Exception as exc:
        return exc
    return None


def test_real_broker_construction_and_delivery(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    p, took = timed(lambda: KafkaProducer(bootstrap_servers, max_block_ms=5_000))
    assert took < SLACK
    try:
        assert p.idempotent  # waits for the broker's answer (within max_block_ms)
        futures = [p.send(topic, b"v%d" % i, partition=i % 3) for i in range(30)]
        p.flush(30)
        assert all(isinstance(f.result(0), RecordMetadata) for f in futures)
    finally:
        p.close(10)


def test_real_broker_missing_topic_fails_the_send_at_max_block_ms(bootstrap_servers: str) -> None:
    """A topic that does not exist (auto-creation off) fails its record at max_block_ms, naming
    UNKNOWN_TOPIC_OR_PARTITION, on both faces (before: at delivery_timeout_ms)."""
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {
        "max_block_ms": 1_000,
        "delivery_timeout_ms": 60_000,
        "request_timeout_ms": 1_000,
        "allow_auto_create_topics": False,
    }
    with KafkaProducer(bootstrap_servers, **options) as p:
        p.start()  # connected: what follows is the topic's lookup alone
        fut, took = timed(lambda: p.send(topic, b"x"))
        assert took < 1.0 + SLACK
        assert fut.done()
        with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION") as info:
            fut.result(0)
        assert "max_block_ms" in str(info.value) and topic in str(info.value)

    async def main() -> BaseException | None:
        async with AsyncKafkaProducer(bootstrap_servers, **options) as ap:
            fut = await asyncio.wait_for(ap.send(topic, b"x"), 1.0 + SLACK)
            assert fut.done()
            return await _exception(fut)

    error = asyncio.run(main())
    assert isinstance(error, KafkaTimeoutError) and "UNKNOWN_TOPIC_OR_PARTITION" in str(error), error


def test_flush_timeout_names_what_is_waiting_and_why(mock_cluster: MockCluster) -> None:
    """A flush cut short by its timeout says which partition still waits and the last error.
    (A record whose topic's metadata cannot be had no longer waits at all: it fails at
    max_block_ms, so the record kept waiting here is one whose Produce keeps being refused.)"""
    topic = mock_cluster.create_topic(f"waiting-{uuid.uuid4().hex[:6]}", partitions=1)
    p = KafkaProducer(
        mock_cluster.bootstrap,
        max_block_ms=5_000,
        delivery_timeout_ms=60_000,
        request_timeout_ms=1_000,
        retry_backoff_ms=50,
    )
    try:
        p.send(topic, b"first").result(10)  # the topic's partitions are known
        mock_cluster.push_request_errors(ApiKey.PRODUCE, *[ErrorCode.NOT_ENOUGH_REPLICAS] * 1000)
        fut = p.send(topic, b"x")
        exc, took = timed(lambda: p.flush(1.5))
        assert took < 1.5 + SLACK
        assert isinstance(exc, KafkaTimeoutError), exc
        assert "flush did not finish within 1.5s" in str(exc) and f"{topic}[0]" in str(exc), exc
        assert "NOT_ENOUGH_REPLICAS" in str(exc), exc  # the cause, not only that time ran out
        assert not fut.done()  # the record itself still has its own deadline
    finally:
        mock_cluster.clear_request_errors(ApiKey.PRODUCE)
        p.close(0)
