"""confluent-kafka's calling convention, a dict of Java-style names first
(``KafkaProducer({"bootstrap.servers": ..., "enable.idempotence": True})``), works for every
public class, blocking and asyncio, as ``from_config`` does; keywords beside it win; and a
``bootstrap_servers`` of another type is refused at construction (issue 39: the dict was taken
for the bootstrap list or a topic name and failed a minute later, or in poll). No broker is
needed: everything here is decided before anything connects."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

import kafka_core
import kafka_core.aio
from kafka_core.config import takes_config
from kafka_core.errors import KafkaConfigError

NOWHERE = "127.0.0.1:1"
BAD_PORT = "127.0.0.1:99999"  # refused when the client is built: proof the dict's value got there
# (class, the Java-style names it needs besides bootstrap.servers, keyword arguments it needs)
CLASSES: list[tuple[Any, dict[str, Any], dict[str, Any]]] = [
    (kafka_core.KafkaProducer, {}, {}),
    (kafka_core.aio.KafkaProducer, {}, {}),
    (kafka_core.KafkaConsumer, {"group.id": "g"}, {"topics": ["t"]}),
    (kafka_core.aio.KafkaConsumer, {"group.id": "g"}, {"topics": ["t"]}),
    (kafka_core.KafkaShareConsumer, {"group.id": "g"}, {"topics": ["t"]}),
    (kafka_core.aio.KafkaShareConsumer, {"group.id": "g"}, {"topics": ["t"]}),
    (kafka_core.KafkaAdmin, {}, {}),
    (kafka_core.aio.KafkaAdmin, {}, {}),
    (kafka_core.KafkaStreamTransport, {}, {}),
    (kafka_core.aio.KafkaStreamTransport, {}, {}),
    (kafka_core.KafkaClient, {}, {}),
    (kafka_core.aio.KafkaClient, {}, {}),
]
IDS = [f"{c.__module__.split('.')[1]}.{c.__name__}" for c, _, _ in CLASSES]


async def _close(obj: Any) -> None:
    result = obj.close()
    if inspect.isawaitable(result):
        await result


def build(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """Construct ``cls`` (an asyncio one inside a running loop, as an application would) and
    close it again; return it."""

    async def inside_a_loop() -> Any:
        obj = cls(*args, **kwargs)
        await _close(obj)
        return obj

    if cls.__module__.endswith(".sync") or cls.__module__ == "kafka_core.sync_client":
        obj = cls(*args, **kwargs)
        obj.close()
        return obj
    return asyncio.run(inside_a_loop())


@pytest.mark.parametrize(("cls", "names", "needed"), CLASSES, ids=IDS)
def test_a_dict_first_is_a_config(cls: Any, names: dict[str, Any], needed: dict[str, Any]) -> None:
    with pytest.raises(KafkaConfigError, match="99999"):
        build(cls, {"bootstrap.servers": BAD_PORT, **names}, **needed)


@pytest.mark.parametrize(("cls", "names", "needed"), CLASSES, ids=IDS)
def test_keywords_beside_the_dict_win(cls: Any, names: dict[str, Any], needed: dict[str, Any]) -> None:
    build(cls, {"bootstrap.servers": BAD_PORT, **names}, bootstrap_servers=NOWHERE, **needed)


@pytest.mark.parametrize(("cls", "names", "needed"), CLASSES, ids=IDS)
def test_an_unknown_name_in_the_dict_is_refused_at_once(
    cls: Any, names: dict[str, Any], needed: dict[str, Any]
) -> None:
    with pytest.raises(KafkaConfigError, match=r"no\.such\.name"):
        build(cls, {"bootstrap.servers": NOWHERE, "no.such.name": 1, **names}, **needed)


@pytest.mark.parametrize(("cls", "names", "needed"), CLASSES, ids=IDS)
@pytest.mark.parametrize(
    "bad", [123, b"127.0.0.1:9092", None, [NOWHERE, 9092], {"bootstrap.servers": NOWHERE}]
)
def test_a_bootstrap_servers_of_another_type_is_refused_at_once(
    cls: Any, names: dict[str, Any], needed: dict[str, Any], bad: Any
) -> None:
    kwargs = {**needed, **{k.replace(".", "_"): v for k, v in names.items()}}
    with pytest.raises(KafkaConfigError, match="bootstrap_servers"):
        build(cls, bootstrap_servers=bad, **kwargs)


def test_the_dicts_values_reach_the_options() -> None:
    config = {"bootstrap.servers": NOWHERE, "acks": "1", "enable.idempotence": "false", "linger.ms": "7"}
    producer = build(kafka_core.KafkaProducer, config)
    assert producer.acks == 1
    assert build(kafka_core.KafkaProducer, config, acks="all").acks == -1  # the keyword wins
    consumer = build(
        kafka_core.KafkaConsumer, {"bootstrap.servers": NOWHERE, "group.id": "g1"}, "t1", topics=["t2"]
    )
    assert consumer.group_id == "g1"
    admin = build(kafka_core.KafkaAdmin, {"bootstrap.servers": NOWHERE, "default.api.timeout.ms": "5000"})
    assert admin.default_timeout_ms == 5000.0
    client = build(kafka_core.aio.KafkaClient, {"bootstrap.servers": NOWHERE, "client.id": "from-dict"})
    assert client.client_id == "from-dict"
    transport = build(kafka_core.KafkaStreamTransport, {"bootstrap.servers": NOWHERE, "linger.ms": "1"})
    assert transport.bootstrap_servers == NOWHERE


def test_the_transport_sends_each_name_to_its_side() -> None:
    from kafka_core.config import transport_keywords

    out = transport_keywords(
        {"bootstrap.servers": NOWHERE, "linger.ms": "1", "fetch.min.bytes": "2", "client.id": "c"},
        {"producer_linger_ms": 3},
    )
    assert out == {
        "bootstrap_servers": NOWHERE,
        "client_id": "c",
        "producer_linger_ms": 3,
        "consumer_fetch_min_bytes": 2,
    }


def test_a_dict_goes_first_and_alone() -> None:
    with pytest.raises(KafkaConfigError, match="first, positionally"):
        kafka_core.KafkaConsumer("t", {"bootstrap.servers": NOWHERE, "group.id": "g"})
    with pytest.raises(KafkaConfigError, match="alone positionally"):
        kafka_core.KafkaProducer({"bootstrap.servers": NOWHERE}, NOWHERE)
    with pytest.raises(KafkaConfigError, match="topic names"):
        kafka_core.aio.KafkaConsumer(["t1", "t2"], bootstrap_servers=NOWHERE)
    with pytest.raises(KafkaConfigError, match="topic names"):
        kafka_core.KafkaShareConsumer(b"t", bootstrap_servers=NOWHERE, group_id="g")


def test_help_shows_the_constructors_own_parameters() -> None:
    """The decorator keeps the signature help() and IDEs show (commit 49c2ea8 for KafkaClient)."""
    for cls in (kafka_core.KafkaProducer, kafka_core.KafkaClient, kafka_core.aio.KafkaClient):
        parameters = inspect.signature(cls).parameters
        assert "Mapping[str, Any]" in str(parameters["bootstrap_servers"].annotation)
        assert "client_id" in parameters or "acks" in parameters
    assert "topics_args" in inspect.signature(kafka_core.KafkaConsumer).parameters


def test_takes_config_alone() -> None:
    seen: dict[str, Any] = {}

    class Thing:
        @takes_config(lambda config, overrides: {"bootstrap_servers": config["servers"], **overrides})
        def __init__(self, bootstrap_servers: Any = "x:1", *, other: int = 0) -> None:
            seen.update(bootstrap_servers=bootstrap_servers, other=other)

    Thing({"servers": "a:1"}, other=2)
    assert seen == {"bootstrap_servers": "a:1", "other": 2}
    Thing(("a:1", "b:2"))  # any iterable of str is taken, as a list
    assert seen["bootstrap_servers"] == ["a:1", "b:2"]
