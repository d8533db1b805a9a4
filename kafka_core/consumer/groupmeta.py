"""The consumer protocol's embedded structs (JoinGroup metadata, SyncGroup assignment).

They travel as opaque bytes inside group requests and are never flexible, so a small hand-written
codec (big-endian, int16-length strings, int32-length bytes) is simpler than the generated layer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafka_core.errors import KafkaProtocolError

SUBSCRIPTION_VERSION = 3  # v1 owned partitions (KIP-429), v2 generation, v3 rack
ASSIGNMENT_VERSION = 3

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _bad(what: str) -> KafkaProtocolError:
    return KafkaProtocolError(-1, "CORRUPT_GROUP_METADATA", False, f"consumer protocol: {what}")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass
class Assignment:
    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_H.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I.pack(v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
            return
        data = s.encode()
        self.int16(len(data))
        self.parts.append(data)

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
            return
        self.int32(len(b))
        self.parts.append(bytes(b))

    def topic_partitions(self, tps: dict[str, list[int]]) -> None:
        self.int32(len(tps))
        for topic in sorted(tps):
            self.string(topic)
            parts = tps[topic]
            self.int32(len(parts))
            self.parts.append(struct.pack(f">{len(parts)}i", *parts))

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(bytes(buf))
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise _bad(f"truncated at byte {self.pos} (need {n} more)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def done(self) -> bool:
        return self.pos >= len(self.buf)

    def int16(self) -> int:
        return _H.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I.unpack(self._take(4))[0]

    def string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < -1:
            raise _bad(f"negative string length {n}")
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as exc:
            raise _bad("string is not UTF-8") from exc

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < -1:
            raise _bad(f"negative bytes length {n}")
        return bytes(self._take(n))

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.buf):
            raise _bad(f"implausible array length {n}")
        return n

    def topic_partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.count()):
            topic = self.string()
            if topic is None:
                raise _bad("null topic name")
            n = self.count()
            out.setdefault(topic, []).extend(struct.unpack(f">{n}i", self._take(4 * n)))
        return out


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    w = _Writer()
    w.int16(version)
    w.int32(len(sub.topics))
    for t in sub.topics:
        w.string(t)
    w.bytes_(sub.user_data)
    if version >= 1:
        w.topic_partitions(sub.owned_partitions)
    if version >= 2:
        w.int32(sub.generation_id)
    if version >= 3:
        w.string(sub.rack_id)
    return w.value()


def decode_subscription(buf: bytes) -> Subscription:
    """Read any version; fields of newer versions than we know are ignored (forward compatible)."""
    r = _Reader(buf)
    version = r.int16()
    if version < 0:
        raise _bad(f"negative subscription version {version}")
    topics = []
    for _ in range(r.count()):
        t = r.string()
        if t is None:
            raise _bad("null topic in subscription")
        topics.append(t)
    sub = Subscription(topics=topics, user_data=r.bytes_())
    if version >= 1 and not r.done():
        sub.owned_partitions = r.topic_partitions()
    if version >= 2 and not r.done():
        sub.generation_id = r.int32()
    if version >= 3 and not r.done():
        sub.rack_id = r.string()
    return sub


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    w = _Writer()
    w.int16(version)
    w.topic_partitions(a.partitions)
    w.bytes_(a.user_data)
    return w.value()


def decode_assignment(buf: bytes | None) -> Assignment:
    """An empty buffer is a valid 'nothing for you' (brokers send it to members left out)."""
    if not buf:
        return Assignment()
    r = _Reader(buf)
    version = r.int16()
    if version < 0:
        raise _bad(f"negative assignment version {version}")
    partitions = r.topic_partitions()
    user_data = r.bytes_() if not r.done() else None
    return Assignment(partitions=partitions, user_data=user_data)
