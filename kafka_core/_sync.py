"""The sync face: run an asyncio object on a private event loop in a daemon thread.

Every blocking class in kafka_core (KafkaClient, and later KafkaProducer/KafkaConsumer) is a thin
``SyncFace`` subclass over its asyncio twin, so the logic exists once. The caller never needs an
event loop of its own, and may even call from inside one (it just blocks that loop's thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ClassVar, TypeVar

from kafka_core.errors import KafkaClosedError

T = TypeVar("T")


class LoopThread:
    """One event loop running forever in one daemon thread, until :meth:`stop`."""

    def __init__(self, name: str = "kafka-core-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def thread_id(self) -> int | None:
        """The loop thread's ident: code that must never block it checks against this."""
        return self._thread.ident

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def run(
        self,
        coro: Coroutine[Any, Any, T] | Awaitable[T],
        *,
        inbox: queue.SimpleQueue[Any] | None = None,
        handle: Callable[[Any], None] | None = None,
    ) -> T:
        """Run ``coro`` on the loop and block until it finishes; Ctrl-C cancels it.

        With ``inbox``, meanwhile ``handle(item)`` runs here, in the caller's thread, for each
        item the loop puts there (work that must not run on the loop, such as a consumer's
        rebalance callback, which may call this face's blocking methods).
        """
        if threading.current_thread() is self._thread or not self.alive:
            if inspect.iscoroutine(coro):
                coro.close()
            if self.alive:
                raise RuntimeError("a sync kafka_core method was called from its own event loop thread")
            raise KafkaClosedError("this object has been closed")
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(_as_coro(coro), self.loop)
        try:
            if inbox is None or handle is None:
                return fut.result()
            fut.add_done_callback(inbox.put)  # the future itself marks the end
            while True:
                item = inbox.get()
                if item is fut:
                    return fut.result()
                handle(item)
        except BaseException:
            # KeyboardInterrupt (or anything else) in the caller: do not leave the work running.
            fut.cancel()
            raise

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain function on the loop thread (async objects are not thread-safe)."""

        async def _call() -> T:
            return fn(*args, **kwargs)

        return self.run(_call())

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive() and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


async def _as_coro(aw: Awaitable[T]) -> T:
    return await aw


def _shutdown(loop_thread: LoopThread, obj: Any, close_method: str | None) -> None:
    """Close the async object then stop its loop; used by close() and by the GC finaliser."""
    try:
        if close_method and loop_thread.alive:
            closer = getattr(obj, close_method, None)
            if closer is not None:
                result = loop_thread.call(closer)
                if inspect.isawaitable(result):
                    loop_thread.run(result)
    finally:
        loop_thread.stop()


class SyncFace:
    """Base of blocking classes. Subclasses set ``_async_class`` (or use :func:`sync_face`).

    The async object is built on the private loop (its constructor may look up the running loop);
    every public coroutine method of it gets a blocking twin here, async generators become plain
    generators, and other methods run on the loop thread too.
    """

    _async_class: ClassVar[type]
    _close_method: ClassVar[str | None] = "close"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        loop_thread = LoopThread(name=f"kafka-core-{type(self).__name__}")
        try:
            obj = loop_thread.call(self._async_class, *args, **kwargs)
        except BaseException:
            loop_thread.stop()
            raise
        self._loop_thread = loop_thread
        self._async_obj = obj
        self._finalizer = weakref.finalize(self, _shutdown, loop_thread, obj, self._close_method)

    @property
    def async_object(self) -> Any:
        """The asyncio object behind this face (only touch it on :attr:`loop`)."""
        return self._async_obj

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop_thread.loop

    @property
    def loop_thread(self) -> LoopThread:
        """The private loop's thread (a face built on another face's client shares it)."""
        return self._loop_thread

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop_thread.run(coro)

    def close(self) -> None:
        """Close the async object and stop the private loop. Idempotent."""
        self._finalizer()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not defined on the face: plain data attributes/properties.
        if name.startswith("_"):
            raise AttributeError(name)
        obj = self.__dict__.get("_async_obj")
        if obj is None:
            raise AttributeError(name)
        return getattr(obj, name)


def _wrap_coroutine(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def method(self: SyncFace, *args: Any, **kwargs: Any) -> Any:
        return self._loop_thread.run(getattr(self._async_obj, name)(*args, **kwargs))

    return method


def _wrap_asyncgen(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def method(self: SyncFace, *args: Any, **kwargs: Any) -> Iterator[Any]:
        agen = self._loop_thread.call(getattr(self._async_obj, name), *args, **kwargs)
        return _iterate(self._loop_thread, agen)

    return method


def _wrap_plain(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def method(self: SyncFace, *args: Any, **kwargs: Any) -> Any:
        return self._loop_thread.call(getattr(self._async_obj, name), *args, **kwargs)

    return method


def _iterate(loop_thread: LoopThread, agen: AsyncIterator[Any]) -> Iterator[Any]:
    try:
        while True:
            try:
                yield loop_thread.run(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None and loop_thread.alive:
            loop_thread.run(aclose())


def sync_face(
    async_cls: type, *, close_method: str | None = "close", exclude: tuple[str, ...] = ()
) -> Callable[[type[SyncFace]], Any]:
    """Class decorator: give a ``SyncFace`` subclass a blocking twin of each public method of ``async_cls``.

    Methods the subclass defines itself win; ``exclude`` names public methods of the core that
    are plumbing for the face, not part of its API. ``close`` is handled by :class:`SyncFace` (it also stops
    the loop). An ``__aiter__`` on the async class becomes ``__iter__``.
    """

    def decorate(cls: type[SyncFace]) -> type[SyncFace]:
        cls._async_class = async_cls
        cls._close_method = close_method
        _share_signature(cls, async_cls)
        for name, fn in inspect.getmembers(async_cls, inspect.isfunction):
            if name.startswith("_") or name in cls.__dict__ or name == close_method or name in exclude:
                continue
            if inspect.iscoroutinefunction(fn):
                setattr(cls, name, _wrap_coroutine(name, fn))
            elif inspect.isasyncgenfunction(fn):
                setattr(cls, name, _wrap_asyncgen(name, fn))
            else:
                setattr(cls, name, _wrap_plain(name, fn))
        for name, attr in vars(async_cls).items():
            # A public classmethod (``from_config``) builds the face when called on the face.
            if isinstance(attr, classmethod) and not name.startswith("_") and name not in cls.__dict__:
                setattr(cls, name, classmethod(attr.__func__))
        if hasattr(async_cls, "__aiter__") and "__iter__" not in cls.__dict__:

            def __iter__(self: SyncFace) -> Iterator[Any]:
                agen = self._loop_thread.call(self._async_obj.__aiter__)
                return _iterate(self._loop_thread, agen)

            cls.__iter__ = __iter__  # type: ignore[attr-defined]
        return cls

    return decorate


def _share_signature(cls: type[SyncFace], async_cls: type) -> None:
    """Show the core's constructor on the face: ``help()`` and IDEs see the real parameters
    (not ``*args, **kwargs``), and the options stay documented once, in the core's docstring."""
    init: Any = cls.__dict__.get("__init__")
    if init is None:

        def __init__(self: SyncFace, *args: Any, **kwargs: Any) -> None:
            super(cls, self).__init__(*args, **kwargs)

        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        init = __init__
        type.__setattr__(cls, "__init__", init)
    sig = inspect.signature(async_cls)  # the constructor's parameters, without self
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    init.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()])
    init.__doc__ = "The asyncio class's options: see the class documentation."
    type.__setattr__(cls, "__signature__", sig)
    face_doc = inspect.cleandoc(cls.__doc__ or "")
    core_doc = inspect.cleandoc(async_cls.__doc__ or "")
    if core_doc and core_doc not in face_doc:
        cls.__doc__ = f"{face_doc}\n\nThe asyncio class's documentation (same options):\n\n{core_doc}"
