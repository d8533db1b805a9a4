"""Clients kept per Python worker, keyed by their options.

Spark reuses a Python worker for task after task, so a client built once per worker (not per
task) saves the connection set-up on every task. An entry unused for ``idle_s`` is closed; one
that failed is dropped by its user and rebuilt on the next task, never reused.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("kafka_core.spark")

T = TypeVar("T")

__all__ = ["WorkerCache"]


class WorkerCache(Generic[T]):
    def __init__(
        self, build: Callable[[dict[str, Any]], T], close: Callable[[T], Any], idle_s: float = 300.0
    ) -> None:
        self._build = build
        self._close = close
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[T, float]] = {}
        # one build per key at a time: a task and the warm-up thread started before it wait for
        # the same client rather than each building (and connecting) one
        self._building: dict[str, threading.Lock] = {}

    def get(self, key: str, options: dict[str, Any]) -> T:
        """The cached object for ``key`` (built from ``options`` if there is none)."""
        now = time.monotonic()
        stale: list[T] = []
        with self._lock:
            for k, (obj, used) in list(self._entries.items()):
                if k != key and now - used > self.idle_s:
                    stale.append(obj)
                    del self._entries[k]
            entry = self._entries.get(key)
            if entry is not None:
                self._entries[key] = (entry[0], now)
        for obj in stale:
            self._quietly_close(obj)
        if entry is not None:
            return entry[0]
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries[key] = (entry[0], time.monotonic())
                    return entry[0]
            obj = self._build(options)
            with self._lock:
                self._entries[key] = (obj, time.monotonic())
            return obj

    def peek(self, key: str) -> T | None:
        """The cached object for ``key`` if there is one (never builds)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries[key] = (entry[0], time.monotonic())
        return None if entry is None else entry[0]

    def touch(self, key: str) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries[key] = (entry[0], time.monotonic())

    def discard(self, key: str, obj: T) -> None:
        """Drop ``obj`` (after a failure): the next ``get`` builds a new one."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is obj:
                del self._entries[key]
        self._quietly_close(obj)

    def clear(self) -> None:
        with self._lock:
            entries, self._entries = self._entries, {}
        for obj, _ in entries.values():
            self._quietly_close(obj)

    def __len__(self) -> int:
        return len(self._entries)

    def _quietly_close(self, obj: T) -> None:
        with contextlib.suppress(Exception):
            self._close(obj)
