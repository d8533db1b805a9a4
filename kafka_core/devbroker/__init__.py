"""The documented path of the development brokers: ``python -m kafka_core.devbroker [PORT]``,
``python -m kafka_core.devbroker --broker kafka [--nodes 3] [--json]``, and
``from kafka_core.devbroker import KafkaCluster, TansuBroker, ...``.

A facade kept so those lines never change: the brokers themselves live in
:mod:`kafka_core.devtools.brokers`, with the other dev tools, apart from the client's layers.
"""

from __future__ import annotations

from kafka_core.devtools.brokers import (
    KAFKA_VERSION,
    OLDEST_KAFKA_VERSION,
    BrokerStartError,
    KafkaCluster,
    KafkaNode,
    OAuthServer,
    S3Emulator,
    SeaweedGateway,
    TansuBroker,
    TestUser,
    broker_from_env,
    free_port,
    kafka_classpath,
    seaweedfs_gateway_binary,
    tansu_binary,
)
from kafka_core.devtools.kerberos import KerberosRealm, kerberos_available

__all__ = [
    "KAFKA_VERSION",
    "OLDEST_KAFKA_VERSION",
    "BrokerStartError",
    "KafkaCluster",
    "KafkaNode",
    "KerberosRealm",
    "OAuthServer",
    "S3Emulator",
    "SeaweedGateway",
    "TansuBroker",
    "TestUser",
    "broker_from_env",
    "free_port",
    "kafka_classpath",
    "kerberos_available",
    "seaweedfs_gateway_binary",
    "tansu_binary",
]
