"""What a Spark task carries and does, shared by the batch source, the stream reader and the
transactional driver: a read task's offset range and its reading, a write task's commit message.

Kept below ``source``, ``stream`` and ``txn_driver`` so that none of them imports another for it;
the classes are pickled between driver and executors under this module's name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition, WriterCommitMessage

from kafka_core.spark.options import SourceOptions
from kafka_core.spark.profiling import profiled_iter

if TYPE_CHECKING:
    from kafka_core.producer import PreparedTransaction
    from kafka_core.spark.planning import OffsetRange
    from kafka_core.spark.write import TaskResult

__all__ = [
    "KafkaCommitMessage",
    "RangePartition",
    "commit_message",
    "range_tasks",
    "read_partition",
    "start_warm_up",
]


class RangePartition(InputPartition):
    """One task: its offset ranges (one, or several small ones read one after another) and the
    options to read them with (pickled to the executor)."""

    def __init__(self, options: SourceOptions, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple((r.topic, r.partition, r.start, r.end) for r in ranges))
        self.options = options
        self.ranges = tuple(ranges)


def range_tasks(options: SourceOptions, ranges: Sequence[OffsetRange]) -> list[RangePartition]:
    """The planned ranges as tasks: small ones together per ``minRecordsPerPartition``, unless
    ``minPartitions`` asks for a number of tasks (then one per range, as Spark's connector)."""
    from kafka_core.spark.planning import pack_ranges

    groups: list[tuple[OffsetRange, ...]]
    if options.min_partitions is not None:
        groups = [(r,) for r in ranges]
    else:
        groups = pack_ranges(ranges, options.min_records_per_partition, options.max_records_per_partition)
    return [RangePartition(options, group) for group in groups]


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """A write task's counts, logged by the driver when the write commits; in a transactional
    write also the task's partition and the transaction it prepared, which the driver ends."""

    rows: int = 0
    bytes: int = 0
    batches: int = 0
    task_partition: int = -1
    prepared: PreparedTransaction | None = None


def commit_message(result: TaskResult) -> KafkaCommitMessage:
    """The message a write task sends the driver, from what it wrote."""
    c = result.counts
    return KafkaCommitMessage(
        rows=c.rows,
        bytes=c.bytes,
        batches=c.batches,
        task_partition=result.task_partition,
        prepared=result.prepared,
    )


def start_warm_up(options: SourceOptions) -> None:
    """In a daemon thread, what a read task needs before its first batch (see
    :func:`kafka_core.spark.read.prepare`): started when the task's reader is unpickled in the
    Python worker, ahead of its partition, which Spark sends after it. Once per worker and options
    is enough: later tasks find it all built."""
    key = repr(options)
    with _WARMED_LOCK:
        if key in _WARMED:
            return
        _WARMED.add(key)
    threading.Thread(target=_warm_up, args=(options,), name="kafka_core-read-warm-up", daemon=True).start()


_WARMED: set[str] = set()
_WARMED_LOCK = threading.Lock()


def _warm_up(options: SourceOptions) -> None:
    from kafka_core.spark.read import prepare

    prepare(options)


def read_partition(partition: InputPartition) -> Iterator[Any]:
    """An executor's task. Spark reads one plain ``InputPartition`` when the plan has none."""
    if not isinstance(partition, RangePartition):
        return iter(())
    from kafka_core.spark.read import read_ranges

    batches = read_ranges(partition.options, partition.ranges)
    if partition.options.include_headers:
        batches = (_null_empty_headers(b) for b in batches)
    return profiled_iter("read", batches)


def _null_empty_headers(batch: Any) -> Any:
    """A record without headers has ``headers`` null, not an empty array, as in Spark's connector
    (its row converter writes null when the record has none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = batch.schema.get_field_index("headers")
    column = batch.column(index)
    empty = pc.fill_null(pc.equal(pc.list_value_length(column), 0), True)
    if not pc.any(empty).as_py():
        return batch
    fixed = pc.if_else(empty, pa.scalar(None, type=column.type), column)
    arrays = [fixed if i == index else batch.column(i) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
