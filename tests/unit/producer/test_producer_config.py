"""Options users bring from other clients: serializers and Java-style config dicts
(``from_config``) on the producer, the client and the admin, against the in-memory broker."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fakes.produce_broker import ProduceBroker

import kafka_core
import kafka_core.aio
from kafka_core.errors import KafkaConfigError
from kafka_core.producer.partitioner import murmur2_partition


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


class Boom(Exception):
    pass


def _refuse(obj: Any) -> bytes:
    raise Boom(f"cannot serialize {obj!r}")


def test_serializers_apply_before_partitioning_and_none_passes() -> None:
    broker = ProduceBroker(3)

    async def main() -> list[Any]:
        async with kafka_core.aio.KafkaProducer(
            client=broker, key_serializer=str.encode, value_serializer=_dumps, linger_ms=0
        ) as p:
            futures = [
                await p.send("t", {"n": 1}, key="user-1"),
                await p.send("t", None, key="user-1"),  # a tombstone stays one
                await p.send("t", [2]),
            ]
            await p.flush(10)
            return [await f for f in futures]

    first, tombstone, unkeyed = asyncio.run(main())
    assert first.partition == tombstone.partition == murmur2_partition(b"user-1", 3)
    assert broker.logs[first.partition][first.offset] == b'{"n": 1}'
    assert broker.logs[tombstone.partition][tombstone.offset] is None
    assert broker.logs[unkeyed.partition][unkeyed.offset] == b"[2]"


def test_a_serializer_that_raises_fails_send_at_once_and_queues_nothing() -> None:
    broker = ProduceBroker(1)

    async def main() -> dict[str, Any]:
        async with kafka_core.aio.KafkaProducer(client=broker, value_serializer=_refuse) as p:
            with pytest.raises(Boom):
                await p.send("t", object())
            await p.flush(10)
            return p.metrics()["producer"]

    snapshot = asyncio.run(main())
    assert broker.requests == [] and broker.logs[0] == []
    assert snapshot["buffer_used_bytes"] == 0


def test_the_blocking_face_serializes_too() -> None:
    broker = ProduceBroker(2)
    with kafka_core.KafkaProducer(client=broker, key_serializer=str.encode, value_serializer=_dumps) as p:
        meta = p.send("t", {"a": 1}, key="k").result(10)
    assert meta.partition == murmur2_partition(b"k", 2)
    assert broker.logs[meta.partition][meta.offset] == b'{"a": 1}'


def test_the_blocking_face_raises_a_serializer_error_at_send_and_queues_nothing() -> None:
    broker = ProduceBroker(1)
    with kafka_core.KafkaProducer(client=broker, value_serializer=_refuse) as p:
        with pytest.raises(Boom):
            p.send("t", object())
        p.flush(10)
        assert p.metrics()["producer"]["buffer_used_bytes"] == 0
    assert broker.requests == [] and broker.logs[0] == []


def test_without_serializers_the_blocking_send_is_the_accumulators_own() -> None:
    with kafka_core.KafkaProducer(client=ProduceBroker(1)) as p:
        assert "bind_blocking" not in getattr(p.send, "__qualname__", "")


@pytest.mark.parametrize("bad", [b"not callable", 5])
def test_a_serializer_must_be_callable(bad: Any) -> None:
    with pytest.raises(KafkaConfigError, match="value_serializer"):
        kafka_core.aio.KafkaProducer(client=ProduceBroker(1), value_serializer=bad)


def test_producer_from_config_translates_java_names_and_overrides_win() -> None:
    broker = ProduceBroker(1)

    async def main() -> tuple[Any, int]:
        p = kafka_core.aio.KafkaProducer.from_config(
            {"linger.ms": 0, "acks": "1", "enable.idempotence": "false", "compression.type": "GZIP"},
            client=broker,
            value_serializer=str.encode,
        )
        async with p:
            meta = await (await p.send("t", "hello"))
            return meta, p.acks

    meta, acks = asyncio.run(main())
    assert acks == 1
    assert broker.logs[0][meta.offset] == b"hello"
    assert broker.init_calls == []  # enable.idempotence=false reached the producer


@pytest.mark.parametrize(
    "cls",
    [
        kafka_core.KafkaProducer,
        kafka_core.aio.KafkaProducer,
        kafka_core.KafkaClient,
        kafka_core.aio.KafkaClient,
        kafka_core.KafkaAdmin,
    ],
)
def test_from_config_names_every_unknown_key(cls: Any) -> None:
    with pytest.raises(KafkaConfigError) as err:
        cls.from_config({"bootstrap.servers": "127.0.0.1:1", "no.such.thing": 1, "fetch.min.bytes": 2})
    assert "'no.such.thing'" in str(err.value) and "'fetch.min.bytes'" in str(err.value)


@pytest.mark.parametrize(
    ("cls", "face"),
    [
        (kafka_core.KafkaClient, kafka_core.KafkaClient),
        (kafka_core.aio.KafkaClient, kafka_core.aio.KafkaClient),
        (kafka_core.KafkaAdmin, kafka_core.KafkaAdmin),
        (kafka_core.aio.KafkaAdmin, kafka_core.aio.KafkaAdmin),
    ],
)
def test_client_and_admin_from_config_build_their_own_class(cls: Any, face: Any) -> None:
    obj = cls.from_config({"bootstrap.servers": "127.0.0.1:1", "client.id": "from-config"})
    try:
        assert type(obj) is face
        client = getattr(obj, "client", obj)  # the admin's client, or the client itself
        assert client.client_id == "from-config"
    finally:
        result = obj.close()
        if asyncio.iscoroutine(result):
            asyncio.run(result)


def test_record_queue_time_is_the_time_a_batch_waited_before_it_was_sent() -> None:
    """As Java's record-queue-time: per batch drained into a request, the ms since it opened;
    a batch lingers 50 ms here, so it waited at least that long."""
    broker = ProduceBroker(1)

    async def main() -> dict[str, Any]:
        async with kafka_core.aio.KafkaProducer(client=broker, linger_ms=50) as p:
            await (await p.send("t", b"v"))
            return p.metrics()["producer"]["record_queue_time_ms"]

    queued = asyncio.run(main())
    assert queued["count"] == 1 and 49 <= queued["max"] < 5_000  # (49: ms truncated)
    assert queued["avg"] == queued["max"] == queued["sum"]
