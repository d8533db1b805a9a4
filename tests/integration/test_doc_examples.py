"""Every ```python example in the README and the user guides runs, as written, against the test broker.

The guides use ``127.0.0.1:9092`` as the broker address, as the README does; each example runs in a
fresh interpreter with that address replaced by the test broker's, so an example that stops
working fails here. An example that cannot run here (one that blocks forever by design, or needs a
TLS or SASL listener the test broker lacks) is preceded by the line ``<!-- no-test -->``, or
``<!-- no-test: why -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = [
    "README.md",
    "docs/producer.md",
    "docs/consumer.md",
    "docs/columnar.md",
    "docs/security.md",
    "docs/logging.md",
    "docs/tuning.md",
    "docs/migrating.md",
    "docs/admin.md",
    "docs/transport.md",
    "docs/metrics.md",
    "docs/cli.md",
    "docs/transactions.md",
]
PLACEHOLDER = "127.0.0.1:9092"
_BLOCK = re.compile(r"(<!-- no-test(?::[^\n]*?)? -->\s*\n)?```python\n(.*?)```", re.S)


def examples(text: str) -> list[str]:
    """The runnable python blocks of a markdown text, in order."""
    return [m.group(2) for m in _BLOCK.finditer(text) if not m.group(1)]


def _cases() -> list[pytest.param]:  # type: ignore[valid-type]
    cases = []
    for guide in GUIDES:
        path = ROOT / guide
        if not path.exists():
            continue
        for i, code in enumerate(examples(path.read_text())):
            cases.append(pytest.param(guide, code, id=f"{Path(guide).stem}-{i + 1}"))
    return cases


def test_examples_are_found() -> None:
    text = (
        "a\n```python\nprint(1)\n```\n<!-- no-test -->\n```python\nwhile True: pass\n```\n```bash\nls\n```\n"
        "<!-- no-test: needs a TLS listener -->\n```python\nconnect()\n```\n<!-- a note -->\n```python\nprint(2)\n```\n"
    )
    assert examples(text) == ["print(1)\n", "print(2)\n"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("guide", "code"), _cases())
def test_guide_example_runs(guide: str, code: str, bootstrap_servers: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code.replace(PLACEHOLDER, bootstrap_servers))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150
    )
    assert proc.returncode == 0, f"{guide} example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
