"""SASL GSSAPI (Kerberos) against Apache Kafka's own GSSAPI listener, with a throwaway MIT realm
(the session's ``kerberos_realm``, its KDC started once for the run): a principal logs in with its
keytab or from a ticket cache and produces, consumes and administers; a stale keytab, a principal
the KDC does not know and a wrong service name are refused at once, naming GSSAPI and the cause;
ACLs apply to the Kerberos principal (``alice@REALM`` is ``User:alice``); no keytab's path or
bytes reach logs, reprs or metrics; the guide's GSSAPI example runs as written.

The cluster is this module's own (one node with the GSSAPI listener, as the dev broker's), so
these tests run whatever the session's broker. Timings are hang guards, never measurements.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.cli import run as run_cli
from fakes.topics import listing_with
from prerequisites import unavailable

from kafka_core import KafkaAdmin, KafkaConsumer, KafkaProducer, NewTopic
from kafka_core.admin import AclBinding, AclBindingFilter, AclOperation, AclResourceType
from kafka_core.devbroker import BrokerStartError, KafkaCluster
from kafka_core.devtools.kerberos import KerberosRealm
from kafka_core.errors import KafkaAuthenticationError, KafkaError, KafkaProtocolError
from kafka_core.producer import RecordMetadata

pytestmark = pytest.mark.timeout(300)

GUARD = 60.0  # a hang guard: every refusal here comes within seconds
REAUTH_MS = 3_000  # the GSSAPI listener's sessions: connections re-authenticate in band (KIP-368)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(kerberos_realm: KerberosRealm) -> Iterator[KafkaCluster]:
    try:
        import gssapi  # noqa: F401
    except ImportError as exc:
        unavailable("the gssapi package", f"{exc} (pip install -e '.[gssapi]'; ci/bootstrap.sh does)")
    overrides = {
        "auto.create.topics.enable": "false",
        "listener.name.gssapi.gssapi.connections.max.reauth.ms": str(REAUTH_MS),
    }
    own = KafkaCluster(1, kerberos=kerberos_realm, overrides=overrides)
    try:
        own.start()
    except BrokerStartError as exc:
        own.close()
        unavailable("Apache Kafka with a GSSAPI listener", f"it did not start: {exc}")
    try:
        yield own
    finally:
        own.close()


@pytest.fixture
def kafka_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="kafka_core")
    return caplog


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def gssapi_options(
    cluster: KafkaCluster, principal: str | None, keytab: Path | None, **kerberos: Any
) -> dict[str, Any]:
    """Client options for the GSSAPI listener; ``kerberos``: more ``sasl_kerberos_*`` options."""
    assert cluster.kerberos is not None
    return {
        "bootstrap_servers": cluster.listeners["GSSAPI"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_principal": principal,
        "sasl_kerberos_keytab": str(keytab) if keytab else None,
        **kerberos,
    }


def client(cluster: KafkaCluster, name: str = "admin", **kerberos: Any) -> dict[str, Any]:
    assert cluster.kerberos is not None
    principal, keytab = cluster.kerberos.client(name)
    return gssapi_options(cluster, principal, keytab, **kerberos)


def make_topic(cluster: KafkaCluster) -> str:
    name = unique("krb")
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap) as admin:  # PLAINTEXT: a super user
        admin.create_topics([NewTopic(name, 1, 1)])[name].result()
    return name


def consume(options: dict[str, Any], topic: str, group: str, want: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    with KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **options) as consumer:
        deadline = time.monotonic() + GUARD
        while len(values) < want and time.monotonic() < deadline:
            values += [m.value for m in consumer.poll(timeout_ms=500)]
    return values


def assert_no_keytab(keytabs: list[Path], *texts: str) -> None:
    """Neither a keytab's path nor any 16-byte run of its contents (hex or raw) in ``texts``."""
    for keytab in keytabs:
        data = keytab.read_bytes()
        pieces = [str(keytab), keytab.name]
        pieces += [data[i : i + 16].hex() for i in range(0, len(data) - 16, 16)]
        pieces += [repr(data[i : i + 16])[2:-1] for i in range(0, len(data) - 16, 16)]
        for text in texts:
            for piece in pieces:
                assert piece not in text, f"keytab {keytab.name} leaked into: {text[:300]!r}"


def test_a_principal_with_its_keytab_administers_produces_and_consumes(
    cluster: KafkaCluster, kafka_logs: Any
) -> None:
    options = client(cluster, "admin")
    topic = unique("krb")
    with KafkaAdmin(**options) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 1)])[topic].error is None
        assert topic in listing_with(admin, [topic])
        texts = [repr(admin), str(admin.metrics()), str(vars(admin.client))]
    with KafkaProducer(**options) as producer:
        metas = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(4)]
        producer.flush(GUARD)
        assert all(isinstance(m.result(0), RecordMetadata) for m in metas)
        texts += [repr(producer), str(producer.metrics())]
    values = consume(options, topic, unique("g"), 4)
    assert sorted(v or b"" for v in values) == [b"v0", b"v1", b"v2", b"v3"]
    assert "GSSAPI" in kafka_logs.text or kafka_logs.records  # the connections were logged at DEBUG
    assert cluster.kerberos is not None
    assert_no_keytab(list(cluster.kerberos.client_keytabs.values()), kafka_logs.text, *texts)


def sasl_authenticates(metrics: dict[str, Any]) -> int:
    return sum(v["count"] for v in metrics["network"]["requests"].get("SASL_AUTHENTICATE", {}).values())


def test_busy_connections_re_authenticate_in_band_and_lose_nothing(cluster: KafkaCluster) -> None:
    """The listener ends sessions after REAUTH_MS: the producer's connection logs in again with a
    fresh GSS-API context (the tickets from the process's cache) while records flow."""
    options = client(cluster, "admin")
    topic = make_topic(cluster)
    sent = 0
    with KafkaProducer(**options, linger_ms=5) as producer:
        producer.send(topic, b"0").result(GUARD)
        sent, first = 1, sasl_authenticates(producer.metrics())
        connections = producer.metrics()["network"]["connections"]["created"]
        deadline = time.monotonic() + GUARD
        while sasl_authenticates(producer.metrics()) < 2 * first:  # one more whole exchange
            assert time.monotonic() < deadline, "no re-authentication within the guard"
            producer.send(topic, b"%d" % sent).result(GUARD)
            sent += 1
        # in band: on the connections it had, none dropped and made again
        assert producer.metrics()["network"]["connections"]["created"] == connections
    values = consume(options, topic, unique("g"), sent)
    assert sorted(int(v or b"-1") for v in values) == list(range(sent))


def test_a_ticket_cache_logs_in_without_a_keytab(
    cluster: KafkaCluster, kerberos_realm: KerberosRealm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kinit first, then no keytab at all: the principal of KRB5CCNAME's cache logs in."""
    assert cluster.kerberos is not None
    principal, keytab = cluster.kerberos.client("admin")
    cache = tmp_path / "ccache"
    kinit = shutil.which("kinit")
    assert kinit is not None, "kinit (krb5-user) is missing: run ci/kerberos.sh"
    subprocess.run([kinit, "-k", "-t", str(keytab), "-c", f"FILE:{cache}", principal], check=True, timeout=30)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    options = gssapi_options(cluster, principal=None, keytab=None)
    with KafkaAdmin(**options) as admin:
        assert isinstance(admin.list_topics(), list | dict | set | tuple)


def test_the_host_name_option_names_the_service_when_connecting_by_address(cluster: KafkaCluster) -> None:
    """By 127.0.0.1 the service would be kafka/127.0.0.1, a principal the realm lacks;
    sasl_kerberos_domain_name (kafka-python's name) says which host's principal to ask for."""
    port = cluster.listeners["GSSAPI"].split(",")[0].rsplit(":", 1)[1]
    by_address = {**client(cluster, "admin"), "bootstrap_servers": f"127.0.0.1:{port}"}
    with KafkaAdmin(**by_address) as admin, pytest.raises(KafkaAuthenticationError) as info:
        admin.list_topics()
    assert "GSSAPI" in str(info.value) and "kafka@127.0.0.1" in str(info.value), info.value
    named = {
        **client(cluster, "admin", sasl_kerberos_domain_name="localhost"),
        "bootstrap_servers": f"127.0.0.1:{port}",
    }
    with KafkaAdmin(**named) as admin:
        assert isinstance(admin.list_topics(), list | dict | set | tuple)


def test_the_command_line_logs_in_with_x_options(cluster: KafkaCluster) -> None:
    assert cluster.kerberos is not None
    topic = make_topic(cluster)
    principal, keytab = cluster.kerberos.client("admin")
    login = ["-X", "security_protocol=SASL_PLAINTEXT", "-X", "sasl_mechanism=GSSAPI"]
    login += ["-X", f"sasl_kerberos_principal={principal}"]
    proc = run_cli(
        *login, "-X", f"sasl_kerberos_keytab={keytab}", "topics", "list", servers=cluster.listeners["GSSAPI"]
    )
    assert proc.returncode == 0 and topic in proc.stdout.decode(), proc.stderr.decode()
    _, alice_keytab = cluster.kerberos.client("alice")
    proc = run_cli(
        *login,
        "-X",
        f"sasl_kerberos_keytab={alice_keytab}",
        "topics",
        "list",
        servers=cluster.listeners["GSSAPI"],
    )
    assert proc.returncode != 0 and "SASL GSSAPI authentication" in proc.stderr.decode(), proc.stderr.decode()


# -- refusals: at once, naming GSSAPI and the cause -----------------------------------------------------


def refused(options: dict[str, Any]) -> tuple[KafkaAuthenticationError, str]:
    """The error a producer's send raises at once, and raises again on the next send; with what
    the producer shows (repr, metrics)."""
    producer = KafkaProducer(**options, max_block_ms=10_000)
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaAuthenticationError) as info:
            producer.send(unique("t"), b"x")
        assert time.monotonic() - t0 < GUARD
        with pytest.raises(KafkaAuthenticationError):
            producer.send(unique("t"), b"x")
        shown = repr(producer) + str(producer.metrics())
    finally:
        producer.close(5)
    return info.value, shown


def test_a_stale_keytab_is_refused_naming_the_cause(
    cluster: KafkaCluster, kerberos_realm: KerberosRealm, kafka_logs: Any
) -> None:
    name = unique("carol")
    keytab = kerberos_realm.principal(name)
    kerberos_realm.rekey(name)  # the keytab's key is no longer the principal's
    error, shown = refused(gssapi_options(cluster, kerberos_realm.qualified(name), keytab))
    text = str(error)
    assert text.startswith("SASL GSSAPI authentication as"), text
    assert "stale" in text and kerberos_realm.qualified(name) in text, text
    assert_no_keytab([keytab], text, repr(error), shown, kafka_logs.text)


def test_a_principal_the_kdc_does_not_know_is_refused(
    cluster: KafkaCluster, kerberos_realm: KerberosRealm, kafka_logs: Any
) -> None:
    name = unique("ghost")
    keytab = kerberos_realm.principal(name)
    kerberos_realm.delete(name)
    error, shown = refused(gssapi_options(cluster, kerberos_realm.qualified(name), keytab))
    assert "SASL GSSAPI authentication" in str(error), error
    assert "not found in Kerberos database" in str(error), error
    assert_no_keytab([keytab], str(error), shown, kafka_logs.text)


def test_a_keytab_without_the_principal_is_refused_naming_what_it_holds(cluster: KafkaCluster) -> None:
    assert cluster.kerberos is not None
    admin_principal, _ = cluster.kerberos.client("admin")
    alice_principal, alice_keytab = cluster.kerberos.client("alice")
    options = gssapi_options(cluster, admin_principal, alice_keytab)
    error, _ = refused(options)
    assert f"holds no key for {admin_principal}" in str(error) and alice_principal in str(error), error
    # the consumer's poll and the admin's calls say the same, at once and again
    with KafkaConsumer(unique("t"), group_id=unique("g"), **options) as consumer:
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(KafkaAuthenticationError, match="holds no key"):
                consumer.poll(timeout_ms=500)
            assert time.monotonic() - t0 < GUARD
    with KafkaAdmin(**options) as admin, pytest.raises(KafkaAuthenticationError, match="holds no key"):
        admin.list_topics()


def test_a_kdc_that_does_not_answer_is_named(
    cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A realm whose KDC is down (made, then stopped): the login fails at once, saying so."""
    down = KerberosRealm("DOWN.TEST", workdir=tmp_path / "down")
    down.start()
    keytab = down.principal("dave")
    down.close()  # the KDC stops; its files stay (the directory is the test's)
    monkeypatch.setenv("KRB5_CONFIG", str(down.krb5_conf))
    error, _ = refused(gssapi_options(cluster, "dave@DOWN.TEST", keytab))
    assert "GSSAPI" in str(error) and "Cannot contact any KDC for realm 'DOWN.TEST'" in str(error), error


def test_a_service_name_the_realm_lacks_is_refused(cluster: KafkaCluster) -> None:
    error, _ = refused(client(cluster, "admin", sasl_kerberos_service_name="nosuchservice"))
    assert "GSSAPI" in str(error) and "nosuchservice@localhost" in str(error), error
    assert "not found in Kerberos database" in str(error), error


# -- ACLs: the authorizer sees User:alice -------------------------------------------------------------


def eventually(attempt: Any, what: str) -> Any:
    deadline = time.monotonic() + GUARD
    while True:
        try:
            return attempt()
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing: {exc}") from exc
            time.sleep(0.2)


def test_acls_apply_to_the_kerberos_principal(cluster: KafkaCluster) -> None:
    topic = make_topic(cluster)
    group = unique("alice-group")
    alice = client(cluster, "alice")
    quick = {"max_block_ms": 10_000}
    with KafkaProducer(**alice, **quick) as producer:
        denied = producer.send(topic, b"denied").exception(GUARD)
    assert isinstance(denied, KafkaProtocolError) and denied.name == "TOPIC_AUTHORIZATION_FAILED", denied

    principal = "User:alice"  # alice@REALM, by the broker's default principal.to.local rule
    bindings = [
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.WRITE),
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.READ),
        AclBinding(AclResourceType.TOPIC, topic, principal, AclOperation.DESCRIBE),
        AclBinding(AclResourceType.GROUP, group, principal, AclOperation.READ),
    ]
    with KafkaAdmin(**client(cluster, "admin")) as admin:  # the Kerberos super user grants them
        created = admin.create_acls(bindings)
        assert all(r.error is None for r in created.values()), created
        try:

            def produce() -> RecordMetadata:
                with KafkaProducer(**alice, **quick) as producer:
                    return producer.send(topic, b"allowed").result(GUARD)

            meta = eventually(produce, "alice producing after the grant")
            assert isinstance(meta, RecordMetadata) and meta.topic == topic
            assert consume(alice, topic, group, 1) == [b"allowed"]
        finally:
            admin.delete_acls([AclBindingFilter(principal=principal)])


# -- the guide's example --------------------------------------------------------------------------------


def test_the_guide_example_runs_against_the_dev_brokers_listener(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    """docs/security.md's GSSAPI example, with the values the dev broker's JSON gives in place of
    the guide's (the block is marked no-test for test_doc_examples: it is run here)."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text[text.index("## SASL: GSSAPI (Kerberos)") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    code = match.group(1)
    info = cluster.describe()["kerberos"]
    replacements = {
        "localhost:9096": info["bootstrap"],
        "/etc/krb5.conf": info["krb5_conf"],
        "/etc/security/keytabs/admin.keytab": info["keytab"],
        "admin@EXAMPLE.COM": info["principal"],
    }
    for placeholder, value in replacements.items():
        assert placeholder in code, f"the guide's example no longer has {placeholder!r}"
        code = code.replace(placeholder, value)
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRB5")}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"the GSSAPI example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
