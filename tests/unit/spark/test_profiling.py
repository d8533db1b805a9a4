"""KAFKA_CORE_SPARK_PROFILE: the executors' opt-in profiles of kafka_core's own task code (issue 41)."""

from __future__ import annotations

import json
import pstats
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_core.spark.profiling import ENV, profiled_call, profiled_iter


class _Batch:
    num_rows = 3


def _batches() -> Iterator[_Batch]:
    for _ in range(4):
        sum(range(10_000))  # some work of ours to see in the profile
        yield _Batch()


def test_off_by_default_nothing_is_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    items = _batches()
    assert profiled_iter("read", items) is items
    assert profiled_call("write", lambda: 7) == 7


def test_a_read_task_leaves_its_profile_and_the_time_spent_outside(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "prof"))
    assert sum(b.num_rows for b in profiled_iter("read", _batches())) == 12
    (figures,) = (tmp_path / "prof").glob("read-*.json")
    got = json.loads(figures.read_text())
    assert got["rows"] == 12 and got["inside_s"] <= got["wall_s"]
    assert got["outside_s"] == pytest.approx(got["wall_s"] - got["inside_s"])
    stats = pstats.Stats(str(figures.with_suffix(".prof")))
    assert any(name == "_batches" for (_, _, name) in stats.stats)  # type: ignore[attr-defined]


def test_a_write_task_is_profiled_even_when_it_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))

    def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        profiled_call("write", fails)
    assert len(list(tmp_path.glob("write-*.prof"))) == 1
    assert "wall_s" in json.loads(next(tmp_path.glob("write-*.json")).read_text())
