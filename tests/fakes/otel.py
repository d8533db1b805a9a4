"""The OpenTelemetry SDK set up for the tracing tests: an in-memory exporter, a tracer provider
writing to it, and kafka_core instrumented with that provider for the test (undone after it).

The fixtures are imported by the test modules that use them (``from fakes.otel import
exporter_fixture, ...``); they are named ``exporter``, ``provider`` and ``instrumented``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kafka_core.tracing import KafkaCoreInstrumentor


@pytest.fixture(name="exporter")
def exporter_fixture() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(name="provider")
def provider_fixture(exporter: InMemorySpanExporter) -> TracerProvider:
    """A provider of the test's own (never the global one), each span exported as it ends."""
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp


@pytest.fixture(name="instrumented")
def instrumented_fixture(provider: TracerProvider) -> Iterator[KafkaCoreInstrumentor]:
    """kafka_core's clients traced into ``provider`` during the test."""
    inst = KafkaCoreInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        yield inst
    finally:
        inst.uninstrument()


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans called ``name``, in the order they ended."""
    return [s for s in exporter.get_finished_spans() if s.name == name]
