"""``KafkaCoreInstrumentor``: OpenTelemetry tracing of every kafka_core client, turned on and off.

It follows opentelemetry-instrumentation's ``BaseInstrumentor`` conventions (one instance,
``instrument(**kwargs)`` / ``uninstrument()``, ``tracer_provider=``, the hooks, a warning when
called twice) without needing that package: the ``[otel]`` extra is opentelemetry-api alone. The
``opentelemetry_instrumentor`` entry point lets ``opentelemetry-instrument`` turn it on.
"""

from __future__ import annotations

import functools
import logging
import types
import weakref
from collections.abc import Callable, Collection
from typing import Any, ClassVar

from opentelemetry import trace
from opentelemetry.trace import TracerProvider

from kafka_core._version import __version__
from kafka_core.tracing import wrappers as w
from kafka_core.tracing.spans import ConsumeHook, ProduceHook, Tracing, server_attributes

log = logging.getLogger("kafka_core.tracing")

__all__ = ["KafkaCoreInstrumentor"]

SCHEMA_URL = "https://opentelemetry.io/schemas/1.11.0"  # the contrib confluent-kafka one's


def _tracing(
    tracer_provider: TracerProvider | None,
    produce_hook: ProduceHook | None,
    consume_hook: ConsumeHook | None,
) -> Tracing:
    tracer = trace.get_tracer("kafka_core.tracing", __version__, tracer_provider, schema_url=SCHEMA_URL)
    return Tracing(tracer, produce_hook, consume_hook)


def _classes() -> dict[str, type]:
    from kafka_core.consumer.consumer import KafkaConsumer as AioConsumer
    from kafka_core.consumer.sync import KafkaConsumer
    from kafka_core.producer.producer import KafkaProducer as AioProducer
    from kafka_core.producer.sync import KafkaProducer
    from kafka_core.share.consumer import KafkaShareConsumer as AioShareConsumer
    from kafka_core.share.sync import KafkaShareConsumer
    from kafka_core.transport.transport import KafkaStreamTransport as AioTransport

    return {
        "aio_producer": AioProducer,
        "producer": KafkaProducer,
        "aio_consumer": AioConsumer,
        "consumer": KafkaConsumer,
        "aio_share": AioShareConsumer,
        "share": KafkaShareConsumer,
        "aio_transport": AioTransport,
    }


def _remembering_init(state: w.State, original: Callable[..., None], positional: bool) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        state.remember_servers(self, args, kwargs, positional)

    return __init__


class KafkaCoreInstrumentor:
    """Traces kafka_core's producers, consumers, share consumers and transports.

    ``KafkaCoreInstrumentor().instrument(tracer_provider=None, produce_hook=None,
    consume_hook=None)`` wraps the classes' public methods (``send``, ``send_batch``, ``poll``,
    ``poll_columns``, iteration, ``run``, ``close``, the transport's ``subscribe``);
    ``uninstrument()`` puts the originals back. A blocking producer built before
    ``instrument()`` keeps its untraced ``send`` (its hot path is bound when it is built): build
    clients after it, or trace one object with :meth:`instrument_producer` /
    :meth:`instrument_consumer`. Hooks: ``produce_hook(span, args, kwargs)`` and
    ``consume_hook(span, records, args, kwargs)``, called on recording spans; what they raise
    is logged, never passed on.
    """

    _instance: ClassVar[KafkaCoreInstrumentor | None] = None
    _is_instrumented_by_opentelemetry = False

    def __new__(cls, *args: Any, **kwargs: Any) -> KafkaCoreInstrumentor:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        return self._is_instrumented_by_opentelemetry

    def instrumentation_dependencies(self) -> Collection[str]:
        """None beyond kafka_core itself: the instrumentation ships with the library."""
        return ()

    def instrument(self, **kwargs: Any) -> None:
        if self._is_instrumented_by_opentelemetry:
            log.warning("Attempting to instrument while already instrumented")
            return
        kwargs.pop("skip_dep_check", None)
        kwargs.pop("raise_exception_on_conflict", None)
        self._instrument(**kwargs)
        self._is_instrumented_by_opentelemetry = True

    def uninstrument(self, **kwargs: Any) -> None:
        if not self._is_instrumented_by_opentelemetry:
            log.warning("Attempting to uninstrument while already uninstrumented")
            return
        self._uninstrument(**kwargs)
        self._is_instrumented_by_opentelemetry = False

    def _instrument(
        self,
        tracer_provider: TracerProvider | None = None,
        produce_hook: ProduceHook | None = None,
        consume_hook: ConsumeHook | None = None,
        **_: Any,
    ) -> None:
        tr = _tracing(tracer_provider, produce_hook, consume_hook)
        state = w.State()
        c = _classes()
        self._patched: list[tuple[type, str, Any]] = []
        self._sends: weakref.WeakKeyDictionary[Any, Callable[..., Any]] = weakref.WeakKeyDictionary()
        sends = self._sends

        def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
            original = cls.__dict__[name]
            self._patched.append((cls, name, original))
            setattr(cls, name, make(original))

        patch(c["aio_producer"], "__init__", lambda f: _remembering_init(state, f, True))
        patch(c["aio_producer"], "send", lambda f: w.traced_send(tr, state, f))
        patch(c["aio_producer"], "send_batch", lambda f: w.traced_send_batch(tr, state, f, True))
        patch(c["producer"], "send_batch", lambda f: w.traced_send_batch(tr, state, f, False))

        def blocking_producer_init(original: Callable[..., None]) -> Callable[..., None]:
            @functools.wraps(original)
            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                original(self, *args, **kwargs)
                fast = self.send
                sends[self] = fast
                self.send = w.traced_blocking_send(tr, fast, state.servers_of(self))

            return __init__

        patch(c["producer"], "__init__", blocking_producer_init)
        for aio, face in (("aio_consumer", "consumer"), ("aio_share", "share")):
            patch(c[aio], "__init__", lambda f: _remembering_init(state, f, False))
            for cls, is_async in ((c[aio], True), (c[face], False)):
                patch(cls, "poll", lambda f, a=is_async: w.traced_poll(tr, state, f, a, False))  # type: ignore[misc]
                patch(cls, "poll_columns", lambda f, a=is_async: w.traced_poll(tr, state, f, a, True))  # type: ignore[misc]
                patch(cls, "close", lambda f, a=is_async: w.traced_close(state, f, a))  # type: ignore[misc]
            patch(c[face], "__iter__", lambda f: w.traced_iter(tr, state, f))
        patch(c["aio_consumer"], "run", lambda f: w.traced_run(tr, state, f, True))
        patch(c["consumer"], "run", lambda f: w.traced_run(tr, state, f, False))
        patch(c["aio_consumer"], "__aiter__", lambda f: w.traced_aiter(tr, state, f))
        patch(c["aio_transport"], "subscribe", lambda f: w.traced_subscribe(tr, f))

    def _uninstrument(self, **_: Any) -> None:
        for cls, name, original in reversed(self._patched):
            setattr(cls, name, original)
        self._patched = []
        for producer, fast in list(self._sends.items()):
            producer.send = fast
        self._sends = weakref.WeakKeyDictionary()

    # -- one object at a time ---------------------------------------------------------------

    @staticmethod
    def instrument_producer(
        producer: Any,
        tracer_provider: TracerProvider | None = None,
        *,
        bootstrap_servers: Any = None,
        produce_hook: ProduceHook | None = None,
    ) -> Any:
        """Trace this producer (blocking or asyncio) alone; returns it. ``bootstrap_servers``:
        for the ``server.*`` attributes."""
        tr = _tracing(tracer_provider, produce_hook, None)
        state = w.State()
        servers = server_attributes(bootstrap_servers)
        cls = type(producer)
        originals = _own_attributes(producer, ["send", "send_batch"])
        if _is_async(producer):
            state.servers[producer] = servers
            producer.send = types.MethodType(w.traced_send(tr, state, cls.send), producer)
            producer.send_batch = types.MethodType(
                w.traced_send_batch(tr, state, cls.send_batch, True), producer
            )
        else:
            state.servers[producer] = servers
            producer.send = w.traced_blocking_send(tr, producer.send, servers)
            producer.send_batch = types.MethodType(
                w.traced_send_batch(tr, state, cls.send_batch, False), producer
            )
        _ORIGINALS[producer] = originals
        return producer

    @staticmethod
    def instrument_consumer(
        consumer: Any,
        tracer_provider: TracerProvider | None = None,
        *,
        bootstrap_servers: Any = None,
        consume_hook: ConsumeHook | None = None,
    ) -> Any:
        """Trace this consumer or share consumer (blocking or asyncio) alone: ``poll``,
        ``poll_columns``, ``close`` and (group consumers) ``run``; returns it. Iteration over
        it then gets the batch spans of the polls behind it."""
        tr = _tracing(tracer_provider, None, consume_hook)
        state = w.State()
        state.servers[consumer] = server_attributes(bootstrap_servers)
        cls = type(consumer)
        is_async = _is_async(consumer)
        names = ["poll", "poll_columns", "close"] + (["run"] if hasattr(cls, "run") else [])
        _ORIGINALS[consumer] = _own_attributes(consumer, names)
        consumer.poll = types.MethodType(w.traced_poll(tr, state, cls.poll, is_async, False), consumer)
        consumer.poll_columns = types.MethodType(
            w.traced_poll(tr, state, cls.poll_columns, is_async, True), consumer
        )
        consumer.close = types.MethodType(w.traced_close(state, cls.close, is_async), consumer)
        if "run" in names:
            consumer.run = types.MethodType(w.traced_run(tr, state, cls.run, is_async), consumer)
        return consumer

    @staticmethod
    def uninstrument_producer(producer: Any) -> Any:
        return _restore(producer)

    @staticmethod
    def uninstrument_consumer(consumer: Any) -> Any:
        return _restore(consumer)


_ORIGINALS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_ABSENT = object()


def _own_attributes(obj: Any, names: list[str]) -> dict[str, Any]:
    """What ``obj`` itself holds under ``names`` (the blocking producer's bound ``send``), to
    put back; the rest were the class's."""
    return {name: obj.__dict__.get(name, _ABSENT) for name in names}


def _restore(obj: Any) -> Any:
    for name, own in _ORIGINALS.pop(obj, {}).items():
        if own is _ABSENT:
            obj.__dict__.pop(name, None)
        else:
            setattr(obj, name, own)
    return obj


def _is_async(obj: Any) -> bool:
    return getattr(obj, "async_object", None) is None
