"""Opt-in profiles of the executors' Python: where a task's time goes in kafka_core's own code.

With ``KAFKA_CORE_SPARK_PROFILE`` set to a directory in the Python workers' environment (on a
local master, the driver's), every write task and every read task of ``format("kafka_core")``
runs its own code under :mod:`cProfile` and leaves ``<write|read>-<pid>-<n>.prof`` there, with
the task's wall and CPU time beside it in ``.json``. A read task's profile covers only the time
spent producing its batches, not Spark's Arrow serialisation between them, so wall time minus
profiled time is what Spark and the JVM took. Off (the default), nothing is wrapped.
"""

from __future__ import annotations

import cProfile
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ENV", "profile_dir", "profiled_call", "profiled_iter"]

ENV = "KAFKA_CORE_SPARK_PROFILE"
T = TypeVar("T")
_COUNTER = itertools.count()


def profile_dir() -> Path | None:
    """The directory profiles go to, or None when profiling is off."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def _dump(kind: str, prof: cProfile.Profile, figures: dict[str, Any]) -> None:
    folder = profile_dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{kind}-{os.getpid()}-{next(_COUNTER)}"
    prof.dump_stats(f"{stem}.prof")
    Path(f"{stem}.json").write_text(json.dumps(figures))


def profiled_call(kind: str, fn: Callable[[], T]) -> T:
    """``fn()``, profiled when :data:`ENV` is set."""
    if profile_dir() is None:
        return fn()
    prof = cProfile.Profile()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        return prof.runcall(fn)
    finally:
        _dump(kind, prof, {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu})


def profiled_iter(kind: str, items: Iterator[T]) -> Iterator[T]:
    """``items``, each step profiled when :data:`ENV` is set; the time between steps (Spark's
    own, serialising what was yielded) is counted apart as ``outside_s``."""
    if profile_dir() is None:
        return items
    return _profiled(kind, items)


def _profiled(kind: str, items: Iterator[T]) -> Iterator[T]:
    prof = cProfile.Profile()
    start, cpu = time.perf_counter(), time.process_time()
    inside = 0.0
    rows = 0
    try:
        while True:
            began = time.perf_counter()
            prof.enable()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                prof.disable()
                inside += time.perf_counter() - began
            rows += getattr(item, "num_rows", 0)
            yield item
    finally:
        wall = time.perf_counter() - start
        figures = {"wall_s": wall, "cpu_s": time.process_time() - cpu, "inside_s": inside, "rows": rows}
        _dump(kind, prof, {**figures, "outside_s": wall - inside})
