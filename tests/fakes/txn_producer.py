"""A transactional AsyncKafkaProducer over an in-memory broker, for the transaction unit tests:
fast retries, short bounds, no linger, closed after the test's body whatever it raised."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kafka_core.producer import AsyncKafkaProducer

TXN_OPTIONS: dict[str, Any] = {
    "transactional_id": "tx-1",
    "linger_ms": 0,
    "retry_backoff_ms": 1,
    "delivery_timeout_ms": 20_000,
    "request_timeout_ms": 10_000,
    "max_block_ms": 5_000,
}


def txn_producer(broker: Any, **options: Any) -> AsyncKafkaProducer:
    return AsyncKafkaProducer(client=broker, **{**TXN_OPTIONS, **options})


def run_txn(broker: Any, body: Callable[[AsyncKafkaProducer], Awaitable[Any]], **options: Any) -> Any:
    """``body(producer)`` on a fresh event loop; its result."""

    async def main() -> Any:
        p = txn_producer(broker, **options)
        try:
            return await body(p)
        finally:
            await p.close(timeout=5)

    return asyncio.run(main())


def call_names(broker: Any, since: int = 0) -> list[str]:
    """The API names the broker was asked, from call ``since`` on."""
    return [name for name, _ in broker.calls[since:]]
