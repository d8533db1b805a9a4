"""An accumulator on its own, as the producer's unit tests build it: no broker, no loop."""

from __future__ import annotations

import random
from typing import Any

from kafka_core.producer.accumulator import Accumulator, ProducerBatch
from kafka_core.producer.partitioner import DefaultPartitioner

__all__ = ["Wakeups", "make_accumulator", "sealed_batches"]


class Wakeups:
    """Counts the accumulator's calls to wake the I/O loop."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make_accumulator(
    batch_size: int = 1000,
    buffer_memory: int = 1 << 20,
    linger_ms: float = 5,
    *,
    max_block_ms: float = 1000,
    partitioner_seed: int = 5,
    wakeup: Any = None,
    delivery_timeout_ms: float = 120_000,
) -> Accumulator:
    """An accumulator with a seeded partitioner (the sticky choices repeat run to run)."""
    return Accumulator(
        batch_size=batch_size,
        buffer_memory=buffer_memory,
        max_block_ms=max_block_ms,
        linger_ms=linger_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        partitioner=DefaultPartitioner(random.Random(partitioner_seed)),
        wakeup=wakeup if wakeup is not None else Wakeups(),
    )


def sealed_batches(acc: Accumulator, topic: str = "t") -> list[ProducerBatch]:
    """Every sealed batch of ``topic``, partition by partition."""
    return [b for q in acc.topics[topic].queues or () for b in q.sealed]
