"""OTLP metrics (opentelemetry-proto's ``MetricsData``) encoded by hand, the subset KIP-714 needs.

A dependency on opentelemetry-proto (and protobuf) for one message of a few fields would cost
every install; the subset here is numbers only: gauges and sums of NumberDataPoints with string
attributes, under one resource and one scope. tests/unit/metrics/test_telemetry_push.py decodes the bytes with
opentelemetry-proto to prove them exact.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from kafka_core.metrics.kip714 import Point

__all__ = ["CUMULATIVE", "DELTA", "Point", "encode_metrics_data"]

# AggregationTemporality (opentelemetry/proto/metrics/v1/metrics.proto)
DELTA = 1
CUMULATIVE = 2

_VARINT, _FIXED64, _LEN = 0, 1, 2
_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")


def _varint(out: bytearray, n: int) -> None:
    if n < 0:
        n += 1 << 64  # int64 fields: two's complement in ten bytes
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _tag(out: bytearray, number: int, wire: int) -> None:
    _varint(out, (number << 3) | wire)


def _bytes(out: bytearray, number: int, data: bytes | bytearray) -> None:
    _tag(out, number, _LEN)
    _varint(out, len(data))
    out += data


def _string(out: bytearray, number: int, text: str) -> None:
    if text:  # proto3: an empty string is the default, left out
        _bytes(out, number, text.encode())


def _key_value(key: str, value: str) -> bytearray:
    any_value = bytearray()
    _bytes(any_value, 1, value.encode())  # AnyValue.string_value (a oneof: sent even if empty)
    kv = bytearray()
    _string(kv, 1, key)
    _bytes(kv, 2, any_value)
    return kv


def _attributes(out: bytearray, number: int, attributes: Mapping[str, str]) -> None:
    for key, value in sorted(attributes.items()):
        _bytes(out, number, _key_value(key, str(value)))


def _data_point(point: Point, start_ns: int, time_ns: int) -> bytearray:
    dp = bytearray()
    if point.is_sum and start_ns:
        _tag(dp, 2, _FIXED64)  # start_time_unix_nano
        dp += _UINT64.pack(start_ns)
    _tag(dp, 3, _FIXED64)  # time_unix_nano
    dp += _UINT64.pack(time_ns)
    value = point.value
    if isinstance(value, int):  # bool included
        _tag(dp, 6, _FIXED64)  # as_int (sfixed64)
        dp += _INT64.pack(int(value))
    else:
        _tag(dp, 4, _FIXED64)  # as_double
        dp += _DOUBLE.pack(float(value))
    _attributes(dp, 7, point.attributes)
    return dp


def _metric(name: str, points: list[Point], start_ns: int, time_ns: int, temporality: int) -> bytearray:
    first = points[0]
    m = bytearray()
    _string(m, 1, name)
    _string(m, 2, first.description)
    _string(m, 3, first.unit)
    body = bytearray()
    for point in points:
        _bytes(body, 1, _data_point(point, start_ns, time_ns))
    if first.is_sum:
        _tag(body, 2, _VARINT)
        _varint(body, temporality)
        _tag(body, 3, _VARINT)
        _varint(body, 1)  # is_monotonic
        _bytes(m, 7, body)  # Metric.sum
    else:
        _bytes(m, 5, body)  # Metric.gauge
    return m


def encode_metrics_data(
    points: Iterable[Point],
    *,
    resource: Mapping[str, str],
    scope_name: str,
    scope_version: str,
    time_ns: int,
    start_ns: int,
    temporality: int = CUMULATIVE,
) -> bytes:
    """``MetricsData`` bytes: one ResourceMetrics of ``resource``'s attributes, one ScopeMetrics,
    one Metric per name (its points in order), every point stamped ``time_ns``; sums start at
    ``start_ns`` with ``temporality`` (DELTA or CUMULATIVE)."""
    by_name: dict[str, list[Point]] = {}
    for point in points:
        by_name.setdefault(point.name, []).append(point)
    scope = bytearray()
    _string(scope, 1, scope_name)
    _string(scope, 2, scope_version)
    scope_metrics = bytearray()
    _bytes(scope_metrics, 1, scope)
    for name, group in by_name.items():
        _bytes(scope_metrics, 2, _metric(name, group, start_ns, time_ns, temporality))
    res = bytearray()
    _attributes(res, 1, resource)
    resource_metrics = bytearray()
    _bytes(resource_metrics, 1, res)
    _bytes(resource_metrics, 2, scope_metrics)
    out = bytearray()
    _bytes(out, 1, resource_metrics)
    return bytes(out)
