"""The README's promises, run for real: the main job (examples/demo.py) and the quick-start code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_demo_round_trips_every_record(bootstrap_servers: str) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--count", "20000"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every record came back intact" in proc.stdout
    assert re.search(r"consumed 20,000 \(distinct 20,000\)", proc.stdout), proc.stdout


def test_readme_quick_start_runs(bootstrap_servers: str, new_topic) -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 3, "README lost its quick-start examples"
    topic = new_topic(partitions=3)
    for block in blocks:
        code = block.replace("127.0.0.1:9092", bootstrap_servers).replace('"orders"', repr(topic))
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, f"README block failed:\n{block}\n{proc.stdout}{proc.stderr}"
        if "KafkaConsumer(" in block:
            assert "hello" in proc.stdout, f"README consumer printed no record:\n{block}\n{proc.stdout}"
