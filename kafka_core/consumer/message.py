"""What poll() hands to the application: one small object per record, built in bulk.

A ConsumedMessage wraps the codec's decoded record (which already holds offset, key, value,
headers and timestamps) and adds topic and partition, so that building one costs three slot
writes instead of eight attribute copies: poll's per-record Python work stays minimal.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.codec import KafkaRecord
from kafka_core.consumer_base.deserialize import KafkaDeserializationError

__all__ = [
    "ConsumedMessage",
    "KafkaDeserializationError",
    "OffsetAndMetadata",
    "TopicPartition",
    "deserialize_messages",
    "messages_from_records",
]

_FIELDS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp", "timestamp_type")


class ConsumedMessage:
    """One consumed record: topic, partition, offset, key, value, headers, timestamp, timestamp_type."""

    __slots__ = ("topic", "partition", "_record")

    offset: int = property(attrgetter("_record.offset"))  # type: ignore[assignment]
    key: bytes | None = property(attrgetter("_record.key"))  # type: ignore[assignment]
    value: bytes | None = property(attrgetter("_record.value"))  # type: ignore[assignment]
    headers: list[tuple[str, bytes | None]] = property(attrgetter("_record.headers"))  # type: ignore[assignment]
    timestamp: int = property(attrgetter("_record.timestamp"))  # type: ignore[assignment]
    timestamp_type: int = property(attrgetter("_record.timestamp_type"))  # type: ignore[assignment]

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int = -1,
        timestamp_type: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._record = KafkaRecord(
            key=key,
            value=value,
            headers=list(headers or ()),
            timestamp=timestamp,
            offset=offset,
            timestamp_type=timestamp_type,
        )

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def _astuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumedMessage):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset))

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return (ConsumedMessage, self._astuple())

    def __repr__(self) -> str:
        return (
            f"ConsumedMessage(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={_short(self.key)}, value={_short(self.value)}, headers={self.headers!r}, "
            f"timestamp={self.timestamp}, timestamp_type={self.timestamp_type})"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def messages_from_records(topic: str, partition: int, records: list[Any]) -> list[ConsumedMessage]:
    """Wrap codec KafkaRecords (the one per-record Python loop of poll)."""
    new = ConsumedMessage.__new__
    cls = ConsumedMessage
    out: list[ConsumedMessage] = []
    append = out.append
    for r in records:
        m = new(cls)
        m.topic = topic
        m.partition = partition
        m._record = r
        append(m)
    return out


class _Deserialized(ConsumedMessage):
    """A ConsumedMessage whose key and value are what the deserializers made of the bytes."""

    __slots__ = ("key", "value")  # shadow the base class's properties: plain slots here
    key: Any  # whatever the deserializer made
    value: Any


Deserializer = Callable[[Any], Any]  # gets the bytes-like key or value the codec decoded


def deserialize_messages(
    messages: list[ConsumedMessage], key_fn: Deserializer | None, value_fn: Deserializer | None
) -> tuple[list[ConsumedMessage], KafkaDeserializationError | None]:
    """The messages with deserialized keys/values (None stays None), up to the first failure:
    (the ones before it, its error) or (all of them, None)."""
    out: list[ConsumedMessage] = []
    new = _Deserialized.__new__
    cls = _Deserialized
    for m in messages:
        record = m._record
        key, value = record.key, record.value
        part = "key"
        try:
            if key is not None and key_fn is not None:
                key = key_fn(key)
            part = "value"
            if value is not None and value_fn is not None:
                value = value_fn(value)
        except Exception as exc:
            err = KafkaDeserializationError(m.topic, m.partition, record.offset, part, exc)
            err.__cause__ = exc
            return out, err
        d = new(cls)
        d.topic = m.topic
        d.partition = m.partition
        d._record = record
        d.key = key
        d.value = value
        out.append(d)
    return out, None
