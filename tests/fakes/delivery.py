"""Helpers the consumer's broker tests share (Tansu, the mock cluster): poll until the expected
records arrived, and check that every acknowledged record was delivered once, as it was sent."""

from __future__ import annotations

import time
from typing import Any

from fakes.patience import patience


def drain(c: Any, expected: int, timeout: float = 45.0) -> list[Any]:
    """Poll a (sync) consumer until ``expected`` records arrived or ``timeout`` s passed; then
    once more, so that a record delivered beyond the expected count shows up as a duplicate.
    The timeout is as fakes.patience shortens it."""
    got: list[Any] = []
    deadline = time.monotonic() + patience(timeout)
    while len(got) < expected and time.monotonic() < deadline:
        got.extend(c.poll(200))
    got.extend(c.poll(300))
    return got


def assert_exact(acked: dict[tuple[int, int], bytes], got: list[Any], partitions: int = 0) -> None:
    """Each acknowledged record (``(partition, offset) -> value``) read once, at its offset; with
    ``partitions``, each of those partitions' acknowledged offsets also run from 0 without a gap,
    in send order, and were delivered in offset order."""
    seen: dict[tuple[int, int], bytes] = {}
    for m in got:
        key = (m.partition, m.offset)
        assert key not in seen, f"record at partition {m.partition} offset {m.offset} delivered twice"
        seen[key] = bytes(m.value)
    missing = sorted(set(acked) - set(seen))
    assert not missing, f"{len(missing)} acknowledged records never delivered, first {missing[:5]}"
    assert seen == acked, "delivered records differ from the acknowledged ones"
    # Grouped by partition once: a pass over everything per partition is quadratic at 1,000.
    acked_at: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for q, o in acked:
        if q in acked_at:
            acked_at[q].append(o)
    got_at: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for m in got:
        if m.partition in got_at:
            got_at[m.partition].append(m.offset)
    for p in range(partitions):
        offsets = sorted(acked_at[p])
        assert offsets == list(range(len(offsets))), f"partition {p}: holes or gaps {offsets[:10]}"
        values = [acked[(p, o)] for o in offsets]
        assert values == sorted(values), f"partition {p}: send order not kept"
        order = got_at[p]
        assert order == sorted(order), f"partition {p}: delivered out of order"
