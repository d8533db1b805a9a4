"""The ``kafka_core`` PySpark data source: Spark's Kafka connector options, schema and sink.

Batch reads plan offset ranges once on the driver and read each with the columnar decoder on
the executors; streaming reads keep offsets as Spark's JSON with admission control; writes go
through the Arrow writers. Options are checked here, on the driver, before any task runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
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

from kafka_core.errors import KafkaTimeoutError, KafkaTransactionError
from kafka_core.spark.options import SinkOptions, SourceOptions, parse_sink, parse_source

if TYPE_CHECKING:
    from kafka_core.producer import PreparedTransaction
    from kafka_core.spark.planning import OffsetRange
    from kafka_core.spark.write import TaskResult

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


class RangePartition(InputPartition):
    """One task: an offset range and the options to read it with (pickled to the executor)."""

    def __init__(self, options: SourceOptions, offsets: OffsetRange) -> None:
        super().__init__((offsets.topic, offsets.partition, offsets.start, offsets.end))
        self.options = options
        self.range = offsets


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """A write task's counts, logged by the driver when the write commits; in a transactional
    write also the task's partition and the transaction it prepared, which the driver ends."""

    rows: int = 0
    bytes: int = 0
    batches: int = 0
    task_partition: int = -1
    prepared: PreparedTransaction | None = None


def _message(result: TaskResult) -> KafkaCommitMessage:
    c = result.counts
    return KafkaCommitMessage(
        rows=c.rows,
        bytes=c.bytes,
        batches=c.batches,
        task_partition=result.task_partition,
        prepared=result.prepared,
    )


def read_partition(partition: InputPartition) -> Iterator[Any]:
    """An executor's task. Spark reads one plain ``InputPartition`` when the plan has none."""
    if not isinstance(partition, RangePartition):
        return iter(())
    from kafka_core.spark.read import read_range

    return read_range(partition.options, partition.range)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        from kafka_core.spark.offsets import OffsetReader
        from kafka_core.spark.planning import check_ranges, resolve, split_ranges

        opts = self.options
        reader = OffsetReader(opts)
        try:
            tps = reader.partitions()
            lookups = reader.lookups()
            start = resolve(opts.starting, tps, lookups, starting=True, strategy=opts.starting_strategy)
            assert opts.ending is not None
            end = resolve(opts.ending, tps, lookups, starting=False, name="endingOffsets")
        finally:
            reader.close()
        ranges = check_ranges(start, end, fail_on_data_loss=opts.fail_on_data_loss, on_loss=log.warning)
        tasks = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
        return [RangePartition(opts, r) for r in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition)


class KafkaArrowWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        from kafka_core.spark.write import write_arrow

        return _message(write_arrow(self.options, iterator))

    def commit(self, messages: list[Any]) -> None:
        _commit(self.options, messages, None)

    def abort(self, messages: list[Any]) -> None:
        _abort(self.options, messages, None)


class KafkaStreamWriter(_StreamWriterBase):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        from kafka_core.spark.write import write_any

        return _message(write_any(self.options, iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        _commit(self.options, messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        _abort(self.options, messages, batchId)


def _where(batch_id: int | None) -> str:
    return "" if batch_id is None else f" (micro-batch {batch_id})"


def _commit(options: SinkOptions, messages: list[Any], batch_id: int | None) -> None:
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    if options.transactional_id_prefix is not None:
        _complete_prepared(options, ours, _where(batch_id))
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
        _abort_prepared(options, ours, _where(batch_id))
        return
    log.warning(
        "Kafka write%s aborted; %d rows had already been delivered by tasks that succeeded",
        _where(batch_id),
        sum(m.rows for m in ours),
    )


# How many EndTxn the driver has in flight at once, each over a client of its own: a broker that
# answers one bad EndTxn by dropping the connection (Tansu does, for a fenced epoch) must not
# take the other tasks' commits down with it.
_END_TXN_CONCURRENCY = 16
# The driver's abort waits no longer than this (Spark is failing the write already).
_ABORT_TIMEOUT_S = 60.0


def _end_all(
    options: SinkOptions, tasks: list[KafkaCommitMessage], commit: bool
) -> list[tuple[KafkaCommitMessage, BaseException | None]]:
    """EndTxn for every prepared transaction, concurrently, all within ``transactionTimeoutMs``
    (the broker aborts a transaction open longer anyway); aborts within a minute at most."""
    import asyncio
    import concurrent.futures

    from kafka_core.aio import complete_transaction
    from kafka_core.config import client_keywords

    client_options, _ = client_keywords(options.producer)
    timeout = options.transaction_timeout_ms / 1000.0
    if not commit:  # best effort: the broker aborts them after transactionTimeoutMs anyway
        timeout = min(timeout, _ABORT_TIMEOUT_S)
    prepared = [m for m in tasks if m.prepared is not None]

    async def run() -> list[BaseException | None]:
        gate = asyncio.Semaphore(_END_TXN_CONCURRENCY)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout  # for all of them: the broker's clock runs for all at once

        async def end(txn: PreparedTransaction) -> None:
            async with gate:
                left = deadline - loop.time()
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"not ended: the driver's {timeout:g} s ran out while the other transactions "
                        "were being ended"
                    )
                await complete_transaction(txn, commit=commit, timeout=left, **client_options)

        results = await asyncio.gather(
            *(end(m.prepared) for m in prepared if m.prepared), return_exceptions=True
        )
        return [r if isinstance(r, BaseException) else None for r in results]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        outcomes = asyncio.run(run())
    else:  # called from inside a loop: run ours on a thread of its own
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            outcomes = pool.submit(asyncio.run, run()).result()
    return list(zip(prepared, outcomes, strict=True))


def _txn_name(m: KafkaCommitMessage) -> str:
    assert m.prepared is not None
    p = m.prepared
    return f"task partition {m.task_partition} ({p.transactional_id!r}, producer id {p.producer_id}, epoch {p.producer_epoch})"


def _complete_prepared(options: SinkOptions, tasks: list[KafkaCommitMessage], where: str) -> None:
    """Commit every task's prepared transaction; raise naming those that did and did not commit.

    Not atomic across tasks: when some commits fail the others stay committed, and a fenced or
    timed-out transaction's records were aborted, so the write must fail, never pass silently."""
    missing = sorted(m.task_partition for m in tasks if m.prepared is None)
    if missing:
        raise KafkaTransactionError(
            f"Kafka transactional write{where}: task partitions {missing} returned no prepared transaction"
        )
    log.info(  # what an operator needs to finish the job by hand should this driver die now
        "Kafka transactional write%s: committing %s",
        where,
        ", ".join(f"{_txn_name(m)}" for m in tasks if m.prepared is not None and m.prepared.producer_id >= 0)
        or "no transaction (nothing written)",
    )
    outcomes = _end_all(options, tasks, commit=True)
    failed = [(m, exc) for m, exc in outcomes if exc is not None]
    if not failed:
        return
    committed = sorted(m.task_partition for m, exc in outcomes if exc is None)
    details = "; ".join(
        f"{_txn_name(m)}: {exc}" for m, exc in sorted(failed, key=lambda f: f[0].task_partition)
    )
    first = failed[0][1]
    raise KafkaTransactionError(
        f"Kafka transactional write{where} failed: {len(failed)} of {len(outcomes)} task transactions did not "
        f"commit ({details}); committed task partitions: {committed or 'none'} (their records are "
        "visible to read_committed readers: the commit is not atomic across tasks)",
        code=getattr(first, "code", None),
    ) from first


def _abort_prepared(options: SinkOptions, tasks: list[KafkaCommitMessage], where: str) -> None:
    """Abort the prepared transactions of the tasks that finished. The others were aborted by
    their task, or are aborted when a new attempt initialises the same transactional id, or by
    the broker after ``transactionTimeoutMs``. Never raises: Spark is failing the write already."""
    prepared = [m for m in tasks if m.prepared is not None]
    try:
        outcomes = _end_all(options, prepared, commit=False)
    except Exception as exc:
        log.warning(
            "Kafka transactional write%s aborted, but its %d prepared transactions could not be aborted "
            "(%s): the broker aborts them after transactionTimeoutMs",
            where,
            len(prepared),
            exc,
        )
        return
    for m, error in outcomes:
        if error is not None:
            log.warning("Kafka transactional write%s: aborting %s: %s", where, _txn_name(m), error)
    log.warning(
        "Kafka transactional write%s aborted: %d prepared task transactions aborted, %d could not be",
        where,
        sum(1 for _, error in outcomes if error is None),
        sum(1 for _, error in outcomes if error is not None),
    )


class KafkaDataSource(DataSource):
    """``spark.read.format("kafka_core")``: a drop-in for Spark's own Kafka connector."""

    @classmethod
    def name(cls) -> str:
        return "kafka_core"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() in ("true", "1", "yes")
        return read_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafka_core.spark.stream import KafkaStreamReader

        return KafkaStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return KafkaArrowWriter(_sink(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        return KafkaStreamWriter(_sink(self.options, schema))


def _sink(options: Any, schema: StructType) -> SinkOptions:
    from kafka_core.spark.write import check_sink_schema

    sink = parse_sink(options)
    check_sink_schema({f.name: f.dataType.simpleString() for f in schema.fields}, sink.topic)
    return sink
