"""The cluster-wide admin calls on Apache Kafka: the KRaft quorum, feature levels, client quotas,
SCRAM users (a user made here then signs in) and delegation tokens (on a node of its own with
``delegation.token.secret.key``, the only broker set-up that issues them).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from collections.abc import Iterator

import pytest
from fakes.timing import wait_until
from prerequisites import unavailable

from kafka_core import KafkaAdmin
from kafka_core.admin import ClientQuotaEntity, FeatureUpdate, ScramDeletion, ScramUpsertion
from kafka_core.aio import KafkaAdmin as AsyncKafkaAdmin
from kafka_core.client import KafkaClient
from kafka_core.devbroker import KAFKA_VERSION, BrokerStartError, KafkaCluster
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaProtocolError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


@pytest.fixture
def kafka(real_kafka: KafkaCluster) -> Iterator[KafkaCluster]:
    yield real_kafka


@pytest.fixture
def admin(kafka: KafkaCluster) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(kafka.bootstrap, api_timeout_ms=30_000) as a:
        yield a


def test_the_quorum_and_the_feature_levels(kafka: KafkaCluster, admin: KafkaAdmin) -> None:
    quorum = admin.describe_quorum()
    node_ids = [n.node_id for n in kafka.nodes]
    assert quorum.leader_id in node_ids and quorum.leader_epoch >= 1 and quorum.high_watermark > 0
    assert sorted(v.replica_id for v in quorum.voters) == node_ids
    leader = next(v for v in quorum.voters if v.replica_id == quorum.leader_id)
    assert leader.log_end_offset >= quorum.high_watermark

    features = admin.describe_features()
    assert "metadata.version" in features.finalized and "metadata.version" in features.supported
    level = features.finalized["transaction.version"].max_version
    top = features.supported["transaction.version"].max_version
    assert features.finalized_epoch is not None and 0 <= level <= top

    # Setting a level to what it is changes nothing and succeeds; beyond what the brokers
    # support is refused by name; a downgrade is only asked about (validate_only).
    assert admin.update_features({"transaction.version": level})["transaction.version"].ok
    beyond = admin.update_features({"transaction.version": top + 1}, validate_only=True)
    assert beyond["transaction.version"].error.name == "INVALID_UPDATE_VERSION"
    if level > 0:
        down = admin.update_features(
            {"transaction.version": FeatureUpdate(level - 1, "safe_downgrade")}, validate_only=True
        )
        assert down["transaction.version"].ok, down
    assert admin.describe_features().finalized["transaction.version"].max_version == level
    with pytest.raises(KafkaConfigError):
        admin.update_features({"transaction.version": FeatureUpdate(1, "sideways")})


def test_client_quotas_set_described_and_removed(admin: KafkaAdmin) -> None:
    user = f"quota-{uuid.uuid4().hex[:8]}"
    alone = ClientQuotaEntity.of({"user": user})
    with_client = ClientQuotaEntity.of({"user": user, "client-id": "etl"})
    changed = admin.alter_client_quotas(
        {
            alone: {"producer_byte_rate": 1_048_576, "consumer_byte_rate": 2_097_152},
            with_client: {"request_percentage": 50},
        }
    )
    assert all(r.ok for r in changed.values()), changed
    # A change reaches the brokers' caches through the metadata log, a moment after the answer.
    assert wait_until(lambda: len(admin.describe_client_quotas({"user": user})) == 2, 30)
    found = admin.describe_client_quotas({"user": user})
    assert found[alone] == {"producer_byte_rate": 1_048_576.0, "consumer_byte_rate": 2_097_152.0}
    assert found[with_client] == {"request_percentage": 50.0}
    assert set(admin.describe_client_quotas({"user": user}, strict=True)) == {alone}

    bad = admin.alter_client_quotas({alone: {"no_such_quota": 1}})
    assert isinstance(bad[alone].error, KafkaProtocolError) and bad[alone].error.name == "INVALID_REQUEST"

    admin.alter_client_quotas({alone: {"producer_byte_rate": None, "consumer_byte_rate": None}})
    admin.alter_client_quotas({with_client: {"request_percentage": None}})
    assert wait_until(lambda: admin.describe_client_quotas({"user": user}) == {}, 30)
    with pytest.raises(KafkaConfigError):
        ClientQuotaEntity.of({"group": "g"})


def test_a_scram_user_made_by_the_admin_signs_in_and_its_password_is_never_shown(
    kafka: KafkaCluster, admin: KafkaAdmin
) -> None:
    user = f"scram-{uuid.uuid4().hex[:8]}"
    password = secrets.token_urlsafe(16)
    upsert = ScramUpsertion(user, password, "SCRAM-SHA-256", iterations=4096)
    assert password not in repr(upsert) and password not in str(upsert)
    # The broker takes one change per user per request, and says so by name.
    twice = admin.alter_user_scram_credentials([upsert, ScramUpsertion(user, password, "SCRAM-SHA-512")])
    assert twice[user].error.name == "DUPLICATE_RESOURCE"
    assert admin.alter_user_scram_credentials([upsert])[user].ok
    assert admin.alter_user_scram_credentials([ScramUpsertion(user, password, "SCRAM-SHA-512")])[user].ok

    def described() -> int:
        res = admin.describe_user_scram_credentials([user])[user]
        return len(res.value or [])

    assert wait_until(lambda: described() == 2, 30)
    (info,) = admin.describe_user_scram_credentials([user]).values()
    assert sorted((c.mechanism, c.iterations) for c in info.result()) == [
        ("SCRAM-SHA-256", 4096),
        ("SCRAM-SHA-512", 8192),
    ]

    async def sign_in(secret: str) -> None:
        async with KafkaClient(
            kafka.listeners["SASL_PLAINTEXT"],
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username=user,
            sasl_password=secret,
            api_timeout_ms=15_000,
        ) as client:
            await client.metadata([])

    asyncio.run(sign_in(password))  # the broker checks the salted hash made here
    with pytest.raises(KafkaAuthenticationError) as refused:
        asyncio.run(sign_in(password + "x"))
    assert password not in str(refused.value)

    too_few = ScramUpsertion(user, password, iterations=10)
    with pytest.raises(KafkaConfigError) as bad:
        admin.alter_user_scram_credentials([too_few])
    assert password not in str(bad.value) and password not in repr(too_few)

    assert admin.alter_user_scram_credentials([ScramDeletion(user, "SCRAM-SHA-256")])[user].ok
    assert admin.alter_user_scram_credentials([ScramDeletion(user, "SCRAM-SHA-512")])[user].ok
    assert wait_until(lambda: not admin.describe_user_scram_credentials([user])[user].ok, 30)
    missing = admin.describe_user_scram_credentials([user])[user]
    assert missing.error.name == "RESOURCE_NOT_FOUND"
    again = admin.alter_user_scram_credentials([ScramDeletion(user, "SCRAM-SHA-256")])
    assert again[user].error.name == "RESOURCE_NOT_FOUND"


def test_delegation_tokens_are_refused_by_name_where_the_cluster_issues_none(admin: KafkaAdmin) -> None:
    with pytest.raises(KafkaProtocolError) as refused:
        admin.create_delegation_token()
    assert refused.value.name in ("DELEGATION_TOKEN_AUTH_DISABLED", "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")


@pytest.fixture(scope="module")
def token_kafka() -> Iterator[KafkaCluster]:
    """A node with delegation tokens on (a secret key), started for these tests only."""
    cluster = KafkaCluster(
        1,
        overrides={
            "delegation.token.secret.key": secrets.token_hex(16),
            "delegation.token.max.lifetime.ms": str(7 * 24 * 3600 * 1000),
            "delegation.token.expiry.time.ms": str(24 * 3600 * 1000),
        },
        version=os.environ.get("KAFKA_CORE_KAFKA_VERSION", "").strip() or KAFKA_VERSION,
    )
    try:
        cluster.start()
    except BrokerStartError as exc:
        cluster.close()
        unavailable("a Kafka node with delegation tokens", f"it did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.close()


def test_delegation_tokens_created_described_renewed_and_expired(token_kafka: KafkaCluster) -> None:
    admin_user = token_kafka.user("SCRAM-SHA-512", "admin")
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": admin_user.name,
        "sasl_password": admin_user.password,
    }
    with KafkaAdmin(token_kafka.listeners["SASL_PLAINTEXT"], api_timeout_ms=30_000, **sasl) as admin:
        token = admin.create_delegation_token(renewers=["User:alice"], max_lifetime_ms=3_600_000)
        assert token.owner == "User:admin" and token.renewers == ["User:alice"]
        assert token.hmac and token.hmac.hex() not in repr(token)
        assert token.issue_timestamp_ms < token.expiry_timestamp_ms <= token.max_timestamp_ms
        assert token.max_timestamp_ms - token.issue_timestamp_ms == 3_600_000

        def listed_ids() -> list[str]:
            return [t.token_id for t in admin.describe_delegation_tokens()]

        assert wait_until(lambda: token.token_id in listed_ids(), 30)  # through the metadata log
        (listed,) = [t for t in admin.describe_delegation_tokens() if t.token_id == token.token_id]
        assert listed.hmac == token.hmac and listed.renewers == ["User:alice"]
        assert [t.token_id for t in admin.describe_delegation_tokens(["User:admin"])] == [token.token_id]
        assert admin.describe_delegation_tokens(["User:nobody"]) == []

        renewed = admin.renew_delegation_token(token.hmac, renew_period_ms=60_000)
        assert token.issue_timestamp_ms < renewed <= token.max_timestamp_ms
        expired = admin.expire_delegation_token(token.hmac)
        assert expired <= renewed
        assert wait_until(lambda: token.token_id not in listed_ids(), 30)
        with pytest.raises(KafkaProtocolError) as unknown:
            admin.renew_delegation_token(token.hmac)
        assert unknown.value.name == "DELEGATION_TOKEN_NOT_FOUND"
        assert token.hmac.hex() not in str(unknown.value)

    # Over a connection that did not authenticate, the cluster issues no token.
    with KafkaAdmin(token_kafka.bootstrap, api_timeout_ms=30_000) as plain:
        with pytest.raises(KafkaProtocolError) as refused:
            plain.create_delegation_token()
        assert refused.value.name == "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


def test_the_asyncio_face_reads_the_quorum_and_features(kafka: KafkaCluster) -> None:
    async def main() -> None:
        async with AsyncKafkaAdmin(kafka.bootstrap) as admin:
            quorum = await admin.describe_quorum()
            assert quorum.leader_id in [n.node_id for n in kafka.nodes]
            assert "metadata.version" in (await admin.describe_features()).finalized
            assert isinstance(await admin.describe_client_quotas(), dict)

    asyncio.run(main())
