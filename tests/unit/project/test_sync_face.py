"""The generic sync runner that every blocking class (client, producer, consumer) is built on."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator

import pytest

from kafka_core._sync import LoopThread, SyncFace, sync_face
from kafka_core.errors import KafkaClosedError

CLOSED: list[str] = []


class AsyncThing:
    """A toy async class with each kind of member a sync face must handle."""

    def __init__(self, name: str, *, fail: bool = False) -> None:
        if fail:
            raise ValueError("bad option")
        self.name = name
        self.loop = asyncio.get_running_loop()  # constructors may need the running loop
        self.items = [1, 2, 3]

    async def add(self, a: int, b: int = 0) -> int:
        """Add two numbers, on the loop."""
        await asyncio.sleep(0)
        assert asyncio.get_running_loop() is self.loop
        return a + b

    async def boom(self) -> None:
        raise KeyError("inner")

    async def stream(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    def plain(self) -> str:
        assert asyncio.get_running_loop() is self.loop  # plain methods run on the loop thread too
        return self.name.upper()

    @property
    def size(self) -> int:
        return len(self.items)

    def __aiter__(self) -> AsyncIterator[int]:
        return self.stream(2)

    async def close(self) -> None:
        CLOSED.append(self.name)


@sync_face(AsyncThing)
class Thing(SyncFace):
    pass


def _threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("kafka-core-"))


def test_methods_properties_and_generators() -> None:
    with Thing("a") as t:
        assert t.add(2, b=3) == 5
        assert t.plain() == "A"
        assert t.size == 3 and t.name == "a"
        assert list(t.stream(4)) == [0, 1, 2, 3]
        assert list(t) == [0, 1]
        assert Thing.add.__doc__ == "Add two numbers, on the loop."
        with pytest.raises(KeyError, match="inner"):
            t.boom()
    assert "a" in CLOSED


def test_close_stops_the_thread_and_later_calls_fail() -> None:
    before = _threads()
    t = Thing("b")
    assert _threads() == before + 1
    t.close()
    t.close()  # idempotent
    assert _threads() == before
    with pytest.raises(KafkaClosedError):
        t.add(1)


def test_constructor_errors_propagate_without_leaking_a_thread() -> None:
    before = _threads()
    with pytest.raises(ValueError, match="bad option"):
        Thing("c", fail=True)
    assert _threads() == before


def test_works_from_inside_a_running_event_loop() -> None:
    async def caller() -> int:
        with Thing("d") as t:
            return t.add(40, 2)

    assert asyncio.run(caller()) == 42


def test_forgotten_objects_are_closed_by_the_garbage_collector() -> None:
    t = Thing("forgotten")
    t.add(1)
    del t
    gc.collect()
    assert "forgotten" in CLOSED


def test_loop_thread_refuses_reentrant_calls() -> None:
    loop = LoopThread("reentrant")
    try:

        async def inner() -> None:
            loop.run(asyncio.sleep(0))

        with pytest.raises(RuntimeError, match="own event loop thread"):
            loop.run(inner())
    finally:
        loop.stop()


def test_loop_thread_call_after_stop_is_a_clear_error() -> None:
    loop = LoopThread("stopped")
    loop.stop()
    with pytest.raises(KafkaClosedError):
        loop.call(len, [1])


def test_public_names() -> None:
    import kafka_core
    import kafka_core.aio
    import kafka_core.client.cluster
    import kafka_core.sync_client

    assert getattr(kafka_core, "__file__", None), (
        "kafka_core imports as a namespace package: re-run `pip install -e .` so the editable "
        "install sees kafka_core/__init__.py"
    )
    assert kafka_core.KafkaClient is kafka_core.sync_client.KafkaClient
    assert kafka_core.aio.KafkaClient is kafka_core.client.cluster.KafkaClient
    assert isinstance(kafka_core.__version__, str)


@pytest.mark.parametrize(
    "name", ["KafkaProducer", "KafkaConsumer", "KafkaAdmin", "KafkaClient", "KafkaStreamTransport"]
)
def test_blocking_classes_show_the_cores_parameters_and_docs(name: str) -> None:
    import inspect
    import pydoc

    import kafka_core
    import kafka_core.aio

    face, core = getattr(kafka_core, name), getattr(kafka_core.aio, name)
    expected = list(inspect.signature(core).parameters)
    assert list(inspect.signature(face).parameters) == expected
    assert "bootstrap_servers" in expected and "args" not in expected
    assert list(inspect.signature(face.__init__).parameters) == ["self", *expected]
    text = pydoc.render_doc(face, renderer=pydoc.plaintext)
    assert "bootstrap_servers" in text and "*args" not in text.split("Methods defined here")[0]
    assert inspect.cleandoc(core.__doc__) in inspect.cleandoc(face.__doc__)  # documented once


def test_a_face_without_its_own_constructor_gets_the_cores_signature() -> None:
    import inspect

    @sync_face(AsyncThing)
    class Thing(SyncFace):
        """The toy's blocking face."""

    assert str(inspect.signature(Thing)) == "(name: 'str', *, fail: 'bool' = False) -> 'None'"
    t = Thing("x")
    try:
        assert t.name == "x"
    finally:
        t.close()


def test_the_producer_docstring_documents_every_option() -> None:
    import inspect

    from kafka_core.aio import KafkaProducer

    doc = KafkaProducer.__doc__ or ""
    names = list(inspect.signature(KafkaProducer).parameters)
    missing = [p for p in names if f"``{p}``" not in doc and f"``**{p}``" not in doc]
    assert not missing, missing


def test_run_serves_work_the_loop_hands_to_the_callers_thread() -> None:
    import queue

    loop = LoopThread()
    try:
        inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        handled: list[tuple[str, bool]] = []

        async def job() -> str:
            inbox.put("first")
            await asyncio.sleep(0.01)
            inbox.put("second")
            return "done"

        caller = threading.current_thread()
        result = loop.run(
            job(),
            inbox=inbox,
            handle=lambda item: handled.append((item, threading.current_thread() is caller)),
        )
        assert result == "done"
        assert handled == [("first", True), ("second", True)]
    finally:
        loop.stop()
