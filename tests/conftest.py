"""Test set-up: the codec implementation check and the real broker the integration tests use.

``mock_cluster`` is librdkafka's 3-broker mock cluster (kafka_core/chaos/mockcluster.py), fresh per test.
The broker is ``KAFKA_BOOTSTRAP_SERVERS`` when set (e.g. Apache Kafka from
docker-compose.kafka.yml), else an embedded Tansu started once per session. Under ``CI=true`` a
broker that cannot be had fails the run; it is never skipped there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from report_guard import with_line_numbers

import kafka_core.codec
from kafka_core._env import env_flag
from kafka_core.chaos.mockcluster import MockCluster, MockClusterError
from kafka_core.devbroker import BrokerStartError, TansuBroker

IN_CI = env_flag("CI")
EXTERNAL_BROKER = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
# The embedded broker is Tansu; an external one is Apache Kafka unless said otherwise.
BROKER_FLAVOR = os.environ.get("KAFKA_BROKER_FLAVOR", "kafka" if EXTERNAL_BROKER else "tansu")
ON_TANSU = BROKER_FLAVOR == "tansu"


def pytest_report_header(config: pytest.Config) -> list[str]:
    broker = EXTERNAL_BROKER or "embedded tansu (started on demand)"
    return [f"kafka_core codec: {kafka_core.codec.IMPLEMENTATION}; broker: {broker} ({BROKER_FLAVOR})"]


def pytest_configure(config: pytest.Config) -> None:
    if env_flag("KAFKA_CORE_REQUIRE_EXTENSION") and kafka_core.codec.IMPLEMENTATION != "cython":
        raise pytest.UsageError(
            "KAFKA_CORE_REQUIRE_EXTENSION is set but the Cython codec did not load "
            f"(implementation: {kafka_core.codec.IMPLEMENTATION})"
        )
    if env_flag("KAFKA_CORE_PURE_PYTHON") and kafka_core.codec.IMPLEMENTATION != "python":
        raise pytest.UsageError("KAFKA_CORE_PURE_PYTHON is set but the codec is not the Python twin")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "bootstrap_servers" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        marker = item.get_closest_marker("tansu_deviation")
        if marker is not None and ON_TANSU:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "Tansu deviates")
            item.add_marker(pytest.mark.xfail(reason=f"Tansu deviation: {reason}", strict=True))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Before pytest renders a failure: mend tracebacks it cannot render (see report_guard)."""
    if call.excinfo is not None and with_line_numbers(call.excinfo.value):
        exc = call.excinfo.value
        call.excinfo = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker | None]:
    """The embedded broker object, or None when the broker comes from the environment."""
    if EXTERNAL_BROKER:
        yield None
        return
    try:
        broker = TansuBroker().start()
    except BrokerStartError as exc:
        if IN_CI:
            pytest.fail(f"CI needs a broker and none could be started: {exc}", pytrace=False)
        pytest.skip(f"no broker: {exc}")
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def persistent_tansu(tansu: TansuBroker | None) -> Iterator[TansuBroker]:
    """A persistent Tansu of the test module's own (S3 on moto_server), stopped and restarted at
    will while the session broker is left alone."""
    if tansu is None:
        pytest.skip(
            "these tests stop the broker: they need the embedded Tansu, and an external "
            "KAFKA_BOOTSTRAP_SERVERS cluster cannot be stopped from here"
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
def bootstrap_servers(tansu: TansuBroker | None) -> str:
    return EXTERNAL_BROKER or tansu.bootstrap  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def on_tansu() -> bool:
    return ON_TANSU


@pytest.fixture
def new_topic(bootstrap_servers: str, tansu: TansuBroker | None) -> Callable[..., str]:
    """Create a fresh, uniquely named topic (3 partitions by default) and return its name."""

    def create(partitions: int = 3, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        if tansu is not None:
            tansu.create_topic(name, partitions)
        else:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap_servers})
            futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
            futures[name].result(30)
        return name

    return create


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
