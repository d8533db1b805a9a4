"""Finding the client snapshots in what an object's ``metrics()`` returns, for the exporters.

A producer or consumer returns one client snapshot; a transport or an admin nests its clients'
snapshots in its own dict. Prometheus's collector and the OpenTelemetry export both read them
this way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["client_snapshots", "distinct_ids", "snapshot_of"]


def snapshot_of(source: Any) -> Any:
    """``source.metrics()``, or ``source()`` for a function returning such a dict."""
    fn: Callable[[], Any] = source.metrics if hasattr(source, "metrics") else source
    return fn()


def client_snapshots(snap: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, snapshot) for every client snapshot in ``snap``, however it is nested; kind is
    ``producer``, ``consumer`` or ``client`` (a client of neither, e.g. an admin's)."""
    if isinstance(snap, list | tuple):
        for item in snap:
            yield from client_snapshots(item)
        return
    if not isinstance(snap, dict):
        return
    if "network" in snap and "client_id" in snap:
        kind = "producer" if "producer" in snap else "consumer" if "consumer" in snap else "client"
        yield kind, snap
        return
    for value in snap.values():
        yield from client_snapshots(value)


def distinct_ids(snaps: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(kind, client id, snapshot): two clients of one kind with one ``client_id`` get
    ``"id#2"`` for the second, so that their series stay apart."""
    seen: dict[tuple[str, str], int] = {}
    for kind, snap in snaps:
        client_id = str(snap.get("client_id"))
        n = seen[(kind, client_id)] = seen.get((kind, client_id), 0) + 1
        yield kind, client_id if n == 1 else f"{client_id}#{n}", snap
