"""A missing prerequisite fails a test unless KAFKA_CORE_ALLOW_SKIP=1 (tests/prerequisites.py), and
a skip it allowed is named in the run's summary; CI refuses the opt-out. The last three run pytest
itself on a probe file, with the suite's own conftest loaded as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import ALLOW_SKIP, MARK, need_module, summary_lines, unavailable

TESTS = Path(__file__).resolve().parents[2]

PROBE = """
from prerequisites import unavailable

def test_needs_a_broker():
    unavailable("the probe's broker", "it did not start: no such binary")

def test_needs_nothing():
    pass
"""


def test_a_missing_prerequisite_fails_without_the_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_SKIP, raising=False)
    monkeypatch.delenv("CI", raising=False)  # strict outside CI too
    with pytest.raises(
        pytest.fail.Exception, match=rf"(?s)Apache Kafka is needed .*: refused.*{ALLOW_SKIP}=1"
    ):
        unavailable("Apache Kafka", "refused")


@pytest.mark.parametrize("value", ["0", "false", "no", ""])
def test_an_opt_out_set_off_is_no_opt_out(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ALLOW_SKIP, value)
    with pytest.raises(pytest.fail.Exception):
        unavailable("Java 17", "no java on PATH")


def test_the_opt_out_skips_with_a_marked_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_SKIP, "1")
    with pytest.raises(pytest.skip.Exception) as info:
        unavailable("Java 17", "no java on PATH")
    assert str(info.value) == f"{MARK}Java 17: no java on PATH"


def test_a_test_dependency_that_will_not_import_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_SKIP, raising=False)
    assert need_module("json") is sys.modules["json"]
    with pytest.raises(pytest.fail.Exception, match="the no_such_module_here module is needed"):
        need_module("no_such_module_here")


def test_the_summary_counts_only_the_skips_the_opt_out_allowed() -> None:
    reasons = [
        f"Skipped: {MARK}Java 17: no java",
        f"Skipped: {MARK}Java 17: no java",
        f"Skipped: {MARK}a broker: it did not start",
        "Skipped: the C extension is not in use (pure-Python run)",
    ]
    assert summary_lines(reasons) == [
        f"{ALLOW_SKIP}=1: 3 skipped that would have failed; what they lacked:",
        "  2 x Java 17: no java",
        "  1 x a broker: it did not start",
    ]
    assert summary_lines(reasons[3:]) == []


def _run_probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", ALLOW_SKIP, "PYTEST_ADDOPTS")}
    clean["PYTHONPATH"] = os.pathsep.join([str(TESTS), clean.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=tmp_path,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_run_missing_a_prerequisite_fails(tmp_path: Path) -> None:
    proc = _run_probe(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert "the probe's broker is needed and could not be had" in proc.stdout, proc.stdout


def test_the_opt_out_skips_loudly(tmp_path: Path) -> None:
    proc = _run_probe(tmp_path, **{ALLOW_SKIP: "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout, proc.stdout
    assert f"{ALLOW_SKIP}=1: tests whose prerequisites are missing skip" in proc.stdout, proc.stdout
    summary = proc.stdout[proc.stdout.index("skipped for want of a prerequisite") :]
    assert f"{ALLOW_SKIP}=1: 1 skipped that would have failed" in summary, proc.stdout
    assert "1 x the probe's broker: it did not start: no such binary" in summary, proc.stdout


def test_ci_refuses_the_opt_out(tmp_path: Path) -> None:
    proc = _run_probe(tmp_path, **{ALLOW_SKIP: "1", "CI": "true"})
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert f"{ALLOW_SKIP} is set under CI=true" in proc.stderr, proc.stderr
