"""Every ```python example of docs/schema-registry.md runs, as written, against the test broker and
the session's registry: ``127.0.0.1:9092`` becomes the broker's address and
``http://localhost:8081`` the registry's, each example in a fresh interpreter, in the guide's order
(test_doc_examples.py's RUN_ELSEWHERE points here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_doc_examples import examples

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "schema-registry.md"
REGISTRY_PLACEHOLDER = "http://localhost:8081"
BROKER_PLACEHOLDER = "127.0.0.1:9092"

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

CODES = examples(GUIDE.read_text())


def test_the_guide_has_examples() -> None:
    assert len(CODES) >= 4
    assert all(REGISTRY_PLACEHOLDER in code for code in CODES)


@pytest.mark.parametrize("number", range(1, len(CODES) + 1))
def test_schema_registry_example_runs(
    number: int, bootstrap_servers: str, schema_registry: str, tmp_path: Path
) -> None:
    code = CODES[number - 1]
    script = tmp_path / "example.py"
    script.write_text(
        code.replace(BROKER_PLACEHOLDER, bootstrap_servers).replace(REGISTRY_PLACEHOLDER, schema_registry)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150
    )
    assert proc.returncode == 0, f"example {number} failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
