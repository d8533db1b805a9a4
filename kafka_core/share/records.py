"""What a share consumer hands over and takes back: records, acknowledgement types, errors.

A :class:`ShareRecord` is a consumed record plus the broker's delivery count for it (1 the first
time, more when it was released, or its lock expired, and it came back). Acknowledgement types are
the protocol's numbers (KIP-932: 1 accept, 2 release, 3 reject; 0 marks a gap, an offset with no
record, which the consumer acknowledges for itself).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from kafka_core._typing import Buffer
from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import KafkaShareRecord, decode_share_records
from kafka_core.consumer_base.deserialize import KafkaDeserializationError
from kafka_core.errors import KafkaConfigError, KafkaError, KafkaUnsupportedVersionError
from kafka_core.protocol.errors import ErrorCode

GAP = 0  # an acquired offset without a record (a transaction marker, a compacted one)


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged (the protocol's numbers).

    ACCEPT: processed, never delivered again. RELEASE: give it back now, to be delivered again
    (to any member) with its delivery count raised. REJECT: unprocessable, never delivered again.
    RENEW (KIP-1222, Kafka 4.2+): still working on it: its acquisition lock starts again and it
    stays this consumer's, to be acknowledged again later.
    """

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4

    @classmethod
    def parse(cls, value: Any) -> AcknowledgeType:
        """A member, its number, or its name in any case (``"accept"``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            member = cls.__members__.get(value.strip().upper())
            if member is not None:
                return member
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        raise KafkaConfigError(
            f"acknowledgement type must be an AcknowledgeType or one of 'accept', 'release', "
            f"'reject', 'renew', not {value!r}"
        )


class AcknowledgeMode(enum.Enum):
    """``implicit``: what a poll returned is accepted at the next poll, commit or close.
    ``explicit``: every record is acknowledged by the application (as Java's client)."""

    IMPLICIT = "implicit"
    EXPLICIT = "explicit"

    @classmethod
    def parse(cls, value: Any) -> AcknowledgeMode:
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for m in cls:
                if m.value == value.strip().lower():
                    return m
        raise KafkaConfigError(f"share_acknowledgement_mode must be 'implicit' or 'explicit', not {value!r}")


class KafkaAcknowledgementError(KafkaError):
    """An acknowledgement the consumer cannot take: the record was already acknowledged, was
    never delivered to this consumer, or records of the last poll are still unacknowledged in
    explicit mode. Nothing was sent; the records concerned keep their state."""


class KafkaShareGroupsUnsupportedError(KafkaUnsupportedVersionError):
    """The broker has no share groups (KIP-932): no ShareGroupHeartbeat/ShareFetch version this
    client speaks."""


UNSUPPORTED = (
    "this broker does not support share groups (KIP-932): needs Apache Kafka 4.1+ with share.version=1"
)

E = ErrorCode
# Share-session errors: the session is gone or out of step; the next request opens a new one
# (acknowledgements in the failed request are lost: their records come back after the lock).
SESSION_RESET_CODES: frozenset[ErrorCode] = frozenset(
    {E.SHARE_SESSION_NOT_FOUND, E.INVALID_SHARE_SESSION_EPOCH}
)
# A partition's leader moved or its metadata is stale: look it up again, fetch there.
LEADER_CODES: frozenset[ErrorCode] = frozenset(
    {E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID, E.FENCED_LEADER_EPOCH}
)
# Membership errors after which the member joins again at epoch 0.
REJOIN_CODES: frozenset[ErrorCode] = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})
# An acknowledgement of a record that is no longer acquired by this member (its lock expired and
# it went to another, or it was acknowledged already).
LOCK_LOST_CODES: frozenset[ErrorCode] = frozenset({E.INVALID_RECORD_STATE})


def record_key(topic: str, partition: int, offset: int) -> tuple[str, int, int]:
    return (topic, partition, offset)


class ShareRecord(KafkaShareRecord):
    """One record of a share group: topic, partition, offset, key, value, headers, timestamp,
    timestamp_type and delivery_count (how many times the broker has delivered it).

    The codec builds these in one object per record (``decode_share_records``), no wrapper
    around a decoded record. Compared and hashed by identity."""

    __slots__ = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (
            f"ShareRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"delivery_count={self.delivery_count}, key={_short(self.key)}, value={_short(self.value)})"
        )


class _DeserializedShareRecord(ShareRecord):
    __slots__ = ("key", "value")  # plain slots over the codec's read-only key and value
    key: Any
    value: Any

    def __reduce__(self) -> tuple[Any, ...]:
        return (_deserialized, (ShareRecord.__reduce__(self), self.key, self.value))


def _deserialized(base: tuple[Any, ...], key: Any, value: Any) -> _DeserializedShareRecord:
    """Unpickle a deserialized record: the raw one rebuilt, then its key and value set."""
    raw = ShareRecord(*base[1])
    d = raw._copy_as(_DeserializedShareRecord)
    assert isinstance(d, _DeserializedShareRecord)
    d.key, d.value = key, value
    return d


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def share_records(
    topic: str, partition: int, records: Buffer | None, acquired: list[tuple[int, int, int]]
) -> list[ShareRecord]:
    """The acquired records of a ShareFetch partition's record data, one ShareRecord each,
    ``acquired`` being its (first, last, delivery count) ranges."""
    if records is None:
        return []
    ranges = acquired if _in_order(acquired) else sorted(acquired)
    out: list[ShareRecord] = decode_share_records(  # type: ignore[assignment]
        records, topic, partition, ranges, record_type=ShareRecord
    )
    return out


def _in_order(ranges: list[tuple[int, int, int]]) -> bool:
    return all(ranges[i][1] < ranges[i + 1][0] for i in range(len(ranges) - 1))


def deserialize(records: list[ShareRecord], key_fn: Any, value_fn: Any) -> list[ShareRecord]:
    """The records with key and value deserialized (None stays None). A deserializer that raises
    makes a KafkaCodecError naming the record (the caller releases the rest)."""
    copy_as = KafkaShareRecord._copy_as
    cls = _DeserializedShareRecord
    out: list[ShareRecord] = []
    for r in records:
        key, value = r.key, r.value
        part = "key"
        try:
            if key is not None and key_fn is not None:
                key = key_fn(key)
            part = "value"
            if value is not None and value_fn is not None:
                value = value_fn(value)
        except Exception as exc:
            err = KafkaDeserializationError(r.topic, r.partition, r.offset, part, exc)
            err.__cause__ = exc
            raise err from exc
        d: Any = copy_as(r, cls)
        d.key = key
        d.value = value
        out.append(d)
    return out


def ack_ranges(acks: dict[int, int]) -> list[tuple[int, int, int]]:
    """``{offset: type}`` as (first, last, type) runs of consecutive offsets of one type."""
    if not acks:
        return []
    low, high = min(acks), max(acks)
    if high - low + 1 == len(acks):  # contiguous (the usual case): one run if one type
        kinds = set(acks.values())
        if len(kinds) == 1:
            return [(low, high, kinds.pop())]
    out: list[tuple[int, int, int]] = []
    for offset in sorted(acks):
        t = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == t:
            first, _, _ = out[-1]
            out[-1] = (first, offset, t)
        else:
            out.append((offset, offset, t))
    return out


class Acks:
    """One partition's acknowledgements awaiting a request: ranges of one type (an implicit
    accept of a whole poll: no entry per offset) plus single offsets (explicit, releases, gaps)."""

    __slots__ = ("runs", "offsets")

    def __init__(self) -> None:
        self.runs: list[tuple[int, int, int]] = []  # (first, last, type)
        self.offsets: dict[int, int] = {}  # offset -> type

    def add_range(self, first: int, last: int, kind: int) -> int:
        """Add first..last as ``kind``; returns how many entries that adds."""
        self.runs.append((first, last, kind))
        return last - first + 1

    def add(self, acks: dict[int, int]) -> int:
        before = len(self.offsets)
        self.offsets.update(acks)
        return len(self.offsets) - before

    def __len__(self) -> int:
        return len(self.offsets) + sum(last - first + 1 for first, last, _ in self.runs)

    def __bool__(self) -> bool:
        return bool(self.runs or self.offsets)

    def ranges(self) -> list[tuple[int, int, int]]:
        """(first, last, type) runs in offset order, adjacent runs of one type merged."""
        if self.offsets:
            if not self.runs:
                return ack_ranges(self.offsets)
            merged = dict(self.offsets)
            for first, last, kind in self.runs:
                merged.update(dict.fromkeys(range(first, last + 1), kind))
            return ack_ranges(merged)
        out: list[tuple[int, int, int]] = []
        for first, last, kind in sorted(self.runs):
            if out and out[-1][1] + 1 == first and out[-1][2] == kind:
                out[-1] = (out[-1][0], last, kind)
            else:
                out.append((first, last, kind))
        return out

    def as_dict(self) -> dict[int, int]:
        """{offset: type} (per offset: for tests and callbacks, never on the hot path)."""
        out = {}
        for first, last, kind in self.runs:
            out.update(dict.fromkeys(range(first, last + 1), kind))
        out.update(self.offsets)
        return out

    def keys(self) -> AckedOffsets:
        return AckedOffsets(self)


class AckedOffsets(Collection[int]):
    """The offsets of an :class:`Acks`, as a set-like view (made into a set only on demand)."""

    __slots__ = ("_acks",)

    def __init__(self, acks: Acks) -> None:
        self._acks = acks

    def __len__(self) -> int:
        return len(self._acks)

    def __iter__(self) -> Iterator[int]:
        for first, last, _ in self._acks.runs:
            yield from range(first, last + 1)
        yield from self._acks.offsets

    def __contains__(self, offset: object) -> bool:
        if offset in self._acks.offsets:
            return True
        return isinstance(offset, int) and any(f <= offset <= last for f, last, _ in self._acks.runs)


class DoneMemory:
    """Acknowledged offsets remembered to tell "acknowledged twice" from "never delivered": the
    newest ``limit`` of them, kept as runs (topic, partition, first, last). Adding costs per run,
    not per offset (a columnar batch accepted whole is one run; before, a tuple per offset made
    acknowledge_batch cost a microsecond a row); a lookup, only on the error path, scans runs."""

    __slots__ = ("limit", "_runs", "_size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._runs: deque[list[Any]] = deque()  # [topic, partition, first, last], oldest first
        self._size = 0

    def add(self, topic: str, partition: int, first: int, last: int) -> None:
        runs = self._runs
        if runs:
            r = runs[-1]
            if r[3] + 1 == first and r[1] == partition and r[0] == topic:
                r[3] = last
                self._size += last - first + 1
                self._trim()
                return
        runs.append([topic, partition, first, last])
        self._size += last - first + 1
        self._trim()

    def add_offsets(self, topic: str, partition: int, offsets: Iterable[int]) -> None:
        if isinstance(offsets, range) and offsets.step == 1:
            if offsets:
                self.add(topic, partition, offsets.start, offsets.stop - 1)
            return
        for offset in offsets:
            self.add(topic, partition, offset, offset)

    def _trim(self) -> None:
        runs = self._runs
        while self._size > self.limit:
            r = runs[0]
            extra = self._size - self.limit
            n = r[3] - r[2] + 1
            if n <= extra:
                runs.popleft()
                self._size -= n
            else:
                r[2] += extra
                self._size -= extra

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 3:
            return False
        topic, partition, offset = key
        return any(
            r[2] <= offset <= r[3] and r[1] == partition and r[0] == topic for r in reversed(self._runs)
        )
