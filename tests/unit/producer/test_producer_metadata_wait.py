"""A record whose topic's partitions cannot be had fails at send, as the Java client's
``waitOnMetadata``: at once for an answer asking again cannot mend (TOPIC_AUTHORIZATION_FAILED),
at ``max_block_ms`` for one it could (an unknown topic), naming the cause; never
``delivery_timeout_ms`` later. Both faces; a stand-in client answers metadata per topic (the real
broker's side is in tests/integration/test_kafka_security.py and test_producer_fail_fast.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker

from kafka_core import KafkaProducer
from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.client.metadata import ClusterMeta, TopicMeta
from kafka_core.errors import KafkaAuthenticationError, KafkaProtocolError, KafkaTimeoutError
from kafka_core.producer.futures import RecordMetadata
from kafka_core.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

DELIVERY_TIMEOUT_MS = 60_000
GUARD = DELIVERY_TIMEOUT_MS / 1000 / 2  # hang guard: well before delivery_timeout_ms


class TopicErrors(ProduceBroker):
    """Answers metadata with ``errors[topic]`` for the topics listed there."""

    def __init__(self, errors: dict[str, int]) -> None:
        super().__init__(partitions=2)
        self.errors = errors

    async def metadata(self, topics: list[str]) -> ClusterMeta:
        self.metadata_asked.extend(t for t in topics if t in self.errors)
        answer = await super().metadata([t for t in topics if t not in self.errors])
        failed = [
            TopicMeta(name=t, error_code=self.errors[t], partitions=[]) for t in topics if t in self.errors
        ]
        return ClusterMeta(brokers=answer.brokers, topics=[*answer.topics, *failed])


class RefusedLogin(ProduceBroker):
    """Every start fails as a wrong password does; counts the attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        raise KafkaAuthenticationError(
            "SASL SCRAM-SHA-256 authentication to fake:0 failed: invalid credentials"
        )


OPTIONS: dict[str, Any] = {
    "max_block_ms": 1_500,
    "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
    "request_timeout_ms": 1_000,
    "retry_backoff_ms": 20,
}


def test_async_send_fails_at_once_on_topic_authorization_failed() -> None:
    broker = TopicErrors({"denied": ErrorCode.TOPIC_AUTHORIZATION_FAILED})

    async def main() -> tuple[Any, float, Any, int]:
        async with AsyncKafkaProducer(client=broker, **OPTIONS) as p:
            t0 = time.monotonic()
            fut = await p.send("denied", b"x")
            took = time.monotonic() - t0
            assert fut.done()
            error = fut.exception(0)
            ok = await (await p.send("allowed", b"y"))
            failed = p.metrics()["producer"]
        return error, took, ok, failed

    error, took, ok, metrics = asyncio.run(main())
    assert isinstance(error, KafkaProtocolError), error
    assert error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and "denied" in str(error)
    assert took < 1.5  # not even max_block_ms: asking again cannot help (hang guard)
    assert broker.metadata_asked.count("denied") == 1  # no retry storm
    assert isinstance(ok, RecordMetadata)  # the other topic is unaffected
    assert "denied" in str(metrics), metrics  # counted as failed


def test_blocking_send_fails_at_max_block_ms_on_an_unknown_topic() -> None:
    broker = TopicErrors({"missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    errors: list[BaseException] = []
    with KafkaProducer(client=broker, **OPTIONS) as p:
        t0 = time.monotonic()
        fut = p.send("missing", b"x").add_errback(errors.append)
        took = time.monotonic() - t0
        assert fut.done()  # failed by the time send returned
        error = fut.exception(0)
        assert isinstance(error, KafkaTimeoutError), error
        assert "max_block_ms (1500 ms)" in str(error) and "UNKNOWN_TOPIC_OR_PARTITION" in str(error)
        assert "'missing'" in str(error)
        assert errors == [error]  # the errback ran
        assert took < GUARD
        assert broker.metadata_asked.count("missing") >= 2  # retriable: asked again within max_block_ms
        assert isinstance(p.send("present", b"y").result(10), RecordMetadata)


def test_blocking_send_fails_at_once_on_topic_authorization_failed() -> None:
    broker = TopicErrors({"denied": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
    with KafkaProducer(client=broker, **OPTIONS) as p:
        t0 = time.monotonic()
        fut = p.send("denied", b"x")
        took = time.monotonic() - t0
        error = fut.exception(0)
        assert isinstance(error, KafkaProtocolError) and error.name == "TOPIC_AUTHORIZATION_FAILED", error
        assert "denied" in str(error)
        assert took < 1.5  # hang guard: not max_block_ms
        assert broker.metadata_asked.count("denied") == 1
        # each send asks again (ACLs may have been granted meanwhile), and fails alike
        assert isinstance(p.send("denied", b"x").exception(0), KafkaProtocolError)
        assert broker.metadata_asked.count("denied") == 2
        broker.errors.clear()  # granted
        assert isinstance(p.send("denied", b"x").result(10), RecordMetadata)


@pytest.mark.parametrize("face", ["blocking", "asyncio"])
def test_a_refused_login_fails_sends_at_once_and_is_not_retried(face: str) -> None:
    """Before: the start was retried every retry_backoff_ms (a login storm) and the record
    waited out delivery_timeout_ms with 'no broker has answered yet'."""
    broker = RefusedLogin()
    if face == "blocking":
        p = KafkaProducer(client=broker, **OPTIONS)
        try:
            with pytest.raises(KafkaAuthenticationError, match="authentication to fake:0 failed"):
                p.send("t", b"x")
            with pytest.raises(KafkaAuthenticationError):
                p.send("t", b"x")
        finally:
            p.close(5)
    else:

        async def main() -> None:
            p = AsyncKafkaProducer(client=broker, **OPTIONS)
            try:
                with pytest.raises(KafkaAuthenticationError, match="authentication to fake:0 failed"):
                    await asyncio.wait_for(p.send("t", b"x"), GUARD)
                with pytest.raises(KafkaAuthenticationError):
                    await p.start()
            finally:
                await p.close(5)

        asyncio.run(main())
    assert broker.starts == 1


def test_a_record_parked_by_a_delivery_callback_fails_on_topic_authorization_failed() -> None:
    """A send from a delivery callback (the I/O thread never waits) parks its record; an answer
    that cannot change fails it then, not at delivery_timeout_ms."""
    broker = TopicErrors({"denied": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
    chained: list[Any] = []
    with KafkaProducer(client=broker, **OPTIONS) as p:
        first = p.send("ok", b"x").add_callback(lambda _meta: chained.append(p.send("denied", b"y")))
        first.result(10)
        deadline = time.monotonic() + GUARD
        while not chained and time.monotonic() < deadline:
            time.sleep(0.01)
        assert chained, "the callback did not run"
        error = chained[0].exception(GUARD)
    assert isinstance(error, KafkaProtocolError) and error.name == "TOPIC_AUTHORIZATION_FAILED", error
