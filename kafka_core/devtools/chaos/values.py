"""The chaos workload's record bodies: each carries its sequence number and bytes only that
number yields, so a delivered record is checked byte for byte (a corrupt delivery is counted,
never trusted). Below both the books (accounting) and the wire capture, which read them."""

from __future__ import annotations

import hashlib

__all__ = ["parse_value", "record_value"]

_PREFIX = b"chaos-"
_SIZE = 100


def record_value(seq: int) -> bytes:
    """The body of record ``seq``: its number, then bytes that only that number yields."""
    head = b"%s%010d-" % (_PREFIX, seq)
    tail = hashlib.blake2b(head, digest_size=32).hexdigest().encode()
    return (head + tail * 3)[:_SIZE]


def parse_value(data: bytes | bytearray | memoryview | None) -> int | None:
    """The sequence number of an intact record body, else None (corrupt or foreign)."""
    if isinstance(data, memoryview):
        data = data.tobytes()
    if data is None or len(data) != _SIZE or not data.startswith(_PREFIX):
        return None
    try:
        seq = int(data[len(_PREFIX) : len(_PREFIX) + 10])
    except ValueError:
        return None
    return seq if record_value(seq) == data else None
