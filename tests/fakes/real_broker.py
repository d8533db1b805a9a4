"""The session's Apache Kafka in place of librdkafka's mock cluster, for the tests that assert
Kafka's behaviour where the mock deviates from it (strict xfails on the mock).

``mock_or_kafka(reason)`` parametrizes a test's ``cluster`` fixture (indirect) over the mock, a
strict xfail with ``reason``, and the real broker; the module's ``cluster`` fixture hands out
``real_or_mock(request, mock)``. On a Tansu session the real-broker run goes to a one-node
Apache Kafka started for it (the ``real_kafka`` fixture): the behaviour is Kafka's.
"""

from __future__ import annotations

from typing import Any

import pytest

from fakes.topics import wait_writable


class RealKafka:
    """The part of MockCluster's interface those tests use, on the session's real broker."""

    name = "kafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(self, name: str, partitions: int = 3, replication: int = 3) -> str:
        """Create ``name`` with the cluster's default replication; returned once it takes writes."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=-1)])[name].result(
            30
        )
        wait_writable(self.bootstrap, name, partitions)
        return name


def mock_or_kafka(reason: str) -> pytest.MarkDecorator:
    """Run the test on the mock (a strict xfail: it deviates, ``reason``) and on Apache Kafka."""
    return pytest.mark.parametrize(
        "cluster",
        [pytest.param("mock", marks=pytest.mark.xfail(strict=True, reason=reason)), "kafka"],
        indirect=True,
    )


def real_or_mock(request: pytest.FixtureRequest, mock: Any) -> Any:
    """The session's Apache Kafka for a ``cluster`` parametrized "kafka", else ``mock()``."""
    if getattr(request, "param", "mock") != "kafka":
        return mock()
    if request.getfixturevalue("on_tansu"):  # Kafka's behaviour: on a Kafka of its own
        return RealKafka(request.getfixturevalue("real_kafka").bootstrap)
    return RealKafka(request.getfixturevalue("bootstrap_servers"))
