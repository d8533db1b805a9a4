"""The dev registry kept in a Kafka topic: a registry started again on the same topic answers with
the same ids, versions, deletes and compatibility settings, and goes on numbering after them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from prerequisites import need_module

need_module("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402

from kafka_core.devtools.registry import RegistryServer, SchemaStore  # noqa: E402
from kafka_core.devtools.registry.kafka_log import KafkaSchemaLog  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]


def _avro(*fields: str) -> Schema:
    return Schema(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": f, "type": "long", "default": 0} for f in fields],
            }
        )
    )


def _registry(bootstrap: str, topic: str) -> tuple[RegistryServer, KafkaSchemaLog]:
    log = KafkaSchemaLog(bootstrap, topic)
    store = SchemaStore(journal=log.append)
    store.replay(log.events())
    return RegistryServer(store=store).start(), log


def test_a_restarted_registry_keeps_everything(bootstrap_servers: str) -> None:
    topic = f"_schemas-{uuid.uuid4().hex[:8]}"
    first, log = _registry(bootstrap_servers, topic)
    try:
        c = SchemaRegistryClient({"url": first.url})
        ids = [c.register_schema("orders-value", _avro(*"abc"[: n + 1])) for n in range(3)]
        shared = c.register_schema("other-value", _avro("a"))
        c.set_compatibility("orders-value", "FULL")
        c.set_compatibility(level="NONE")
        c.delete_version("orders-value", 2)
        c.register_schema("gone-value", _avro("z"))
        c.delete_subject("gone-value")
        c.delete_subject("gone-value", permanent=True)
    finally:
        first.close()
        log.close()
    second, log = _registry(bootstrap_servers, topic)
    try:
        c = SchemaRegistryClient({"url": second.url})
        assert c.get_versions("orders-value") == [1, 3]
        assert [c.get_version("orders-value", v).schema_id for v in (1, 3)] == [ids[0], ids[2]]
        assert shared == ids[0]
        assert c.get_compatibility("orders-value") == "FULL" and c.get_compatibility() == "NONE"
        assert "gone-value" not in c.get_subjects(deleted=True)
        assert sorted(c.get_subjects()) == ["orders-value", "other-value"]
        new_id = c.register_schema("more-value", _avro("q", "r", "s", "t"))
        assert new_id > max(ids)  # numbering goes on after what was kept (and the deleted id)
    finally:
        second.close()
        log.close()


def test_the_command_with_kafka(bootstrap_servers: str) -> None:
    topic = f"_schemas-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [
        sys.executable,
        "-m",
        "kafka_core.devtools.registry",
        "--kafka",
        bootstrap_servers,
        "--topic",
        topic,
    ]
    for round_number in (1, 2):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            info = json.loads(line)
            assert info["storage"] == f"kafka:{bootstrap_servers}/{topic}"
            c = SchemaRegistryClient({"url": info["url"]})
            if round_number == 1:
                assert c.register_schema("cmd-value", _avro("a")) == 1
            else:
                assert c.get_latest_version("cmd-value").schema_id == 1
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
