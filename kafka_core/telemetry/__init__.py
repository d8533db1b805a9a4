"""KIP-714 client metrics push: the client's ``metrics()`` sent to the brokers as OTLP.

On by default (``enable_metrics_push=True``, as the Java client's ``enable.metrics.push``); it
costs nothing against a broker without KIP-714 and one request per push interval against a
broker with no subscription for the client (docs/metrics.md, "Client metrics pushed to the
broker").
"""

from kafka_core.metrics.kip714 import MetricsCollector
from kafka_core.telemetry.otlp import Point, encode_metrics_data
from kafka_core.telemetry.push import TelemetryPusher, pusher_for, wait_instance_id

__all__ = [
    "MetricsCollector",
    "Point",
    "TelemetryPusher",
    "encode_metrics_data",
    "pusher_for",
    "wait_instance_id",
]
