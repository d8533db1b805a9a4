"""A chaos run stopped by SIGINT or SIGTERM keeps what it ran: the cycle under way ends, the
books of the cycles run are made and the artifact is written, marked INCOMPLETE, never PASS."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from kafka_core.devtools.chaos import cli, faulted, scenarios, stopping
from kafka_core.devtools.chaos.artifacts import Outcome


class _Broker:
    def create_topic(self, name: str, partitions: int) -> None:
        pass


class _Workload:
    """Traffic that always resumes at once: the test is about stopping, not the faults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def wait_progress(self, since: float, timeout: float) -> tuple[float, float]:
        return 0.01, 0.02

    def close(self) -> None:
        pass


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``broker-restart-sigterm`` runs 5 cycles and sends the signal asked for inside cycle 1;
    ``broker-restart-sigkill`` records whether it ran at all."""
    seen: dict[str, Any] = {"faults": 0, "books": 0, "second_ran": False, "signal": signal.SIGTERM}

    def books(outcome: Outcome, wl: Any, failures: list[str], capture: Any = None) -> None:
        seen["books"] += 1
        outcome.tally.acknowledged = outcome.tally.delivered = 100 * len(outcome.cycles)

    def fault(wl: Any) -> dict[str, Any]:
        seen["faults"] += 1
        if seen["faults"] == 2:
            for _ in range(seen.get("repeat", 1)):
                os.kill(os.getpid(), seen["signal"])
        return {}

    def first(outcome: Outcome) -> None:
        failures: list[str] = []
        faulted.faulted_run(outcome, _Broker(), "127.0.0.1:1", [("fault", fault)] * 5, failures)  # type: ignore[arg-type]
        outcome.judge(failures)

    def second(outcome: Outcome) -> None:
        seen["second_ran"] = True
        outcome.judge([])

    monkeypatch.setattr(faulted, "Workload", _Workload)
    monkeypatch.setattr(faulted, "finish_books", books)
    monkeypatch.setattr(faulted, "WARM_S", 0.0)
    monkeypatch.setattr(scenarios, "missing_prerequisite", lambda capability: None)
    monkeypatch.setitem(scenarios.CAPABILITIES, "broker-restart-sigterm", first)
    monkeypatch.setitem(scenarios.CAPABILITIES, "broker-restart-sigkill", second)
    return seen


ARGS = ["run", "--scenario", "broker-restart-sigterm", "--scenario", "broker-restart-sigkill"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_writes_its_books_and_artifact(
    fake_runs: dict[str, Any], tmp_path: Path, sig: signal.Signals
) -> None:
    fake_runs["signal"] = sig
    status = cli.main([*ARGS, "--out", str(tmp_path)])
    assert status == 3
    doc = json.loads((tmp_path / "broker-restart-sigterm.json").read_text())
    assert doc["verdict"] == "INCOMPLETE"
    assert doc["cycles_run"] == 2  # the cycle under way when the signal came was finished
    assert doc["stopped"] == {"by": sig.name, "cycles_run": 2, "cycles_planned": 5}
    assert doc["acknowledged"] == 200 and doc["lost"] == 0
    assert f"stopped by {sig.name} after 2 of 5 cycles" in doc["reason"]
    assert fake_runs["books"] == 1
    assert not fake_runs["second_ran"]
    assert not (tmp_path / "broker-restart-sigkill.json").exists()


def test_a_stopped_run_whose_books_fail_is_a_failure(
    fake_runs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lossy(outcome: Outcome, wl: Any, failures: list[str], capture: Any = None) -> None:
        outcome.tally.lost = 3

    monkeypatch.setattr(faulted, "finish_books", lossy)
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 1
    doc = json.loads((tmp_path / "broker-restart-sigterm.json").read_text())
    assert doc["verdict"] == "FAIL"
    assert "3 acknowledged records lost" in doc["reason"]


def test_a_second_signal_stops_at_once_and_keeps_the_cycles(
    fake_runs: dict[str, Any], tmp_path: Path
) -> None:
    fake_runs["repeat"] = 2
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 3
    doc = json.loads((tmp_path / "broker-restart-sigterm.json").read_text())
    assert doc["verdict"] == "INCOMPLETE"
    assert "no books made" in doc["reason"]
    assert doc["cycles_run"] == 1  # cycle 1 was cut short: only cycle 0 is recorded
    assert fake_runs["books"] == 0


def test_the_handlers_are_restored_and_a_new_run_starts_afresh(
    fake_runs: dict[str, Any], tmp_path: Path
) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    cli.main([*ARGS, "--out", str(tmp_path)])
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    with stopping.graceful_stop():
        assert stopping.stop_requested() is None


def test_a_run_not_stopped_passes(fake_runs: dict[str, Any], tmp_path: Path) -> None:
    fake_runs["signal"] = 0  # signal 0: nothing is delivered
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "broker-restart-sigterm.json").read_text())
    assert doc["verdict"] == "PASS" and doc["cycles_run"] == 5 and doc["stopped"] is None
    assert fake_runs["second_ran"]
