"""Helpers the consumer's unit tests share: the topic they use, filling the fake client's logs,
running a coroutine with a bound, polling until enough arrived, a consumer on the fake, and the
check that each partition's records came once and in order."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fakes.consumer_client import FakeClient
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer

T = "t"
TP0, TP1 = TopicPartition(T, 0), TopicPartition(T, 1)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def fill(client: FakeClient, partition: int, n: int, batch: int = 10, start: int = 0) -> None:
    log = client.log(T, partition)
    for b in range(start, start + n, batch):
        log.append(
            [
                (b"k%d" % i, b"v%d-%d" % (partition, i), [("h", b"x")])
                for i in range(b, min(b + batch, start + n))
            ]
        )


async def consume(c: KafkaConsumer, n: int, *, columns: bool = False, max_records: int | None = None) -> list:
    out: list = []
    for _ in range(200):
        if columns:
            b = await c.poll_columns(50, max_records=max_records)
            if b is not None:
                out.extend(
                    zip(b.column("partition").to_pylist(), b.column("offset").to_pylist(), strict=True)
                )
        else:
            out.extend(await c.poll(50, max_records=max_records))
        if len(out) >= n:
            break
    return out


def new(client: FakeClient, **kw: Any) -> KafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    return KafkaConsumer(topics=[T], client=client, fetch_max_wait_ms=20, **kw)


def fill_each(client: FakeClient, partitions: int, n: int, start: int = 0) -> None:
    """``n`` more records on each of ``T``'s partitions, valued ``b"<partition>-<offset>"``
    (offsets from ``start``), for check_once_in_order."""
    for p in range(partitions):
        client.log(T, p).append([(None, b"%d-%d" % (p, i), []) for i in range(start, start + n)])


async def read(c: KafkaConsumer, n: int, out: list[Any], seconds: float = 20) -> None:
    """Poll until ``n`` more records are in ``out``; fail after ``seconds`` (a hang guard)."""
    want = len(out) + n
    deadline = time.monotonic() + seconds
    while len(out) < want and time.monotonic() < deadline:
        out.extend(await c.poll(50))
    assert len(out) == want, f"{len(out)} of {want}"


def check_once_in_order(got: list[Any], partitions: int, per_partition: int) -> None:
    """Each partition's records of fill_each, offsets 0..per_partition-1, each once, in order."""
    by: dict[int, list[int]] = {}
    for m in got:
        by.setdefault(m.partition, []).append(m.offset)
        assert m.value == b"%d-%d" % (m.partition, m.offset)
    assert by == {p: list(range(per_partition)) for p in range(partitions)}
