"""Errors a new user meets on the first day, against Apache Kafka (issue 39): each comes within the
time the call was given, with its real cause, and at once where the cause is final.

- a consumer without a group (subscribed or statically assigned) that may not read its topic
  raises TOPIC_AUTHORIZATION_FAILED naming it, from poll, on both faces (it used to return []);
- an admin call against a host that does not resolve fails once, at its own timeout, naming DNS
  (it used to wait twice its time, a retry loop inside another);
- a TLS client on a plaintext listener fails at once, saying the listener does not speak TLS;
- a client without SASL on a SASL listener is told the listener likely expects SASL;
- a close the application asked for is not logged as a dropped connection.

Timings are hang guards only (pytest's timeout), never measurements.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.admin import AclBinding, AclBindingFilter, AclOperation, AclResourceType
from kafka_core.aio import KafkaConsumer as AsyncKafkaConsumer
from kafka_core.devbroker import KafkaCluster
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

POLLS = 20  # a hang guard: the refusal comes from the first poll that finds the start done


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(cluster: KafkaCluster) -> str:
    name = unique("first-day")
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap) as admin:  # PLAINTEXT: a super user
        admin.create_topics([NewTopic(name, 2, 1)])[name].result()
    return name


def alice(cluster: KafkaCluster) -> dict[str, Any]:
    """A user with no ACL at all: she may not describe, read or write any topic."""
    user = cluster.user("PLAIN", "alice")
    return {
        "bootstrap_servers": cluster.listeners["SASL_PLAINTEXT"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": user.name,
        "sasl_password": user.password,
    }


def first_poll_error(consumer: KafkaConsumer) -> BaseException:
    for _ in range(POLLS):
        try:
            records = consumer.poll(timeout_ms=500)
        except KafkaProtocolError as exc:
            return exc
        assert records == [], "alice read records she has no ACL for"
    raise AssertionError(f"{POLLS} polls returned [] without saying why")


# -- 1. a consumer without read permission -----------------------------------------------------------


@pytest.mark.parametrize("how", ["subscribed", "assigned"])
def test_a_consumer_without_a_group_that_may_not_read_its_topic_is_told(
    real_kafka: KafkaCluster, how: str
) -> None:
    topic = make_topic(real_kafka)
    where: dict[str, Any] = {"topics": [topic]} if how == "subscribed" else {"partitions": [(topic, 0)]}
    with KafkaConsumer(group_id=None, auto_offset_reset="earliest", **where, **alice(real_kafka)) as consumer:
        error = first_poll_error(consumer)
        assert isinstance(error, KafkaProtocolError) and error.name == "TOPIC_AUTHORIZATION_FAILED"
        assert topic in str(error)
        # and again at the next poll: nothing is silently dropped after the first report
        with pytest.raises(KafkaProtocolError, match="TOPIC_AUTHORIZATION_FAILED"):
            consumer.poll(timeout_ms=500)


def test_the_asyncio_consumer_is_told_too(real_kafka: KafkaCluster) -> None:
    topic = make_topic(real_kafka)

    async def run() -> BaseException:
        consumer = AsyncKafkaConsumer(topics=[topic], group_id=None, **alice(real_kafka))
        try:
            for _ in range(POLLS):
                try:
                    assert await consumer.poll(timeout_ms=500) == []
                except KafkaProtocolError as exc:
                    return exc
        finally:
            await consumer.close()
        raise AssertionError("polls returned [] without saying why")

    error = asyncio.run(run())
    assert "TOPIC_AUTHORIZATION_FAILED" in str(error) and topic in str(error)

    async def started() -> None:  # `async with` starts it: the refusal comes from there
        async with AsyncKafkaConsumer(topics=[topic], group_id=None, **alice(real_kafka)):
            pass

    with pytest.raises(KafkaProtocolError, match="TOPIC_AUTHORIZATION_FAILED"):
        asyncio.run(started())


# -- 2. one deadline through a call ------------------------------------------------------------------


def test_an_admin_call_against_a_host_that_does_not_resolve_fails_once_naming_dns() -> None:
    with (
        KafkaAdmin(bootstrap_servers="nosuchhost.invalid:9092", api_timeout_ms=3_000) as admin,
        pytest.raises(KafkaTimeoutError) as info,
    ):
        admin.list_topics()
    text = str(info.value)
    assert "does not resolve" in text and "nosuchhost.invalid" in text, text
    # one loop's verdict, its cause the DNS failure: not "bootstrap did not succeed" inside it
    assert text.count("did not succeed within") == 1, text


# -- 3. TLS against a plaintext listener ------------------------------------------------------------


def test_a_tls_client_on_a_plaintext_listener_fails_at_once_saying_so(real_kafka: KafkaCluster) -> None:
    assert real_kafka.certificates is not None
    tls = {
        "bootstrap_servers": real_kafka.listeners["PLAINTEXT"],
        "security_protocol": "SSL",
        "ssl_cafile": str(real_kafka.certificates.ca_file),
    }
    # a minute to give up in, so only a final error can come before the hang guard
    with (
        KafkaAdmin(**tls, api_timeout_ms=120_000) as admin,
        pytest.raises(KafkaAuthenticationError, match="does not speak TLS") as info,
    ):
        admin.list_topics()
    assert "PLAINTEXT" in str(info.value)
    with (
        KafkaProducer(**tls, max_block_ms=120_000) as producer,
        pytest.raises(KafkaAuthenticationError, match="does not speak TLS"),
    ):
        producer.send(unique("t"), b"x").result(120)


# -- 5. no SASL on a SASL listener -------------------------------------------------------------------


def test_a_client_without_sasl_on_a_sasl_listener_is_told_it_expects_sasl(real_kafka: KafkaCluster) -> None:
    with (
        KafkaAdmin(bootstrap_servers=real_kafka.listeners["SASL_PLAINTEXT"], api_timeout_ms=3_000) as admin,
        pytest.raises((KafkaConnectionError, KafkaTimeoutError)) as info,
    ):
        admin.list_topics()
    assert "likely expects SASL" in str(info.value) and "SASL_PLAINTEXT" in str(info.value)


# -- 8. a close we asked for is no drop --------------------------------------------------------------


def test_closing_a_client_logs_no_dropped_connection(
    real_kafka: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafka_core")
    topic = make_topic(real_kafka)
    with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
        producer.send(topic, b"x").result(60)
    with KafkaAdmin(bootstrap_servers=real_kafka.bootstrap) as admin:
        assert topic in admin.list_topics()
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert not dropped, dropped


@pytest.mark.parametrize("how", ["subscribed", "assigned"])
def test_a_consumer_that_may_describe_but_not_read_its_topic_is_told(
    real_kafka: KafkaCluster, how: str
) -> None:
    """DESCRIBE without READ: the metadata answers, the offsets lookup and the Fetch refuse."""
    topic = make_topic(real_kafka)
    grant = AclBinding(AclResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE)
    with KafkaAdmin(bootstrap_servers=real_kafka.bootstrap) as admin:
        assert admin.create_acls([grant])[grant].error is None
        try:
            where: dict[str, Any] = (
                {"topics": [topic]} if how == "subscribed" else {"partitions": [(topic, 0)]}
            )
            with KafkaConsumer(
                group_id=None, auto_offset_reset="earliest", **where, **alice(real_kafka)
            ) as consumer:
                error = first_poll_error(consumer)
            assert "TOPIC_AUTHORIZATION_FAILED" in str(error) and topic in str(error), error
        finally:
            admin.delete_acls([AclBindingFilter(resource_name=topic, principal="User:alice")])


def test_a_tls_client_without_sasl_on_a_sasl_ssl_listener_is_told_to_use_sasl_ssl(
    real_kafka: KafkaCluster,
) -> None:
    assert real_kafka.certificates is not None
    with (
        KafkaAdmin(
            bootstrap_servers=real_kafka.listeners["SASL_SSL"],
            security_protocol="SSL",
            ssl_cafile=str(real_kafka.certificates.ca_file),
            api_timeout_ms=3_000,
        ) as admin,
        pytest.raises((KafkaConnectionError, KafkaTimeoutError)) as info,
    ):
        admin.list_topics()
    assert "likely expects SASL" in str(info.value) and "'SASL_SSL'" in str(info.value)
