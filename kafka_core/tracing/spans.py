"""The spans: names, kinds and attributes as the contrib instrumentation of confluent-kafka makes
them (``opentelemetry-instrumentation-confluent-kafka``), so that dashboards and queries built on
its spans see kafka_core's the same way.

- send: ``"<topic> send"``, PRODUCER, ended when the record is queued (as confluent's
  ``produce``); its context goes into the record's headers.
- a poll that hands over a list (confluent's ``consume``): a ``"recv"`` span and, under it,
  ``"<topic> process"`` (CONSUMER), linked to each record's producer span, current until the next
  poll or close.
- one record at a time (iteration, ``run``, a transport handler; confluent's ``poll``):
  ``"<topic> process"`` per record with its partition and ``messaging.message.id``, linked to the
  record's producer span and its child (one trace across the services), current while the record
  is handled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Tracer

from kafka_core.tracing.propagation import extract_context, span_context_of

log = logging.getLogger("kafka_core.tracing")

# The contrib confluent-kafka instrumentation's attribute names (semantic conventions 1.11-1.24).
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_DESTINATION = "messaging.destination"
MESSAGING_DESTINATION_KIND = "messaging.destination_kind"
MESSAGING_OPERATION = "messaging.operation"
MESSAGING_KAFKA_PARTITION = "messaging.kafka.partition"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_BATCH_MESSAGE_COUNT = "messaging.batch.message_count"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

ProduceHook = Callable[[Span, tuple[Any, ...], dict[str, Any]], None]
ConsumeHook = Callable[[Span, Any, tuple[Any, ...], dict[str, Any]], None]


def server_attributes(bootstrap_servers: Any) -> dict[str, Any]:
    """``server.address``/``server.port`` of the first bootstrap server, as the contrib reads
    ``bootstrap.servers`` (a Java-style config dict is read the same way)."""
    servers = bootstrap_servers
    if isinstance(servers, Mapping):
        servers = servers.get("bootstrap.servers") or servers.get("bootstrap_servers")
    if isinstance(servers, list | tuple):
        servers = ",".join(str(s) for s in servers)
    if not isinstance(servers, str):
        return {}
    first = servers.split(",")[0].strip()
    if not first:
        return {}
    if ":" not in first:
        return {SERVER_ADDRESS: first}
    host, _, port = first.rpartition(":")
    try:
        return {SERVER_ADDRESS: host.strip("[]"), SERVER_PORT: int(port)}
    except ValueError:
        return {SERVER_ADDRESS: host.strip("[]")}


class Tracing:
    """A tracer and the user's hooks: what every wrapper of one instrumentation shares."""

    def __init__(
        self,
        tracer: Tracer,
        produce_hook: ProduceHook | None = None,
        consume_hook: ConsumeHook | None = None,
        link_limit: int = 128,
    ) -> None:
        self.tracer = tracer
        self.produce_hook = produce_hook
        self.consume_hook = consume_hook
        self.link_limit = link_limit  # the SDK's default span link limit: more are dropped anyway
        # (topic, server address, port) -> a send span's attributes
        self._send_attributes: dict[tuple[str, Any, Any], dict[str, Any]] = {}

    def send_attributes(self, topic: str, servers: Mapping[str, Any]) -> Mapping[str, Any]:
        """A send span's attributes, made once per topic and servers (read only: the SDK copies
        them into the span)."""
        cache_key = (topic, servers.get(SERVER_ADDRESS), servers.get(SERVER_PORT))
        found = self._send_attributes.get(cache_key)
        if found is None:
            if len(self._send_attributes) >= 1024:  # a client of ever new topic names
                self._send_attributes.clear()
            found = self._send_attributes[cache_key] = {
                MESSAGING_SYSTEM: "kafka",
                MESSAGING_DESTINATION: topic,
                MESSAGING_DESTINATION_KIND: "queue",
                MESSAGING_OPERATION: "publish",
                **servers,
            }
        return found

    def produce_hooked(self, span: Span, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        hook = self.produce_hook
        if hook is not None and span.is_recording():
            try:
                hook(span, args, kwargs)
            except Exception:
                log.exception("the produce hook failed")

    def consume_hooked(self, span: Span, records: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        hook = self.consume_hook
        if hook is not None and span.is_recording():
            try:
                hook(span, records, args, kwargs)
            except Exception:
                log.exception("the consume hook failed")

    def batch_span(self, topic: str, servers: Mapping[str, Any], links: Sequence[Link], count: int) -> Span:
        """confluent's ``consume``: ``recv`` (ended at once) and the process span under it."""
        with self.tracer.start_as_current_span("recv", kind=SpanKind.CONSUMER):
            return self.tracer.start_span(
                f"{topic} process",
                kind=SpanKind.CONSUMER,
                links=links,
                attributes={
                    MESSAGING_SYSTEM: "kafka",
                    MESSAGING_DESTINATION: topic,
                    MESSAGING_DESTINATION_KIND: "queue",
                    MESSAGING_OPERATION: "process",
                    MESSAGING_BATCH_MESSAGE_COUNT: count,
                    **servers,
                },
            )

    def record_links(self, records: Sequence[Any]) -> list[Link]:
        """One link per distinct producer span among ``records`` (records of one ``send_batch``
        share one), at most ``link_limit``; records without headers cost one test."""
        links: list[Link] = []
        seen: set[tuple[int, int]] = set()
        for record in records:
            if not record.headers:
                continue
            sc = span_context_of(extract_context(record.headers))
            if sc is None or (sc.trace_id, sc.span_id) in seen:
                continue
            seen.add((sc.trace_id, sc.span_id))
            links.append(Link(sc))
            if len(links) >= self.link_limit:
                break
        return links

    def message_span(self, record: Any, servers: Mapping[str, Any]) -> tuple[Span, Context]:
        """confluent's ``poll`` for one record, a child of its producer span when it has one;
        returns the span and the context to make current while the record is handled."""
        parent = extract_context(record.headers) if record.headers else None
        sc = span_context_of(parent)
        topic, partition, offset = record.topic, record.partition, record.offset
        span = self.tracer.start_span(
            f"{topic} process",
            context=parent,  # None: the current context
            kind=SpanKind.CONSUMER,
            links=[Link(sc)] if sc is not None else None,
            attributes={
                MESSAGING_SYSTEM: "kafka",
                MESSAGING_DESTINATION: topic,
                MESSAGING_KAFKA_PARTITION: partition,
                MESSAGING_DESTINATION_KIND: "queue",
                MESSAGING_OPERATION: "process",
                **servers,
                MESSAGING_MESSAGE_ID: f"{topic}.{partition}.{offset}",
            },
        )
        return span, trace.set_span_in_context(span, parent)


class CurrentSpan:
    """A consumer's process span of its last poll, current in the poller's thread or task
    until the next poll or close (as confluent's). Detached only where it was attached: a
    context token belongs to one thread's or task's context."""

    __slots__ = ("owner", "span", "token")

    def __init__(self) -> None:
        self.span: Span | None = None
        self.token: object = None
        self.owner: object = None

    def end(self) -> None:
        span, self.span = self.span, None
        if span is None:
            return
        token, self.token = self.token, None
        if token is not None and self.owner == _owner():
            otel_context.detach(token)  # type: ignore[arg-type]
        self.owner = None
        span.end()

    def make_current(self, span: Span, context: Context | None = None) -> None:
        self.span = span
        self.token = otel_context.attach(context if context is not None else trace.set_span_in_context(span))
        self.owner = _owner()


def _owner() -> object:
    """The task (in a loop) or else the thread whose context an attach changed."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    return task if task is not None else threading.get_ident()
