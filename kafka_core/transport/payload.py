"""What goes on the wire for a publish, and what a handler receives back.

Bytes and str travel as they are (str as UTF-8), None as a null value (a tombstone), anything
else as JSON; so a handler can tell them apart only by convention, and ``Message.json()`` /
``Message.text()`` decode on demand instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_core.errors import KafkaConfigError

__all__ = ["Message", "encode_headers", "encode_value"]


def encode_value(value: Any, what: str = "payload") -> bytes | None:
    """bytes-like as they are, str as UTF-8, None as None, other objects as compact JSON."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise KafkaConfigError(
            f"{what} of type {type(value).__name__} is not bytes, str or JSON-serialisable: {exc}"
        ) from exc


def encode_headers(
    headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None,
) -> list[tuple[str, bytes | None]] | None:
    """A dict or (name, value) pairs; values bytes, str (UTF-8) or None."""
    if headers is None:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in pairs:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise KafkaConfigError(f"a header must be a (name, value) pair, not {item!r}") from None
        if not isinstance(name, str):
            raise KafkaConfigError(f"header names must be str, not {name!r}")
        if value is not None and not isinstance(value, bytes | bytearray | str):
            raise KafkaConfigError(f"header {name!r}: the value must be bytes, str or None, not {value!r}")
        if isinstance(value, str):
            value = value.encode()
        elif isinstance(value, bytearray):
            value = bytes(value)  # encoded later, on the loop: a buffer the caller reuses must not leak in
        out.append((name, value))
    return out


@dataclass(frozen=True, slots=True)
class Message:
    """One record handed to a subscription's handler (``value`` and ``key`` as raw bytes).

    ``delivery_count``: in queue mode (``share=True``) how many times the share group has
    delivered this record (1 the first time); None in a consumer group."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    delivery_count: int | None = None

    @classmethod
    def from_consumed(cls, msg: Any) -> Message:
        return cls(
            msg.topic,
            msg.partition,
            msg.offset,
            msg.key,
            msg.value,
            list(msg.headers),
            msg.timestamp,
            getattr(msg, "delivery_count", None),
        )

    def json(self) -> Any:
        """The value decoded as JSON (what ``publish`` made of a Python object)."""
        if self.value is None:
            return None
        return json.loads(self.value)

    def text(self) -> str | None:
        """The value decoded as UTF-8 (what ``publish`` made of a str)."""
        return None if self.value is None else self.value.decode()

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name`` (None when absent)."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found
