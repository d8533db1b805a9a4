"""Share group (KIP-932) test set-up on a real Apache Kafka: topics, groups that read from the
beginning, records, and a broker without share groups.

A share group starts at the end of each partition by default (``share.auto.offset.reset``
latest); a test that produces first sets its group to earliest through our admin.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from fakes.topics import wait_writable
from kafka_core import KafkaAdmin, KafkaProducer, NewTopic
from kafka_core.admin import ConfigResource
from kafka_core.devbroker import TansuBroker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def make_topic(bootstrap: str, partitions: int = 1, prefix: str = "share") -> str:
    """A fresh topic, every partition ready to take writes."""
    name = unique(prefix)
    with KafkaAdmin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    wait_writable(bootstrap, name, partitions)
    return name


def from_earliest(bootstrap: str, group_id: str) -> None:
    """The group's members start at the beginning of partitions it has no state for yet."""
    with KafkaAdmin(bootstrap) as admin:
        resource = ConfigResource.group(group_id)
        admin.incremental_alter_configs({resource: {"share.auto.offset.reset": "earliest"}})[
            resource
        ].result()


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    with KafkaProducer(bootstrap) as producer:
        for value in values:
            producer.send(topic, value, partition=partition if partition is not None else 0)
        producer.flush()


def wait_for(check: object, what: str, timeout: float = 60.0) -> None:
    """Poll ``check()`` until it is true (the broker applies some changes a moment later)."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def broker_without_share_groups(session_tansu: TansuBroker | None) -> Iterator[str]:
    """A Tansu (no KIP-932): the session's, else one of our own for the test (starts in 0.1 s)."""
    if session_tansu is not None:
        yield session_tansu.bootstrap
        return
    broker = TansuBroker().start()
    try:
        yield broker.bootstrap
    finally:
        broker.close()


SHARE_EXAMPLE = re.compile(r"<!-- no-test: needs share groups[^\n]*-->\s*\n```python\n(.*?)```", re.S)
ROOT = Path(__file__).resolve().parents[2]


def run_share_examples(guide: str, bootstrap: str, tmp_path: Path) -> list[str]:
    """Run the guide's examples marked ``<!-- no-test: needs share groups ... -->`` (they cannot
    run on the default test broker, Tansu) against ``bootstrap``; returns their stdout."""
    blocks = SHARE_EXAMPLE.findall((ROOT / guide).read_text())
    assert blocks, f"no share-group example in {guide}"
    outputs = []
    for code in blocks:
        script = tmp_path / "example.py"
        script.write_text(code.replace("127.0.0.1:9092", bootstrap))
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=150
        )
        assert proc.returncode == 0, f"{guide} example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
        outputs.append(proc.stdout)
    return outputs
