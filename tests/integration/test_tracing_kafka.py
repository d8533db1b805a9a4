"""Traces across clients on Apache Kafka (``real_kafka``): confluent-kafka, aiokafka and
kafka-python each instrumented by their OpenTelemetry contrib package, kafka_core by
kafka_core.tracing, one in-memory exporter for all. A record's consume span must have its
producer span as parent or link, whichever client wrote it and whichever reads it; the share
consumer and the transport's handlers too."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

# the fixtures exporter, provider and instrumented
from fakes.otel import exporter_fixture, instrumented_fixture, provider_fixture, spans_named  # noqa: F401
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from kafka_core import KafkaConsumer, KafkaProducer, KafkaShareConsumer
from kafka_core.aio import KafkaStreamTransport
from kafka_core.client.waiting import within
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.tracing import KafkaCoreInstrumentor

pytestmark = [pytest.mark.timeout(180), pytest.mark.interop]
DEADLINE_S = 60.0


def topic_on(kafka: KafkaCluster, partitions: int = 1) -> str:
    name = f"trace-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions)
    return name


def joined(consume: ReadableSpan, produce: ReadableSpan) -> bool:
    """The consume span has the produce span as parent or as a link."""
    target = (produce.context.trace_id, produce.context.span_id)
    parent = consume.parent
    if parent is not None and (parent.trace_id, parent.span_id) == target:
        return True
    return any((link.context.trace_id, link.context.span_id) == target for link in consume.links)


def test_confluent_producer_to_kafka_core_consumer(
    real_kafka: KafkaCluster,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    instrumented: KafkaCoreInstrumentor,
) -> None:
    import confluent_kafka
    from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

    topic = topic_on(real_kafka)
    contrib = ConfluentKafkaInstrumentor()
    contrib.instrument(tracer_provider=provider)
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": real_kafka.bootstrap})
        for i in range(3):
            producer.produce(topic, b"c%d" % i)
        assert producer.flush(30) == 0
    finally:
        contrib.uninstrument()
    sends = spans_named(exporter, f"{topic} send")
    assert len(sends) == 3 and all(s.kind is SpanKind.PRODUCER for s in sends)

    consumer = KafkaConsumer(topic, bootstrap_servers=real_kafka.bootstrap, auto_offset_reset="earliest")
    try:
        got: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 3 and time.monotonic() < deadline:
            got += consumer.poll(timeout_ms=500)  # confluent's consume() shape: links
        assert len(got) == 3
        consumer.seek_to_beginning()
        for n, _ in enumerate(consumer, 1):  # confluent's poll() shape: a child of the send span
            if n == 3:
                break
    finally:
        consumer.close()
    processes = spans_named(exporter, f"{topic} process")
    batch = [p for p in processes if "messaging.message.id" not in (p.attributes or {})]
    single = [p for p in processes if "messaging.message.id" in (p.attributes or {})]
    assert {link.context.span_id for p in batch for link in p.links} == {s.context.span_id for s in sends}
    assert len(single) == 3
    for send, process in zip(sends, single, strict=True):
        assert process.parent is not None and process.parent.span_id == send.context.span_id
        assert process.context.trace_id == send.context.trace_id  # one trace
        assert joined(process, send)


def test_kafka_core_producer_to_confluent_consumer(
    real_kafka: KafkaCluster,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    instrumented: KafkaCoreInstrumentor,
) -> None:
    import confluent_kafka
    from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

    topic = topic_on(real_kafka)
    with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
        for i in range(3):
            producer.send(topic, b"k%d" % i).result(timeout=30)
    sends = spans_named(exporter, f"{topic} send")
    assert len(sends) == 3

    contrib = ConfluentKafkaInstrumentor()
    contrib.instrument(tracer_provider=provider)
    try:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": real_kafka.bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        while got < 3 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.close()
    finally:
        contrib.uninstrument()
    assert got == 3
    processes = [
        p
        for p in spans_named(exporter, f"{topic} process")
        if p.instrumentation_scope.name != "kafka_core.tracing"
    ]
    assert len(processes) == 3
    for send, process in zip(sends, processes, strict=True):
        assert joined(process, send)


def test_kafka_core_producer_to_aiokafka_and_kafka_python_consumers(
    real_kafka: KafkaCluster,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    instrumented: KafkaCoreInstrumentor,
) -> None:
    from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor
    from opentelemetry.instrumentation.kafka import KafkaInstrumentor

    topic = topic_on(real_kafka)
    with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
        producer.send_batch(topic, [b"b0", b"b1"], partition=0).result(timeout=30)  # one span, two records
        producer.send(topic, b"s2").result(timeout=30)
    batch_send, single_send = spans_named(exporter, f"{topic} send")
    expected = [batch_send, batch_send, single_send]

    aio_contrib = AIOKafkaInstrumentor()
    aio_contrib.instrument(tracer_provider=provider)
    try:
        import aiokafka

        async def read() -> None:
            consumer = aiokafka.AIOKafkaConsumer(
                topic, bootstrap_servers=real_kafka.bootstrap, auto_offset_reset="earliest"
            )
            await consumer.start()
            try:
                for _ in range(3):
                    await within(consumer.getone(), DEADLINE_S)
            finally:
                await consumer.stop()

        asyncio.run(read())
    finally:
        aio_contrib.uninstrument()
    received = spans_named(exporter, f"{topic} receive")
    assert len(received) == 3
    for send, span in zip(expected, received, strict=True):
        assert span.parent is not None and span.parent.span_id == send.context.span_id

    kp_contrib = KafkaInstrumentor()
    kp_contrib.instrument(tracer_provider=provider)
    try:
        import kafka

        consumer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=real_kafka.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=int(DEADLINE_S * 1000),
        )
        try:
            for n, _ in enumerate(consumer, 1):
                if n == 3:
                    break
        finally:
            consumer.close()
    finally:
        kp_contrib.uninstrument()
    received = spans_named(exporter, f"{topic} receive")[3:]
    assert len(received) == 3
    for send, span in zip(expected, received, strict=True):
        assert span.context.trace_id == send.context.trace_id and joined(span, send)


def test_share_consumer_spans(
    real_kafka: KafkaCluster,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    instrumented: KafkaCoreInstrumentor,
) -> None:
    from fakes.share_kafka import share_setup

    topic, group = share_setup(real_kafka, 0, prefix="trace-share")
    with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
        for i in range(4):
            producer.send(topic, b"%d" % i).result(timeout=30)
    sends = spans_named(exporter, f"{topic} send")
    consumer = KafkaShareConsumer(topic, bootstrap_servers=real_kafka.bootstrap, group_id=group)
    try:
        got: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 4 and time.monotonic() < deadline:
            got += consumer.poll(timeout_ms=500)
        assert len(got) == 4
        with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
            producer.send(topic, b"late").result(timeout=30)
        [late] = spans_named(exporter, f"{topic} send")[4:]
        for record in consumer:  # one record at a time: its own span, a child of its send span
            assert record.value == b"late"
            break
    finally:
        consumer.close()
    processes = spans_named(exporter, f"{topic} process")  # the polls' ended when iteration began
    batch = [p for p in processes if "messaging.message.id" not in (p.attributes or {})]
    [single] = [p for p in processes if "messaging.message.id" in (p.attributes or {})]
    assert batch and all(p.kind is SpanKind.CONSUMER for p in processes)
    assert {link.context.span_id for p in batch for link in p.links} == {s.context.span_id for s in sends}
    assert single.parent is not None and single.parent.span_id == late.context.span_id


def test_transport_handler_spans_chain_through_a_republish(
    real_kafka: KafkaCluster,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    instrumented: KafkaCoreInstrumentor,
) -> None:
    source, sink = topic_on(real_kafka), topic_on(real_kafka)
    done = threading.Event()

    async def run() -> None:
        async with KafkaStreamTransport(real_kafka.bootstrap) as transport:

            async def forward(message: Any) -> None:
                await transport.publish(sink, message.value)
                done.set()

            unsubscribe = await transport.subscribe(source, f"g-{uuid.uuid4().hex[:8]}", forward)
            await transport.publish(source, b"hello")
            deadline = time.monotonic() + DEADLINE_S
            while not done.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await unsubscribe()

    asyncio.run(run())
    assert done.is_set()
    [first] = spans_named(exporter, f"{source} send")
    [handler] = spans_named(exporter, f"{source} process")  # one per record, none per poll
    [second] = spans_named(exporter, f"{sink} send")
    assert not spans_named(exporter, "recv")
    assert handler.parent is not None and handler.parent.span_id == first.context.span_id
    assert second.parent is not None and second.parent.span_id == handler.context.span_id
    assert first.context.trace_id == handler.context.trace_id == second.context.trace_id
