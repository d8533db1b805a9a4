"""What a test needs and cannot have fails it: strict by default, in CI or not.

A test that skipped when its broker, Java, pyspark or Kafka's protocol definitions were missing
would let ``bash ci/test.sh`` pass on a machine where half the suite never ran. So it fails,
naming what is missing. ``KAFKA_CORE_ALLOW_SKIP=1`` is the one opt-out (for a machine without
Java, say): such tests then skip, and the run's summary lists each one under that name
(``summary_lines``); CI refuses it (tests/conftest.py).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable
from types import ModuleType
from typing import NoReturn

import pytest

from kafka_core._env import env_flag

ALLOW_SKIP = "KAFKA_CORE_ALLOW_SKIP"
# Every skip the opt-out allowed starts its reason with this, so the summary can find it.
MARK = f"[{ALLOW_SKIP}] "


def skips_allowed() -> bool:
    return env_flag(ALLOW_SKIP)


def unavailable(what: str, why: object) -> NoReturn:
    """Fails the test (or the module, at import): ``what`` it needs could not be had, ``why``.
    A skip instead under KAFKA_CORE_ALLOW_SKIP=1."""
    if skips_allowed():
        pytest.skip(f"{MARK}{what}: {why}", allow_module_level=True)
    pytest.fail(
        f"{what} is needed and could not be had: {why}\n"
        f"(set {ALLOW_SKIP}=1 to skip such tests instead of failing)",
        pytrace=False,
    )


def need_module(name: str) -> ModuleType:
    """The module, imported: a test dependency (pyproject's extras) that will not import fails,
    as ``unavailable``; pytest.importorskip would skip silently."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"the {name} module", f"{exc} (install the test extras: pip install -e '.[test,spark]')")


def summary_lines(reasons: Iterable[str]) -> list[str]:
    """The lines naming every skip the opt-out allowed, given the run's skip reasons."""
    allowed = Counter(reason[reason.index(MARK) + len(MARK) :] for reason in reasons if MARK in reason)
    if not allowed:
        return []
    return [
        f"{ALLOW_SKIP}=1: {allowed.total()} skipped that would have failed; what they lacked:",
        *(f"  {count} x {reason}" for reason, count in sorted(allowed.items())),
    ]
