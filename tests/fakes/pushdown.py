"""What the pushdown tests share (tests/integration/test_spark_pushdown.py on the main venv's
Spark, tests/spark_diff/test_diff_pushdown.py beside Spark's connector): record timestamps out
of order, timestamp literals, and how many rows a read's scan handed Spark."""

from __future__ import annotations

import datetime as dt
from typing import Any


def out_of_order_stamp(base_ms: int, step_ms: int, offset: int) -> int:
    """A record's timestamp: ``step_ms`` apart, with every fifth 2.5 steps back (a producer's
    CreateTime out of order) and every seventh 1.3 steps ahead."""
    back = step_ms * 5 // 2 if offset % 5 == 4 else 0
    ahead = step_ms * 13 // 10 if offset % 7 == 3 else 0
    return base_ms + step_ms * offset - back + ahead


def at(ms: int) -> str:
    """A SQL timestamp literal for ``ms`` (the sessions are UTC)."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return "timestamp'" + t.strftime("%Y-%m-%d %H:%M:%S.%f") + "'"


def scanned(df: Any) -> tuple[list[Any], int]:
    """The rows of ``df`` and how many rows its scan handed Spark (the scan node's
    ``numOutputRows``, before any filter Spark applies)."""
    rows = df.collect()
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metric = leaves.apply(i).metrics().get("numOutputRows")
        if metric.isDefined():
            total += int(metric.get().value())
    return rows, total
