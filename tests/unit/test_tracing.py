"""kafka_core.tracing on librdkafka's mock cluster, spans read from the SDK's in-memory exporter:
the span shapes of the contrib confluent-kafka instrumentation, the context in the headers, the
per-batch shapes of send_batch and poll_columns, the hooks, and nothing left behind when off."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from typing import Any

import pytest

# the fixtures exporter, provider and instrumented
from fakes.otel import exporter_fixture, instrumented_fixture, provider_fixture, spans_named  # noqa: F401
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import kafka_core.aio as aio
from kafka_core import KafkaConsumer, KafkaProducer
from kafka_core.devtools.mockcluster import MockCluster
from kafka_core.errors import KafkaCodecError
from kafka_core.tracing import KafkaCoreInstrumentor, extract_context, inject_headers, row_contexts

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def topic(mock_cluster: MockCluster) -> str:
    return mock_cluster.create_topic(f"traced-{uuid.uuid4().hex[:8]}", partitions=1, replication=1)


def header(headers: list[tuple[str, Any]], key: str) -> bytes:
    [value] = [v for k, v in headers if k == key]
    return value


def traceparent_of(span: ReadableSpan) -> bytes:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-".encode()  # then the flags


def poll_all(consumer: Any, n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(100):
        out += consumer.poll(timeout_ms=200)
        if len(out) >= n:
            return out
    raise AssertionError(f"{len(out)} of {n} records consumed")


def test_send_and_poll_make_confluents_spans_and_carry_the_context(
    instrumented: KafkaCoreInstrumentor,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    mock_cluster: MockCluster,
    topic: str,
) -> None:
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
        for i in range(3):
            producer.send(topic, b"v%d" % i, headers=[("app", b"x")]).result(timeout=30)
    sends = spans_named(exporter, f"{topic} send")
    assert len(sends) == 3
    host, _, port = mock_cluster.bootstrap.split(",")[0].rpartition(":")
    assert sends[0].kind is SpanKind.PRODUCER
    assert dict(sends[0].attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.destination": topic,
        "messaging.destination_kind": "queue",
        "messaging.operation": "publish",
        "server.address": host,
        "server.port": int(port),
    }

    consumer = KafkaConsumer(topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest")
    try:
        records = poll_all(consumer, 3)
        # each record carries its own send span's context, the application's header kept
        assert [header(r.headers, "traceparent")[:53] for r in records] == [traceparent_of(s) for s in sends]
        assert all(header(r.headers, "app") == b"x" for r in records)
        # the process span is current after poll: the application's spans are its children
        with provider.get_tracer("app").start_as_current_span("work"):
            pass
    finally:
        consumer.close()
    processes = spans_named(exporter, f"{topic} process")
    recvs = {s.context.span_id: s for s in spans_named(exporter, "recv")}
    assert processes and len(recvs) == len(processes)  # one pair per poll that handed records over
    for process in processes:
        assert process.kind is SpanKind.CONSUMER
        assert process.parent is not None and recvs[process.parent.span_id].kind is SpanKind.CONSUMER
        attrs = dict(process.attributes or {})
        assert attrs["messaging.operation"] == "process" and attrs["messaging.destination"] == topic
        assert attrs["server.address"] == host
    assert sum((p.attributes or {})["messaging.batch.message_count"] for p in processes) == 3
    assert {link.context.span_id for p in processes for link in p.links} == {s.context.span_id for s in sends}
    process = processes[-1]
    [work] = spans_named(exporter, "work")
    assert work.parent is not None and work.parent.span_id == process.context.span_id


def test_iteration_gives_each_record_a_process_span_under_its_producer_span(
    instrumented: KafkaCoreInstrumentor, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
        for i in range(2):
            producer.send(topic, b"v%d" % i, partition=0).result(timeout=30)
    sends = spans_named(exporter, f"{topic} send")
    consumer = KafkaConsumer(topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest")
    seen = []
    try:
        for record in consumer:
            current = trace.get_current_span()
            seen.append((record.offset, current.get_span_context().span_id))
            if len(seen) == 2:
                break
    finally:
        consumer.close()
    processes = spans_named(exporter, f"{topic} process")
    assert len(processes) == 2 and not spans_named(exporter, "recv")  # no batch span under iteration
    for send, process, (offset, current) in zip(sends, processes, seen, strict=True):
        assert process.context.trace_id == send.context.trace_id  # one trace across the services
        assert process.parent is not None and process.parent.span_id == send.context.span_id
        assert [link.context.span_id for link in process.links] == [send.context.span_id]
        assert current == process.context.span_id  # current while the loop body ran
        attrs = dict(process.attributes or {})
        assert attrs["messaging.kafka.partition"] == 0
        assert attrs["messaging.message.id"] == f"{topic}.0.{offset}"


def test_asyncio_send_poll_iteration_and_run(
    instrumented: KafkaCoreInstrumentor, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    polls: list[int] = []

    async def main() -> None:
        async with aio.KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
            for i in range(3):
                await (await producer.send(topic, b"a%d" % i))
        consumer = aio.KafkaConsumer(
            topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest"
        )
        try:
            got: list[Any] = []
            while len(got) < 3:
                batch = await consumer.poll(timeout_ms=200)
                polls.append(len(batch))
                got += batch
            consumer.seek_to_beginning()
            n = 0
            async for _ in consumer:
                n += 1
                if n == 3:
                    break
            consumer.seek_to_beginning()
            handled: list[int] = []

            async def handler(record: Any) -> None:
                handled.append(trace.get_current_span().get_span_context().span_id)
                if len(handled) == 3:
                    consumer.stop()

            await consumer.run(handler)
        finally:
            await consumer.close()

    asyncio.run(main())
    sends = spans_named(exporter, f"{topic} send")
    processes = spans_named(exporter, f"{topic} process")
    assert len(sends) == 3
    batches = sum(1 for n in polls if n)
    assert len(spans_named(exporter, "recv")) == batches  # the polls that handed records over
    assert len(processes) == batches + 3 + 3  # the polls', then one per record iterated and run
    per_record = [p for p in processes if "messaging.message.id" in (p.attributes or {})]
    assert len(per_record) == 6
    assert {p.parent.span_id for p in per_record if p.parent} == {s.context.span_id for s in sends}


def test_send_batch_is_one_span_whose_context_every_record_carries(
    instrumented: KafkaCoreInstrumentor, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    import pyarrow as pa

    n = 50
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
        producer.send_batch(topic, [b"%d" % i for i in range(n)], partition=0).result(timeout=30)
        headers = pa.array(
            [[{"key": "k", "value": b"v"}]] * n,
            pa.list_(
                pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
            ),
        )
        producer.send_batch(topic, pa.array([b"x"] * n), partition=0, headers=headers).result(timeout=30)
    batches = spans_named(exporter, f"{topic} send")
    assert len(batches) == 2
    assert all((s.attributes or {})["messaging.batch.message_count"] == n for s in batches)
    consumer = KafkaConsumer(topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest")
    rows: list[Any] = []
    try:
        while sum(b.num_rows for b in rows) < 2 * n:
            batch = consumer.poll_columns(timeout_ms=200)
            if batch is not None:
                rows.append(batch)
    finally:
        consumer.close()
    contexts = [ctx for b in rows for ctx in row_contexts(b)]
    ids = [trace.get_current_span(c).get_span_context().span_id for c in contexts if c is not None]
    assert ids == [batches[0].context.span_id] * n + [batches[1].context.span_id] * n
    second = [h for b in rows for h in b.column("headers").to_pylist()][n:]
    assert all(h[0] == {"key": "k", "value": b"v"} for h in second)  # the application's kept
    processes = spans_named(exporter, f"{topic} process")
    assert len(processes) == len(rows)
    linked = {link.context.span_id for p in processes for link in p.links}
    assert linked == {s.context.span_id for s in batches}


def test_hooks_run_on_recording_spans_and_their_failures_stay_inside(
    provider: TracerProvider, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    calls: list[str] = []

    def produce_hook(span: Any, args: Any, kwargs: Any) -> None:
        calls.append(f"produce {args[0]}")
        span.set_attribute("app.key", kwargs["key"].decode())
        raise RuntimeError("a broken hook")

    def consume_hook(span: Any, records: Any, args: Any, kwargs: Any) -> None:
        calls.append(f"consume {len(records)}")

    inst = KafkaCoreInstrumentor()
    inst.instrument(tracer_provider=provider, produce_hook=produce_hook, consume_hook=consume_hook)
    try:
        with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
            producer.send(topic, b"v", key=b"k").result(timeout=30)
        consumer = KafkaConsumer(
            topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest"
        )
        try:
            poll_all(consumer, 1)
        finally:
            consumer.close()
    finally:
        inst.uninstrument()
    assert calls == [f"produce {topic}", "consume 1"]
    [send] = spans_named(exporter, f"{topic} send")
    assert (send.attributes or {})["app.key"] == "k"


def test_one_object_traced_explicitly_and_untraced_again(
    provider: TracerProvider, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
        fast = producer.send
        KafkaCoreInstrumentor.instrument_producer(
            producer, provider, bootstrap_servers=mock_cluster.bootstrap
        )
        producer.send(topic, b"traced").result(timeout=30)
        KafkaCoreInstrumentor.uninstrument_producer(producer)
        assert producer.send is fast
        producer.send(topic, b"not traced").result(timeout=30)
    assert len(spans_named(exporter, f"{topic} send")) == 1
    consumer = KafkaConsumer(topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest")
    try:
        KafkaCoreInstrumentor.instrument_consumer(consumer, provider)
        records = poll_all(consumer, 2)
    finally:
        consumer.close()
    assert [extract_context(r) is not None for r in records] == [True, False]
    processes = spans_named(exporter, f"{topic} process")
    assert sum(len(p.links) for p in processes) == 1


def test_sent_on_headers_get_the_new_context_not_a_second_one(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first"):
        first = inject_headers([("a", b"1")])
    with tracer.start_as_current_span("second") as span:
        second = inject_headers(first)
    assert [k for k, _ in second] == ["a", "traceparent"]
    ctx = extract_context(second)
    assert ctx is not None
    assert trace.get_current_span(ctx).get_span_context().span_id == span.get_span_context().span_id


def test_uninstrument_puts_every_method_back() -> None:
    from kafka_core.consumer.consumer import KafkaConsumer as AioConsumer
    from kafka_core.share.sync import KafkaShareConsumer
    from kafka_core.transport.transport import KafkaStreamTransport

    targets = [
        (KafkaProducer, "__init__"),
        (KafkaProducer, "send_batch"),
        (aio.KafkaProducer, "send"),
        (KafkaConsumer, "poll"),
        (KafkaConsumer, "__iter__"),
        (AioConsumer, "__aiter__"),
        (AioConsumer, "run"),
        (KafkaShareConsumer, "poll_columns"),
        (KafkaStreamTransport, "subscribe"),
    ]
    before = [cls.__dict__[name] for cls, name in targets]
    inst = KafkaCoreInstrumentor()
    inst.instrument()
    assert [cls.__dict__[name] for cls, name in targets] != before
    inst.instrument()  # twice: a warning, no second layer
    inst.uninstrument()
    assert [cls.__dict__[name] for cls, name in targets] == before


def test_untraced_clients_never_import_opentelemetry(mock_cluster: MockCluster, topic: str) -> None:
    code = f"""
import sys
from kafka_core import KafkaConsumer, KafkaProducer
with KafkaProducer(bootstrap_servers={mock_cluster.bootstrap!r}) as p:
    p.send({topic!r}, b"v").result(timeout=30)
c = KafkaConsumer({topic!r}, bootstrap_servers={mock_cluster.bootstrap!r}, auto_offset_reset="earliest")
while not c.poll(timeout_ms=200):
    pass
c.close()
print(sorted(m for m in sys.modules if m.startswith(("opentelemetry", "kafka_core.tracing"))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, check=True)
    assert out.stdout.strip() == "[]"


def test_the_entry_point_opentelemetry_instrument_loads_is_the_instrumentor() -> None:
    import importlib
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    target = pyproject["project"]["entry-points"]["opentelemetry_instrumentor"]["kafka_core"]
    module, _, name = target.partition(":")
    instrumentor = getattr(importlib.import_module(module), name)()
    assert instrumentor is KafkaCoreInstrumentor()  # one instance, as BaseInstrumentor's
    instrumentor.instrument(skip_dep_check=True)  # what opentelemetry-instrument passes
    try:
        assert instrumentor.is_instrumented_by_opentelemetry
        assert list(instrumentor.instrumentation_dependencies()) == []
    finally:
        instrumentor.uninstrument()
    assert not instrumentor.is_instrumented_by_opentelemetry


def test_run_handlers_get_a_span_each_and_a_failure_is_recorded_on_it(
    instrumented: KafkaCoreInstrumentor, exporter: InMemorySpanExporter, mock_cluster: MockCluster, topic: str
) -> None:
    from opentelemetry.trace import StatusCode

    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
        for i in range(2):
            producer.send(topic, b"r%d" % i, partition=0).result(timeout=30)
    sends = spans_named(exporter, f"{topic} send")
    consumer = KafkaConsumer(topic, bootstrap_servers=mock_cluster.bootstrap, auto_offset_reset="earliest")
    handled: list[bytes] = []

    def handler(record: Any) -> None:
        handled.append(record.value)
        if len(handled) == 2:
            raise ValueError("cannot handle r1")

    try:
        with pytest.raises(ValueError, match="cannot handle r1"):
            consumer.run(handler)
    finally:
        consumer.close()
    ok, failed = spans_named(exporter, f"{topic} process")
    assert not spans_named(exporter, "recv")  # run's polls make no batch span
    assert [ok.parent.span_id, failed.parent.span_id] == [s.context.span_id for s in sends]  # type: ignore[union-attr]
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]


def test_a_failed_send_is_recorded_on_its_span_and_the_callers_context_restored(
    instrumented: KafkaCoreInstrumentor,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    mock_cluster: MockCluster,
    topic: str,
) -> None:
    tracer = provider.get_tracer("app")

    async def send_async() -> None:
        async with aio.KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer:
            with tracer.start_as_current_span("outer-async") as outer:
                with pytest.raises(KafkaCodecError):
                    await producer.send(topic, 123)  # type: ignore[arg-type]
                assert trace.get_current_span() is outer

    with (
        KafkaProducer(bootstrap_servers=mock_cluster.bootstrap) as producer,
        tracer.start_as_current_span("outer") as outer,
    ):
        with pytest.raises(KafkaCodecError):
            producer.send(topic, 123)  # type: ignore[arg-type]
        assert trace.get_current_span() is outer
    asyncio.run(send_async())
    sends = spans_named(exporter, f"{topic} send")
    assert len(sends) == 2
    for send, parent in zip(sends, ("outer", "outer-async"), strict=True):
        [outer_span] = spans_named(exporter, parent)
        assert send.parent is not None and send.parent.span_id == outer_span.context.span_id
        assert send.status.status_code is trace.StatusCode.ERROR
        assert send.status.description is not None and send.status.description.startswith("KafkaCodecError: ")
        assert [e.name for e in send.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN
