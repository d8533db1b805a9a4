"""The interpreter Spark starts for the ``kafka_core`` data source's Python workers.

A Python data source costs Spark a Python process per step: one to make the source and its
schema, one to plan the read (or make the writer), a daemon that forks the tasks' workers, one
for a write's commit; each started one after another on a new application's first job. For a
pip-installed PySpark, Spark puts ``pyspark.zip`` first on their path, and Python compiles every
module it imports from a zip afresh: about half a second of CPU per process before our code
runs, nearly 1.5 s of a first read and more of a write (a first job of any Python data source or
UDF pays it). Spark names the interpreter per registered function (``pythonExec``), so
:func:`kafka_core.spark.register` gives the data source a launcher (this module's :func:`main`
run by the same interpreter) that caches the zip's compiled modules
(:mod:`kafka_core.spark.zip_bytecode`) and then runs what Spark asked for, as ``python -m`` would.
The session's other Python functions keep their interpreter.

A local session gets the launcher by default: the driver writes it and its workers run on the
same machine. Elsewhere the executors would need the same file at the same path, so it is only
used when asked for (``register(spark, fast_start=True)``) and then it is the console script
``kafka-core-spark-python`` installed beside the workers' interpreter.
"""

from __future__ import annotations

import contextlib
import logging
import os
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("kafka_core.spark")

__all__ = ["CONSOLE_SCRIPT", "launcher_for", "main", "worker_launcher"]

CONSOLE_SCRIPT = "kafka-core-spark-python"


def main(argv: list[str] | None = None) -> None:
    """Run as the interpreter: ``-m pyspark.<module> args...`` runs that module as ``__main__``
    with the zip bytecode cache installed first; anything else is handed to the real
    interpreter unchanged."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[0] == "-m" and args[1].startswith("pyspark."):
        try:
            from kafka_core.spark.zip_bytecode import install

            install()
        except Exception as exc:  # the cache only saves time: never stop a worker
            print(f"kafka_core.spark.launcher: no bytecode cache ({exc!r})", file=sys.stderr, flush=True)
        module = args[1]
        if module == "pyspark.daemon":
            preload()
        # as `python -m` sets them: the working directory first on the path, argv[0] the module's
        sys.path[0] = os.getcwd()
        sys.argv = [module, *args[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    os.execv(sys.executable, [sys.executable, *args])


# What the data source's tasks import (kafka_core.spark.write and .read import most of it
# lazily, at their first task): imported once in the daemon, before it forks the workers.
TASK_MODULES = (
    "pyspark.worker",  # a forked worker imports it (and the data source API) before its task
    "pyspark.sql.datasource",
    "pyarrow",
    "pyarrow.compute",
    "kafka_core.spark.write",
    "kafka_core.spark.read",
    "kafka_core.producer.sync",
    "kafka_core.sync_client",
)


def preload() -> None:
    """Import :data:`TASK_MODULES` in Spark's worker daemon. Spark stops a Python worker that
    has been idle for a minute and forks a new one for the next task; without this each new
    worker imports them again (about 1 s of a write of 1,000,000 rows run after a pause, on two
    cores). A module that fails to import is left to the task, which reports it."""
    import importlib

    for name in TASK_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the task imports it again and fails with the real cause
            print(f"kafka_core.spark.launcher: not preloaded: {name} ({exc!r})", file=sys.stderr, flush=True)
            return


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kafka_core" / "spark-launcher"


def _write_launcher(python: str) -> str | None:
    """A launcher script for ``python`` in the user's cache, named by the interpreter it runs;
    None when it cannot be written."""
    import hashlib  # driver-side only: the workers this module starts do not pay these imports
    import shlex
    import tempfile

    body = (
        "#!/bin/sh\n"
        "# kafka_core: starts Spark's Python workers for the kafka_core data source "
        "(kafka_core/spark/launcher.py)\n"
        f'exec {shlex.quote(python)} -c "from kafka_core.spark.launcher import main; main()" "$@"\n'
    )
    name = hashlib.blake2b(body.encode(), digest_size=8).hexdigest()
    path = _cache_root() / name / CONSOLE_SCRIPT
    try:
        if path.is_file() and path.read_text() == body and os.access(path, os.X_OK):
            return str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(body)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("kafka_core: no Spark worker launcher (%s)", exc)
        return None
    return str(path)


def launcher_for(python: str, *, local: bool) -> str | None:
    """The launcher for the workers' interpreter ``python`` (a path, or a name PATH resolves):
    on a local master one written for it; otherwise the console script installed beside it, when
    there is one. None when there is none to use."""
    import shutil

    found = shutil.which(python)
    if found is None:
        return None
    path = os.path.abspath(found)  # not resolved: a venv's python is a link out of its bin/
    if local:
        return _write_launcher(path)
    script = os.path.join(os.path.dirname(path), CONSOLE_SCRIPT)
    return script if os.access(script, os.X_OK) else None


@contextlib.contextmanager
def worker_launcher(spark: Any, fast_start: bool | None) -> Iterator[str | None]:
    """While registering the data source: the session's ``pythonExec`` is the launcher (Spark
    copies it into the function it wraps), then back to what it was for everything else.
    ``fast_start`` None: on for a local master; True: also elsewhere; False: off."""
    try:
        context = spark.sparkContext
        python = str(context.pythonExec)
        local = str(context.master).startswith("local")
    except Exception:  # Spark Connect: the server starts its workers
        yield None
        return
    if fast_start is False or (fast_start is None and not local):
        yield None
        return
    from kafka_core.spark.workers import probe_python

    # a launcher that cannot import kafka_core would only hide the real error behind its own
    launcher = launcher_for(python, local=local) if probe_python(python).usable else None
    if launcher is None:
        if fast_start:
            log.warning(
                "kafka_core: fast_start asked for, but no launcher can be used for %s (it needs %s beside "
                "it and kafka_core importable); the data source's workers start as usual",
                python,
                CONSOLE_SCRIPT,
            )
        yield None
        return
    context.pythonExec = launcher
    try:
        yield launcher
    finally:
        context.pythonExec = python
