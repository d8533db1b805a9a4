"""One partition's slice of a Fetch response, decoded once, handed over in whole or in part.

The raw record bytes are decoded on first use by the codec (one call per partition response),
then filtered: records below the fetch position (brokers return whole batches that start before
it), control records, and with read_committed the batches of aborted transactions. A corrupt batch
becomes a :class:`KafkaCodecError` naming topic, partition and offset; the good records before it
are still delivered, and the error is raised when the application reaches it. A partition refused
with the name of its new leader (KIP-951) is moved to it by ``leader_moved``.
"""

from __future__ import annotations

import gc
import struct
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from kafka_core.client.hints import leader_hint
from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import decode_record_batches, decode_record_batches_columns
from kafka_core.codec.columns import CONSTANTS
from kafka_core.consumer.message import ConsumedMessage, messages_from_records
from kafka_core.errors import KafkaCodecError

_HDR = struct.Struct(">qi")  # baseOffset, batchLength
_V2 = struct.Struct(">bxxxxhi")  # magic, (crc), attributes, lastOffsetDelta (from byte 16)
_PID = struct.Struct(">q")  # producerId at byte 43
_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch at byte 12
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class BatchHeader(NamedTuple):
    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool
    start: int
    end: int
    leader_epoch: int = -1  # of the leader that appended the batch (v2 batches; KIP-320)


def scan_batches(buf: Any) -> list[BatchHeader]:
    """Headers of the complete batches in ``buf`` (a trailing partial batch is left out)."""
    mv = memoryview(buf)
    size = len(mv)
    pos = 0
    out: list[BatchHeader] = []
    while pos + 17 <= size:
        base, length = _HDR.unpack_from(mv, pos)
        end = pos + 12 + length
        if length < 0 or end > size:
            break
        magic = mv[pos + 16]
        if magic >= 2 and length >= 49:
            _, attrs, delta = _V2.unpack_from(mv, pos + 16)
            pid = _PID.unpack_from(mv, pos + 43)[0]
            epoch = _EPOCH.unpack_from(mv, pos + 12)[0]
            out.append(
                BatchHeader(
                    base,
                    base + delta,
                    pid,
                    bool(attrs & _TRANSACTIONAL),
                    bool(attrs & _CONTROL),
                    pos,
                    end,
                    epoch,
                )
            )
        else:
            # Legacy message sets: the wrapper's offset is its last inner offset.
            out.append(BatchHeader(base, base, -1, False, False, pos, end))
        pos = end
    return out


def last_offset_at(buf: Any, target: int) -> int | None:
    """The last offset of the batch in ``buf`` that holds ``target``, read from batch headers
    alone: the batch may be cut short (a Fetch's partition_max_bytes), its header is enough.
    None when no batch there holds it (or the data is too short to tell)."""
    mv = memoryview(buf)
    size = len(mv)
    pos = 0
    while pos + 27 <= size:  # baseOffset .. lastOffsetDelta (v2); a legacy entry needs 17
        base, length = _HDR.unpack_from(mv, pos)
        if length < 0:
            return None
        magic = mv[pos + 16]
        last = base + _V2.unpack_from(mv, pos + 16)[2] if magic >= 2 else base
        if base <= target <= last:
            return last
        pos += 12 + length
    return None


def aborted_ranges(batches: list[BatchHeader], aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Offset ranges of aborted transactional batches (read_committed), from the aborted list.

    ``aborted`` is the response's (producer_id, first_offset) list. A producer is aborted from its
    first offset until its abort marker (a control batch) is seen.
    """
    if not aborted:
        return []
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    ranges: list[tuple[int, int]] = []
    i = 0
    for b in batches:
        while i < len(pending) and pending[i][1] <= b.last_offset:
            active.add(pending[i][0])
            i += 1
        if not b.transactional or b.producer_id not in active:
            continue
        if b.control:
            active.discard(b.producer_id)
        else:
            ranges.append((b.base_offset, b.last_offset))
    return ranges


def _in_ranges(offset: int, ranges: list[tuple[int, int]]) -> bool:
    return any(lo <= offset <= hi for lo, hi in ranges)


@dataclass(eq=False)
class PartitionFetch:
    """Undelivered data of one partition from one Fetch response."""

    tp: TopicPartition
    fetch_offset: int
    records: Any  # bytes-like record set
    aborted: list[tuple[int, int]] | None = None
    read_committed: bool = False
    check_crcs: bool = True
    # filled on first use
    _batches: list[BatchHeader] | None = None
    _items: list[Any] | None = None
    _columns: Any = None
    _cursor: int = 0
    _error: KafkaCodecError | None = None
    _drop: list[tuple[int, int]] = field(default_factory=list)
    next_offset: int = -1

    @property
    def batch_count(self) -> int:
        """Complete batches found by prepare() (0: only a partial batch came)."""
        return len(self._batches or ())

    def prepare(self) -> None:
        """Find the complete batches (decoding waits for the application's first take)."""
        if self._batches is not None:
            return
        self._batches = batches = scan_batches(self.records)
        # Where the next fetch starts when everything here is delivered: past every complete
        # batch, so offset gaps (compaction, control markers) never stall the partition.
        self.next_offset = (
            max(self.fetch_offset, batches[-1].last_offset + 1) if batches else self.fetch_offset
        )
        self._drop = aborted_ranges(batches, self.aborted or []) if self.read_committed else []

    def epoch_before(self, position: int) -> int | None:
        """The leader epoch of the last batch starting below ``position`` (the one holding the
        record before it, or the last skipped over): a position's offset epoch (KIP-320)."""
        found = None
        for b in self._batches or ():
            if b.base_offset >= position:
                break
            found = b.leader_epoch
        return found if found is not None and found >= 0 else None

    def complete_bytes(self) -> int:
        """Bytes of the complete record batches here (a trailing partial batch is fetched again)."""
        self.prepare()
        b = self._batches
        return b[-1].end - b[0].start if b else 0

    def _locate_error(self, exc: KafkaCodecError, decode: Any) -> tuple[int, Any]:
        """Find the first corrupt batch: decode what precedes it, remember the error for it."""
        mv = memoryview(self.records)
        assert self._batches is not None
        for idx, b in enumerate(self._batches):
            if b.last_offset < self.fetch_offset:
                continue  # skipped by the application (seek past it) or already delivered
            try:
                decode(mv[b.start : b.end], check_crc=self.check_crcs)
            except KafkaCodecError as bad:
                offset = max(b.base_offset, self.fetch_offset)
                err = KafkaCodecError(
                    f"corrupt record batch in {self.tp.topic}[{self.tp.partition}] at offset {offset} "
                    f"(batch offsets {b.base_offset}..{b.last_offset}): {bad}; "
                    f"seek past offset {b.last_offset} to skip it"
                )
                err.topic, err.partition, err.offset = self.tp.topic, self.tp.partition, offset  # type: ignore[attr-defined]
                err.last_offset = b.last_offset  # type: ignore[attr-defined]
                self._error = err
                self.next_offset = offset
                first = self._batches[0].start
                good = decode(mv[first : b.start], check_crc=self.check_crcs) if b.start > first else None
                return idx, good
        # The whole buffer failed but no single batch does: report it at the fetch offset.
        err = KafkaCodecError(
            f"corrupt fetch data in {self.tp.topic}[{self.tp.partition}] at offset {self.fetch_offset}: {exc}"
        )
        err.topic, err.partition, err.offset = self.tp.topic, self.tp.partition, self.fetch_offset  # type: ignore[attr-defined]
        self._error = err
        self.next_offset = self.fetch_offset
        return 0, None

    def _decode_slice(self, decode: Any) -> Any:
        self.prepare()
        assert self._batches is not None
        if not self._batches:
            return None
        mv = memoryview(self.records)
        start = 0
        # Skip whole batches below the position (re-fetched or skipped by a seek) without decoding.
        for b in self._batches:
            if b.last_offset >= self.fetch_offset:
                break
            start = b.end
        end = self._batches[-1].end
        if start >= end:
            return None
        self._batches = [b for b in self._batches if b.start >= start]
        try:
            return decode(mv[start:end], check_crc=self.check_crcs)
        except KafkaCodecError as exc:
            _, good = self._locate_error(exc, decode)
            return good

    # --- the object path (poll) ---

    def messages(self, max_records: int | None) -> list[ConsumedMessage]:
        if self._items is None:
            # Bulk object creation: the cyclic GC would otherwise rescan the growing lists
            # many times over (it halves throughput); none of these objects form cycles.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                self._items = self._build_messages()
            finally:
                if gc_was_enabled:
                    gc.enable()
        return self._take(self._items, max_records)

    def _build_messages(self) -> list[ConsumedMessage]:
        recs = self._decode_slice(decode_record_batches) or []
        pos, drop = self.fetch_offset, self._drop
        if recs and (recs[0].offset < pos or drop or any(b.control for b in self._batches or ())):
            recs = [
                r
                for r in recs
                if r.offset >= pos and not r.is_control and not (drop and _in_ranges(r.offset, drop))
            ]
        return messages_from_records(self.tp.topic, self.tp.partition, recs)

    def _take(self, items: Any, max_records: int | None) -> Any:
        start = self._cursor
        n = len(items) - start
        if max_records is not None and n > max_records:
            n = max_records
        self._cursor = start + n
        if start == 0 and self._cursor == len(items):
            return items
        return items[start : self._cursor]

    # --- the columnar path (poll_columns) ---

    def columns(self, max_records: int | None) -> Any:
        """A pyarrow RecordBatch (consumer schema) of the next rows, or None when empty."""
        if self._columns is None:
            cols = self._decode_slice(decode_record_batches_columns)
            self._columns = (
                _filter_columns(cols, self.fetch_offset, self._drop, self.tp) if cols is not None else _EMPTY
            )
        table = self._columns
        if table is _EMPTY or table.num_rows == 0:
            return None
        start = self._cursor
        n = table.num_rows - start
        if max_records is not None and n > max_records:
            n = max_records
        self._cursor = start + n
        return table if (start == 0 and n == table.num_rows) else table.slice(start, n)

    # --- bookkeeping ---

    def remaining(self) -> int:
        if self._items is not None:
            return len(self._items) - self._cursor
        if self._columns is not None:
            return 0 if self._columns is _EMPTY else self._columns.num_rows - self._cursor
        return -1  # not decoded yet

    @property
    def exhausted(self) -> bool:
        return self.remaining() == 0

    def position_after(self) -> int:
        """Position to store after the last delivered row (or after everything once exhausted)."""
        if self.exhausted:
            return self.next_offset
        if self._items is not None:
            return self._items[self._cursor - 1].offset + 1 if self._cursor else self.fetch_offset
        if self._cursor:
            return self._columns.column(2)[self._cursor - 1].as_py() + 1
        return self.fetch_offset

    def take_error(self) -> KafkaCodecError | None:
        err, self._error = self._error, None
        return err

    @property
    def pending_error(self) -> bool:
        return self._error is not None


_EMPTY = object()


@cache
def consumer_schema() -> Any:
    import pyarrow as pa

    from kafka_core.codec.columns import arrow_schema

    base = arrow_schema()
    return pa.schema(
        [
            pa.field("topic", pa.string(), nullable=False),
            pa.field("partition", pa.int32(), nullable=False),
            *base,
        ]
    )


def _filter_columns(cols: Any, position: int, drop: list[tuple[int, int]], tp: TopicPartition) -> Any:
    import pyarrow as pa

    batch = cols.to_arrow()
    n = batch.num_rows
    if n == 0:
        return _EMPTY
    offsets = batch.column(0)
    if offsets[0].as_py() < position or drop:
        import pyarrow.compute as pc  # only here: importing it costs more than a fetch

        mask = pc.greater_equal(offsets, position)
        for lo, hi in drop:
            mask = pc.and_(
                mask, pc.invert(pc.and_(pc.greater_equal(offsets, lo), pc.less_equal(offsets, hi)))
            )
        batch = batch.filter(mask)
        n = batch.num_rows
        if n == 0:
            return _EMPTY
    arrays = [CONSTANTS.column(tp.topic, pa.string(), n), CONSTANTS.column(tp.partition, pa.int32(), n)]
    return pa.RecordBatch.from_arrays(arrays + list(batch.columns), schema=consumer_schema())


def leader_moved(client: Any, tp: TopicPartition, p: Any, response: Any) -> bool:
    """A Fetch v12+ answer refused ``tp`` naming its new leader (KIP-951, the address too from
    v16): True when the client took the hint (its leader epoch is newer than the cached one),
    so the partition is fetched from that leader at once, without waiting for metadata."""
    hint = leader_hint(p, response)
    return hint is not None and bool(client.take_leader_hint(tp.topic, tp.partition, hint))
