"""Client metrics: cheap counters behind every client's ``metrics()`` snapshot (a plain dict).

``kafka_core.metrics.prometheus`` exposes those snapshots to Prometheus (the optional extra
``kafka-core[metrics]``); docs/metrics.md lists every key.
"""

from kafka_core.metrics.registry import (
    LATENCY_BOUNDS_S,
    ConsumerMetrics,
    NetworkMetrics,
    ProducerMetrics,
    RequestStats,
    SizeStats,
)

__all__ = [
    "LATENCY_BOUNDS_S",
    "ConsumerMetrics",
    "NetworkMetrics",
    "ProducerMetrics",
    "RequestStats",
    "SizeStats",
]
