"""Running the real ``kafka-core`` console script in tests: as a user's shell would, or in a
Python whose imports of some packages fail (a plain install without an extra)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

__all__ = ["KAFKA_CORE", "blocked_imports", "ok", "one_error_line", "run", "run_without"]


def _script() -> str:
    beside = Path(sys.prefix) / "bin" / "kafka-core"
    found = str(beside) if beside.exists() else shutil.which("kafka-core")
    if found is None:
        pytest.fail("the kafka-core console script is not installed (pip install -e .)", pytrace=False)
    return found


KAFKA_CORE = _script()


def _env(servers: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    if servers is not None:
        env["KAFKA_BOOTSTRAP_SERVERS"] = servers
    env.update(extra or {})
    return env


def run(
    *args: str, servers: str | None, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """``kafka-core ARGS`` with the broker address in ``KAFKA_BOOTSTRAP_SERVERS``."""
    return subprocess.run(
        [KAFKA_CORE, *args], input=stdin, capture_output=True, env=_env(servers), timeout=timeout, check=False
    )


def blocked_imports(modules: Sequence[str]) -> str:
    """Python source that makes importing ``modules`` (and their submodules) fail, as if absent."""
    return (
        "import sys\n"
        f"for name in {list(modules)!r}:\n"
        "    for loaded in [m for m in sys.modules if m == name or m.startswith(name + '.')]:\n"
        "        del sys.modules[loaded]\n"
        "    sys.modules[name] = None\n"
    )


def run_without(
    modules: Sequence[str],
    *args: str,
    servers: str | None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """``kafka-core ARGS`` in a Python where ``modules`` cannot be imported."""
    code = blocked_imports(modules) + "from kafka_core.cli import main\nsys.exit(main())\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=_env(servers, env),
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stderr.decode())
    return proc.stdout.decode()


def one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """A failure's stderr: exactly one line, no traceback; returns it."""
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kafka-core"), lines[0]
    return lines[0]
