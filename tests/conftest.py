"""Test set-up: the codec implementation check and the real broker the integration tests use.

``mock_cluster`` is librdkafka's 3-broker mock cluster (kafka_core/devtools/mockcluster.py), fresh per test.
The broker is ``KAFKA_BOOTSTRAP_SERVERS`` when set (any cluster; Apache Kafka unless
``KAFKA_BROKER_FLAVOR`` says otherwise), else the one ``KAFKA_CORE_TEST_BROKER`` names, started
once per session: ``tansu`` (the default), ``kafka`` (Apache Kafka from its Maven Central jars,
``KAFKA_CORE_KAFKA_VERSION`` or the newest supported) or ``seaweedfs`` (the SeaweedFS Kafka
gateway, ``$SEAWEEDFS_GATEWAY_BIN`` or built from kafka_core/devtools/brokers/seaweedfs_gateway). ``kafka_three`` is a three-node Apache
Kafka cluster, started on demand for the replication tests. A broker that cannot be had fails the
run, in CI or not; only ``KAFKA_CORE_ALLOW_SKIP=1`` makes it a skip, named in the summary
(tests/prerequisites.py).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
import quick_jvm
import xdist_scheduling
from fakes.patience import shortened
from fakes.topics import wait_writable
from hypothesis import settings
from prerequisites import ALLOW_SKIP, skips_allowed, summary_lines, unavailable
from report_guard import with_line_numbers

import kafka_core.codec
from kafka_core._env import env_flag
from kafka_core.devbroker import (
    KAFKA_VERSION,
    BrokerStartError,
    KafkaCluster,
    OAuthServer,
    SeaweedGateway,
    TansuBroker,
)
from kafka_core.devtools.kerberos import KerberosRealm, kerberos_available
from kafka_core.devtools.mockcluster import MockCluster, MockClusterError

quick_jvm.use_quick_jvms()  # before any broker or Spark starts, in this process and what it spawns

# No per-example deadline: it is a timing assertion, and on a loaded 2-core CI machine an example of
# a few milliseconds can take 200 (a test never asserts a timing). A test's own @settings keep the rest.
settings.register_profile("kafka_core", deadline=None)
settings.load_profile("kafka_core")

EXTERNAL_BROKER = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
EMBEDDED = os.environ.get("KAFKA_CORE_TEST_BROKER", "tansu").strip().lower()
if EMBEDDED not in ("tansu", "kafka", "seaweedfs"):
    raise pytest.UsageError(f"KAFKA_CORE_TEST_BROKER must be tansu, kafka or seaweedfs, not {EMBEDDED!r}")
KAFKA_TEST_VERSION = os.environ.get("KAFKA_CORE_KAFKA_VERSION", "").strip() or KAFKA_VERSION
# An external broker is Apache Kafka unless said otherwise.
BROKER_FLAVOR = os.environ.get("KAFKA_BROKER_FLAVOR", "kafka" if EXTERNAL_BROKER else EMBEDDED)
ON_TANSU = BROKER_FLAVOR == "tansu"
ON_SEAWEED = BROKER_FLAVOR == "seaweedfs"
# How the compatibility report (tools/compat_table.py) names each embedded server's column.
_SERVER_NAMES = {
    "kafka": f"Apache Kafka {KAFKA_TEST_VERSION}",
    "tansu": "Tansu",
    "seaweedfs": "SeaweedFS gateway",
}


def pytest_report_header(config: pytest.Config) -> list[str]:
    if EXTERNAL_BROKER:
        broker = EXTERNAL_BROKER
    elif EMBEDDED == "kafka":
        broker = f"embedded Apache Kafka {KAFKA_TEST_VERSION} (started on demand)"
    elif EMBEDDED == "seaweedfs":
        broker = "embedded SeaweedFS Kafka gateway (started on demand)"
    else:
        broker = "embedded tansu (started on demand)"
    header = [f"kafka_core codec: {kafka_core.codec.IMPLEMENTATION}; broker: {broker} ({BROKER_FLAVOR})"]
    if skips_allowed():
        header.append(f"{ALLOW_SKIP}=1: tests whose prerequisites are missing skip instead of failing")
    return header


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The skips KAFKA_CORE_ALLOW_SKIP allowed, in a section of their own that a green run cannot hide."""
    reasons = [
        str(report.longrepr[2])
        for report in terminalreporter.stats.get("skipped", ())
        if isinstance(report.longrepr, tuple)
    ]
    lines = summary_lines(reasons)
    if lines:
        terminalreporter.section("skipped for want of a prerequisite", sep="!", yellow=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line, yellow=True, bold=True)


def _broker_unavailable(what: str, exc: Exception) -> NoReturn:
    unavailable(what, f"it did not start: {exc}")


def pytest_configure(config: pytest.Config) -> None:
    if skips_allowed() and env_flag("CI"):
        raise pytest.UsageError(f"{ALLOW_SKIP} is set under CI=true: CI runs every test, it skips none")
    config.addinivalue_line(
        "markers",
        "seaweed_deviation(reason): asserts Apache Kafka's behaviour where the SeaweedFS Kafka "
        "gateway differs (strict xfail on the gateway only)",
    )
    if env_flag("KAFKA_CORE_REQUIRE_EXTENSION") and kafka_core.codec.IMPLEMENTATION != "cython":
        raise pytest.UsageError(
            "KAFKA_CORE_REQUIRE_EXTENSION is set but the Cython codec did not load "
            f"(implementation: {kafka_core.codec.IMPLEMENTATION})"
        )
    if env_flag("KAFKA_CORE_PURE_PYTHON") and kafka_core.codec.IMPLEMENTATION != "python":
        raise pytest.UsageError("KAFKA_CORE_PURE_PYTHON is set but the codec is not the Python twin")


# The compatibility subset each server is measured by (docs/compatibility.md): the core of what a
# client needs of a broker. Module name -> the capability the table calls it.
COMPAT_MODULES = {
    "test_producer": "produce",
    "test_consumer": "consume",
    "test_consumer_group": "classic groups",
    "test_consumer_kip848": "KIP-848 groups",
    "test_admin": "admin",
    "test_transactions": "transactions",
    "test_consumer_transactions": "read_committed",
}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: a module per worker at a time, the three-node cluster's modules on one."""
    return xdist_scheduling.make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist_scheduling.check_groups(items)
    for item in items:
        if "bootstrap_servers" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        module = getattr(item, "module", None)
        if module is not None and module.__name__.rsplit(".", 1)[-1] in COMPAT_MODULES:
            item.add_marker(pytest.mark.compat)
        marker = item.get_closest_marker("tansu_deviation")
        if marker is not None and ON_TANSU:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "Tansu deviates")
            item.add_marker(pytest.mark.xfail(reason=f"Tansu deviation: {reason}", strict=True))
        marker = item.get_closest_marker("seaweed_deviation")
        if marker is not None and ON_SEAWEED:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "the gateway deviates")
            strict = marker.kwargs.get("strict", True)
            item.add_marker(pytest.mark.xfail(reason=f"SeaweedFS gateway deviation: {reason}", strict=strict))
        needs = item.get_closest_marker("needs_kafka")
        if needs is not None and BROKER_FLAVOR == "kafka" and not EXTERNAL_BROKER:
            wanted, reason = needs.args[0], needs.args[1] if len(needs.args) > 1 else "a newer Kafka"
            if _version_tuple(KAFKA_TEST_VERSION) < _version_tuple(wanted):
                item.add_marker(
                    pytest.mark.xfail(
                        reason=f"Kafka {KAFKA_TEST_VERSION} lacks {reason} (since {wanted})", strict=True
                    )
                )


_COMPAT_RESULTS: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``KAFKA_CORE_COMPAT_REPORT`` set, note each test's outcome for tools/compat_table.py."""
    if not os.environ.get("KAFKA_CORE_COMPAT_REPORT"):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "xfailed" if hasattr(report, "wasxfail") and report.outcome == "skipped" else report.outcome
        _COMPAT_RESULTS[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("KAFKA_CORE_COMPAT_REPORT")
    # Under xdist the controller sees every worker's reports and writes the file; a worker,
    # which saw only its own tests, does not.
    if path and _COMPAT_RESULTS and not hasattr(session.config, "workerinput"):
        import json

        broker = EXTERNAL_BROKER or _SERVER_NAMES[EMBEDDED]
        modules = {
            nodeid: COMPAT_MODULES.get(nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py"), "other")
            for nodeid in _COMPAT_RESULTS
        }
        with open(path, "w") as out:
            json.dump({"broker": broker, "results": _COMPAT_RESULTS, "capabilities": modules}, out, indent=1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Before pytest renders a failure: mend tracebacks it cannot render (see report_guard)."""
    if call.excinfo is not None and with_line_numbers(call.excinfo.value):
        exc = call.excinfo.value
        call.excinfo = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))  # type: ignore[arg-type]


@contextlib.contextmanager
def _started_kafka(nodes: int, what: str) -> Iterator[KafkaCluster]:
    """An Apache Kafka of ``nodes`` nodes, started, closed after; one that cannot start fails the
    test (a skip only under KAFKA_CORE_ALLOW_SKIP=1), naming ``what`` needed it."""
    cluster = KafkaCluster(nodes, version=KAFKA_TEST_VERSION)
    try:
        cluster.start()
    except BrokerStartError as exc:
        cluster.close()
        _broker_unavailable(what, exc)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster | None]:
    """The embedded one-node Apache Kafka when ``KAFKA_CORE_TEST_BROKER=kafka``, else None."""
    if EXTERNAL_BROKER or EMBEDDED != "kafka":
        yield None
        return
    with _started_kafka(1, f"Apache Kafka {KAFKA_TEST_VERSION}") as cluster:
        yield cluster


# Tokens of the session's OIDC provider live this long: shorter than the OAuth tests, so that they
# see tokens renewed and connections re-authenticated (KIP-368) while records flow.
OAUTH_TOKEN_SECONDS = 10


@pytest.fixture(scope="session")
def oauth_server() -> Iterator[OAuthServer]:
    """A real OIDC provider (NAV's mock-oauth2-server, from Maven Central) on loopback, once per
    run: the OAuth tests are one module, run by one worker (tests/xdist_scheduling.py)."""
    server = OAuthServer(token_expiry_s=OAUTH_TOKEN_SECONDS)
    try:
        server.start()
    except BrokerStartError as exc:
        server.close()
        _broker_unavailable("an OIDC provider (mock-oauth2-server)", exc)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def kafka_three() -> Iterator[KafkaCluster]:
    """A three-node Apache Kafka cluster (replication factor 3, min.insync.replicas 2), started
    on demand whatever the session's broker, for the replication and failover tests."""
    with _started_kafka(3, "a three-node Apache Kafka cluster") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def real_kafka(kafka_cluster: KafkaCluster | None) -> Iterator[KafkaCluster]:
    """Apache Kafka whatever the session's broker: the session's own when it is the embedded
    Kafka, else a one-node cluster started on demand. For tests of Kafka's behaviour that
    another broker (Tansu, the mock) lacks, so that they run for real on every session."""
    if kafka_cluster is not None:
        yield kafka_cluster
        return
    with _started_kafka(1, f"Apache Kafka {KAFKA_TEST_VERSION}") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kerberos_realm() -> Iterator[KerberosRealm]:
    """A throwaway MIT Kerberos realm (kafka_core/devtools/kerberos.py), its KDC started once for
    the run. The test process uses it and only it: KRB5_CONFIG and a ticket cache of its own."""
    if not kerberos_available():
        unavailable(
            "MIT Kerberos's KDC (krb5kdc, kdb5_util, kadmin.local)", "not installed: run ci/kerberos.sh"
        )
    realm = KerberosRealm()
    try:
        realm.start()
    except BrokerStartError as exc:
        realm.close()
        unavailable("a Kerberos realm", exc)
    try:
        with pytest.MonkeyPatch.context() as env:
            for name, value in realm.env.items():
                env.setenv(name, value)
            yield realm
    finally:
        realm.close()


@pytest.fixture(scope="session")
def seaweed_gateway() -> Iterator[SeaweedGateway | None]:
    """The embedded SeaweedFS Kafka gateway when ``KAFKA_CORE_TEST_BROKER=seaweedfs``, else None.
    One per session: it takes some 30 s to be ready (its MQ broker must win a balancer lock)."""
    if EXTERNAL_BROKER or EMBEDDED != "seaweedfs":
        yield None
        return
    gateway = SeaweedGateway()
    try:
        gateway.start()
    except BrokerStartError as exc:
        gateway.close()
        _broker_unavailable("the SeaweedFS Kafka gateway", exc)
    try:
        yield gateway
    finally:
        gateway.close()


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker | None]:
    """The embedded Tansu, or None when the session's broker is another (external, Kafka, the
    SeaweedFS gateway)."""
    if EXTERNAL_BROKER or EMBEDDED != "tansu":
        yield None
        return
    try:
        broker = TansuBroker().start()
    except BrokerStartError as exc:
        _broker_unavailable("a broker", exc)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def persistent_tansu(
    tansu: TansuBroker | None, kafka_cluster: KafkaCluster | None
) -> Iterator[TansuBroker | KafkaCluster]:
    """A restartable broker of the test module's own, stopped and restarted at will while the
    session broker is left alone: a persistent Tansu (S3 on moto_server), or on Apache Kafka a
    one-node cluster of its own (Kafka keeps its log on disk across restarts)."""
    if kafka_cluster is not None:
        with _started_kafka(1, "a restartable Apache Kafka") as cluster:
            yield cluster
        return
    if tansu is None:
        pytest.skip(
            "these tests stop the broker: they need an embedded Tansu or Apache Kafka, and an "
            "external KAFKA_BOOTSTRAP_SERVERS cluster or the SeaweedFS gateway session has neither"
        )
    broker: TansuBroker | None = None
    try:
        broker = TansuBroker.persistent()
        broker.start()
    except BrokerStartError as exc:
        if broker is not None:
            broker.close()
        pytest.fail(f"persistent Tansu (S3 on moto_server) did not start: {exc}", pytrace=False)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def bootstrap_servers(request: pytest.FixtureRequest) -> str:
    """The session's broker; only the one ``KAFKA_CORE_TEST_BROKER`` names is started."""
    if EXTERNAL_BROKER:
        return EXTERNAL_BROKER
    fixture = {"kafka": "kafka_cluster", "tansu": "tansu", "seaweedfs": "seaweed_gateway"}[EMBEDDED]
    broker: KafkaCluster | TansuBroker | SeaweedGateway = request.getfixturevalue(fixture)
    return broker.bootstrap


@pytest.fixture(scope="session")
def on_tansu() -> bool:
    return ON_TANSU


# How long a test expected to fail on the SeaweedFS gateway (seaweed_deviation, a strict xfail
# there) waits, as a share of the full wait: it fails on what the gateway lacks in seconds instead
# of sitting out each wait (fakes.patience).
SEAWEED_DEVIATION_PATIENCE = 0.2


@pytest.fixture(autouse=True)
def _short_waits_for_what_the_gateway_lacks(request: pytest.FixtureRequest) -> Iterator[None]:
    if ON_SEAWEED and request.node.get_closest_marker("seaweed_deviation") is not None:
        with shortened(SEAWEED_DEVIATION_PATIENCE):
            yield
    else:
        yield


@pytest.fixture
def new_topic(
    bootstrap_servers: str, tansu: TansuBroker | None, seaweed_gateway: SeaweedGateway | None
) -> Callable[..., str]:
    """Create a fresh, uniquely named topic (3 partitions by default) and return its name."""

    def create(partitions: int = 3, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        if tansu is not None:
            tansu.create_topic(name, partitions)
        elif seaweed_gateway is not None:
            # CreateTopics through kafka_core's admin; the gateway's MQ broker then places each
            # partition, so the topic is handed out once every partition answers ListOffsets.
            seaweed_gateway.create_topic(name, partitions)
            wait_writable(bootstrap_servers, name, partitions)
        else:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap_servers})
            # -1: the cluster's default.replication.factor (1 on the embedded Kafka)
            futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=-1)])
            futures[name].result(30)
            _wait_for_leaders(admin, name, partitions)
            wait_writable(bootstrap_servers, name, partitions)
        return name

    return create


def _wait_for_leaders(admin: Any, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Apache Kafka answers CreateTopics once the controller has the topic; the brokers learn of
    it a moment later, and name a leader a moment before that leader takes writes
    (fakes.topics.wait_writable). A record sent before, with acks=0, is dropped without a word,
    so a test topic is handed out only once every partition has a leader that takes writes."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        ready = meta is not None and meta.error is None and len(meta.partitions) == partitions
        if ready and all(p.leader >= 0 and p.error is None for p in meta.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic!r} has no leader for every partition after {timeout} s")
        time.sleep(0.05)


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A fresh 3-broker librdkafka mock cluster, destroyed (with all its data) after the test.

    No skip: confluent-kafka is a test dependency, so a library that will not load is a failure.
    """
    try:
        cluster = MockCluster(3)
    except MockClusterError as exc:
        pytest.fail(f"librdkafka's mock cluster is unavailable: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The URL of a Confluent-API Schema Registry, once per session: ``KAFKA_CORE_SCHEMA_REGISTRY_URL``
    when set (a real registry), else the dev registry (kafka_core/devtools/registry) in this process.
    Tests use subjects of their own (``unique_subject``), so they share it."""
    external = os.environ.get("KAFKA_CORE_SCHEMA_REGISTRY_URL", "").strip()
    if external:
        yield external
        return
    from kafka_core.devtools.registry import RegistryServer

    with RegistryServer() as registry:
        yield registry.url


@pytest.fixture
def unique_subject() -> Callable[[str], str]:
    """A subject name no other test uses: ``unique_subject("orders-value")``."""
    return lambda base: f"{base}-{uuid.uuid4().hex[:10]}"
