"""Executor side of a read: a task's offset ranges (each of one partition), as Arrow batches.

Each task reads its range with the consumer's columnar path and yields ``pyarrow.RecordBatch``es
already in the schema Spark checks, so no Python object is made per record. Gaps in offsets
(compaction, transaction markers, aborted records) are not data loss; offsets that were in
the plan but are gone from the log are, and ``failOnDataLoss`` decides whether that fails the task.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaError, KafkaProtocolError, KafkaTimeoutError
from kafka_core.spark import loss
from kafka_core.spark.cache import WorkerCache
from kafka_core.spark.options import SourceOptions
from kafka_core.spark.planning import DataLossError, OffsetRange

log = logging.getLogger("kafka_core.spark")

__all__ = ["arrow_read_schema", "prepare", "read_range", "read_ranges"]

OFFSET_OUT_OF_RANGE = 1
# Without progress for this long, ask where the log ends: data that is not there is not waited for.
_STALL_CHECK_S = 2.0


@cache
def arrow_read_schema(include_headers: bool, columns: tuple[str, ...] | None = None) -> Any:
    """Spark's Kafka read schema as Arrow (what ``to_arrow_schema`` makes of it, UTC); with
    ``columns``, only those, in that order (a user's schema naming a subset)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        element = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", element))))
    if columns is not None:
        by_name = {f.name: f for f in fields}
        fields = [by_name[c] for c in columns if c in by_name]
    return pa.schema(fields)


def _to_spark(batch: Any, include_headers: bool, columns: tuple[str, ...] | None = None) -> Any:
    """A consumer batch (topic, partition, offset, timestamp, timestamp_type, key, value,
    headers) cast column by column to the Spark schema (buffers shared where types agree);
    with ``columns``, only those are built."""
    import pyarrow as pa

    schema = arrow_read_schema(include_headers, columns)
    arrays = []
    for f in schema:
        source = {"timestampType": "timestamp_type"}.get(f.name, f.name)
        col = batch.column(source)
        arrays.append(col if col.type == f.type else col.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _build_client(options: dict[str, Any]) -> Any:
    from kafka_core.sync_client import KafkaClient

    return KafkaClient(**options)


_CLIENTS: WorkerCache[Any] = WorkerCache(_build_client, lambda c: c.close())


def _client_key(options: SourceOptions) -> str:
    return json.dumps(options.client, sort_keys=True, default=str)


def prepare(options: SourceOptions) -> None:
    """A task's warm-up, run in a thread while Spark hands the task over: this worker's client
    built and connected (bootstrap and broker metadata), the consumer's modules imported, the
    decoders built (while the task's first fetch is in flight). Failures are left to the task,
    whose own calls report them, with its timeouts."""
    try:
        _CLIENTS.get(_client_key(options), options.client).start()
        import kafka_core.consumer.sync  # noqa: F401  (the reader's next import)

        if options.key_format is not None or options.value_format is not None:
            from kafka_core.spark.registry import prepare_decoding

            prepare_decoding((options.key_format, options.value_format))
    except Exception as exc:  # the task meets it again, with its cause and timeout
        log.debug("kafka_core read warm-up: %s: %s", type(exc).__name__, exc)


def _build_consumer(spec: dict[str, Any]) -> _HeldConsumer:
    from kafka_core.consumer.sync import KafkaConsumer

    options: SourceOptions = spec["options"]
    consumer = KafkaConsumer(
        client=spec["client"],
        partitions={spec["topic"]: [spec["partition"]]},
        group_id=None,
        auto_offset_reset="none",
        isolation_level=options.isolation_level,
        **options.consumer,
    )
    return _HeldConsumer(spec["client"], consumer)


class _HeldConsumer:
    """A worker's consumer of one partition, kept between its tasks (as Spark's connector keeps
    its consumers): a micro-batch's task then starts with no consumer to build and no fetch
    session to open and close. Paused between tasks with nothing buffered (see _RangeReader.run),
    so what a task reads is fetched once it has started."""

    def __init__(self, client: Any, consumer: Any) -> None:
        self.client = client
        self.consumer = consumer

    def close(self) -> None:
        self.consumer.close(timeout=1.0, commit=False)


_CONSUMERS: WorkerCache[_HeldConsumer] = WorkerCache(_build_consumer, lambda held: held.close())


def _topic_id(client: Any, topic: str) -> str:
    """The topic's id from fresh metadata: a topic deleted and recreated since this worker's last
    task gets a consumer of its own, never one that knew the old log (whose positions it would
    reset); "?" where the broker names none (the consumer then reports what is wrong)."""
    meta = client.metadata([topic], allow_auto_topic_creation=False).topic(topic)
    return "?" if meta is None or meta.error_code or meta.topic_id is None else str(meta.topic_id)


def read_ranges(options: SourceOptions, ranges: Sequence[OffsetRange]) -> Iterator[Any]:
    """Yield the records of each range in turn (a task's ranges), the topics' ids looked up
    once for the task."""
    topic_ids: dict[str, str] = {}
    for r in ranges:
        yield from read_range(options, r, topic_ids)


def read_range(
    options: SourceOptions, r: OffsetRange, topic_ids: dict[str, str] | None = None
) -> Iterator[Any]:
    """Yield the records of ``r`` (offsets start <= o < end) as Spark-schema Arrow batches.
    ``topic_ids``: the ids this task has looked up already, filled in here."""
    if r.size <= 0:
        return
    key = _client_key(options)
    client = _CLIENTS.get(key, options.client)
    spec = {"options": options, "client": client, "topic": r.topic, "partition": r.partition}
    try:
        consumer_options = json.dumps(options.consumer, sort_keys=True, default=str)
        ids = {} if topic_ids is None else topic_ids
        if r.topic not in ids:
            ids[r.topic] = _topic_id(client, r.topic)
        topic_id = ids[r.topic]
        held_key = f"{key}|{consumer_options}|{options.isolation_level}|{r.topic}|{topic_id}|{r.partition}"
        held = _CONSUMERS.get(held_key, spec)
        if held.client is not client:  # built on a client since dropped after a failure
            _CONSUMERS.discard(held_key, held)
            held = _CONSUMERS.get(held_key, spec)
    except KafkaError:
        _CLIENTS.discard(key, client)
        raise
    try:
        yield from _RangeReader(options, held.consumer, r).run()
    except BaseException as exc:
        # A failed or abandoned read leaves its consumer mid-range: never reused. Nor is a client
        # that just failed, but data loss is the log's doing, not the client's.
        _CONSUMERS.discard(held_key, held)
        if isinstance(exc, KafkaError) and not isinstance(exc, DataLossError):
            _CLIENTS.discard(key, client)
        raise
    else:
        _CONSUMERS.touch(held_key)
        _CLIENTS.touch(key)


class _RangeReader:
    def __init__(self, options: SourceOptions, consumer: Any, r: OffsetRange) -> None:
        self.options = options
        self.consumer = consumer
        self.r = r
        self.tp = TopicPartition(r.topic, r.partition)

    def run(self) -> Iterator[Any]:
        r, tp, consumer = self.r, self.tp, self.consumer
        # Nothing past the range is fetched: no prefetch thrown away at the end, and no Fetch
        # left waiting at the log's end to hold up this worker's next task (measured: a
        # micro-batch's task of 3 records took 100 ms more, the reader's fetch_max_wait_ms).
        consumer.fetch_until(tp, r.end)
        consumer.resume([tp])
        if consumer.position(tp) != r.start:
            consumer.seek(tp, r.start)
        try:
            position = r.start
            progress_at = time.monotonic()
            checked_end = False
            while position < r.end:
                try:
                    batch = consumer.poll_columns(timeout_ms=500)
                except KafkaProtocolError as exc:
                    if exc.code != OFFSET_OUT_OF_RANGE:
                        raise
                    position = self._out_of_range(consumer, position)
                    progress_at = time.monotonic()
                    continue
                now_at = consumer.position(tp)
                if batch is not None and batch.num_rows:
                    yield self._emit(batch)
                if now_at is not None and now_at > position:
                    position = now_at
                    progress_at = time.monotonic()
                    checked_end = False
                    continue
                stalled = time.monotonic() - progress_at
                if not checked_end and stalled >= _STALL_CHECK_S:
                    checked_end = True
                    end = consumer.end_offsets([tp])[tp]
                    if end <= position:
                        self._lost(loss.lost_offsets(position, r.end), loss.log_end_before(end, r.end))
                        return
                if stalled * 1000 >= self.options.poll_timeout_ms:
                    raise KafkaTimeoutError(
                        f"no record of {tp.topic}-{tp.partition} at offset {position} within "
                        f"{self.options.poll_timeout_ms} ms (option 'kafkaConsumer.pollTimeoutMs'); "
                        f"the task reads offsets {r.start} to {r.end}"
                    )
        finally:
            consumer.pause([tp])
            # Nothing fetched before the next task starts is served by it: not what this one
            # buffered past its end, nor the answer of a Fetch still in flight (a seek to the
            # position drops both). Records deleted in between (DeleteRecords, retention) are
            # then found missing as Spark's connector finds them, whose consumer fetches only
            # inside poll; kept, they were served (test_diff_stream_loss, CI of 2026-12-03).
            with contextlib.suppress(KafkaError):
                at = consumer.position(tp)
                if at is not None:
                    consumer.seek(tp, at)

    def _emit(self, batch: Any) -> Any:
        import pyarrow.compute as pc

        offsets = batch.column("offset")
        if offsets[len(offsets) - 1].as_py() >= self.r.end:
            keep = pc.sum(pc.less(offsets, self.r.end)).as_py() or 0
            batch = batch.slice(0, keep)
        opts = self.options
        batch = _to_spark(batch, opts.include_headers, opts.columns)
        if opts.key_format is not None or opts.value_format is not None:
            import pyarrow as pa

            from kafka_core.spark.registry import decode_batch

            batch = decode_batch(batch, (opts.key_format, opts.value_format))
            if opts.columns is not None and list(batch.schema.names) != list(opts.columns):
                # error columns the user's schema left out, or placed elsewhere
                batch = pa.RecordBatch.from_arrays(
                    [batch.column(c) for c in opts.columns], names=list(opts.columns)
                )
        return batch

    def _out_of_range(self, consumer: Any, position: int) -> int:
        """The position is not in the log: before its start (aged out) or past its end."""
        tp, r = self.tp, self.r
        earliest = consumer.beginning_offsets([tp])[tp]
        if position < earliest:
            self._lost(loss.lost_offsets(position, min(earliest, r.end)), loss.retention(earliest))
            if earliest >= r.end:
                return r.end
            consumer.seek(tp, earliest)
            return earliest
        end = consumer.end_offsets([tp])[tp]
        self._lost(loss.lost_offsets(position, r.end), loss.log_end_before(end, r.end))
        return r.end

    def _lost(self, lost: str, cause: str) -> None:
        fail = self.options.fail_on_data_loss
        message = loss.loss_message(self.r.topic, self.r.partition, lost, cause, fail=fail)
        if fail:
            raise DataLossError(message)
        log.warning("%s", message)
