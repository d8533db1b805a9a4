"""Helpers the consumer's unit tests share: the topic they use, filling the fake client's logs,
running a coroutine with a bound, polling until enough arrived, and a consumer on the fake."""

from __future__ import annotations

import asyncio
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
