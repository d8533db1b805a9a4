"""W3C trace context in Kafka record headers: injected on send, extracted on receive.

Headers are ``(str, bytes | None)`` pairs, as every Kafka client carries them; the values are the
propagator's strings in UTF-8, which is what the OpenTelemetry contrib instrumentations of
confluent-kafka, aiokafka and kafka-python write and read, so a context crosses between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators import textmap
from opentelemetry.trace import SpanContext

__all__ = ["extract_context", "header_pairs", "inject_headers", "row_contexts", "span_context_of"]

Headers = Sequence[tuple[str, Any]]


class _HeaderGetter(textmap.Getter[Any]):
    """Reads ``(key, value)`` pairs, or the ``{"key": ..., "value": ...}`` rows of an Arrow
    headers column; the first header of a name wins, as in the contrib instrumentations."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        for item in carrier:
            name, value = (item["key"], item["value"]) if isinstance(item, Mapping) else item
            if name == key:
                if value is None:
                    return None
                return [
                    value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else str(value)
                ]
        return None

    def keys(self, carrier: Any) -> list[str]:
        return [item["key"] if isinstance(item, Mapping) else item[0] for item in carrier]


GETTER = _HeaderGetter()


def header_pairs(context: Context | None = None) -> list[tuple[str, bytes]]:
    """The headers the global propagator writes for ``context`` (None: the current one), encoded."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return [(k, v.encode()) for k, v in carrier.items()]


def inject_headers(
    headers: Iterable[tuple[str, Any]] | None, context: Context | None = None
) -> list[tuple[str, Any]]:
    """A new headers list: ``headers`` without the propagator's own fields, then the context's.

    Replacing (not appending) matters when a consumed record's headers are sent on: readers take
    the first ``traceparent``, and the stale one would win."""
    pairs = header_pairs(context)
    if not headers:
        return pairs
    if not pairs:
        return list(headers)
    names = {k for k, _ in pairs}
    return [h for h in headers if h[0] not in names] + pairs


def extract_context(record_or_headers: Any) -> Context | None:
    """The context a record carries in its headers (a kafka_core message, share record,
    transport message, confluent-kafka or aiokafka record, or a headers list), or None."""
    headers = record_or_headers
    if not isinstance(headers, list | tuple):
        headers = getattr(record_or_headers, "headers", None)
        if callable(headers):  # confluent-kafka's Message.headers()
            headers = headers()
    if not headers:
        return None
    ctx = propagate.extract(headers, getter=GETTER)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def span_context_of(context: Context | None) -> SpanContext | None:
    if context is None:
        return None
    sc = trace.get_current_span(context).get_span_context()
    return sc if sc.is_valid else None


def row_contexts(batch: Any) -> list[Context | None]:
    """Per row of a ``poll_columns`` batch (a pyarrow RecordBatch or Table with a ``headers``
    column), the context its record carries, or None: each record's own producer span."""
    if batch is None or "headers" not in batch.schema.names:
        return [None] * (0 if batch is None else batch.num_rows)
    return [extract_context(row) if row else None for row in batch.column("headers").to_pylist()]


def batch_span_contexts(batch: Any, limit: int) -> list[SpanContext]:
    """The distinct producer span contexts of a columnar batch's rows (at most ``limit``), found
    with Arrow compute: the rows are not turned into Python objects, only one per context."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch is None or batch.num_rows == 0 or "headers" not in batch.schema.names:
        return []
    headers = batch.column("headers")
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if len(headers.values) == 0:
        return []
    flat = pc.list_flatten(headers)
    parents = pc.list_parent_indices(headers)
    hit = pc.equal(flat.field("key"), "traceparent")
    values = pc.filter(flat.field("value"), hit)
    rows = pc.filter(parents, hit)
    out: list[SpanContext] = []
    for value in pc.unique(values).to_pylist():
        if value is None:
            continue
        row = rows[pc.index(values, value).as_py()].as_py()
        sc = span_context_of(extract_context(headers[row].as_py()))
        if sc is not None:
            out.append(sc)
            if len(out) >= limit:
                break
    return out
