"""OpenTelemetry tracing for kafka_core (the ``[otel]`` extra: opentelemetry-api).

Off unless turned on: nothing in the clients imports this package or opentelemetry, and their
methods are the untraced ones until :class:`KafkaCoreInstrumentor` ``.instrument()`` (or
``instrument_producer``/``instrument_consumer`` on one object) wraps them. Spans follow the
contrib instrumentation of confluent-kafka (names, kinds, attributes); the W3C trace context
travels in the ``traceparent``/``tracestate`` record headers. docs/observability.md has the shapes.
"""

from __future__ import annotations

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("kafka_core.tracing needs opentelemetry-api: pip install 'kafka-core[otel]'") from exc

from kafka_core.tracing.instrumentor import KafkaCoreInstrumentor
from kafka_core.tracing.propagation import extract_context, inject_headers, row_contexts

__all__ = ["KafkaCoreInstrumentor", "extract_context", "inject_headers", "row_contexts"]
