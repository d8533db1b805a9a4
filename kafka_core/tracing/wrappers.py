"""Traced versions of the clients' public methods, built around the originals.

Nothing here runs unless tracing is turned on: the instrumentor puts these on the classes (or
``traced_*`` on one object), and takes them off again; the clients' own code has no trace of
tracing, so with tracing off a send or a poll costs exactly what it did.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from kafka_core.tracing.propagation import batch_span_contexts, inject_headers
from kafka_core.tracing.spans import MESSAGING_BATCH_MESSAGE_COUNT, CurrentSpan, Tracing, server_attributes

__all__ = ["State"]

# Set while a transport starts a subscription: the subscription's task inherits it, and its
# polls make no batch span (each record gets its own span around the handler instead).
SUPPRESS_POLL_SPANS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "kafka_core_tracing_suppress_poll_spans", default=False
)


class State:
    """What the wrappers keep per client object, weakly (a closed client is forgotten)."""

    def __init__(self) -> None:
        self.servers: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        self.current: weakref.WeakKeyDictionary[Any, CurrentSpan] = weakref.WeakKeyDictionary()
        # asyncio objects behind a blocking face: the face traces, their own wrappers stand aside
        self.faced: weakref.WeakSet[Any] = weakref.WeakSet()
        # objects inside iteration or run(): their polls make no batch span (one span per record)
        self.per_record: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def servers_of(self, obj: Any) -> dict[str, Any]:
        found = self.servers.get(obj)
        if found is None:
            inner = getattr(obj, "async_object", None)
            found = self.servers.get(inner, {}) if inner is not None else {}
        return found

    def current_of(self, obj: Any) -> CurrentSpan:
        cur = self.current.get(obj)
        if cur is None:
            cur = self.current[obj] = CurrentSpan()
        return cur

    def remember_servers(
        self, obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], positional: bool
    ) -> None:
        """The bootstrap servers a client was built with (the first positional argument is
        a producer's servers, or anyone's Java-style config dict)."""
        servers: Any = kwargs.get("bootstrap_servers")
        if servers is None and args and (positional or isinstance(args[0], Mapping)):
            servers = args[0]
        with contextlib.suppress(TypeError):  # not weakly referenceable: no server attributes
            self.servers[obj] = server_attributes(servers if servers is not None else "localhost:9092")


# -- producers -------------------------------------------------------------------------------


def batch_headers(headers: Any, count: int, context_headers: list[tuple[str, bytes]]) -> Any:
    """``send_batch``'s headers with the batch span's context on every record: each record
    carries the one span that sent it."""
    if not context_headers:
        return headers
    if headers is None:
        return [context_headers] * count
    if not isinstance(headers, list | tuple):  # an Arrow list<struct<key, value>> array
        headers = [[(h["key"], h["value"]) for h in row] if row else None for row in headers.to_pylist()]
    names = {k for k, _ in context_headers}
    return [
        [h for h in row if h[0] not in names] + context_headers if row else context_headers for row in headers
    ]


def _begin_send(
    tr: Tracing,
    servers: dict[str, Any],
    topic: str,
    value: Any,
    key: Any,
    partition: int | None,
    headers: Any,
) -> tuple[Span, object, Any]:
    """A record's send span, made current (``_end_send`` ends it): the span, the context token
    and the record's headers with the span's context in them. What ``start_as_current_span``
    does, without its two generator context managers: a send span is the hot path's only cost
    with tracing on, and the SDK's own work is all of the rest."""
    span = tr.tracer.start_span(
        f"{topic} send", kind=SpanKind.PRODUCER, attributes=tr.send_attributes(topic, servers)
    )
    ctx = trace.set_span_in_context(span)
    token = otel_context.attach(ctx)
    try:
        headers = inject_headers(headers, ctx)
        tr.produce_hooked(span, (topic, value), {"key": key, "partition": partition, "headers": headers})
    except BaseException as exc:
        _end_send(span, token, exc)
        raise
    return span, token, headers


def _end_send(span: Span, token: object, exc: BaseException | None = None) -> None:
    """As ``start_as_current_span``'s exit: a failure recorded, the context restored, the span ended."""
    try:
        if exc is not None:
            _fail(span, exc)
    finally:
        otel_context.detach(token)  # type: ignore[arg-type]
        span.end()


def traced_send(tr: Tracing, state: State, original: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def send(
        self: Any,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
    ) -> Any:
        span, token, headers = _begin_send(tr, state.servers_of(self), topic, value, key, partition, headers)
        try:
            result = await original(self, topic, value, key, partition, headers, timestamp_ms)
        except BaseException as exc:
            _end_send(span, token, exc)
            raise
        _end_send(span, token)
        return result

    return send


def traced_blocking_send(
    tr: Tracing, fast: Callable[..., Any], servers: dict[str, Any]
) -> Callable[..., Any]:
    """The blocking producer's ``send`` is bound per object (its accumulator's own append):
    the traced one wraps that bound function."""

    def send(
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
    ) -> Any:
        span, token, headers = _begin_send(tr, servers, topic, value, key, partition, headers)
        try:
            result = fast(topic, value, key, partition, headers, timestamp_ms)
        except BaseException as exc:
            _end_send(span, token, exc)
            raise
        _end_send(span, token)
        return result

    send.__wrapped__ = fast  # type: ignore[attr-defined]
    return send


def _batch_attributes(tr: Tracing, topic: str, servers: dict[str, Any], count: int) -> dict[str, Any]:
    return {**tr.send_attributes(topic, servers), MESSAGING_BATCH_MESSAGE_COUNT: count}


def traced_send_batch(
    tr: Tracing, state: State, original: Callable[..., Any], is_async: bool
) -> Callable[..., Any]:
    """One span per ``send_batch`` call; every record's headers carry that span's context."""
    from kafka_core.tracing.propagation import header_pairs

    def begin(self: Any, topic: str, values: Any) -> tuple[Span | None, int]:
        """The batch's span; None for values send_batch itself will refuse (its error, not ours)."""
        try:
            count = len(values)
        except TypeError:
            return None, 0
        span = tr.tracer.start_span(
            f"{topic} send",
            kind=SpanKind.PRODUCER,
            attributes=_batch_attributes(tr, topic, state.servers_of(self), count),
        )
        return span, count

    def with_context(span: Span, headers: Any, count: int) -> Any:
        if not span.get_span_context().is_valid:
            return headers
        return batch_headers(headers, count, header_pairs(trace.set_span_in_context(span)))

    if is_async:

        async def send_batch(
            self: Any, topic: str, values: Any, keys: Any = None, partition: int | None = None,
            headers: Any = None, timestamps: Any = None, **encoders: Any,
        ) -> Any:  # fmt: skip
            span, count = begin(self, topic, values)
            if span is None:
                return await original(self, topic, values, keys, partition, headers, timestamps, **encoders)
            with trace.use_span(span, end_on_exit=True):
                headers = with_context(span, headers, count)
                tr.produce_hooked(
                    span, (topic, values), {"keys": keys, "partition": partition, "headers": headers}
                )
                return await original(self, topic, values, keys, partition, headers, timestamps, **encoders)

        return send_batch

    def send_batch_blocking(
        self: Any, topic: str, values: Any, keys: Any = None, partition: int | None = None,
        headers: Any = None, timestamps: Any = None, **encoders: Any,
    ) -> Any:  # fmt: skip
        span, count = begin(self, topic, values)
        if span is None:
            return original(self, topic, values, keys, partition, headers, timestamps, **encoders)
        with trace.use_span(span, end_on_exit=True):
            headers = with_context(span, headers, count)
            tr.produce_hooked(
                span, (topic, values), {"keys": keys, "partition": partition, "headers": headers}
            )
            return original(self, topic, values, keys, partition, headers, timestamps, **encoders)

    return send_batch_blocking


# -- consumers -------------------------------------------------------------------------------


def _after_poll(
    tr: Tracing, state: State, self: Any, records: Any, args: tuple[Any, ...], columns: bool
) -> None:
    """A poll handed over records: the batch's process span, current until the next poll."""
    if columns:
        if records is None or records.num_rows == 0:
            return
        from opentelemetry.trace import Link

        links = [Link(sc) for sc in batch_span_contexts(records, tr.link_limit)]
        topic = records.column("topic")[0].as_py()
        count = records.num_rows
    else:
        if not records:
            return
        links = tr.record_links(records)
        topic = records[0].topic
        count = len(records)
    span = tr.batch_span(topic, state.servers_of(self), links, count)
    tr.consume_hooked(span, records, args, {})
    state.current_of(self).make_current(span)


def _end_batch_span(state: State, self: Any) -> None:
    """A poll's process span ends at the next poll, at close, and where per-record spans begin
    (iteration, run)."""
    cur = state.current.get(self)
    if cur is not None:
        cur.end()


def _standing_aside(state: State, self: Any) -> bool:
    return self in state.faced or state.per_record.get(self, 0) > 0 or SUPPRESS_POLL_SPANS.get()


def traced_poll(
    tr: Tracing, state: State, original: Callable[..., Any], is_async: bool, columns: bool
) -> Callable[..., Any]:
    if is_async:

        async def poll(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _standing_aside(state, self):
                return await original(self, *args, **kwargs)
            _end_batch_span(state, self)
            records = await original(self, *args, **kwargs)
            _after_poll(tr, state, self, records, args, columns)
            return records

        return poll

    def poll_blocking(self: Any, *args: Any, **kwargs: Any) -> Any:
        inner = getattr(self, "async_object", None)
        if inner is not None:
            state.faced.add(inner)
        if _standing_aside(state, self):
            return original(self, *args, **kwargs)
        _end_batch_span(state, self)
        records = original(self, *args, **kwargs)
        _after_poll(tr, state, self, records, args, columns)
        return records

    return poll_blocking


def traced_close(state: State, original: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """close ends the last poll's process span (confluent's close does too)."""
    if is_async:

        async def close(self: Any, *args: Any, **kwargs: Any) -> Any:
            _end_batch_span(state, self)
            return await original(self, *args, **kwargs)

        return close

    def close_blocking(self: Any, *args: Any, **kwargs: Any) -> Any:
        _end_batch_span(state, self)
        return original(self, *args, **kwargs)

    return close_blocking


def _fail(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def traced_handler(
    tr: Tracing, handler: Callable[[Any], Any], servers: dict[str, Any]
) -> Callable[[Any], Any]:
    """``handler(record)`` inside the record's process span (its failure recorded there); a
    coroutine function stays one, so callers that tell them apart still can."""
    if inspect.iscoroutinefunction(handler):

        async def handle_async(record: Any) -> Any:
            span, ctx = tr.message_span(record, servers)
            token = otel_context.attach(ctx)
            unsuppress = SUPPRESS_POLL_SPANS.set(False)
            try:
                tr.consume_hooked(span, [record], (), {})
                return await handler(record)
            except BaseException as exc:
                _fail(span, exc)
                raise
            finally:
                SUPPRESS_POLL_SPANS.reset(unsuppress)
                otel_context.detach(token)
                span.end()

        return handle_async

    def handle(record: Any) -> Any:
        span, ctx = tr.message_span(record, servers)
        token = otel_context.attach(ctx)
        unsuppress = SUPPRESS_POLL_SPANS.set(False)
        try:
            tr.consume_hooked(span, [record], (), {})
            result = handler(record)
        except BaseException as exc:
            _fail(span, exc)
            span.end()
            raise
        finally:
            SUPPRESS_POLL_SPANS.reset(unsuppress)
            otel_context.detach(token)
        if inspect.isawaitable(result):
            return _end_after(result, span)
        span.end()
        return result

    return handle


async def _end_after(result: Awaitable[Any], span: Span) -> Any:
    try:
        return await result
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        span.end()


def traced_run(tr: Tracing, state: State, original: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """``run(handler)``: a process span per record around the handler, no batch span."""
    if is_async:

        async def run(self: Any, handler: Callable[[Any], Any]) -> Any:
            _end_batch_span(state, self)
            return await original(self, traced_handler(tr, handler, state.servers_of(self)))

        return run

    def run_blocking(self: Any, handler: Callable[[Any], Any]) -> Any:
        _end_batch_span(state, self)
        state.per_record[self] = state.per_record.get(self, 0) + 1
        try:
            return original(self, traced_handler(tr, handler, state.servers_of(self)))
        finally:
            state.per_record[self] -= 1

    return run_blocking


def _process_span(tr: Tracing, cur: CurrentSpan, record: Any, servers: dict[str, Any]) -> None:
    """The record's process span, current in ``cur`` while the loop body runs (until cur.end())."""
    span, ctx = tr.message_span(record, servers)
    tr.consume_hooked(span, [record], (), {})
    cur.make_current(span, ctx)


def traced_iter(tr: Tracing, state: State, original: Callable[..., Any]) -> Callable[..., Any]:
    """Blocking iteration: each record current in its process span while the loop body runs."""

    def __iter__(self: Any) -> Any:
        _end_batch_span(state, self)
        it = original(self)
        servers = state.servers_of(self)
        cur = CurrentSpan()
        try:
            while True:
                state.per_record[self] = state.per_record.get(self, 0) + 1
                try:
                    record = next(it)
                except StopIteration:
                    return
                finally:
                    state.per_record[self] -= 1
                _process_span(tr, cur, record, servers)
                try:
                    yield record
                finally:
                    cur.end()
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    return __iter__


def traced_aiter(tr: Tracing, state: State, original: Callable[..., Any]) -> Callable[..., Any]:
    """asyncio iteration (``async for``): as the blocking one."""

    def __aiter__(self: Any) -> Any:
        _end_batch_span(state, self)
        return _aiterate(tr, original(self), state.servers_of(self))

    return __aiter__


async def _aiterate(tr: Tracing, agen: Any, servers: dict[str, Any]) -> Any:
    cur = CurrentSpan()
    try:
        async for record in agen:
            _process_span(tr, cur, record, servers)
            try:
                yield record
            finally:
                cur.end()
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            await aclose()


# -- the transport ----------------------------------------------------------------------------


def traced_subscribe(tr: Tracing, original: Callable[..., Any]) -> Callable[..., Any]:
    """A subscription's handler runs in each record's process span; its polls make none."""

    async def subscribe(
        self: Any, topic: str, group_id: str, handler: Callable[[Any], Any], **kwargs: Any
    ) -> Any:
        servers = server_attributes(getattr(self, "bootstrap_servers", None))
        wrapped = traced_handler(tr, handler, servers) if callable(handler) else handler
        token = SUPPRESS_POLL_SPANS.set(True)
        try:
            return await original(self, topic, group_id, wrapped, **kwargs)
        finally:
            SUPPRESS_POLL_SPANS.reset(token)

    return subscribe
