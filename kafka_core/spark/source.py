"""The ``kafka_core`` PySpark data source: Spark's Kafka connector options, schema and sink.

Batch reads plan offset ranges once on the driver and read each with the columnar decoder on
the executors; streaming reads keep offsets as Spark's JSON with admission control; writes go
through the Arrow writers. Options are checked here, on the driver, before any task runs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_core.errors import KafkaConfigError
from kafka_core.spark.options import SinkOptions, SourceOptions, parse_sink, parse_source
from kafka_core.spark.pushdown import Pushdown
from kafka_core.spark.registry import (
    FormatOptions,
    pin_reader,
    pinned,
    read_schema_with_formats,
    source_formats,
    spark_type,
)
from kafka_core.spark.tasks import (
    KafkaCommitMessage,
    commit_message,
    range_tasks,
    read_partition,
    start_warm_up,
)

if TYPE_CHECKING:  # the checker sees the 4.1+ base; at run time 4.0 falls back
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
else:
    try:  # 4.1+
        from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
    except ImportError:  # pragma: no cover - 4.0
        from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase

log = logging.getLogger("kafka_core.spark")

__all__ = ["KafkaDataSource", "read_schema"]


def read_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka read schema (``headers`` only with ``includeHeaders``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class KafkaBatchReader(DataSourceReader):
    """A batch read. Without pushdown (``spark.sql.python.filterPushdown.enabled`` off, the
    default, or Spark 4.0) it is this class: Spark 4.1+ refuses a reader that implements
    ``pushFilters`` where pushdown is off, so only :class:`KafkaPushdownReader` does."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.pushdown = Pushdown()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled in the Python worker that runs a read task, before the task's partition
        # arrives: the client's connection and the decoders get going meanwhile.
        self.__dict__.update(state)
        start_warm_up(self.options)

    def partitions(self) -> Sequence[InputPartition]:
        from kafka_core.spark.offsets import OffsetReader
        from kafka_core.spark.planning import check_ranges, check_specs, resolve, split_ranges

        opts = self.options
        assert opts.ending is not None
        check_specs(opts.starting, opts.ending)
        reader = OffsetReader(opts)
        try:
            tps = reader.partitions()
            _warn_unmatched(opts, tps)
            lookups = reader.lookups()
            start = resolve(opts.starting, tps, lookups, starting=True, strategy=opts.starting_strategy)
            assert opts.ending is not None
            end = resolve(opts.ending, tps, lookups, starting=False, name="endingOffsets")
            ranges = check_ranges(start, end, fail_on_data_loss=opts.fail_on_data_loss, on_loss=log.warning)
            if not self.pushdown.empty:
                ranges = _pushed_ranges(self.pushdown, ranges, reader)
        finally:
            reader.close()
        tasks = split_ranges(
            ranges, opts.min_partitions, opts.max_records_per_partition, keep_empty=self.pushdown.empty
        )
        return range_tasks(opts, tasks)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition)


class KafkaPushdownReader(KafkaBatchReader):
    """A batch read planned by Spark's filter-pushdown worker: filters on ``topic``,
    ``partition``, ``offset`` and ``timestamp`` narrow the offset ranges before anything is
    fetched (:mod:`kafka_core.spark.pushdown`)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from kafka_core.spark.pushdown import push

        columns = self.options.columns or tuple(read_schema(self.options.include_headers).names)
        self.pushdown, remaining = push(filters, columns)
        return iter(remaining)


def _pushed_ranges(pushdown: Pushdown, ranges: list[Any], reader: Any) -> list[Any]:
    """The ranges narrowed by the pushed filters; the timestamp lookups come after the ends were
    resolved, so a record appended in between is after the end or found by the lookup."""
    from kafka_core.spark.pushdown import narrow

    kept = [r for r in ranges if pushdown.keeps(r.tp)]
    since = None
    if pushdown.since_ms is not None:
        since = reader.for_times({r.tp: pushdown.since_ms for r in kept if r.size > 0})
    out = narrow(kept, pushdown, since)
    log.info(
        "Kafka batch read: filters pushed (%s): %d of %d records in %d of %d partitions to read",
        ", ".join(pushdown.pushed),
        sum(r.size for r in out),
        sum(r.size for r in ranges),
        len({r.tp for r in out}),
        len(ranges),
    )
    return out


def _warn_unmatched(opts: SourceOptions, tps: Sequence[Any]) -> None:
    """A batch read of a topic that does not exist is empty, as with Spark's own connector (its
    default, consumer-based offset reader finds no partition to assign): say so on the driver."""
    found = {tp.topic for tp in tps}
    missing = [t for t in opts.subscribe if t not in found]
    if missing:
        names = ", ".join(repr(t) for t in missing)
        what = f"topic {names} does" if len(missing) == 1 else f"topics {names} do"
        log.warning(
            "Kafka batch read: subscribed %s not exist (no partition found); read as empty, as Spark's "
            "Kafka source does. Check the name, or create the topic before reading.",
            what,
        )
    elif opts.pattern is not None and not tps:
        log.warning(
            "Kafka batch read: subscribePattern %r matches no topic; the read is empty.", opts.pattern
        )


class KafkaArrowWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = _with_write_id(options)

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        from kafka_core.spark.write import write_arrow

        return commit_message(write_arrow(self.options, iterator))

    def commit(self, messages: list[Any]) -> None:
        _commit(self.options, messages, None)

    def abort(self, messages: list[Any]) -> None:
        _abort(self.options, messages, None)


class KafkaStreamWriter(_StreamWriterBase):
    def __init__(self, options: SinkOptions) -> None:
        self.options = _with_write_id(options)

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        from kafka_core.spark.write import write_any

        return commit_message(write_any(self.options, iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        _commit(self.options, messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        _abort(self.options, messages, batchId)


def _with_write_id(options: SinkOptions) -> SinkOptions:
    """A transactional write gets an id of its own on the driver, shipped to its tasks: it names
    the mark by which a task attempt that outlived its write (committed or aborted) knows to begin nothing."""
    if options.transactional_id_prefix is None or options.write_id is not None:
        return options
    import uuid

    return dataclasses.replace(options, write_id=uuid.uuid4().hex[:16])


def _where(batch_id: int | None) -> str:
    return "" if batch_id is None else f" (micro-batch {batch_id})"


def _commit(options: SinkOptions, messages: list[Any], batch_id: int | None) -> None:
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    if options.transactional_id_prefix is not None:
        from kafka_core.spark.txn_driver import complete_prepared

        # A batch write's id is its own; a micro-batch shares it with the next ones: no end mark.
        complete_prepared(options, ours, _where(batch_id), mark_ended=batch_id is None)
    rows = sum(m.rows for m in ours)
    size = sum(m.bytes for m in ours)
    log.info(
        "Kafka write committed%s: %d rows, %d bytes from %d tasks",
        _where(batch_id),
        rows,
        size,
        len(messages),
    )


def _abort(options: SinkOptions, messages: list[Any], batch_id: int | None) -> None:
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    if options.transactional_id_prefix is not None:
        from kafka_core.spark.txn_driver import abort_all

        # Spark's list has a place per task partition: None where the task failed or never ended.
        abort_all(options, ours, len(messages), _where(batch_id))
        return
    log.warning(
        "Kafka write%s aborted; %d rows had already been delivered by tasks that succeeded",
        _where(batch_id),
        sum(m.rows for m in ours),
    )


class KafkaDataSource(DataSource):
    """``spark.read.format("kafka_core")``: a drop-in for Spark's own Kafka connector."""

    @classmethod
    def name(cls) -> str:
        return "kafka_core"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() in ("true", "1", "yes")
        formats, topics = source_formats(self.options)
        if not any(formats):
            return read_schema(include)
        pinned_formats = tuple(None if f is None else pin_reader(f, topics) for f in formats)
        # Spark pickles this instance after schema() for the planner: the reader takes these pins
        # instead of asking the registry again from another Python worker
        self._pinned_formats = pinned_formats
        return read_schema_with_formats(read_schema(include), pinned_formats)

    def reader(self, schema: StructType) -> DataSourceReader:
        from kafka_core.spark.pushdown import in_pushdown_planner

        options = parse_source(self.options, streaming=False)
        options = _with_formats(options, schema, getattr(self, "_pinned_formats", None))
        if in_pushdown_planner():
            return KafkaPushdownReader(options)
        return KafkaBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafka_core.spark.stream import KafkaStreamReader

        options = parse_source(self.options, streaming=True)
        return KafkaStreamReader(_with_formats(options, schema, getattr(self, "_pinned_formats", None)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return KafkaArrowWriter(_sink(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        return KafkaStreamWriter(_sink(self.options, schema))


def _with_formats(
    options: SourceOptions, schema: StructType, pins: tuple[FormatOptions | None, ...] | None = None
) -> SourceOptions:
    """Reader schemas pinned. ``pins``: those schema() fixed, which made ``schema`` (Spark calls
    schema() only when the user gave none), so they are taken as they are; else pinned now, and
    they must still give the types Spark planned with (a new latest version registered in between,
    or a user's schema that is not the reader schema's, would not)."""
    names = set(schema.names)
    # a format whose column the schema leaves out is not decoded at all
    options = dataclasses.replace(
        options,
        key_format=options.key_format if "key" in names else None,
        value_format=options.value_format if "value" in names else None,
    )
    if options.key_format is None and options.value_format is None:
        return _select_columns(options, schema)
    if pins is not None and [p is None for p in pins] == [
        options.key_format is None,
        options.value_format is None,
    ]:
        # schema() made ``schema`` (there was no user schema): every column, of these types
        return dataclasses.replace(options, key_format=pins[0], value_format=pins[1])
    return _select_columns(pinned(options), schema)


def _select_columns(options: SourceOptions, schema: StructType) -> SourceOptions:
    """The columns a user's schema asks for: any of the source's, in any order, each of its
    type; only those are built. The source's own schema (no user schema) reads as before."""
    full = read_schema(True).fields
    types = {f.name: f.dataType.simpleString() for f in full}
    own = [f.name for f in read_schema(options.include_headers).fields]
    for fmt in (options.key_format, options.value_format):
        if fmt is not None:
            types[fmt.column] = spark_type(fmt).simpleString()
            if fmt.mode == "PERMISSIVE":
                types[fmt.error_column] = "string"
                own.append(fmt.error_column)
    seen: set[str] = set()
    for f in schema.fields:
        if f.name in seen:
            raise KafkaConfigError(f"the read schema names column {f.name!r} twice")
        seen.add(f.name)
        if f.name not in types:
            raise KafkaConfigError(
                f"the read schema names column {f.name!r}, which the kafka_core source does not have: "
                f"its columns are {', '.join(own)} (the schema may name any of them, in any order)"
            )
        if f.name == "headers" and not options.include_headers:
            raise KafkaConfigError(
                "the read schema names column 'headers': set option 'includeHeaders' to true"
            )
        given = f.dataType.simpleString()
        if given != types[f.name]:
            if f.name in ("key", "value") and getattr(options, f"{f.name}_format") is not None:
                raise KafkaConfigError(
                    f"the read schema gives column {f.name!r} the type {given}, but its reader schema "
                    f"decodes it as {types[f.name]} (it may also have changed while the query was "
                    "planned: run it again)"
                )
            raise KafkaConfigError(
                f"the read schema gives column {f.name!r} the type {given}; the kafka_core source "
                f"reads it as {types[f.name]}"
            )
    for fmt in (options.key_format, options.value_format):
        if fmt is not None and fmt.error_column in seen and fmt.column not in seen:
            raise KafkaConfigError(
                f"the read schema names column {fmt.error_column!r} without {fmt.column!r}: "
                f"the errors come from decoding {fmt.column!r}"
            )
    names = tuple(schema.names)
    if list(names) == own:
        return options
    return dataclasses.replace(options, columns=names, include_headers="headers" in names)


def _sink(options: Any, schema: StructType) -> SinkOptions:
    from kafka_core.spark.write import check_sink_schema

    sink = parse_sink(options)
    encoded = frozenset(f.column for f in (sink.key_format, sink.value_format) if f is not None)
    check_sink_schema({f.name: f.dataType.simpleString() for f in schema.fields}, sink.topic, encoded)
    if encoded:
        from kafka_core.spark.registry import with_column_types

        sink = with_column_types(sink, schema)
    return sink
