"""Registering the data source when Spark already has it, with no false warning.

Spark 4 looks up the top-level ``pyspark_*`` modules of its workers' Python once per JVM; when
that Python has kafka_core (``PYSPARK_PYTHON`` names the venv), ``format("kafka_core")`` is
registered before :func:`kafka_core.spark.register` runs, and Spark's DataSourceManager logs a
WARN that the explicit registration "replaced a statically registered data source" (or "a
previously registered" one, on a second call). ``register`` still registers, for the workers'
launcher (:mod:`kafka_core.spark.launcher`), so these helpers tell whether what is there is this
very class: then Spark's warning is held back and the replacement logged at DEBUG; a different
class keeps Spark's warning and adds one naming it.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Iterator
from io import BytesIO
from typing import Any

log = logging.getLogger("kafka_core.spark")

__all__ = ["pickled_class", "registered_class", "replacing"]

# The Spark class whose logger says "replaced a statically registered data source".
MANAGER_LOGGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


class _NamesOnly(pickle.Unpickler):
    """Reads a pickled class reference without importing anything: a global becomes its name."""

    def find_class(self, module: str, name: str) -> Any:
        return ("global", module, name)


def pickled_class(data: bytes) -> str | None:
    """``module.qualname`` of a class pickled by reference (as cloudpickle pickles an importable
    class: what Spark holds for a registered Python data source), else None (a class pickled by
    value, or anything else)."""
    try:
        found = _NamesOnly(BytesIO(data)).load()
    except Exception:  # by value: the reduce calls meet names, not functions
        return None
    if isinstance(found, tuple) and len(found) == 3 and found[0] == "global":
        return f"{found[1]}.{found[2]}"
    return None


def registered_class(spark: Any, name: str) -> str | None:
    """The class Spark has for the Python data source ``name`` (``module.qualname``); ``""``
    when it has one that is not a class reference, None when it has none or cannot say (Spark
    Connect, a Spark without these calls)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        if not manager.dataSourceExists(name):
            return None
        command = manager.lookupDataSource(name).dataSourceCls().command()
        text = str(command.mkString(","))
        data = bytes(int(b) & 0xFF for b in text.split(",")) if text else b""
    except Exception as exc:  # Connect has no JVM here; other versions may lack the calls
        log.debug("kafka_core: cannot see what Spark has registered as %r (%s)", name, exc)
        return None
    return pickled_class(data) or ""


@contextlib.contextmanager
def _quiet_manager(spark: Any) -> Iterator[None]:
    """Spark's DataSourceManager logs nothing below ERROR meanwhile; its level is restored after."""
    try:
        jvm = spark._jvm
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        own = bool(config.getLoggers().containsKey(MANAGER_LOGGER))
        before = config.getLoggerConfig(MANAGER_LOGGER).getLevel() if own else None
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        configurator.setLevel(MANAGER_LOGGER, jvm.org.apache.logging.log4j.Level.ERROR)
    except Exception as exc:  # not log4j 2: Spark's warning stays
        log.debug("kafka_core: cannot quieten %s (%s)", MANAGER_LOGGER, exc)
        yield
        return
    try:
        yield
    finally:
        try:
            if own:
                configurator.setLevel(MANAGER_LOGGER, before)
            else:
                config.removeLogger(MANAGER_LOGGER)
                context.updateLoggers()
        except Exception as exc:
            log.debug("kafka_core: cannot restore %s's log level (%s)", MANAGER_LOGGER, exc)


@contextlib.contextmanager
def replacing(spark: Any, name: str, cls: type) -> Iterator[None]:
    """Around ``spark.dataSource.register(cls)``: quiet when Spark already has ``cls`` itself,
    a warning naming the other class when it has a different one."""
    ours = f"{cls.__module__}.{cls.__qualname__}"
    there = registered_class(spark, name)
    if there is None:
        yield
    elif there == ours:
        log.debug(
            "kafka_core: Spark already has format(%r) as %s (found in its workers' Python or registered "
            "before); registering it again for this session",
            name,
            ours,
        )
        with _quiet_manager(spark):
            yield
    else:
        log.warning(
            "kafka_core: format(%r) was registered by %s, not %s; kafka_core's data source replaces it "
            "in this session",
            name,
            there or "a class pickled by value (one the workers cannot import by name)",
            ours,
        )
        yield
