"""SASL/OAUTHBEARER against Apache Kafka's own JWT validator (``OAuthBearerValidatorCallbackHandler``:
JWKS, expected issuer and audience) with tokens from a real OIDC provider (NAV's mock-oauth2-server)
fetched by kafka_core's built-in client-credentials grant.

The provider starts once per run (the session fixture ``oauth_server``), the Kafka node with its
OAUTHBEARER listener once for this module. Tokens live OAUTH_TOKEN_SECONDS (10 s), and the
listener's sessions end with the token (``connections.max.reauth.ms`` on), so the tests that
produce for longer see tokens renewed and connections re-authenticated in band (KIP-368).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import KAFKA_TEST_VERSION, OAUTH_TOKEN_SECONDS
from prerequisites import need_module, unavailable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.auth import OAuthBearerToken, OidcTokenProvider, shared_token_cache
from kafka_core.devbroker import BrokerStartError, KafkaCluster, OAuthServer
from kafka_core.errors import KafkaAuthenticationError

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(oauth_server: OAuthServer) -> Iterator[KafkaCluster]:
    own = KafkaCluster(1, version=KAFKA_TEST_VERSION, oauth=oauth_server)
    try:
        own.start()
    except BrokerStartError as exc:
        own.close()
        unavailable("Apache Kafka with an OAUTHBEARER listener", f"it did not start: {exc}")
    try:
        yield own
    finally:
        own.close()


def oauth(cluster: KafkaCluster, **overrides: Any) -> dict[str, Any]:
    """A client's options from the cluster's JSON description (what the dev broker prints)."""
    info = cluster.describe()["oauth"]
    return {
        "bootstrap_servers": info["bootstrap"],
        "security_protocol": info["security_protocol"],  # the entry names what works there
        "sasl_mechanism": info["sasl_mechanism"],
        "sasl_oauth_token_endpoint_url": info["token_endpoint"],
        "sasl_oauth_client_id": info["client_id"],
        "sasl_oauth_client_secret": info["client_secret"],
        **overrides,
    }


def make_topic(cluster: KafkaCluster) -> str:
    name = f"oauth-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result()
    return name


def consume_all(options: dict[str, Any], topic: str, want: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    with KafkaConsumer(
        topic, group_id=f"g-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest", **options
    ) as c:
        deadline = time.monotonic() + 60
        while len(values) < want and time.monotonic() < deadline:
            values += [m.value for m in c.poll(timeout_ms=500)]
    return values


def dropped_or_refused(metrics: dict[str, Any]) -> list[str]:
    """Requests failed by a dropped connection, a timeout or a refused login (a fresh cluster's
    COORDINATOR_LOAD_IN_PROGRESS and the like are the broker's own business)."""
    bad = {"CONNECTION", "TIMEOUT", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE"}
    return [
        f"{api}: {name} x{n}"
        for api, per_broker in metrics["network"]["errors"].items()
        for errors in per_broker.values()
        for name, n in errors.items()
        if name in bad
    ]


def logins(metrics: dict[str, Any]) -> int:
    return sum(v["count"] for v in metrics["network"]["requests"].get("SASL_AUTHENTICATE", {}).values())


def test_a_good_client_produces_consumes_and_administers(
    cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka_core")
    topic = make_topic(cluster)
    options = oauth(cluster)
    with KafkaProducer(**options) as producer:
        for i in range(10):
            producer.send(topic, f"r{i}".encode())
        producer.flush()
    assert consume_all(options, topic, 10) == [f"r{i}".encode() for i in range(10)]
    with KafkaAdmin(**options) as admin:
        assert topic in admin.list_topics()
    # Neither the client secret nor a token (a JWT starts "eyJ") reaches the logs, at any level.
    assert options["sasl_oauth_client_secret"] not in caplog.text and "eyJ" not in caplog.text


def test_one_provider_object_serves_every_client_with_one_token(cluster: KafkaCluster) -> None:
    info = cluster.describe()["oauth"]
    # A secret of its own: a cache of its own (the provider accepts any secret).
    provider = OidcTokenProvider(info["token_endpoint"], info["client_id"], f"shared-{uuid.uuid4().hex}")
    cache = shared_token_cache(provider)
    before = cache.fetches
    options = {**oauth(cluster), "sasl_oauth_token_endpoint_url": None, "sasl_oauth_token_provider": provider}
    options.pop("sasl_oauth_client_id")
    options.pop("sasl_oauth_client_secret")
    topic = make_topic(cluster)
    with KafkaAdmin(**options) as admin, KafkaProducer(**options) as producer:
        assert topic in admin.list_topics()
        producer.send(topic, b"one").result(30)
    assert consume_all(options, topic, 1) == [b"one"]
    assert cache.fetches - before == 1  # three clients, several connections, one token


def refusal(options: dict[str, Any]) -> str:
    with (
        pytest.raises(KafkaAuthenticationError) as info,
        KafkaAdmin(**options, api_timeout_ms=30_000) as admin,
    ):
        admin.list_topics()
    return str(info.value)


def forged_token(cluster: KafkaCluster) -> str:
    """A token with the right issuer, audience, expiry and key id, signed by a key the provider
    never had: what a client holding the wrong credentials could present."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    assert cluster.oauth is not None
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": "kafka"}
    claims = {
        "sub": "kafka-client",
        "aud": "kafka",
        "iss": cluster.oauth.issuer,
        "iat": now,
        "exp": now + 300,
    }

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    signing_input = f"{part(header)}.{part(claims)}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@pytest.mark.parametrize("case", ["wrong-signature", "expired", "wrong-audience"])
def test_bad_tokens_are_refused_naming_the_mechanism_and_the_brokers_reason(
    cluster: KafkaCluster, case: str
) -> None:
    if case == "wrong-signature":
        token = forged_token(cluster)
        options = {
            **oauth(cluster, sasl_oauth_token_endpoint_url=None, sasl_oauth_client_id=None),
            "sasl_oauth_client_secret": None,
            "sasl_oauth_token_provider": lambda: token,
        }
    elif case == "expired":
        options = oauth(cluster, sasl_oauth_client_id="expired-client")
    else:
        options = oauth(cluster, sasl_oauth_scope="not-kafka")
    text = refusal(options)
    assert "SASL OAUTHBEARER authentication" in text and "invalid_token" in text, text
    if case == "expired":
        assert re.search(r"expired \d+ s ago", text), text
    assert cluster.describe()["oauth"]["client_secret"] not in text


def test_tokens_are_renewed_and_connections_re_authenticated_while_records_flow(
    cluster: KafkaCluster,
) -> None:
    """Records go out for 2.5 token lifetimes on the same connections: each session ends with
    its token, so without in-band re-authentication the broker would close them mid-flow."""
    topic = make_topic(cluster)
    options = oauth(cluster)
    sent = 0
    with KafkaProducer(**options, linger_ms=5) as producer:
        producer.send(topic, b"first").result(30)
        closed = producer.metrics()["network"]["connections"]["closed"]
        first_logins = logins(producer.metrics())
        deadline = time.monotonic() + 2.5 * OAUTH_TOKEN_SECONDS
        futures = []
        while time.monotonic() < deadline:
            futures.append(producer.send(topic, str(sent).encode()))
            sent += 1
            time.sleep(0.02)
        for future in futures:
            future.result(60)
        metrics = producer.metrics()
    # No connection was dropped and made again (the producer may open further lanes meanwhile).
    assert metrics["network"]["connections"]["closed"] == closed
    assert logins(metrics) >= first_logins + 2  # re-authenticated in band, twice at least
    assert not dropped_or_refused(metrics)
    values = consume_all(options, topic, sent + 1)
    assert values == [b"first", *(str(i).encode() for i in range(sent))]  # nothing lost, nothing twice


def test_the_token_endpoint_down_for_a_while_drops_no_working_connection(cluster: KafkaCluster) -> None:
    """The provider is stopped (SIGSTOP: its port takes connections and never answers) from half
    the token's lifetime to past the point where it is due for renewal (75-80%), while records
    flow: the renewal hangs and lands once the provider is back, before the token runs out, and
    the connections re-authenticate with it. No connection is dropped, no record fails. (An
    outage that outlasts the token ends the broker's sessions: nothing a client can do.)"""
    assert cluster.oauth is not None
    info = cluster.describe()["oauth"]
    provider = OidcTokenProvider(info["token_endpoint"], info["client_id"], f"down-{uuid.uuid4().hex}")
    token: OAuthBearerToken = asyncio.run(shared_token_cache(provider).token())
    topic = make_topic(cluster)
    options = {
        "bootstrap_servers": info["bootstrap"],
        "security_protocol": info["security_protocol"],  # the entry names what works there
        "sasl_mechanism": info["sasl_mechanism"],
        "sasl_oauth_token_provider": provider,
    }
    sent = 0
    with KafkaProducer(**options, linger_ms=5) as producer:
        producer.send(topic, b"before").result(30)
        closed = producer.metrics()["network"]["connections"]["closed"]
        first_logins = logins(producer.metrics())
        # The provider's outage runs on timers of its own, whatever the sends below wait for.
        begin = token.issued_at + 0.5 * token.lifetime
        end = token.issued_at + 0.85 * token.lifetime
        pause = threading.Timer(max(0.0, begin - time.time()), cluster.oauth.pause)
        resume = threading.Timer(max(0.0, end - time.time()), cluster.oauth.resume)
        pause.start()
        resume.start()
        try:
            while time.time() < token.issued_at + 1.6 * token.lifetime:
                producer.send(topic, str(sent).encode()).result(30)
                sent += 1
                time.sleep(0.05)
        finally:
            pause.cancel()
            resume.join()
            cluster.oauth.resume()
        metrics = producer.metrics()
    assert metrics["network"]["connections"]["closed"] == closed
    assert logins(metrics) > first_logins  # the session went on past the first token's expiry
    assert not dropped_or_refused(metrics)
    assert len(consume_all(options, topic, sent + 1)) == sent + 1


def test_the_security_guides_oauth_examples_run(cluster: KafkaCluster) -> None:
    """docs/security.md's OAUTHBEARER examples, run as written against this listener (the guide's
    placeholders replaced), each in a fresh interpreter."""
    text = (ROOT / "docs/security.md").read_text()
    blocks = re.findall(
        r"<!-- no-test: [^>]*test_oauth_kafka\.py[^>]*-->\s*\n```python\n(.*?)```", text, re.S
    )
    assert blocks, "docs/security.md has no OAUTHBEARER example marked for this test"
    info = cluster.describe()["oauth"]
    for block in blocks:
        code = (
            block.replace("broker.example.com:9093", info["bootstrap"])
            .replace("https://idp.example.com/oauth2/token", info["token_endpoint"])
            .replace("my-client-secret", info["client_secret"])
            .replace('"SASL_SSL"', '"SASL_PLAINTEXT"')
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
        )
        assert result.returncode == 0, f"{block}\n--- stderr:\n{result.stderr[-3000:]}"


def test_the_cli_logs_in_with_javas_names(cluster: KafkaCluster) -> None:
    info = cluster.describe()["oauth"]
    topic = make_topic(cluster)
    command = [
        sys.executable,
        "-m",
        "kafka_core.cli",
        "topics",
        "list",
        "--json",
        "--bootstrap-servers",
        info["bootstrap"],
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=OAUTHBEARER",
        "-X",
        f"sasl.oauthbearer.token.endpoint.url={info['token_endpoint']}",
        "-X",
        f"sasl.oauthbearer.client.credentials.client.id={info['client_id']}",
        "-X",
        f"sasl.oauthbearer.client.credentials.client.secret={info['client_secret']}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert topic in result.stdout
    assert info["client_secret"] not in result.stdout + result.stderr


def test_the_share_consumer_and_the_transport_take_the_same_options(cluster: KafkaCluster) -> None:
    from fakes.share_kafka import share_setup

    from kafka_core import KafkaShareConsumer, KafkaStreamTransport

    options = oauth(cluster)
    topic, group = share_setup(cluster, 3, prefix="oauth-share")
    values: list[bytes | None] = []
    with KafkaShareConsumer(topic, group_id=group, **options) as consumer:
        deadline = time.monotonic() + 60
        while len(values) < 3 and time.monotonic() < deadline:
            values += [m.value for m in consumer.poll(timeout_ms=500)]
    assert sorted(v for v in values if v is not None) == [b"0", b"1", b"2"]
    with KafkaStreamTransport(**options) as transport:
        assert transport.publish(topic, b"via-transport").offset == 3


def test_spark_writes_and_reads_with_javas_oauth_options(cluster: KafkaCluster) -> None:
    """The Spark source and sink log in with the options Spark's connector takes (``kafka.``-prefixed
    Java names), each executor's client fetching its own tokens from the provider."""
    need_module("pyspark")
    from spark_cluster import local_session

    topic = make_topic(cluster)
    info = cluster.describe()["oauth"]
    options = {
        "kafka.bootstrap.servers": info["bootstrap"],
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": info["token_endpoint"],
        "kafka.sasl.oauthbearer.client.credentials.client.id": info["client_id"],
        "kafka.sasl.oauthbearer.client.credentials.client.secret": info["client_secret"],
    }
    with local_session("local[2]", "kafka_core-oauth") as spark:
        df = spark.range(300).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
        # Delivery bounded well inside the test's timeout: once in CI (load 24) this write hung past
        # pytest's 180 s, under the default 120 s delivery timeout, and the interrupted py4j call
        # broke the next Spark tests of that worker; a failure must come back with its cause.
        writer = (
            df.repartition(2)
            .write.format("kafka_core")
            .option("topic", topic)
            .option("kafka.delivery.timeout.ms", "45000")
            .option("kafka.request.timeout.ms", "15000")
        )
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.mode("append").save()
        reader = spark.read.format("kafka_core").option("subscribe", topic)
        for k, v in options.items():
            reader = reader.option(k, v)
        rows = reader.load().selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect()
    assert sorted(int(r.v) for r in rows) == list(range(300))
    assert all(r.k == r.v for r in rows)


def test_a_tls_client_on_this_plain_listener_is_told_at_once(cluster: KafkaCluster) -> None:
    """docs/security.md's SASL_SSL example followed against the dev broker, whose OAUTHBEARER
    listener is plain (its entry says SASL_PLAINTEXT): the handshake's failure is final and names
    the cause, not "cannot connect to HOST:PORT: " after the client's whole timeout."""
    options = oauth(cluster, security_protocol="SASL_SSL")
    with (
        KafkaAdmin(**options, api_timeout_ms=120_000) as admin,
        pytest.raises(KafkaAuthenticationError, match="does not speak TLS") as info,
    ):
        admin.list_topics()
    assert "SASL_PLAINTEXT" in str(info.value)
