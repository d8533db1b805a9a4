"""End-to-end producer benchmark: N records of S bytes to a P-partition topic, acks=all.

Each client runs in its own fresh process against its own fresh topic with the same data;
measured from the first send to the end of flush (every record acknowledged).

    python -m bench.e2e_producer [--records 300000] [--repeat 3] [--clients a,b,...]
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from bench.common import (
    NotImplementedYet,
    ProduceBench,
    RunResult,
    Span,
    our_export,
)

CLIENTS = ("confluent-kafka", "aiokafka", "kafka-python", "kafka_core", "kafka_core-send_batch")
ANCHOR = "confluent-kafka"
LINGER_MS = 5
BATCH_BYTES = 1_048_576
COLUMNAR_CHUNK = 10_000  # rows per send_batch call: Spark's default Arrow batch size


def _run_confluent(bootstrap: str, topic: str, values: list[bytes]) -> RunResult:
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": LINGER_MS,
            "batch.size": 1_000_000,  # librdkafka's maximum
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,  # one config-level callback: cheaper than one per message
        }
    )
    producer.list_topics(topic, timeout=10)
    span = Span().start()
    produce, poll = producer.produce, producer.poll
    for value in values:
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.005)
    remaining = producer.flush(120)
    span.stop()
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered, {len(errors)} errors: {errors[:3]}")
    return RunResult("confluent-kafka", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


def _run_aiokafka(bootstrap: str, topic: str, values: list[bytes]) -> RunResult:
    from aiokafka import AIOKafkaProducer

    async def main() -> RunResult:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=LINGER_MS, max_batch_size=BATCH_BYTES
        )
        await producer.start()
        try:
            await producer.partitions_for(topic)
            span = Span().start()
            send = producer.send
            futures = [await send(topic, value) for value in values]
            await producer.flush()
            span.stop()
            failed = [f.exception() for f in futures if not f.done() or f.exception() is not None]
        finally:
            await producer.stop()
        if failed:
            raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")
        return RunResult("aiokafka", records=len(values), wall_s=span.wall, cpu_s=span.cpu)

    return asyncio.run(main())


def _run_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> RunResult:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=LINGER_MS, batch_size=BATCH_BYTES
    )
    try:
        producer.partitions_for(topic)
        span = Span().start()
        send = producer.send
        futures = [send(topic, value) for value in values]
        producer.flush()
        span.stop()
        failed = [f.exception for f in futures if not f.succeeded()]
    finally:
        producer.close()
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")
    return RunResult("kafka-python", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


def _our_producer(bootstrap: str, method: str) -> Any:
    """Build our producer, or say it does not exist yet (only here: a bug later is an error)."""
    producer = our_export("KafkaProducer")(
        bootstrap_servers=bootstrap, acks=-1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES
    )
    if not callable(getattr(producer, method, None)):
        producer.close()
        raise NotImplementedYet(f"kafka_core.KafkaProducer.{method} does not exist yet")
    return producer


def _warm_metadata(producer: Any, topic: str) -> None:
    """Fetch the topic's metadata before timing, as the peers do, when the client offers a way."""
    partitions_for = getattr(producer, "partitions_for", None)
    if callable(partitions_for):
        partitions_for(topic)


def _failures(handles: Sequence[Any]) -> list[str]:
    """Failed futures among what send/send_batch returned (a future, a list of them, or None)."""
    failed = []
    for handle in handles:
        if handle is None:
            continue
        # exception() when there is one: result() of a batch future may build a row per record.
        get_exception = getattr(handle, "exception", None)
        if not callable(get_exception) and isinstance(handle, list | tuple):
            failed.extend(_failures(handle))
            continue
        try:
            error = get_exception(30) if callable(get_exception) else handle.result() and None
        except Exception as exc:
            error = exc
        if error is not None:
            failed.append(f"{type(error).__name__}: {error}")
    return failed


def _run_ours(bootstrap: str, topic: str, values: list[bytes]) -> RunResult:
    producer = _our_producer(bootstrap, "send")
    try:
        _warm_metadata(producer, topic)
        span = Span().start()
        send = producer.send
        futures = [send(topic, value) for value in values]
        producer.flush()
        span.stop()
        failed = _failures(futures)
    finally:
        producer.close()
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")
    return RunResult("kafka_core", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


def _run_ours_batch(bootstrap: str, topic: str, values: list[bytes]) -> RunResult:
    import pyarrow as pa

    column = pa.array(values, pa.binary())
    producer = _our_producer(bootstrap, "send_batch")
    try:
        _warm_metadata(producer, topic)
        span = Span().start()
        handles = [
            producer.send_batch(topic, column.slice(start, COLUMNAR_CHUNK))
            for start in range(0, len(column), COLUMNAR_CHUNK)
        ]
        producer.flush()
        span.stop()
        failed = _failures(handles)
    finally:
        producer.close()
    if failed:
        raise RuntimeError(f"{len(failed)} batches failed: {failed[:3]}")
    result = RunResult("kafka_core-send_batch", records=len(values), wall_s=span.wall, cpu_s=span.cpu)
    result.extra["note"] = f"pyarrow binary array, {COLUMNAR_CHUNK} rows per call"
    return result


RUNNERS = {
    "confluent-kafka": _run_confluent,
    "aiokafka": _run_aiokafka,
    "kafka-python": _run_kafka_python,
    "kafka_core": _run_ours,
    "kafka_core-send_batch": _run_ours_batch,
}


BENCH = ProduceBench(
    module="bench.e2e_producer",
    kind="produce",
    label="produce",
    records=300_000,
    timeout=180.0,
    clients=CLIENTS,
    anchor=ANCHOR,
    runners=RUNNERS,
    doc=__doc__ or "",
)
run_producer_bench = BENCH.run
main = BENCH.main


if __name__ == "__main__":
    sys.exit(main())
