"""Executor side of a write: Arrow batches (or rows) to Kafka through a cached producer.

Each Arrow batch goes to ``send_batch`` whole per topic (and per explicit partition), so records
never become Python objects; string columns are cast to binary by Arrow, null values are
tombstones. Before a task returns, its producer is flushed and every delivery checked: any
failure fails the task, and Spark retries it (at-least-once, as Spark's own sink). A producer is
cached per Python worker, keyed by its options, and thrown away after any failure.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_core.errors import KafkaConfigError, KafkaError, KafkaTimeoutError
from kafka_core.spark.cache import WorkerCache
from kafka_core.spark.options import SinkOptions
from kafka_core.spark.profiling import profiled_call

if TYPE_CHECKING:
    from kafka_core.producer import PreparedTransaction

__all__ = ["TaskResult", "WriteCounts", "check_sink_schema", "produce_partition", "write_any", "write_arrow"]

log = logging.getLogger("kafka_core.spark")

_COLUMNS = ("topic", "key", "value", "headers", "partition")


@dataclass
class WriteCounts:
    """What one task wrote: its commit message carries these to the driver."""

    rows: int = 0
    bytes: int = 0
    batches: int = 0


@dataclass
class TaskResult:
    """A task's counts and, in a transactional write, its task partition and the transaction it
    prepared (the driver commits it)."""

    counts: WriteCounts
    task_partition: int = -1
    prepared: PreparedTransaction | None = None


def check_sink_schema(
    fields: dict[str, str], topic_option: str | None, encoded: frozenset[str] = frozenset()
) -> None:
    """Spark's rules for the sink's columns, checked on the driver. ``fields``: name -> Spark
    simpleString type (``binary``, ``string``, ``int``, ``array<struct<key:string,value:binary>>``);
    ``encoded``: the columns keyFormat/valueFormat encode (any type the schema writes)."""
    lower = {name.lower(): t for name, t in fields.items()}
    if "value" not in lower:
        raise KafkaConfigError(
            "the sink needs a 'value' column (string or binary); the DataFrame has: " + ", ".join(fields)
        )
    for name, allowed in (("value", ("string", "binary")), ("key", ("string", "binary"))):
        if name in lower and name not in encoded and lower[name] not in allowed:
            raise KafkaConfigError(f"column {name!r} must be string or binary, not {lower[name]}")
    # As Spark's connector: with the option set the column is ignored, whatever its type.
    if "topic" in lower and topic_option is None and lower["topic"] != "string":
        raise KafkaConfigError(f"column 'topic' must be a string, not {lower['topic']}")
    if "topic" not in lower and topic_option is None:
        raise KafkaConfigError(
            "no topic to write to: set the option 'topic' or give the DataFrame a 'topic' column"
        )
    if "partition" in lower and lower["partition"] != "int":
        raise KafkaConfigError(f"column 'partition' must be an int, not {lower['partition']}")
    if "headers" in lower:
        compact = lower["headers"].replace(" ", "")
        if compact not in (
            "array<struct<key:string,value:binary>>",
            "array<struct<key:string,value:string>>",
        ):
            raise KafkaConfigError(
                f"column 'headers' must be array<struct<key:string,value:binary>>, not {lower['headers']}"
            )


def _build_producer(options: dict[str, Any]) -> Any:
    from kafka_core.producer.sync import KafkaProducer

    return KafkaProducer(**options)


_PRODUCERS: WorkerCache[Any] = WorkerCache(_build_producer, lambda p: p.close(timeout=5.0))


def _column(batch: Any, name: str) -> Any:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index)


def _binary(col: Any) -> Any:
    import pyarrow as pa

    if col is None:
        return None
    t = col.type
    if pa.types.is_string(t):
        return col.cast(pa.binary())
    if pa.types.is_large_string(t):
        return col.cast(pa.large_binary())
    return col


def _headers(col: Any) -> Any:
    """Spark's headers column as the encoder's (string values cast to binary)."""
    import pyarrow as pa

    if col is None or (col.null_count == len(col)):
        return None
    element = col.type.value_type
    value_type = element.field("value").type
    if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
        target = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
        col = col.cast(target)
    if col.null_count:  # a null headers array is no headers
        col = col.fill_null(pa.scalar([], col.type))
    return col


class _Sender:
    """Sends the batches of one task and remembers their futures. ``producer`` returns the task's
    producer; it is asked when the first group is sent (the producer may still be starting)."""

    def __init__(
        self, producer: Callable[[], Any], topic_option: str | None, formats: tuple[Any, Any] = (None, None)
    ) -> None:
        self._get_producer = producer
        self.formats = formats  # (key, value) SinkFormat or None: encoded by Schema Registry
        self._producer: Any = None
        self.topic_option = topic_option
        self.futures: list[Any] = []
        self.counts = WriteCounts()
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    @property
    def producer(self) -> Any:
        if self._producer is None:
            self._producer = self._get_producer()
        return self._producer

    # Spark hands over batches of 10,000 rows; sending them in bigger groups makes bigger
    # per-partition Kafka batches and costs about a quarter less CPU per row.
    GROUP_ROWS = 65_536
    GROUP_BYTES = 8 << 20

    def send(self, batch: Any) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= self.GROUP_ROWS or self._pending_bytes >= self.GROUP_BYTES:
            self._send_pending()

    def _send_pending(self) -> None:
        import pyarrow as pa

        if not self._pending:
            return
        pending, self._pending = self._pending, []
        self._pending_rows = self._pending_bytes = 0
        batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
        self._send_group(batch)

    def _send_group(self, batch: Any) -> None:
        import pyarrow.compute as pc

        self.counts.batches += 1
        if self.topic_option is not None:
            self._send_topic(self.topic_option, batch)
            return
        topics = _column(batch, "topic")
        if topics is None:
            raise KafkaConfigError("no topic to write to: set the option 'topic' or add a 'topic' column")
        if topics.null_count:
            raise KafkaConfigError(
                "null topic present in the data; use the option 'topic' to set a topic for every row"
            )
        distinct = pc.unique(topics).to_pylist()
        if len(distinct) == 1:
            self._send_topic(distinct[0], batch)
            return
        for topic in distinct:
            self._send_topic(topic, batch.filter(pc.equal(topics, topic)))

    def _send_topic(self, topic: str, batch: Any) -> None:
        import pyarrow.compute as pc

        values = self._encoded(topic, batch, "value", self.formats[1])
        keys = self._encoded(topic, batch, "key", self.formats[0])
        headers = _headers(_column(batch, "headers"))
        self.counts.rows += batch.num_rows
        self.counts.bytes += values.nbytes + (keys.nbytes if keys is not None else 0)
        partitions = _column(batch, "partition")
        if partitions is None or partitions.null_count == len(partitions):
            self.futures.append(self.producer.send_batch(topic, values, keys=keys, headers=headers))
            return
        # Explicit partitions: one send per partition value; rows with a null partition are
        # placed by the partitioner.
        for p in pc.unique(partitions).to_pylist():
            mask = pc.is_null(partitions) if p is None else pc.equal(partitions, p)
            rows = pc.indices_nonzero(mask)
            take = [None if c is None else c.take(rows) for c in (values, keys, headers)]
            self.futures.append(
                self.producer.send_batch(topic, take[0], keys=take[1], partition=p, headers=take[2])
            )

    @staticmethod
    def _encoded(topic: str, batch: Any, name: str, fmt: Any) -> Any:
        column = _column(batch, name)
        if fmt is None or column is None:
            return _binary(column)
        from kafka_core.spark.registry import encode_column

        return encode_column(fmt, column, topic)

    def flush_pending(self) -> None:
        """Hand the batches still grouped here to the producer."""
        self._send_pending()

    def finish(self, timeout_s: float) -> WriteCounts:
        """Flush, then check every delivery: the first failure fails the task."""
        self._send_pending()
        deadline = time.monotonic() + timeout_s
        self.producer.flush(timeout_s)
        for future in self.futures:
            exc = future.exception(max(0.0, deadline - time.monotonic()))
            if exc is not None:
                raise exc
        return self.counts

    def check_delivered(self) -> None:
        """After a flush or prepare: every future is done; the first failure fails the task."""
        for future in self.futures:
            exc = future.exception(0)
            if exc is not None:
                raise exc


class _ProducerStart:
    """The worker's first task builds its producer in a thread while its first batches arrive.

    A fresh Python worker has yet to import the producer and connect; meanwhile the JVM is already
    computing the task's first rows. Building the producer (and asking for the topic's metadata)
    in a thread lets the two overlap; the main thread waits for the producer only when its first
    group of rows is ready to send. A cached producer is taken at once, with no thread.
    """

    def __init__(self, key: str, options: dict[str, Any], topic: str | None) -> None:
        self.key = key
        self._producer = _PRODUCERS.peek(key)
        self._error: BaseException | None = None
        self._ready = threading.Event()
        if self._producer is not None:
            self._ready.set()
            return
        threading.Thread(
            target=self._start, args=(options, topic), name="kafka-core-spark-producer-start", daemon=True
        ).start()

    def _start(self, options: dict[str, Any], topic: str | None) -> None:
        try:
            producer = _PRODUCERS.get(self.key, options)
        except BaseException as exc:  # handed to the task's thread by get()
            self._error = exc
            self._ready.set()
            return
        self._producer = producer
        self._ready.set()
        if topic is not None:
            # Warms the metadata the first send needs; a failure here is the send's to report.
            with contextlib.suppress(Exception):
                producer.partitions_for(topic)

    def get(self) -> Any:
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._producer

    def started(self) -> Any:
        """The producer if it was built (None if building it failed or has not finished)."""
        return self._producer if self._ready.is_set() else None


def _run(options: SinkOptions, feed: Any) -> WriteCounts:
    key = options.cache_key
    start = _ProducerStart(key, options.producer, options.topic)
    delivery_s = float(options.producer.get("delivery_timeout_ms", 120_000)) / 1000.0
    sender = _Sender(start.get, options.topic, (options.key_format, options.value_format))
    try:
        feed(sender)
        counts = sender.finish(delivery_s + 5.0)
    except BaseException as exc:
        # A failed task may have left records queued or a broken connection: start afresh next time.
        producer = start.started()
        if producer is not None:
            _PRODUCERS.discard(key, producer)
        if isinstance(exc, TimeoutError) and not isinstance(exc, KafkaError):
            raise KafkaTimeoutError(f"records not delivered in time: {exc}") from exc
        raise
    _PRODUCERS.touch(key)
    return counts


# States in which this producer still holds a transaction it can abort itself.
_ABORTABLE_STATES = ("in_transaction", "preparing", "prepared", "abortable_error")


def _run_transactional(options: SinkOptions, feed: Any, task_partition: int) -> TaskResult:
    """One task's rows in one transaction, delivered and prepared, never committed here.

    The producer is built for this task and closed at its end (close() leaves a prepared
    transaction open for the driver). It is not cached: the executor never learns when the
    driver completed the transaction, and initialising the id again in the next task would fence
    (abort) it if the driver had not yet. A failure aborts the transaction before raising."""
    from kafka_core.producer.sync import KafkaProducer

    txn_id = options.transactional_id(task_partition)
    delivery_s = float(options.producer.get("delivery_timeout_ms", 120_000)) / 1000.0
    producer = KafkaProducer(
        **options.producer, transactional_id=txn_id, transaction_timeout_ms=options.transaction_timeout_ms
    )
    try:
        try:
            producer.init_transactions()  # fences an earlier attempt of this task: its transaction aborts
            if options.write_id is not None:  # after the init, or a late attempt could miss the mark
                from kafka_core.spark.txn_mark import check_write_not_ended

                request_s = float(options.producer.get("request_timeout_ms", 30_000)) / 1000.0
                check_write_not_ended(producer, options.end_mark_id(), txn_id, request_s)
            producer.begin_transaction()
            sender = _Sender(lambda: producer, options.topic, (options.key_format, options.value_format))
            feed(sender)
            sender.flush_pending()
            prepared = producer.prepare_transaction(delivery_s + 5.0)  # as long as a delivery may take
            sender.check_delivered()
        except BaseException as exc:
            _abort_quietly(producer, txn_id, exc)
            raise
    finally:
        try:
            producer.close(timeout=5.0)  # a prepared transaction stays open
        except Exception as exc:
            log.warning("closing the producer of transaction %r: %s", txn_id, exc)
    log.info(
        "task partition %d prepared transaction %r (producer id %d, epoch %d): %d rows",
        task_partition,
        txn_id,
        prepared.producer_id,
        prepared.producer_epoch,
        sender.counts.rows,
    )
    return TaskResult(sender.counts, task_partition, prepared)


def _abort_quietly(producer: Any, txn_id: str, cause: BaseException) -> None:
    state = str(producer.transaction_state)
    if state not in _ABORTABLE_STATES:
        return  # none begun, or fenced/fatal: the newer producer or the broker ends it
    try:
        producer.abort_transaction()
    except Exception as exc:  # the task fails with its own cause; the broker ends it at the latest
        log.warning(
            "could not abort transaction %r after %r: %s; the next attempt of this task fences it, or the "
            "broker aborts it after transactionTimeoutMs",
            txn_id,
            cause,
            exc,
        )


def _task_partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise KafkaConfigError("a transactional write must run in a Spark task (no TaskContext here)")
    return int(ctx.partitionId())


def _write(options: SinkOptions, feed: Any) -> TaskResult:
    if options.transactional_id_prefix is None:
        return profiled_call("write", lambda: TaskResult(_run(options, feed)))
    return profiled_call("write", lambda: _run_transactional(options, feed, _task_partition()))


def write_arrow(options: SinkOptions, batches: Iterator[Any]) -> TaskResult:
    """A task's Arrow batches to Kafka; returns its counts once every record is delivered (and
    its prepared transaction, with ``transactionalIdPrefix``)."""

    def feed(sender: _Sender) -> None:
        for batch in batches:
            sender.send(batch)

    return _write(options, feed)


def _struct_value(value: Any, t: Any) -> Any:
    """A Spark Row's value (nested Rows, dicts for maps, naive local datetimes for timestamps)
    shaped for ``pa.array(..., t)``."""
    import datetime

    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(t):
        fields = value.asDict() if hasattr(value, "asDict") else value
        return {
            t.field(i).name: _struct_value(fields.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_map(t):
        pairs = value.items() if isinstance(value, dict) else value
        return [(k, _struct_value(v, t.item_type)) for k, v in pairs]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_struct_value(v, t.value_type) for v in value]
    if pa.types.is_timestamp(t) and t.tz is not None and isinstance(value, datetime.datetime):
        # pyspark hands a TimestampType as a naive datetime in the local time zone
        return value.astimezone() if value.tzinfo is None else value
    return value


def _rows_to_batch(rows: list[Any], types: tuple[Any, Any] = (None, None)) -> Any:
    """``types``: the Arrow types of the key and value columns a registry format encodes (their
    rows are structs, not bytes)."""
    import pyarrow as pa

    columns: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
    for row in rows:
        if isinstance(row, dict):
            get = row.get
        elif hasattr(row, "asDict"):
            get = row.asDict().get
        elif isinstance(row, (bytes, bytearray, str)) or row is None:
            columns["value"].append(row)
            continue
        else:  # a (key, value) tuple
            key, value = row
            columns["key"].append(key)
            columns["value"].append(value)
            continue
        for name in _COLUMNS:
            columns[name].append(get(name))
    arrays = {}
    for name, values in columns.items():
        if len(values) != len(rows):
            continue
        struct_type = types[0] if name == "key" else types[1] if name == "value" else None
        if struct_type is not None:
            arrays[name] = pa.array([_struct_value(v, struct_type) for v in values], struct_type)
        elif name in ("key", "value"):
            arrays[name] = pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary())
        elif name == "topic":
            arrays[name] = pa.array(values, pa.string())
        elif name == "partition":
            arrays[name] = pa.array(values, pa.int32())
        elif name == "headers":
            arrays[name] = pa.array(
                [None if h is None else [{"key": k, "value": v} for k, v in _pairs(h)] for h in values],
                pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
            )
    return pa.RecordBatch.from_pydict(arrays)


def _pairs(headers: Any) -> Iterable[tuple[str, bytes | None]]:
    for h in headers:
        if isinstance(h, dict):
            k, v = h["key"], h["value"]
        elif hasattr(h, "asDict"):
            d = h.asDict()
            k, v = d["key"], d["value"]
        else:
            k, v = h
        yield k, (v.encode() if isinstance(v, str) else v)


def _feed_rows(rows: Iterable[Any], chunk_rows: int, types: tuple[Any, Any] = (None, None)) -> Any:
    def feed(sender: _Sender) -> None:
        chunk: list[Any] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= chunk_rows:
                sender.send(_rows_to_batch(chunk, types))
                chunk = []
        if chunk:
            sender.send(_rows_to_batch(chunk, types))

    return feed


def write_any(options: SinkOptions, items: Iterator[Any]) -> TaskResult:
    """Arrow batches (Spark 4.1+ stream writers) or Rows (4.0), whichever the iterator holds."""
    import itertools

    import pyarrow as pa

    first = next(items, None)
    if first is None and options.transactional_id_prefix is None:
        return TaskResult(WriteCounts())
    if first is None:
        # Still through _write: a transactional task prepares an empty transaction (producer id
        # -1, nothing to complete), and its init fences what an earlier micro-batch left open.
        return _write(options, lambda sender: None)
    chained = itertools.chain([first], items)
    if isinstance(first, pa.RecordBatch):
        return write_arrow(options, chained)
    from kafka_core.spark.registry import column_arrow_type

    types = (column_arrow_type(options.key_format), column_arrow_type(options.value_format))
    return _write(options, _feed_rows(chained, 10_000, types))


def produce_partition(
    rows: Iterable[Any], topic: str | None = None, *, chunk_rows: int = 10_000, **options: Any
) -> int:
    """For ``rdd.foreachPartition`` and ``df.foreachPartition`` users: write the rows (Rows or
    dicts with the sink's columns, ``(key, value)`` tuples, or bare values) with a cached
    producer, and return once every record is delivered (raising otherwise, so Spark retries the
    task). ``options`` are the producer's keyword arguments (``bootstrap_servers``, ``acks`` ...),
    or Java-style names in a ``config`` dict."""
    from kafka_core.config import translate

    config = options.pop("config", None)
    producer_options = {**(translate(config, "producer") if config else {}), **options}
    if "bootstrap_servers" not in producer_options:
        raise KafkaConfigError("produce_partition needs bootstrap_servers")
    if chunk_rows < 1:
        raise KafkaConfigError(f"chunk_rows must be positive, not {chunk_rows}")
    sink = SinkOptions(producer=producer_options, topic=topic)
    return _run(sink, _feed_rows(rows, chunk_rows)).rows
