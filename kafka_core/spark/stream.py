"""Streaming reads: offsets as Spark's JSON, admission control, Trigger.AvailableNow.

Every driver-side call of a query runs in one long-lived Python process, so this object keeps
its Kafka connection, the topic ids it has seen (to tell a recreated topic) and the time of the
last micro-batch (for ``maxTriggerDelay``). ``read`` runs on a pickled copy on the executors and
uses none of that state. Spark's checkpoint holds the offsets; with ``commitOffsetsToGroup`` the
offsets of each finished micro-batch are also committed to a consumer group, for lag monitoring
only (:mod:`kafka_core.spark.group_commit`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kafka_core.client.metadata import TopicPartition
from kafka_core.spark import loss
from kafka_core.spark.options import SourceOptions
from kafka_core.spark.planning import (
    DataLossError,
    check_ranges,
    from_json,
    rate_limit,
    resolve,
    split_ranges,
    to_json,
)
from kafka_core.spark.tasks import range_tasks, read_partition

try:  # 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - 4.0/4.1

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

    ReadLimit = ReadAllAvailable = ReadMaxRows = ReadMinRows = None  # type: ignore[assignment,misc]

log = logging.getLogger("kafka_core.spark")

__all__ = ["KafkaStreamReader"]


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._reader: Any = None
        self._topic_ids: dict[str, str] = {}
        self._restart: set[str] = set()  # topics recreated since the last plan: read from earliest
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's end
        self._last_end: dict[TopicPartition, int] | None = None
        # the newest offsets seen by the last latestOffset, before any read limit: the backlog
        self._latest: dict[TopicPartition, int] | None = None
        self._last_trigger = time.monotonic()
        self._recreated: dict[str, tuple[str, str]] = {}  # topic -> (old id, new id), not yet reported
        self._committer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get only what read() needs: no connection, no driver-side bookkeeping.
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # -- driver side --------------------------------------------------------------------------

    def _offsets(self) -> Any:
        if self._reader is None:
            from kafka_core.spark.offsets import OffsetReader

            self._reader = OffsetReader(self.options)
        return self._reader

    def _loss(self, tp: TopicPartition, lost: str, cause: str) -> None:
        fail = self.options.fail_on_data_loss
        message = loss.loss_message(tp.topic, tp.partition, lost, cause, fail=fail)
        if fail:
            raise DataLossError(message)
        log.warning("%s", message)

    def _commit_to_group(self, processed: dict[str, Any] | None) -> None:
        """``commitOffsetsToGroup``: offsets Spark has finished with go to the group (never raises)."""
        group = self.options.commit_group
        if group is None or processed is None:
            return
        if self._committer is None:
            from kafka_core.spark.group_commit import GroupCommitter

            self._committer = GroupCommitter(group, self.options.client)
        self._committer.commit(from_json(processed))

    def _current(self) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
        """Partitions read now and their latest offsets; a recreated topic is noticed here."""
        reader = self._offsets()
        tps = reader.partitions()
        ids = reader.topic_ids()
        for topic, tid in ids.items():
            old = self._topic_ids.get(topic)
            if old is not None and old != tid:
                self._recreated[topic] = (old, tid)  # reported per partition by latestOffset
                self._restart.add(topic)
        self._topic_ids.update(ids)
        return tps, reader.latest(tps)

    def initialOffset(self) -> dict[str, Any]:
        tps, _ = self._current()
        opts = self.options
        start = resolve(
            opts.starting, tps, self._offsets().lookups(), starting=True, strategy=opts.starting_strategy
        )
        return to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        _, latest = self._current()
        self._target = latest

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        # Spark asks for the next batch's end with the previous batch's end as ``start`` only
        # after that batch ran through the sink: those offsets are processed.
        self._commit_to_group(start)
        _tps, latest = self._current()
        if self._target is not None:
            # AvailableNow: nothing past what was there when the query started; new partitions
            # found since then are read to their current end.
            latest = {tp: min(off, self._target.get(tp, off)) for tp, off in latest.items()}
        # Spark 4.0/4.1 call latestOffset() without arguments
        begin = self._last_end if start is None else from_json(start)
        recreated, self._recreated = self._recreated, {}
        self._latest = latest
        if begin is None:
            self._last_end = latest
            return to_json(latest)
        for tp in sorted(begin):
            if tp.topic in recreated:
                self._loss(tp, loss.lost_offsets(begin[tp], None), loss.recreated(*recreated[tp.topic]))
            elif tp not in latest and tp.topic not in self._restart:
                self._loss(tp, loss.lost_offsets(begin[tp], None), loss.gone())
        earliest_needed = [tp for tp in latest if tp not in begin or tp.topic in self._restart]
        if earliest_needed:
            # New partitions (and recreated topics) are read from their earliest offset.
            begin = {tp: o for tp, o in begin.items() if tp.topic not in self._restart}
            first = self._offsets().earliest(earliest_needed)
            for tp in sorted(first):
                # As Spark's connector: an added partition that no longer starts at 0 lost records.
                if first[tp] > 0 and tp.topic not in self._restart:
                    self._loss(tp, loss.lost_offsets(0, first[tp]), loss.added_late(first[tp]))
            begin.update(first)
        end = self._admit(begin, latest, limit)
        self._last_end = end
        return to_json(end)

    def _admit(
        self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int], limit: Any
    ) -> dict[TopicPartition, int]:
        """maxOffsetsPerTrigger shared out by lag; minOffsetsPerTrigger waits up to maxTriggerDelay."""
        opts = self.options
        if limit is None:  # Spark before 4.2 passes no limit: the options are the limit
            limited = opts.max_offsets_per_trigger is not None or opts.min_offsets_per_trigger is not None
        else:
            limited = not isinstance(limit, ReadAllAvailable)
        if not limited:
            self._last_trigger = time.monotonic()
            return latest
        available = sum(max(0, off - begin.get(tp, off)) for tp, off in latest.items())
        if (
            opts.min_offsets_per_trigger is not None
            and self._target is None
            and available < opts.min_offsets_per_trigger
            and (time.monotonic() - self._last_trigger) * 1000 < opts.max_trigger_delay_ms
        ):
            return {tp: begin.get(tp, off) for tp, off in latest.items()}  # not enough yet: skip
        cap = opts.max_offsets_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows if cap is None else min(cap, limit.max_rows)
        end = latest if cap is None else rate_limit(begin, latest, cap)
        if end != {tp: begin.get(tp, off) for tp, off in latest.items()}:
            self._last_trigger = time.monotonic()
        return end

    def getDefaultReadLimit(self) -> Any:
        opts = self.options
        if ReadAllAvailable is None:
            return None
        if opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.min_offsets_per_trigger is not None:
            return ReadMinRows(opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The newest offsets in Kafka when the last batch was planned, not that batch's
        rate-limited end: the query's progress shows the backlog (``latestOffset`` against
        ``endOffset``), as Spark's connector reports it. Under Trigger.AvailableNow, the
        offsets the query stops at."""
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        backwards = [tp for tp in stop if tp in begin and stop[tp] < begin[tp]]
        for tp in backwards:
            # Recreated or truncated: with failOnDataLoss=false the partition is read from its
            # start again (Spark's connector skips it, and misses the new records).
            self._loss(tp, loss.lost_offsets(begin[tp], None), loss.backwards(begin[tp], stop[tp]))
        missing = [tp for tp in stop if tp not in begin or tp.topic in self._restart or tp in backwards]
        if missing:
            begin.update(self._offsets().earliest(missing))
        self._restart.clear()
        ranges = check_ranges(
            begin, stop, fail_on_data_loss=self.options.fail_on_data_loss, on_loss=log.warning
        )
        tasks = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        return range_tasks(self.options, tasks)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark is done with offsets before ``end``: commit them to the group, if asked.
        Spark calls this one batch late and never for the last batch; ``latestOffset`` commits
        the same offsets earlier, so this only catches up (an unchanged offset is not resent)."""
        self._commit_to_group(end)

    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close()
            self._committer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # -- executor side ------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition)
