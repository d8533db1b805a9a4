"""Consumer options: named choices parsed once into enums, what a bad value says, the defaults
shared with the producer and admin, from_config, and the key/value deserializers."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import run

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.message import ConsumedMessage, KafkaDeserializationError
from kafka_core.consumer.policies import IsolationLevel, OffsetReset
from kafka_core.errors import KafkaCodecError, KafkaConfigError

T = "t"


def make(**kw: object) -> KafkaConsumer:
    return KafkaConsumer(topics=[T], client=FakeClient({T: 1}), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "member"),
    [
        ("earliest", OffsetReset.EARLIEST),
        ("latest", OffsetReset.LATEST),
        (OffsetReset.NONE, OffsetReset.NONE),
    ],
)
def test_offset_reset_strings_and_members_parse_to_the_member(given: object, member: OffsetReset) -> None:
    c = make(auto_offset_reset=given)
    assert c.auto_offset_reset is member
    assert c.auto_offset_reset == member.value  # still equal to the string users wrote


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("auto_offset_reset", "smallest"),
        ("auto_offset_reset", "EARLIEST"),
        ("auto_offset_reset", None),
        ("isolation_level", "dirty"),
        ("isolation_level", 1),
    ],
)
def test_a_bad_choice_names_the_option_and_the_choices(option: str, value: object) -> None:
    with pytest.raises(KafkaConfigError, match=option) as info:
        make(**{option: value})
    assert repr(value) in str(info.value)


def test_isolation_level_member_is_accepted() -> None:
    make(isolation_level=IsolationLevel.READ_COMMITTED)
    make(isolation_level="read_committed")


# -- bootstrap_servers default, from_config -------------------------------------------------------


def test_bootstrap_servers_defaults_alike_on_consumer_producer_and_admin() -> None:
    from kafka_core import KafkaAdmin, KafkaProducer
    from kafka_core import KafkaConsumer as SyncConsumer

    defaults = {
        cls.__name__ + str(i): inspect.signature(cls).parameters["bootstrap_servers"].default
        for i, cls in enumerate((KafkaConsumer, SyncConsumer, KafkaProducer, KafkaAdmin))
    }
    assert set(defaults.values()) == {"localhost:9092"}, defaults


def test_no_bootstrap_servers_builds_a_client_for_localhost() -> None:
    async def main() -> None:
        c = KafkaConsumer(T)  # nothing connects before start/poll
        assert c.metrics()["consumer"]["group_id"] is None
        await c.close()

    run(main())


def test_from_config_takes_java_names_and_keyword_overrides() -> None:
    c = KafkaConsumer.from_config(
        {"group.id": "g", "auto.offset.reset": "EARLIEST", "isolation.level": "read_committed"},
        topics=[T],
        client=FakeClient({T: 1}),
    )
    assert c.group_id == "g" and c.auto_offset_reset is OffsetReset.EARLIEST
    assert c.subscription() == [T]


def test_from_config_names_every_unknown_key() -> None:
    with pytest.raises(KafkaConfigError) as info:
        KafkaConsumer.from_config({"group.id": "g", "fetch.wait.max": 5, "linger.ms": 1}, topics=[T])
    assert "fetch.wait.max" in str(info.value) and "linger.ms" in str(info.value)


def test_from_config_on_the_sync_face_builds_the_sync_face() -> None:
    from kafka_core import KafkaConsumer as SyncConsumer

    c = SyncConsumer.from_config({"group.id": "g"}, topics=[T])
    try:
        assert isinstance(c, SyncConsumer) and c.subscription() == [T]
    finally:
        c.close(timeout=5, commit=False)


# -- deserializers --------------------------------------------------------------------------------


def fill_log(client: FakeClient, records: list[tuple[bytes | None, bytes | None]]) -> None:
    client.log(T, 0).append([(k, v, []) for k, v in records])


def reader(client: FakeClient, **kw: Any) -> KafkaConsumer:
    return KafkaConsumer(
        partitions={T: [0]}, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20, **kw
    )


async def take(c: KafkaConsumer, n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(100):
        out.extend(await c.poll(50))
        if len(out) >= n:
            break
    return out


def test_deserializers_apply_to_keys_and_values_and_none_stays_none() -> None:
    client = FakeClient({T: 1})
    fill_log(client, [(b"k0", b'{"n": 0}'), (None, b'{"n": 1}'), (b"k2", None)])

    async def main() -> list[Any]:
        c = reader(client, key_deserializer=bytes.decode, value_deserializer=json.loads)
        got = await take(c, 3)
        await c.close()
        return got

    got = run(main())
    assert [(m.offset, m.key, m.value) for m in got] == [
        (0, "k0", {"n": 0}),
        (1, None, {"n": 1}),
        (2, "k2", None),
    ]
    assert all(isinstance(m, ConsumedMessage) and m.topic == T and m.partition == 0 for m in got)


def test_poll_columns_returns_the_raw_bytes() -> None:
    client = FakeClient({T: 1})
    fill_log(client, [(b"k0", b"v0")])

    async def main() -> Any:
        c = reader(client, key_deserializer=bytes.decode, value_deserializer=bytes.decode)
        for _ in range(100):
            batch = await c.poll_columns(50)
            if batch is not None:
                break
        await c.close()
        return batch

    batch = run(main())
    assert batch.column("key").to_pylist() == [b"k0"] and batch.column("value").to_pylist() == [b"v0"]


def test_a_failing_deserializer_raises_a_typed_error_naming_the_record_and_drops_nothing() -> None:
    client = FakeClient({T: 1})
    fill_log(client, [(b"k", b"1"), (b"k", b"2"), (b"k", b"bad"), (b"k", b"4")])

    async def main() -> tuple[list[int], list[KafkaDeserializationError], list[int]]:
        c = reader(client, value_deserializer=int)
        before: list[int] = []
        errors: list[KafkaDeserializationError] = []
        for _ in range(100):
            try:
                before.extend(m.value for m in await c.poll(50))
            except KafkaDeserializationError as exc:
                errors.append(exc)
                if len(errors) == 2:
                    break
        c.seek(TopicPartition(T, 0), errors[-1].offset + 1)  # the way past it
        after = [m.value for m in await take(c, 1)]
        await c.close()
        return before, errors, after

    before, errors, after = run(main())
    assert before == [1, 2]  # the records before the bad one were handed over
    for err in errors:  # raised again while the position stays on it
        assert isinstance(err, KafkaCodecError) and isinstance(err.__cause__, ValueError)
        assert (err.topic, err.partition, err.offset, err.part) == (T, 0, 2, "value")
        assert f"{T}[0] offset 2" in str(err)
    assert after == [4]


def test_a_deserializer_must_be_callable() -> None:
    with pytest.raises(KafkaConfigError, match="value_deserializer"):
        make(value_deserializer="json")


def test_group_metadata_and_closed_without_a_group() -> None:
    async def main() -> None:
        c = KafkaConsumer(partitions={T: [0]}, group_id="g", client=FakeClient({T: 1}))
        assert tuple(c.group_metadata()) == ("g", -1, "", None)  # a static assignment: never a member
        assert not c.closed
        await c.close()
        assert c.closed

    run(main())


def test_every_constructor_option_is_documented_in_the_class_docstring() -> None:
    """The sync face shows this docstring too: an option missing from it is missing from help()."""
    doc = KafkaConsumer.__doc__ or ""
    names = [
        n for n in inspect.signature(KafkaConsumer).parameters if n not in ("topics_args", "client_options")
    ]
    assert [n for n in names if f"``{n}" not in doc] == []
