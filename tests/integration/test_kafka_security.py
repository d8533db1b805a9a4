"""Security on the reference broker (Apache Kafka from its Maven Central jars, KafkaCluster):
SASL PLAIN and SCRAM-SHA-256/512 over SASL_PLAINTEXT and SASL_SSL, a wrong password failing fast,
ACL denials named per resource and lifted by kafka_core's own admin, TLS host name verification,
no secret in logs, reprs, metrics or errors, and a producer failing a record at max_block_ms.

Runs whatever the session's broker: the session's Apache Kafka when there is one
(``KAFKA_CORE_TEST_BROKER=kafka``), else a one-node cluster of this module's own. Timings are
hang guards only (well below delivery_timeout_ms), never measurements.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes.topics import listing_with
from prerequisites import unavailable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclResourceType,
)
from kafka_core.aio import KafkaProducer as AsyncKafkaProducer
from kafka_core.devbroker import BrokerStartError, KafkaCluster
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kafka_core.producer import RecordMetadata

pytestmark = pytest.mark.timeout(300)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DELIVERY_TIMEOUT_MS = 120_000  # the default: a record must fail long before it
GUARD = DELIVERY_TIMEOUT_MS / 1000 / 2
WRONG_PASSWORD = "not-the-password-" + uuid.uuid4().hex[:8]
MAX_LOGINS = 3  # a refused login may be tried this often, never in a loop


@pytest.fixture(scope="module")
def cluster(kafka_cluster: KafkaCluster | None) -> Iterator[KafkaCluster]:
    """The session's Apache Kafka, else one of this module's own (auto-creation off)."""
    if kafka_cluster is not None:
        yield kafka_cluster
        return
    own = KafkaCluster(1, overrides={"auto.create.topics.enable": "false"})
    try:
        own.start()
    except BrokerStartError as exc:
        own.close()
        unavailable("Apache Kafka (the security tests)", f"it did not start: {exc}")
    try:
        yield own
    finally:
        own.close()


@pytest.fixture(scope="module")
def secrets_of(cluster: KafkaCluster) -> list[str]:
    return [u.password for u in cluster.users] + [WRONG_PASSWORD]


@pytest.fixture
def kafka_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every kafka_core logger at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="kafka_core")
    return caplog


def sasl(
    cluster: KafkaCluster,
    mechanism: str,
    name: str,
    protocol: str = "SASL_PLAINTEXT",
    password: str | None = None,
) -> dict[str, Any]:
    user = cluster.user(mechanism, name)
    options: dict[str, Any] = {
        "bootstrap_servers": cluster.listeners[protocol],
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_username": user.name,
        "sasl_password": user.password if password is None else password,
    }
    if protocol == "SASL_SSL":
        assert cluster.certificates is not None
        options["ssl_cafile"] = str(cluster.certificates.ca_file)
    return options


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(cluster: KafkaCluster, partitions: int = 1) -> str:
    name = unique("sec")
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap) as admin:  # PLAINTEXT: a super user
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    return name


def consume(options: dict[str, Any], topic: str, group: str, want: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    with KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **options) as consumer:
        deadline = time.monotonic() + GUARD
        while len(values) < want and time.monotonic() < deadline:
            values += [m.value for m in consumer.poll(timeout_ms=500)]
    return values


def logins(metrics: dict[str, Any]) -> tuple[int, int]:
    """(SaslAuthenticate requests, refused ones) from a client's metrics()."""
    network = metrics["network"]
    requests = sum(v["count"] for v in network["requests"].get("SASL_AUTHENTICATE", {}).values())
    refused = sum(
        n
        for per_broker in network["errors"].get("SASL_AUTHENTICATE", {}).values()
        for name, n in per_broker.items()
        if name == "SASL_AUTHENTICATION_FAILED"
    )
    return requests, refused


def assert_no_secret(secrets: list[str], *texts: str) -> None:
    for text in texts:
        for secret in secrets:
            assert secret not in text, f"a password leaked into: {text[:300]!r}"


def eventually(attempt: Callable[[], Any], what: str) -> Any:
    """``attempt()`` until it returns without a KafkaError (ACLs reach the authorizer
    asynchronously); the last error if it never does within the guard."""
    deadline = time.monotonic() + GUARD
    while True:
        try:
            return attempt()
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing: {exc}") from exc
            time.sleep(0.2)


# -- SASL: every mechanism on both SASL listeners ---------------------------------------------------


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_produce_consume_admin(
    cluster: KafkaCluster, mechanism: str, protocol: str, secrets_of: list[str], kafka_logs: Any
) -> None:
    options = sasl(cluster, mechanism, "admin", protocol)
    topic = unique("sasl")
    with KafkaAdmin(**options) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 1)])[topic].error is None
        assert topic in listing_with(admin, [topic])
        admin_text = repr(admin) + str(admin.metrics())
    with KafkaProducer(**options) as producer:
        metas = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(4)]
        producer.flush(GUARD)
        assert all(isinstance(m.result(0), RecordMetadata) for m in metas)
        producer_text = repr(producer) + str(producer.metrics())
    values = consume(options, topic, unique("g"), 4)
    assert sorted(v or b"" for v in values) == [b"v0", b"v1", b"v2", b"v3"]
    assert kafka_logs.records  # the capture works: the connections were logged at DEBUG
    assert_no_secret(secrets_of, kafka_logs.text, admin_text, producer_text)


# -- a wrong password: fails fast, named, no login storm -----------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_producer(
    cluster: KafkaCluster, mechanism: str, secrets_of: list[str], kafka_logs: Any
) -> None:
    options = sasl(cluster, mechanism, "alice", "SASL_SSL", password=WRONG_PASSWORD)
    producer = KafkaProducer(**options, max_block_ms=10_000)
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaAuthenticationError, match=f"SASL {mechanism} authentication") as info:
            producer.send(unique("t"), b"x")
        assert time.monotonic() - t0 < GUARD
        with pytest.raises(KafkaAuthenticationError):  # later sends too, without logging in again
            producer.send(unique("t"), b"x")
        requests, refused = logins(producer.metrics())
        assert refused == 1 and requests <= MAX_LOGINS * 2, producer.metrics()["network"]
        texts = [str(info.value), repr(info.value), repr(producer), str(producer.metrics())]
    finally:
        producer.close(5)
    assert_no_secret(secrets_of, kafka_logs.text, *texts)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_admin(
    cluster: KafkaCluster, mechanism: str, secrets_of: list[str], kafka_logs: Any
) -> None:
    options = sasl(cluster, mechanism, "admin", "SASL_PLAINTEXT", password=WRONG_PASSWORD)
    with KafkaAdmin(**options) as admin:
        t0 = time.monotonic()
        with pytest.raises(KafkaAuthenticationError, match=f"SASL {mechanism} authentication") as info:
            admin.list_topics()
        assert time.monotonic() - t0 < GUARD
        requests, refused = logins(admin.metrics())
        assert refused == 1 and requests <= MAX_LOGINS * 2, admin.metrics()["network"]
        texts = [str(info.value), repr(admin), str(admin.metrics())]
    assert_no_secret(secrets_of, kafka_logs.text, *texts)


def test_wrong_password_consumer_names_the_refused_login(
    cluster: KafkaCluster, secrets_of: list[str], kafka_logs: Any
) -> None:
    """A refused login names the mechanism (KafkaAuthenticationError, a KafkaConnectionError:
    code catching the latter sees it too) and is not retried in a loop."""
    options = sasl(cluster, "SCRAM-SHA-256", "alice", "SASL_PLAINTEXT", password=WRONG_PASSWORD)
    error: BaseException | None = None
    with KafkaConsumer(unique("t"), group_id=unique("g"), request_timeout_ms=3_000, **options) as consumer:
        deadline = time.monotonic() + GUARD
        while error is None and time.monotonic() < deadline:
            try:
                consumer.poll(timeout_ms=500)
            except KafkaConnectionError as exc:
                error = exc
        assert error is not None, "poll never reported the refused login"
        assert "SASL SCRAM-SHA-256 authentication" in str(error), error
        for _ in range(3):  # every later poll says it again, without logging in again
            with pytest.raises(KafkaAuthenticationError, match="SASL SCRAM-SHA-256 authentication"):
                consumer.poll(timeout_ms=500)
        _requests, refused = logins(consumer.metrics())
        # not retried: the one refused login, however many polls
        assert refused == 1, consumer.metrics()["network"]
        texts = [str(error), repr(error), repr(consumer), str(consumer.metrics())]
    assert_no_secret(secrets_of, kafka_logs.text, *texts)


def test_wrong_password_consumer_raises_the_authentication_error_at_once(cluster: KafkaCluster) -> None:
    options = sasl(cluster, "SCRAM-SHA-256", "alice", "SASL_PLAINTEXT", password=WRONG_PASSWORD)
    with KafkaConsumer(unique("t"), group_id=unique("g"), **options) as consumer:
        with pytest.raises(KafkaAuthenticationError):
            for _ in range(10):  # 5 s of polls, far below request_timeout_ms (30 s)
                consumer.poll(timeout_ms=500)
        assert logins(consumer.metrics())[1] <= MAX_LOGINS


# -- ACLs: denials named per resource, lifted by our own admin ----------------------------------------


def test_acl_denials_are_named_then_granted_described_and_deleted(
    cluster: KafkaCluster, secrets_of: list[str], kafka_logs: Any
) -> None:
    topic = make_topic(cluster)
    group = unique("alice-group")
    alice = sasl(cluster, "SCRAM-SHA-512", "alice", "SASL_PLAINTEXT")
    quick = {"max_block_ms": 10_000}  # delivery_timeout_ms stays 120 s: the record must not wait it out

    # 1. no ACL: the send fails with TOPIC_AUTHORIZATION_FAILED naming the topic, by the time it returns
    with KafkaProducer(**alice, **quick) as producer:
        t0 = time.monotonic()
        future = producer.send(topic, b"denied")
        assert future.done() and time.monotonic() - t0 < GUARD
        denied = future.exception(0)
    assert isinstance(denied, KafkaProtocolError) and denied.name == "TOPIC_AUTHORIZATION_FAILED", denied
    assert topic in str(denied)

    async def async_send() -> BaseException | None:
        async with AsyncKafkaProducer(**alice, **quick) as producer:
            future = await asyncio.wait_for(producer.send(topic, b"denied"), GUARD)
            assert future.done()
            return future.exception(0)

    adenied = asyncio.run(async_send())
    assert isinstance(adenied, KafkaProtocolError) and adenied.name == "TOPIC_AUTHORIZATION_FAILED", adenied

    # 2. a group she may not use: GROUP_AUTHORIZATION_FAILED naming the group
    with (
        pytest.raises(KafkaProtocolError, match="GROUP_AUTHORIZATION_FAILED") as group_denied,
        KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **alice) as consumer,
    ):
        deadline = time.monotonic() + GUARD
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
    assert group in str(group_denied.value)

    # 3. granted with kafka_core's admin, as the SASL super user
    principal = "User:alice"
    bindings = [
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.WRITE),
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.READ),
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.DESCRIBE),
        AclBinding(AclResourceType.GROUP, group, principal, AclOperation.READ),
    ]
    with KafkaAdmin(**sasl(cluster, "SCRAM-SHA-512", "admin", "SASL_SSL")) as admin:
        created = admin.create_acls(bindings)
        assert all(r.error is None for r in created.values()), created
        mine = AclBindingFilter(principal=principal)

        def described() -> set[AclBinding]:
            found = {b for b in admin.describe_acls(mine) if b.resource_name in (topic, group)}
            if found != set(bindings):
                raise KafkaTimeoutError(f"ACLs not all described yet: {found}")
            return found

        assert eventually(described, "describe_acls") == set(bindings)

        def produce() -> RecordMetadata:
            with KafkaProducer(**alice, **quick) as producer:
                return producer.send(topic, b"allowed").result(GUARD)

        meta = eventually(produce, "alice producing after the grant")
        assert isinstance(meta, RecordMetadata) and meta.topic == topic
        assert consume(alice, topic, group, 1) == [b"allowed"]

        # 4. deleted: the filter returns what it removed, and alice is refused again
        deleted = admin.delete_acls([AclBindingFilter(resource_name=topic, principal=principal)])
        [result] = deleted.values()
        assert set(result.result()) == set(bindings[:3])
        admin.delete_acls([AclBindingFilter(resource_name=group, principal=principal)])

        def refused_again() -> BaseException:
            with KafkaProducer(**alice, **quick) as producer:
                error = producer.send(topic, b"denied again").exception(GUARD)
            if error is None:
                raise KafkaTimeoutError("the deleted ACL still lets alice write")
            return error

        again = eventually(refused_again, "alice refused after the delete")
        assert isinstance(again, KafkaProtocolError) and again.name == "TOPIC_AUTHORIZATION_FAILED", again
        assert not [b for b in admin.describe_acls(mine) if b.resource_name in (topic, group)]
    assert_no_secret(secrets_of, kafka_logs.text, str(denied), str(adenied), str(group_denied.value))


def test_alice_reading_a_topic_she_may_not_names_the_topic(cluster: KafkaCluster) -> None:
    """The group is hers, the topic is not: the consumer names the topic."""
    topic = make_topic(cluster)
    group = unique("alice-group")
    principal = "User:alice"
    grant = AclBinding(AclResourceType.GROUP, group, principal, AclOperation.READ)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap) as admin:  # PLAINTEXT: ANONYMOUS is a super user
        assert admin.create_acls([grant])[grant].error is None
        try:
            alice = sasl(cluster, "PLAIN", "alice", "SASL_SSL")
            with (
                pytest.raises(KafkaProtocolError, match="TOPIC_AUTHORIZATION_FAILED") as info,
                KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **alice) as consumer,
            ):
                deadline = time.monotonic() + 10  # a hang guard for a known failure
                while time.monotonic() < deadline:
                    consumer.poll(timeout_ms=500)
            assert topic in str(info.value)
        finally:
            admin.delete_acls([AclBindingFilter(resource_name=group, principal=principal)])


# -- fail fast: a record whose topic cannot be had fails at max_block_ms ------------------------------


def test_a_missing_topic_fails_the_record_at_max_block_ms(cluster: KafkaCluster) -> None:
    topic = unique("missing")
    options = sasl(cluster, "SCRAM-SHA-256", "admin")
    with KafkaProducer(**options, max_block_ms=2_000, allow_auto_create_topics=False) as producer:
        producer.start()
        t0 = time.monotonic()
        future = producer.send(topic, b"x")
        assert future.done() and time.monotonic() - t0 < GUARD
        error = future.exception(0)
    assert isinstance(error, KafkaTimeoutError), error
    assert "max_block_ms (2000 ms)" in str(error) and "UNKNOWN_TOPIC_OR_PARTITION" in str(error), error
    assert topic in str(error)


# -- TLS: the broker's name is checked; ssl_check_hostname=False skips that check only ---------------


def tls(cluster: KafkaCluster, host: str, **options: Any) -> dict[str, Any]:
    assert cluster.certificates is not None
    port = cluster.listeners["SSL"].split(",")[0].rsplit(":", 1)[1]
    return {
        "bootstrap_servers": f"{host}:{port}",
        "security_protocol": "SSL",
        "ssl_cafile": str(cluster.certificates.ca_file),
        **options,
    }


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_tls_with_the_ca_works_by_a_certified_name(cluster: KafkaCluster, host: str) -> None:
    topic = make_topic(cluster)
    with KafkaProducer(**tls(cluster, host)) as producer:
        assert isinstance(producer.send(topic, b"tls").result(GUARD), RecordMetadata)
    assert consume(tls(cluster, host), topic, unique("g"), 1) == [b"tls"]


def test_tls_refuses_a_name_the_certificate_does_not_carry(cluster: KafkaCluster) -> None:
    """'127.1' reaches the same listener (inet_aton reads it as 127.0.0.1) but is not a name in the
    certificate (localhost, 127.0.0.1): the handshake is refused for the name alone, at once."""
    assert cluster.certificates is not None and "127.1" not in cluster.certificates.names
    with KafkaAdmin(**tls(cluster, "127.1")) as admin:
        t0 = time.monotonic()
        with pytest.raises(KafkaAuthenticationError, match="Hostname mismatch"):
            admin.list_topics()
        assert time.monotonic() - t0 < GUARD
    with (
        KafkaProducer(**tls(cluster, "127.1")) as producer,
        pytest.raises(KafkaAuthenticationError, match="Hostname mismatch"),
    ):
        producer.send(unique("t"), b"x")


def test_tls_check_hostname_off_skips_only_the_name_check(cluster: KafkaCluster) -> None:
    with KafkaAdmin(**tls(cluster, "127.1", ssl_check_hostname=False)) as admin:
        assert isinstance(admin.list_topics(), list | dict | set | tuple)
    # the chain is still verified: without our CA the same certificate is refused
    with KafkaAdmin(**tls(cluster, "127.1", ssl_check_hostname=False, ssl_cafile=None)) as admin:
        with pytest.raises(KafkaAuthenticationError, match="certificate verify failed") as info:
            admin.list_topics()
        assert "Hostname" not in str(info.value)
