"""client_instance_id(timeout) on the public producer, consumer and share consumer, asyncio and
blocking: a thin delegation to kafka_core.telemetry (whose behaviour test_telemetry_push.py
covers against a scripted broker); here, what each face raises without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core import KafkaConsumer, KafkaProducer, KafkaShareConsumer, aio
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError

NOWHERE = "127.0.0.1:1"  # refused at once
FACES: dict[str, Callable[..., Any]] = {
    "producer": lambda **kw: KafkaProducer(bootstrap_servers=NOWHERE, **kw),
    "consumer": lambda **kw: KafkaConsumer("t", bootstrap_servers=NOWHERE, group_id="g", **kw),
    "share consumer": lambda **kw: KafkaShareConsumer("t", bootstrap_servers=NOWHERE, group_id="g", **kw),
}
AIO: dict[str, Callable[..., Any]] = {
    "producer": lambda **kw: aio.KafkaProducer(bootstrap_servers=NOWHERE, **kw),
    "consumer": lambda **kw: aio.KafkaConsumer("t", bootstrap_servers=NOWHERE, group_id="g", **kw),
    "share consumer": lambda **kw: aio.KafkaShareConsumer("t", bootstrap_servers=NOWHERE, group_id="g", **kw),
}


@pytest.mark.parametrize("kind", list(FACES))
def test_blocking_faces_with_metrics_push_off(kind: str) -> None:
    client = FACES[kind](enable_metrics_push=False)
    try:
        with pytest.raises(KafkaConfigError, match="enable_metrics_push=False"):
            client.client_instance_id(5)
    finally:
        client.close()


@pytest.mark.parametrize("kind", list(FACES))
def test_blocking_faces_time_out_saying_what_is_awaited(kind: str) -> None:
    client = FACES[kind]()
    try:
        with pytest.raises(KafkaTimeoutError, match=r"no client instance id within 0\.3s: .+"):
            client.client_instance_id(0.3)
    finally:
        client.close()


@pytest.mark.parametrize("kind", list(AIO))
def test_asyncio_classes(kind: str) -> None:
    async def main() -> None:
        off = AIO[kind](enable_metrics_push=False)
        on = AIO[kind]()
        try:
            with pytest.raises(KafkaConfigError, match="enable_metrics_push=False"):
                await off.client_instance_id(5)
            with pytest.raises(KafkaTimeoutError, match=r"within 0\.2s"):
                await on.client_instance_id(0.2)
            with pytest.raises(KafkaConfigError, match="timeout must be"):
                await on.client_instance_id(-1)
        finally:
            await off.close()
            await on.close()

    asyncio.run(main())
