"""kafka_core's own clients signing in with a delegation token on Apache Kafka (KIP-48): SCRAM with
the token id as user name, the HMAC (base64) as password and the ``tokenauth=true`` extension.

A token made over SCRAM by kafka_core's admin, owned by alice: a producer (from a Java-style config,
``ScramLoginModule ... tokenauth="true"``) and a consumer sign in with it and act as alice (her
ACLs let them through, a topic she has none for does not). A wrong HMAC, an unknown token id, an
expired token and a token past its lifetime are refused with a KafkaAuthenticationError that names
the token and never carries an HMAC, nor does any log line, repr or metric.

The node has ``delegation.token.secret.key`` (the only set-up that issues tokens) and checks for
expired tokens every second, so that a token past its lifetime is gone within seconds.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes.timing import wait_until
from prerequisites import unavailable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.admin import AclBinding, AclOperation, AclResourceType, DelegationToken
from kafka_core.devbroker import KAFKA_VERSION, BrokerStartError, KafkaCluster
from kafka_core.errors import KafkaAuthenticationError, KafkaError, KafkaProtocolError
from kafka_core.network.sasl import delegation_token_options

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

GUARD = 60.0  # a hang guard, never a measurement
OWNER = "User:alice"


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    """One node that issues delegation tokens and sweeps expired ones every second."""
    node = KafkaCluster(
        1,
        overrides={
            "delegation.token.secret.key": secrets.token_hex(16),
            "delegation.token.max.lifetime.ms": str(24 * 3600 * 1000),
            "delegation.token.expiry.time.ms": str(3600 * 1000),
            "delegation.token.expiry.check.interval.ms": "1000",
        },
        version=os.environ.get("KAFKA_CORE_KAFKA_VERSION", "").strip() or KAFKA_VERSION,
    )
    try:
        node.start()
    except BrokerStartError as exc:
        node.close()
        unavailable("a Kafka node with delegation tokens", f"it did not start: {exc}")
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def admin(cluster: KafkaCluster) -> Iterator[KafkaAdmin]:
    """The SCRAM super user: a token is only issued over an authenticated connection."""
    user = cluster.user("SCRAM-SHA-512", "admin")
    with KafkaAdmin(
        cluster.listeners["SASL_PLAINTEXT"],
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user.name,
        sasl_password=user.password,
        api_timeout_ms=30_000,
    ) as a:
        yield a


@pytest.fixture
def kafka_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="kafka_core")
    return caplog


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def signed_in_with(cluster: KafkaCluster, mechanism: str, token_id: str, hmac: bytes | str) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.listeners["SASL_PLAINTEXT"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        **delegation_token_options(token_id, hmac),
    }


def new_token(admin: KafkaAdmin, **options: Any) -> DelegationToken:
    """A token for alice, once the broker knows it (it comes through the metadata log)."""
    token = admin.create_delegation_token(owner=OWNER, **options)
    assert wait_until(lambda: token.token_id in {t.token_id for t in admin.describe_delegation_tokens()}, 30)
    return token


def hmac_texts(*hmacs: bytes) -> list[str]:
    """The forms an HMAC could leak in: base64 (the password), hex, and Python's bytes repr."""
    return [form for h in hmacs for form in (base64.b64encode(h).decode(), h.hex(), repr(h)[2:-1])]


def assert_no_hmac(hmacs: list[str], *texts: str) -> None:
    for text in texts:
        for hmac in hmacs:
            assert hmac not in text, f"an HMAC leaked into: {text[:300]!r}"


def eventually(attempt: Callable[[], Any], what: str) -> Any:
    """``attempt()`` until it returns without a KafkaError (ACLs reach the authorizer a moment
    after the call); the last error if it never does within the guard."""
    deadline = time.monotonic() + GUARD
    while True:
        try:
            return attempt()
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing: {exc}") from exc
            time.sleep(0.2)


def refused_login(options: dict[str, Any]) -> tuple[KafkaAuthenticationError, list[str]]:
    """The error a producer signing in with ``options`` meets (max_block_ms bounds the wait), and
    the texts to search for a leaked HMAC: the error's, the producer's repr and metrics."""
    with KafkaProducer(**options, max_block_ms=20_000) as producer:
        with pytest.raises(KafkaAuthenticationError) as refused:
            producer.send(unique("never"), b"x").result(GUARD)
        texts = [str(refused.value), repr(refused.value), repr(producer), str(producer.metrics())]
    assert "SASL" in str(refused.value)
    return refused.value, texts


def test_a_producer_and_a_consumer_sign_in_with_a_token_and_act_as_its_owner(
    cluster: KafkaCluster, admin: KafkaAdmin, kafka_logs: pytest.LogCaptureFixture
) -> None:
    topic, other, group = unique("token"), unique("token-other"), unique("token-group")
    with KafkaAdmin(cluster.bootstrap) as plain:  # PLAINTEXT: a super user
        for name in (topic, other):
            plain.create_topics([NewTopic(name, 1, 1)])[name].result()
    token = new_token(admin, renewers=["User:admin"])
    assert token.owner == OWNER
    granted = [
        AclBinding(AclResourceType.TOPIC, topic, OWNER, operation)
        for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
    ] + [AclBinding(AclResourceType.GROUP, group, OWNER, AclOperation.READ)]
    assert all(r.error is None for r in admin.create_acls(granted).values())

    # The producer from a Java-style config, as a Java client signs in with a token.
    hmac_b64 = base64.b64encode(token.hmac).decode()
    java_config = {
        "bootstrap.servers": cluster.listeners["SASL_PLAINTEXT"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{token.token_id}" password="{hmac_b64}" tokenauth="true";',
        "max.block.ms": "20000",
    }
    values = [f"v{i}".encode() for i in range(5)]

    def produce() -> None:
        with KafkaProducer(java_config) as producer:
            for value in values:
                producer.send(topic, value).result(GUARD)

    eventually(produce, "the token's producer writing after the grant")

    # Acting as alice: a topic she has no ACL for is refused, by name.
    with KafkaProducer(**signed_in_with(cluster, "SCRAM-SHA-512", token.token_id, token.hmac)) as producer:
        denied = producer.send(other, b"denied").exception(GUARD)
        texts = [repr(producer), str(producer.metrics())]
    assert isinstance(denied, KafkaProtocolError) and denied.name == "TOPIC_AUTHORIZATION_FAILED", denied

    got: list[bytes | None] = []
    consumer_options = signed_in_with(cluster, "SCRAM-SHA-512", token.token_id, hmac_b64)
    with KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **consumer_options) as consumer:
        deadline = time.monotonic() + GUARD
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value for m in consumer.poll(timeout_ms=500)]
        consumer.commit()
        texts += [repr(consumer), str(consumer.metrics())]
    assert got == values
    assert_no_hmac(hmac_texts(token.hmac), kafka_logs.text, str(denied), *texts)


def test_a_wrong_hmac_and_an_unknown_token_are_refused_naming_the_token_never_an_hmac(
    cluster: KafkaCluster, admin: KafkaAdmin, kafka_logs: pytest.LogCaptureFixture
) -> None:
    token = new_token(admin)
    wrong = secrets.token_bytes(len(token.hmac))
    refused, texts = refused_login(signed_in_with(cluster, "SCRAM-SHA-256", token.token_id, wrong))
    assert token.token_id in str(refused) and "tokenauth" in str(refused), refused
    unknown_id = "no-such-token-" + uuid.uuid4().hex[:8]
    unknown, more = refused_login(signed_in_with(cluster, "SCRAM-SHA-512", unknown_id, token.hmac))
    assert unknown_id in str(unknown), unknown

    # Without the extension the same id and HMAC are a user name and password Kafka does not know:
    # what a client lacking tokenauth met.
    plain_scram = signed_in_with(cluster, "SCRAM-SHA-512", token.token_id, token.hmac)
    plain_scram["sasl_options"] = {"tokenauth": False}
    _, plain_texts = refused_login(plain_scram)
    assert_no_hmac(hmac_texts(token.hmac, wrong), kafka_logs.text, *texts, *more, *plain_texts)


def test_an_expired_token_and_one_past_its_lifetime_are_refused(
    cluster: KafkaCluster, admin: KafkaAdmin, kafka_logs: pytest.LogCaptureFixture
) -> None:
    expired = new_token(admin, renewers=["User:admin"])  # a renewer may expire it
    options = signed_in_with(cluster, "SCRAM-SHA-256", expired.token_id, expired.hmac)
    with KafkaAdmin(**options, api_timeout_ms=30_000) as as_token:
        as_token.list_topics()  # signs in while the token lives
    admin.expire_delegation_token(expired.hmac)
    assert wait_until(
        lambda: expired.token_id not in {t.token_id for t in admin.describe_delegation_tokens()}, 30
    )
    after_expiry, texts = refused_login(options)
    assert expired.token_id in str(after_expiry)

    lapsing = new_token(admin, max_lifetime_ms=3_000)  # the broker sweeps it once lapsed
    assert lapsing.max_timestamp_ms - lapsing.issue_timestamp_ms == 3_000
    assert wait_until(
        lambda: lapsing.token_id not in {t.token_id for t in admin.describe_delegation_tokens()}, 30
    )
    lapsed, more = refused_login(signed_in_with(cluster, "SCRAM-SHA-512", lapsing.token_id, lapsing.hmac))
    assert lapsing.token_id in str(lapsed)
    assert_no_hmac(hmac_texts(expired.hmac, lapsing.hmac), kafka_logs.text, *texts, *more)
