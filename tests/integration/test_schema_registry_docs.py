"""Every ```python example of docs/schema-registry.md runs, as written, against the test broker and
the session's registry: ``127.0.0.1:9092`` (Spark examples: ``broker1:9092``) becomes the broker's
address and ``http://localhost:8081`` the registry's. Plain examples run each in a fresh
interpreter, in the guide's order; those that use the ``spark`` session run one after the other in
one Spark interpreter, as test_doc_examples.py runs the Spark guides (whose RUN_ELSEWHERE points
here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_doc_examples import examples, spark_script

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "schema-registry.md"
REGISTRY_PLACEHOLDER = "http://localhost:8081"
BROKER_PLACEHOLDER = "127.0.0.1:9092"

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

ALL = examples(GUIDE.read_text())
SPARK = [code for code in ALL if "spark." in code or "spark\n" in code]
CODES = [code for code in ALL if code not in SPARK]


def test_the_guide_has_examples() -> None:
    assert len(CODES) >= 4
    assert all(REGISTRY_PLACEHOLDER in code for code in ALL)


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


@pytest.mark.timeout(900)
def _spark_examples_run(bootstrap_servers: str, schema_registry: str, tmp_path: Path) -> None:
    codes = [code.replace(REGISTRY_PLACEHOLDER, schema_registry) for code in SPARK]
    script = tmp_path / "examples.py"
    script.write_text(spark_script(codes, bootstrap_servers))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=840
    )
    assert proc.stdout.count(": ok\n") == len(codes) and proc.returncode == 0, (
        f"{proc.stdout}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )


if SPARK:  # defined only when the guide has Spark examples: no test that cannot apply
    test_schema_registry_spark_examples_run = _spark_examples_run
