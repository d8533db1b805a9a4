"""The Spark sink's producer per Python worker: a worker's first task builds it while its first
batches arrive (and asks for the topic's metadata), later tasks reuse it, a failure drops it.

The producer class is replaced by a fake that records what the sink asks of it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pyarrow as pa
import pytest

from kafka_core.errors import KafkaConfigError, KafkaError
from kafka_core.spark.cache import WorkerCache
from kafka_core.spark.options import SinkOptions
from kafka_core.spark.write import produce_partition, write_arrow


class FakeProducer:
    built: list[FakeProducer] = []
    gate: threading.Event | None = None  # the constructor waits for it (the first batch's arrival)
    refuse: BaseException | None = None
    fail_delivery = False

    def __init__(self, **options: Any) -> None:
        if FakeProducer.refuse is not None:
            raise FakeProducer.refuse
        self.saw_gate = FakeProducer.gate.wait(10) if FakeProducer.gate is not None else None
        self.options = options
        self.sent: list[tuple[str, int]] = []
        self.metadata_for: list[str] = []
        self.asked_metadata = threading.Event()
        self.closed = False
        FakeProducer.built.append(self)

    def partitions_for(self, topic: str) -> list[int]:
        self.metadata_for.append(topic)
        self.asked_metadata.set()
        return [0]

    def send_batch(self, topic: str, values: Any, **kw: Any) -> Future[Any]:
        self.sent.append((topic, len(values)))
        future: Future[Any] = Future()
        if FakeProducer.fail_delivery:
            future.set_exception(KafkaError("delivery refused"))
        else:
            future.set_result(None)
        return future

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> int:
        self.closed = True
        return 0


@pytest.fixture(autouse=True)
def fake_producer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr("kafka_core.producer.sync.KafkaProducer", FakeProducer)
    FakeProducer.built, FakeProducer.gate, FakeProducer.refuse = [], None, None
    FakeProducer.fail_delivery = False
    yield


def _batches(n: int, rows: int = 10, on_first: threading.Event | None = None) -> Iterator[pa.RecordBatch]:
    for i in range(n):
        yield pa.record_batch({"value": pa.array([b"v%d" % i] * rows, pa.binary())})
        if i == 0 and on_first is not None:
            on_first.set()


def _options(**producer: Any) -> SinkOptions:
    return SinkOptions(producer={"bootstrap_servers": "b:9092", **producer}, topic="t")


def test_first_task_reads_its_batches_while_the_producer_starts() -> None:
    first_batch = threading.Event()
    FakeProducer.gate = first_batch  # the producer's build waits for the task's first batch
    result = write_arrow(_options(client_id="start"), _batches(3, on_first=first_batch))
    (producer,) = FakeProducer.built
    assert producer.saw_gate is True  # built while the batches were being read, not before
    assert result.counts.rows == 30
    assert sum(n for _, n in producer.sent) == 30
    assert producer.asked_metadata.wait(10)  # the topic's metadata asked for by the starting thread
    assert producer.metadata_for == ["t"]


def test_later_tasks_reuse_the_worker_producer() -> None:
    options = _options(client_id="reuse")
    write_arrow(options, _batches(1))
    write_arrow(options, _batches(2))
    assert len(FakeProducer.built) == 1
    assert sum(n for _, n in FakeProducer.built[0].sent) == 30


def test_a_producer_that_cannot_be_built_fails_the_task() -> None:
    FakeProducer.refuse = KafkaConfigError("bad option")
    with pytest.raises(KafkaConfigError, match="bad option"):
        write_arrow(_options(client_id="refused"), _batches(2))


def test_a_failed_delivery_drops_the_producer() -> None:
    options = _options(client_id="drop")
    FakeProducer.fail_delivery = True
    with pytest.raises(KafkaError, match="delivery refused"):
        write_arrow(options, _batches(1))
    FakeProducer.fail_delivery = False
    write_arrow(options, _batches(1))
    first, second = FakeProducer.built
    assert first.closed and not second.closed


def test_produce_partition_counts_rows_through_the_same_path() -> None:
    rows = [(b"k%d" % i, b"v%d" % i) for i in range(25)]
    assert produce_partition(rows, "t", bootstrap_servers="b:9092", client_id="rows") == 25


def test_worker_cache_peek_never_builds() -> None:
    built: list[dict[str, Any]] = []

    def build(options: dict[str, Any]) -> str:
        built.append(options)
        return "obj"

    cache: WorkerCache[str] = WorkerCache(build, lambda _: None)
    assert cache.peek("k") is None
    assert cache.get("k", {"a": 1}) == "obj"
    assert cache.peek("k") == "obj"
    assert built == [{"a": 1}]
