"""Fixtures of the ``--watch`` tests: a clock the watch loop's sleeps move."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_core.cli import watch


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """A monotonic clock the watch's sleeps move; Ctrl-C on the sleep after ``stop[0]`` refreshes."""
    now = [1000.0]
    stop = [3]
    slept = [0]

    def sleep(seconds: float) -> None:
        slept[0] += 1
        if slept[0] >= stop[0]:
            raise KeyboardInterrupt
        now[0] += max(seconds, 0.001)

    monkeypatch.setattr(watch.time, "sleep", sleep)
    monkeypatch.setattr(watch.time, "monotonic", lambda: now[0])
    yield stop
