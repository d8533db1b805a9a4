"""Which Python Spark's workers run, and whether it can import kafka_core.

Spark runs a Python data source's code (lookup, planning, the tasks) in Python workers it starts
itself, with the interpreter ``SparkContext.pythonExec`` names: ``PYSPARK_PYTHON`` as it was when
the context was created, else ``python3`` from PATH. It is not the driver's interpreter: a job
started as ``/path/to/venv/bin/python job.py`` without activating the venv gets workers from
whatever ``python3`` PATH finds, which usually lacks kafka_core, and Spark then fails with
``[DATA_SOURCE_NOT_FOUND]`` or ``ModuleNotFoundError: No module named 'kafka_core'``.
``spark.pyspark.python`` is read by ``spark-submit`` only (it sets ``PYSPARK_PYTHON`` for the
driver); set on a session builder it changes nothing.

:func:`check_worker_python` asks that interpreter (once per interpreter and directory, in a
subprocess) whether it finds kafka_core and pyarrow. When it does not, on a local master with no
``PYSPARK_PYTHON`` chosen, the session's Python workers are switched to the driver's interpreter
(``pythonExec`` is read each time Spark wraps a Python function, so this works for an existing
session); otherwise a warning names both interpreters and the fix.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("kafka_core.spark")

__all__ = ["WorkerPython", "check_worker_python", "probe_python"]

NEEDED = ("kafka_core", "pyarrow")
DRIVER_VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"

_PROBE = (
    "import importlib.util as u, json, sys; print(json.dumps({'version': '%d.%d' % sys.version_info[:2], "
    f"'missing': [m for m in {NEEDED!r} if u.find_spec(m) is None]}}))"
)


@dataclass(frozen=True)
class WorkerPython:
    """What an interpreter answered: its path (None: not found), Python version and what it lacks."""

    path: str | None
    version: str | None = None
    missing: tuple[str, ...] = ()
    error: str | None = None  # it could not be run or did not answer

    @property
    def usable(self) -> bool:
        return (
            self.path is not None
            and self.error is None
            and not self.missing
            and self.version == DRIVER_VERSION
        )

    def problem(self) -> str:
        if self.path is None:
            return "is not found (on PATH, or from the driver's working directory)"
        if self.error is not None:
            return f"could not be asked what it imports ({self.error})"
        if self.version != DRIVER_VERSION:
            return f"is Python {self.version}, the driver runs Python {DRIVER_VERSION}"
        return "cannot import " + " and ".join(self.missing)


@functools.lru_cache(maxsize=32)
def _probe(path: str, cwd: str) -> WorkerPython:
    try:
        done = subprocess.run(
            [path, "-c", _PROBE], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        return WorkerPython(path, str(answer["version"]), tuple(answer["missing"]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError, TypeError) as exc:
        return WorkerPython(path, error=f"{type(exc).__name__}: {exc}")


def probe_python(executable: str) -> WorkerPython:
    """Ask ``executable`` (a path, or a name PATH resolves, as Spark resolves it) for its Python
    version and which of kafka_core and pyarrow it cannot import; cached per interpreter and
    working directory (a worker finds modules in the driver's working directory too)."""
    path = shutil.which(executable)
    if path is None:
        return WorkerPython(None)
    path = os.path.abspath(path)
    if path == os.path.abspath(sys.executable):
        return WorkerPython(path, DRIVER_VERSION)
    return _probe(path, os.getcwd())


def check_worker_python(spark: Any) -> None:
    """Make sure the session's Python workers can import kafka_core, or say why they cannot.

    On a local master with no ``PYSPARK_PYTHON`` set, a worker interpreter that lacks kafka_core
    is replaced by the driver's (the workers run on this machine, so it is there); elsewhere, or
    when ``PYSPARK_PYTHON`` names it, the choice is the user's and a warning names the fix.
    """
    try:
        context = spark.sparkContext
        configured = str(context.pythonExec)
        master = str(context.master)
    except Exception:  # Spark Connect has no SparkContext: its workers are the server's business
        return
    worker = probe_python(configured)
    if worker.usable:
        return
    named = configured if worker.path in (None, configured) else f"{configured} ({worker.path})"
    chosen = "PYSPARK_PYTHON" in os.environ
    if master.startswith("local") and not chosen:
        context.pythonExec = sys.executable
        log.warning(
            "kafka_core: Spark would start this session's Python workers with %s, which %s; they now run "
            "the driver's interpreter %s. Set PYSPARK_PYTHON=%s before creating the SparkSession to "
            "choose it yourself (and silence this warning).",
            named,
            worker.problem(),
            sys.executable,
            sys.executable,
        )
        return
    log.warning(
        "kafka_core: Spark starts its Python workers with %s (%s), not with the driver's interpreter %s, "
        "and %s %s: format('kafka_core') will fail with [DATA_SOURCE_NOT_FOUND] or \"ModuleNotFoundError: "
        "No module named 'kafka_core'\". Set PYSPARK_PYTHON=%s in the environment before the SparkSession "
        "is created (spark-submit: --conf spark.pyspark.python=...), install kafka_core[arrow] into %s, "
        "or on a cluster ship an environment that has it (docs/spark-cluster.md).",
        named,
        "from PYSPARK_PYTHON" if configured == os.environ.get("PYSPARK_PYTHON") else "Spark's default",
        sys.executable,
        configured,
        worker.problem(),
        sys.executable,
        configured,
    )
