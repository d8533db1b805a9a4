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
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.producer import KafkaProducer, RecordMetadata

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
    address = request.getfixturevalue(where)
    p, took = timed(
        lambda: KafkaProducer(
            address, max_block_ms=2_000, delivery_timeout_ms=4_000, request_timeout_ms=1_000, linger_ms=5
        )
    )
    assert isinstance(p, KafkaProducer), p
    assert took < SLACK  # construction does not wait for the broker
    try:
        fut, took = timed(lambda: p.send("t", b"nowhere"))
        assert took < 2.0 + SLACK, took  # send: max_block_ms at most
        sent_at = time.monotonic()  # delivery_timeout_ms runs from send's return (as in Java)
        exc, took = timed(lambda: fut.exception(4.0 + SLACK))
        assert time.monotonic() - sent_at < 4.0 + SLACK
        assert isinstance(exc, KafkaTimeoutError), exc
        assert "delivery_timeout_ms" in str(exc)
        if where == "closed_port":
            assert REFUSED.search(str(exc)), exc  # the real cause, not just "timed out"
        else:
            assert "no broker has answered" in str(exc) or "timed out" in str(exc), exc
        _, took = timed(lambda: p.flush(1.0))
        assert took < 1.0 + SLACK
    finally:
        _, took = timed(lambda: p.close(1.0))
        assert took < 1.0 + SLACK


def test_the_issue_scenario_settles_by_delivery_timeout(closed_port: str) -> None:
    """The reported case: max_block_ms=3000, delivery_timeout_ms=5000 (with a request timeout that
    fits in it): send gives up on the metadata by max_block_ms, and the future fails
    delivery_timeout_ms after send returned, naming the refused connection."""
    with KafkaProducer(
        closed_port, max_block_ms=3_000, delivery_timeout_ms=5_000, request_timeout_ms=4_000
    ) as p:
        fut, took = timed(lambda: p.send("t", b"x"))
        assert took < 3.0 + SLACK
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=REFUSED):
            fut.result(5.0 + SLACK)
        assert time.monotonic() - t0 < 5.0 + SLACK


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


def test_real_broker_missing_topic_keeps_send_and_delivery_bounds(bootstrap_servers: str) -> None:
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    with KafkaProducer(
        bootstrap_servers,
        max_block_ms=1_000,
        delivery_timeout_ms=2_500,
        request_timeout_ms=1_000,
        allow_auto_create_topics=False,
    ) as p:
        fut, took = timed(lambda: p.send(topic, b"x"))
        assert took < 1.0 + SLACK
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            fut.result(2.5 + SLACK)
        assert time.monotonic() - t0 < 2.5 + SLACK


def test_flush_timeout_names_what_is_waiting_and_why(closed_port: str) -> None:
    """A flush cut short by its timeout says which partition still waits and the last error."""
    p = KafkaProducer(closed_port, max_block_ms=1_000, delivery_timeout_ms=30_000, request_timeout_ms=1_000)
    try:
        fut = p.send("waiting-topic", b"x")
        exc, took = timed(lambda: p.flush(1.5))
        assert took < 1.5 + SLACK
        assert isinstance(exc, KafkaTimeoutError), exc
        assert "flush did not finish within 1.5s" in str(exc) and "'waiting-topic'" in str(exc), exc
        assert REFUSED.search(str(exc)), exc  # the cause, not only that time ran out
        assert not fut.done()  # the record itself still has its own deadline
    finally:
        p.close(0)
