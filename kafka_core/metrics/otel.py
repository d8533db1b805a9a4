"""OpenTelemetry export of ``metrics()`` snapshots (the optional extra ``kafka-core[otel]``).

The same numbers the client pushes to brokers (KIP-714), under the same names
(``org.apache.kafka.producer.record.send.total``...; kafka_core.metrics.kip714), through an
OpenTelemetry meter: observable counters for the totals, observable gauges for the values now,
with the attributes Java gives them (``client_id``, ``node_id``, ``topic``, ``partition``).
Nothing is done per increment: each collection of the meter provider's readers takes one
snapshot per exported object, and opentelemetry is imported only when this module is used.

    from kafka_core.metrics.otel import export_metrics
    export = export_metrics(producer)        # the global MeterProvider, or meter_provider=
    ...
    export.close()                           # before closing the producer
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from kafka_core._version import __version__
from kafka_core.metrics.kip714 import KINDS, METRICS, MetricsCollector, prefix
from kafka_core.metrics.snapshots import client_snapshots, distinct_ids, snapshot_of

log = logging.getLogger("kafka_core.metrics")

__all__ = ["METER_NAME", "MetricsExport", "export_metrics"]

METER_NAME = "kafka_core"
_EXTRA_HINT = "pip install 'kafka-core[otel]'"
# One set of instruments per meter provider (an instrument name may be created once per meter):
# every export to that provider adds its object to it.
_providers: weakref.WeakKeyDictionary[Any, _ProviderExport] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # guards _providers


def _otel_metrics() -> Any:
    try:
        from opentelemetry import metrics
    except ImportError as exc:
        raise ImportError(
            f"OpenTelemetry metrics export needs opentelemetry-api, the optional extra kafka-core[otel]: {_EXTRA_HINT}"
        ) from exc
    return metrics


def export_metrics(obj: Any, meter_provider: Any = None) -> MetricsExport:
    """Export ``obj.metrics()`` (a producer, consumer, share consumer, client, admin or transport,
    sync or asyncio, or a function returning such a dict) through ``meter_provider`` (default:
    OpenTelemetry's global one). Returns the handle whose ``close()`` stops it."""
    otel = _otel_metrics()
    provider = otel.get_meter_provider() if meter_provider is None else meter_provider
    with _lock:
        export = _providers.get(provider)
        if export is None:
            export = _providers[provider] = _ProviderExport(provider.get_meter(METER_NAME, __version__), otel)
    return MetricsExport(export, export.add(obj))


class MetricsExport:
    """One exported object: ``close()`` (or leaving a ``with`` block) stops its series from the
    next collection on. The instruments stay (OpenTelemetry cannot remove one) and observe
    nothing for it."""

    def __init__(self, export: _ProviderExport, source: _Source) -> None:
        self._export = export
        self._source = source

    @property
    def closed(self) -> bool:
        return self._source.closed

    def close(self) -> None:
        """Idempotent."""
        self._export.remove(self._source)

    def __enter__(self) -> MetricsExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Source:
    """An exported object and its collectors (one per client snapshot in what it returns: a
    collector keeps the previous collection's counters, for the averages since then)."""

    __slots__ = ("closed", "collectors", "obj")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.collectors: dict[tuple[int, str], MetricsCollector] = {}
        self.closed = False


def _kind(kind: str, snap: dict[str, Any]) -> str:
    """The KIP-714 kind of a client snapshot: a share consumer's is a consumer's, Java's way;
    a bare client's (an admin's) the admin's."""
    if kind == "client":
        return "consumer" if "share" in snap else "admin"
    return kind


class _ProviderExport:
    """The instruments on one meter and the objects they observe.

    The SDK calls every instrument's callback once per collection (per reader). The first call
    of a collection takes the snapshots and makes every metric's observations; the others are
    served from them. A callback whose metric was served already starts the next collection:
    one snapshot per object per collection, whatever order the callbacks come in."""

    def __init__(self, meter: Any, otel: Any) -> None:
        self._otel = otel
        self._sources: list[_Source] = []
        self._lock = threading.Lock()  # guards _sources, _round, _served (readers' threads)
        self._round: dict[str, list[Any]] | None = None
        self._served: set[str] = set()
        made: set[str] = set()
        for kind in KINDS:
            for info in METRICS[kind]:
                name = prefix(kind) + info.name
                if name in made:
                    continue
                made.add(name)
                create = meter.create_observable_counter if info.sum else meter.create_observable_gauge
                create(name, callbacks=[self._callback(name)], unit=info.unit, description=info.description)

    def add(self, obj: Any) -> _Source:
        source = _Source(obj)
        with self._lock:
            self._sources.append(source)
        return source

    def remove(self, source: _Source) -> None:
        with self._lock:
            source.closed = True
            self._sources = [s for s in self._sources if s is not source]

    def _callback(self, name: str) -> Any:
        def observe(options: Any) -> Iterable[Any]:
            return self.observe(name)

        return observe

    def observe(self, name: str) -> list[Any]:
        with self._lock:
            if self._round is None or name in self._served:
                self._round = self._collect()
                self._served = set()
            self._served.add(name)
            return self._round.get(name, [])

    def _collect(self) -> dict[str, list[Any]]:
        observation = self._otel.Observation
        out: dict[str, list[Any]] = {}
        now = time.monotonic()
        found: list[tuple[str, dict[str, Any]]] = []
        owners: list[tuple[_Source, int]] = []
        for source in self._sources:
            try:
                snaps = list(client_snapshots(snapshot_of(source.obj)))
            except Exception as exc:  # a closed object: its series are gone, the rest go on
                log.debug("metrics of %r unavailable: %r", source.obj, exc)
                continue
            for i, kind_and_snap in enumerate(snaps):
                found.append(kind_and_snap)
                owners.append((source, i))
        for (kind, client_id, snap), (source, i) in zip(distinct_ids(found), owners, strict=True):
            kind = _kind(kind, snap)
            collector = source.collectors.get((i, kind))
            if collector is None:
                collector = source.collectors[(i, kind)] = MetricsCollector(kind)
            for point in collector.collect(snap, now, delta=False, prefixes=None):
                attrs = {"client_id": client_id, **point.attributes}
                out.setdefault(point.name, []).append(observation(point.value, attrs))
        return out
