"""What a Spark read's first job costs in the Python workers (issue 34): the planner's imports, the
reader schema pinned once on the driver and shipped to the tasks, the per-worker caches built
once, the task's warm-up started when its reader is unpickled. No broker, no Spark session."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prerequisites import need_module

need_module("pyspark")
need_module("httpx")

from kafka_core.devtools.registry import RegistryServer  # noqa: E402
from kafka_core.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from kafka_core.spark import registry as spark_registry  # noqa: E402
from kafka_core.spark import tasks  # noqa: E402
from kafka_core.spark.cache import WorkerCache  # noqa: E402
from kafka_core.spark.registry import FormatOptions, pin_reader  # noqa: E402
from kafka_core.spark.source import KafkaBatchReader, KafkaDataSource  # noqa: E402

ORDER = '{"type": "record", "name": "Order", "namespace": "t", "fields": [{"name": "id", "type": "long"}]}'
ORDER_V2 = (
    '{"type": "record", "name": "Order", "namespace": "t", "fields": [{"name": "id", "type": "long"}, '
    '{"name": "note", "type": ["null", "string"], "default": null}]}'
)


def _framed(schema_id: int, avro: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + avro


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


def test_the_source_module_imports_no_network_stack_http_or_producer() -> None:
    """Every Spark Python worker of a read (the schema lookup, the planner, each task) imports
    kafka_core.spark.source first; the connection stack comes with the client that needs it, httpx
    with the registry client, and a read never needs the producer or the admin client."""
    code = "import json, sys, kafka_core.spark.source; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    for heavy in ("kafka_core.network.connection", "httpx", "kafka_core.producer", "kafka_core.admin"):
        assert heavy not in loaded, heavy


def test_a_pinned_avro_schema_decodes_its_records_without_the_registry(registry: RegistryServer) -> None:
    """The driver ships the pinned version's text and id: a task decodes records of that id with
    the registry gone; any other id is asked of the registry (here: unknown to it, so that record
    fails with the registry's answer)."""
    import pyarrow as pa

    client = SchemaRegistryClient({"url": registry.url})
    v1 = client.register_schema("orders-value", Schema(ORDER, "AVRO"))
    fmt = FormatOptions(column="value", format="avro", registry={"url": registry.url}, mode="PERMISSIVE")
    pinned = pin_reader(fmt, ("orders",))
    assert (pinned.subject, pinned.version, pinned.pinned_id) == ("orders-value", 1, v1)
    assert pinned.pinned_schema is not None and "pinned_schema" not in repr(pinned)

    unknown = spark_registry._deserializer(pinned).decode(pa.array([_framed(v1 + 7, b"\x0a")], pa.binary()))
    assert unknown.values.to_pylist() == [None]
    assert f"schema id {v1 + 7}" in unknown.errors[0].as_py() and "404" in unknown.errors[0].as_py()

    registry.close()
    result = spark_registry._deserializer(pinned).decode(pa.array([_framed(v1, b"\x0a")] * 2, pa.binary()))
    assert result.values.to_pylist() == [{"id": 5}, {"id": 5}]
    assert result.errors.to_pylist() == [None, None]


def test_another_version_is_fetched_by_its_id(registry: RegistryServer) -> None:
    """Records written under a newer version than the pinned one are read by their writer schema."""
    import pyarrow as pa

    client = SchemaRegistryClient({"url": registry.url})
    v1 = client.register_schema("mixed-value", Schema(ORDER, "AVRO"))
    fmt = FormatOptions(column="value", format="avro", registry={"url": registry.url})
    pinned = pin_reader(fmt, ("mixed",))
    v2 = client.register_schema("mixed-value", Schema(ORDER_V2, "AVRO"))
    values = pa.array([_framed(v1, b"\x02"), _framed(v2, b"\x04\x02\x02x")], pa.binary())
    assert spark_registry._deserializer(pinned).decode(values).values.to_pylist() == [{"id": 1}, {"id": 2}]


def test_the_schema_lookup_pins_for_the_planner(registry: RegistryServer) -> None:
    """Spark pickles the data source after schema() and hands it to the planner's worker: the
    reader takes the pins from it and asks the registry nothing more."""
    client = SchemaRegistryClient({"url": registry.url})
    schema_id = client.register_schema("pins-value", Schema(ORDER, "AVRO"))
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "pins",
        "valueFormat": "avro",
        "schema.registry.url": registry.url,
    }
    source = KafkaDataSource(options)
    schema = source.schema()
    planner_copy = pickle.loads(pickle.dumps(source))
    registry.close()
    reader = planner_copy.reader(schema)
    assert isinstance(reader, KafkaBatchReader)
    value = reader.options.value_format
    assert value is not None and (value.pinned_id, value.version) == (schema_id, 1)


def test_a_worker_cache_builds_once_for_callers_at_the_same_time() -> None:
    """The task and its warm-up thread ask for the same client at once: one is built."""
    built: list[int] = []

    def build(options: dict[str, Any]) -> object:
        time.sleep(0.05)
        built.append(1)
        return object()

    cache: WorkerCache[object] = WorkerCache(build, lambda _: None)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("k", {}))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(built) == 1 and len({id(o) for o in got}) == 1 and len(got) == 4


def test_an_unpickled_reader_starts_one_warm_up_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark unpickles the reader in the task's worker before sending the partition; the warm-up
    starts there, once per worker and options (later tasks find the client and decoders built)."""
    from kafka_core.spark.options import parse_source

    started: list[Any] = []
    done = threading.Event()

    def record(options: Any) -> None:
        started.append(options)
        done.set()

    monkeypatch.setattr(tasks, "_warm_up", record)
    monkeypatch.setattr(tasks, "_WARMED", set())
    reader = KafkaBatchReader(
        parse_source({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "w"}, streaming=False)
    )
    assert not started  # not on the driver, where the reader is made
    data = pickle.dumps(reader)
    pickle.loads(data)
    assert done.wait(5)
    pickle.loads(data)
    time.sleep(0.05)
    assert len(started) == 1 and started[0] == reader.options
