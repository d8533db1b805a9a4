"""Share sessions and the two requests on them: ShareFetch (with acknowledgements piggybacked)
and ShareAcknowledge.

A share session lives on one broker (the leader of the partitions fetched there). Its epoch is
0 to open it (no acknowledgements allowed then), then 1, 2, ... one per request, -1 to close it;
requests on one session therefore go one at a time (``NodeSession.lock``). A session the broker
lost or that fell out of step (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, a dropped
connection) opens again at epoch 0; the acknowledgements of the failed request are reported
failed, and their records come back once their acquisition lock expires.

Each partition answer becomes a :class:`Chunk`: its record bytes, decoded only when polled, and
the offsets the broker acquired for this member with their delivery counts: only those are
handed over; offsets acquired without a record (transaction markers) are acknowledged as gaps.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import uuid
from collections.abc import Collection
from collections.abc import Set as AbstractSet
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.codec import decode_record_batches_columns
from kafka_core.codec.columns import CONSTANTS
from kafka_core.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafka_core.protocol.errors import ErrorCode, error_for
from kafka_core.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kafka_core.share.records import (
    LEADER_CODES,
    Acks,
    ShareRecord,
    share_records,
)

log = logging.getLogger("kafka_core.share.consumer")  # the callback's errors, as before
INT32_MAX = 2**31 - 1
CLOSE_EPOCH = -1
# ShareFetch goes on a connection of its own: a broker serves one connection's requests in
# order, so a long-polling ShareFetch would hold up the ShareAcknowledge and heartbeats behind it.
FETCH_LANE = 1 << 17

# {TopicPartition: (offsets, error or None)}: the outcome of acknowledgements, per partition
# (the offsets as the acknowledgements' key view: a set is made only for a callback).
AckResults = dict[TopicPartition, tuple[Collection[int], BaseException | None]]


class NodeSession:
    """The share session with one broker: its epoch and the partitions it holds. As a fetch
    session (KIP-227), a ShareFetch on an open session names only the partitions it adds (and
    those it acknowledges for) and the ones it forgets: the broker keeps the rest."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        # One request at a time on the session (a ShareFetch or a ShareAcknowledge): guards
        # ``epoch`` and ``parts``, which each request's answer moves on.
        self.lock = asyncio.Lock()
        self.epoch = 0
        self.parts: frozenset[TopicPartition] = frozenset()

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.parts = frozenset()


class Chunk:
    """One partition's acquired records from one ShareFetch, handed over in whole or in part."""

    __slots__ = (
        "tp",
        "records",
        "size",
        "_counts",
        "ranges",
        "single",
        "acquired_at",
        "lock_s",
        "_items",
        "_cols",
        "_cursor",
        "gaps",
    )

    def __init__(
        self,
        tp: TopicPartition,
        records: Any,
        acquired: list[tuple[int, int, int]],
        now: float,
        lock_s: float,
    ) -> None:
        self.tp = tp
        self.records = records
        self._counts: dict[int, int] | None = None  # built only when a path needs lookups
        self.ranges = acquired
        self.size = sum(last - first + 1 for first, last, _ in acquired)  # offsets acquired
        # (low, high, count) when the acquired offsets are one range with one delivery count
        self.single: tuple[int, int, int] | None = None
        if acquired:
            low, high = acquired[0][0], acquired[-1][1]
            if high - low + 1 == self.size and len({a[2] for a in acquired}) == 1:
                self.single = (low, high, acquired[0][2])
        self.acquired_at = now
        self.lock_s = lock_s
        self._items: list[ShareRecord] | None = None
        self._cols: Any = None
        self._cursor = 0
        self.gaps: list[int] = []  # acquired offsets without a record, found when decoded

    @property
    def counts(self) -> dict[int, int]:
        """{acquired offset: delivery count} (per offset: only when the ranges do not do)."""
        if self._counts is None:
            self._counts = {}
            for first, last, count in self.ranges:
                self._counts.update(dict.fromkeys(range(first, last + 1), count))
        return self._counts

    def _decode_items(self) -> list[ShareRecord]:
        if self._items is None:
            # Bulk object creation, as the consumer's fetch results do: the cyclic GC would
            # otherwise rescan the growing lists many times over; none of these form cycles.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                items = share_records(self.tp.topic, self.tp.partition, self.records, self.ranges)
            finally:
                if gc_was_enabled:
                    gc.enable()
            self._items = items
            if len(items) != self.size:
                self._note_gaps([r.offset for r in items])
        return self._items

    def _note_gaps(self, offsets: list[int]) -> None:
        if len(offsets) != self.size:
            self.gaps = sorted(set(self.counts).difference(offsets))

    def take(self, n: int | None) -> list[ShareRecord]:
        if self._cols is not None:  # began as columns: the rest as objects, from the same rows
            return self._take_from_columns_as_items(n)
        items = self._decode_items()
        start = self._cursor
        end = len(items) if n is None else min(len(items), start + n)
        self._cursor = end
        return items if start == 0 and end == len(items) else items[start:end]

    def _take_from_columns_as_items(self, n: int | None) -> list[ShareRecord]:
        table = self.take_columns(n)
        if table is None:
            return []
        offsets = set(table.column("offset").to_pylist())
        return [
            r
            for r in share_records(self.tp.topic, self.tp.partition, self.records, self.ranges)
            if r.offset in offsets
        ]

    def take_columns(self, n: int | None) -> Any:
        """The next rows as a pyarrow RecordBatch (share schema), or None."""
        if self._cols is None:
            if self._items is not None:  # began as objects: columns of the rest
                rest = self._items[self._cursor :]
                self._items = None
                self._cursor = 0
                keep = {r.offset for r in rest}
                self._cols = self._build_columns(keep)
            else:
                self._cols = self._build_columns(None)
        table = self._cols
        if table is None or table.num_rows == 0:
            return None
        start = self._cursor
        count = table.num_rows - start
        if n is not None and count > n:
            count = n
        self._cursor = start + count
        if count == 0:
            return None
        return table if start == 0 and count == table.num_rows else table.slice(start, count)

    def _build_columns(self, keep: set[int] | None) -> Any:
        import pyarrow as pa

        if self.records is None:
            return None
        batch = decode_record_batches_columns(self.records).to_arrow()
        if batch.num_rows == 0:
            return None
        if keep is None and self.single is not None:
            return self._single_range_columns(batch, *self.single)
        offsets = batch.column(0).to_pylist()
        counts = self.counts
        wanted = counts if keep is None else keep
        mask = [o in wanted for o in offsets]
        if not all(mask):
            batch = batch.filter(pa.array(mask))
            offsets = [o for o, m in zip(offsets, mask, strict=True) if m]
        if keep is None:
            self._note_gaps(offsets)
        n = batch.num_rows
        delivery = pa.array([counts[o] for o in offsets], pa.int16())
        arrays = [
            CONSTANTS.column(self.tp.topic, pa.string(), n),
            CONSTANTS.column(self.tp.partition, pa.int32(), n),
        ]
        return pa.RecordBatch.from_arrays(
            [*arrays, *batch.columns, delivery], schema=share_schema(batch.schema)
        )

    def _single_range_columns(self, batch: Any, low: int, high: int, count: int) -> Any:
        """One acquired range with one delivery count (the usual case): no per-row Python."""
        import pyarrow as pa

        col = batch.column(0)
        if col[0].as_py() < low or col[len(col) - 1].as_py() > high:
            import pyarrow.compute as pc

            batch = batch.filter(pc.and_(pc.greater_equal(col, low), pc.less_equal(col, high)))
        n = batch.num_rows
        if n != high - low + 1:
            self._note_gaps(batch.column(0).to_pylist())
        if n == 0:
            return None
        arrays = [
            CONSTANTS.column(self.tp.topic, pa.string(), n),
            CONSTANTS.column(self.tp.partition, pa.int32(), n),
        ]
        delivery = CONSTANTS.column(count, pa.int16(), n)
        return pa.RecordBatch.from_arrays(
            [*arrays, *batch.columns, delivery], schema=share_schema(batch.schema)
        )

    @property
    def exhausted(self) -> bool:
        if self._items is not None:
            return self._cursor >= len(self._items)
        if self._cols is not None:
            return self._cols is None or self._cursor >= self._cols.num_rows
        return False

    def undelivered(self) -> list[int]:
        """Acquired offsets not handed over (to release when the chunk is dropped)."""
        if self._items is not None:
            return [r.offset for r in self._items[self._cursor :]]
        if self._cols is not None:
            return self._cols.column("offset").to_pylist()[self._cursor :]
        return sorted(self.counts)


_SCHEMAS: dict[Any, Any] = {}


def share_schema(base: Any) -> Any:
    """The consumer's columns (topic, partition, offset, timestamp, ...) plus ``delivery_count``."""
    schema = _SCHEMAS.get(base)
    if schema is None:
        import pyarrow as pa

        schema = pa.schema(
            [
                pa.field("topic", pa.string(), nullable=False),
                pa.field("partition", pa.int32(), nullable=False),
                *base,
                pa.field("delivery_count", pa.int16(), nullable=False),
            ]
        )
        _SCHEMAS[base] = schema
    return schema


def _batches(cls: Any, acks: Acks | None) -> list[Any]:
    if not acks:
        return []
    return [cls(first_offset=f, last_offset=last, acknowledge_types=[t]) for f, last, t in acks.ranges()]


class ShareRequests:
    """Builds, sends and reads ShareFetch and ShareAcknowledge for one consumer."""

    def __init__(
        self,
        client: Any,
        group_id: str,
        *,
        member_id: Any,
        topic_id: Any,
        topic_name: Any,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        request_timeout_ms: float,
    ) -> None:
        self._client = client
        self.group_id = group_id
        self._member_id = member_id  # callables: the membership's current values
        self._topic_id = topic_id
        self._topic_name = topic_name
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.request_timeout_ms = request_timeout_ms
        self.lock_timeout_ms = 30_000  # the broker says (each ShareFetch answer)

    def _by_topic_id(self, tps: Any) -> dict[uuid.UUID, list[TopicPartition]]:
        out: dict[uuid.UUID, list[TopicPartition]] = {}
        ids: dict[str, uuid.UUID | None] = {}  # each topic's id looked up once, not per partition
        for tp in tps:
            tid = ids[tp.topic] if tp.topic in ids else ids.setdefault(tp.topic, self._topic_id(tp.topic))
            if tid is not None:
                out.setdefault(tid, []).append(tp)
        return out

    async def fetch(
        self,
        sess: NodeSession,
        wanted: frozenset[TopicPartition],
        acks: dict[TopicPartition, Acks],
        max_wait_ms: int | None = None,
    ) -> tuple[list[Chunk], AckResults, BaseException | None]:
        """One ShareFetch on ``sess`` (the caller holds its lock) for the partitions ``wanted``
        there: (chunks, ack outcomes, error). ``max_wait_ms`` (default ``self.max_wait_ms``):
        how long the broker may hold it. An open session is sent only what changed: the same
        ``wanted`` as last time (the same object) costs no pass over it."""
        wait_ms = self.max_wait_ms if max_wait_ms is None else max_wait_ms
        if sess.epoch == 0 and acks:  # no acknowledgements on a session being opened
            raise AssertionError("acknowledgements on a new share session")
        added: AbstractSet[TopicPartition]
        forgotten: AbstractSet[TopicPartition]
        if sess.epoch == 0:
            added, forgotten = wanted, frozenset()
        elif wanted is sess.parts:
            added = forgotten = frozenset()
        else:
            added, forgotten = wanted - sess.parts, sess.parts - wanted
        topics: list[Any] = []
        fp_cls, ft_cls, ab_cls = (
            ShareFetchRequest.FetchPartition,
            ShareFetchRequest.FetchTopic,
            ShareFetchRequest.AcknowledgementBatch,
        )
        for tid, tps in self._by_topic_id(added | acks.keys() if acks else added).items():
            topics.append(
                ft_cls(
                    topic_id=tid,
                    partitions=[
                        fp_cls(
                            partition_index=tp.partition,
                            acknowledgement_batches=_batches(ab_cls, acks.get(tp)),
                        )
                        for tp in tps
                    ],
                )
            )
        forgotten_data = [
            ShareFetchRequest.ForgottenTopic(topic_id=tid, partitions=[tp.partition for tp in tps])
            for tid, tps in self._by_topic_id(forgotten).items()
        ]
        body = ShareFetchRequest(
            group_id=self.group_id,
            member_id=self._member_id(),
            share_session_epoch=sess.epoch,
            max_wait_ms=wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            max_records=self.max_records,
            batch_size=self.max_records,
            topics=topics,
            forgotten_topics_data=forgotten_data,
        )
        try:
            resp = await self._client.send(
                sess.node_id, body, timeout_ms=self.request_timeout_ms + wait_ms, lane=FETCH_LANE
            )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            sess.reset()
            return [], _failed(acks, exc), exc
        if resp.error_code:
            err = error_for(
                resp.error_code, f"ShareFetch to broker {sess.node_id}: {resp.error_message or ''}"
            )
            sess.reset()
            return [], _failed(acks, err), err
        sess.advance()
        sess.parts = wanted
        if resp.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        now = asyncio.get_running_loop().time()
        chunks: list[Chunk] = []
        results: AckResults = {}
        error: BaseException | None = None
        for t in resp.responses:
            name = self._topic_name(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp in acks:
                    results[tp] = (
                        acks[tp].keys(),
                        _ack_error(p.acknowledge_error_code, p.acknowledge_error_message, tp),
                    )
                if p.error_code:
                    error = error_for(p.error_code, f"ShareFetch {tp}: {p.error_message or ''}")
                    if p.error_code in LEADER_CODES:
                        self._client.invalidate_metadata(name)
                    continue
                if p.acquired_records:
                    acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
                    chunks.append(Chunk(tp, p.records, acquired, now, self.lock_timeout_ms / 1000.0))
        for tp, offsets in acks.items():  # not answered for: not acknowledged
            if tp not in results:
                results[tp] = (
                    offsets.keys(),
                    error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"ShareFetch {tp}"),
                )
        return chunks, results, error

    async def acknowledge(
        self, sess: NodeSession, acks: dict[TopicPartition, Acks], *, close: bool = False, renew: bool = False
    ) -> AckResults:
        """One ShareAcknowledge on ``sess`` (the caller holds its lock); ``close`` ends the session;
        ``renew``: the acknowledgements are RENEWs (KIP-1222, ShareAcknowledge v2)."""
        if sess.epoch == 0:
            if close:
                return {}
            err = error_for(
                ErrorCode.SHARE_SESSION_NOT_FOUND, f"no open share session with broker {sess.node_id}"
            )
            return _failed(acks, err)
        ab_cls = ShareAcknowledgeRequest.AcknowledgementBatch
        ap_cls = ShareAcknowledgeRequest.AcknowledgePartition
        topics = [
            ShareAcknowledgeRequest.AcknowledgeTopic(
                topic_id=tid,
                partitions=[
                    ap_cls(partition_index=tp.partition, acknowledgement_batches=_batches(ab_cls, acks[tp]))
                    for tp in tps
                ],
            )
            for tid, tps in self._by_topic_id(acks).items()
        ]
        body = ShareAcknowledgeRequest(
            group_id=self.group_id,
            member_id=self._member_id(),
            share_session_epoch=CLOSE_EPOCH if close else sess.epoch,
            topics=topics,
        )
        if renew:
            body.is_renew_ack = True
        try:
            resp = await self._client.send(sess.node_id, body, timeout_ms=self.request_timeout_ms)
        except KafkaError as exc:
            sess.reset()
            return _failed(acks, exc)
        if resp.error_code:
            err = error_for(
                resp.error_code, f"ShareAcknowledge to broker {sess.node_id}: {resp.error_message or ''}"
            )
            sess.reset()
            return _failed(acks, err)
        if close:
            sess.reset()
        else:
            sess.advance()
        results: AckResults = {}
        for t in resp.responses:
            name = self._topic_name(t.topic_id)
            for p in t.partitions:
                tp = TopicPartition(name or str(t.topic_id), p.partition_index)
                if tp in acks:
                    results[tp] = (acks[tp].keys(), _ack_error(p.error_code, p.error_message, tp))
        for tp, offsets in acks.items():
            if tp not in results:
                results[tp] = (
                    offsets.keys(),
                    error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"ShareAcknowledge {tp}"),
                )
        return results


def _ack_error(code: int, message: str | None, tp: TopicPartition) -> BaseException | None:
    if not code:
        return None
    return error_for(code, f"acknowledging records of {tp}: {message or ''}")


def _failed(acks: dict[TopicPartition, Acks], err: BaseException) -> AckResults:
    return {tp: (offsets.keys(), err) for tp, offsets in acks.items()}


ColumnPiece = tuple[TopicPartition, Any, "tuple[int, int, int] | None"]


def join_tables(tables: list[Any]) -> Any:
    """One RecordBatch of ``tables`` (same schema), or None."""
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    import pyarrow as pa

    return pa.Table.from_batches(tables).combine_chunks().to_batches()[0]


def batch_ranges(batch: Any) -> list[tuple[str, int, int, int]]:
    """A share batch's rows as (topic, partition, first, last) runs of consecutive offsets,
    found by Arrow compute (no Python per row): a poll_columns batch is a few such runs."""
    n = batch.num_rows
    if n == 0:
        return []
    topic, part, off = batch.column("topic"), batch.column("partition"), batch.column("offset")
    starts, ends = [0], [n - 1]
    if n > 1:
        import pyarrow.compute as pc

        def changed(col: Any) -> Any:
            return pc.not_equal(col.slice(1), col.slice(0, n - 1))

        step = pc.not_equal(pc.subtract(off.slice(1), off.slice(0, n - 1)), 1)
        cut = pc.or_(pc.or_(step, changed(part)), changed(topic))
        idx = pc.indices_nonzero(cut).to_pylist()  # row i + 1 starts a new run
        starts += [i + 1 for i in idx]
        ends = [*idx, n - 1]
    return [
        (topic[a].as_py(), part[a].as_py(), off[a].as_py(), off[b].as_py())
        for a, b in zip(starts, ends, strict=True)
    ]


async def by_leader(
    client: Any, pending: dict[TopicPartition, Acks]
) -> tuple[dict[int, dict[TopicPartition, Acks]], AckResults]:
    """Pending acknowledgements grouped by their partition's leader; those whose leader
    cannot be found are failed outcomes already."""
    meta = client.cached_metadata()
    by_node: dict[int, dict[TopicPartition, Acks]] = {}
    failed: AckResults = {}
    for tp, acks in pending.items():
        node = leader_of(meta, tp)
        if node is None:
            try:
                node = await client.leader_for(tp.topic, tp.partition)
            except KafkaError as exc:
                failed[tp] = (acks.keys(), exc)
                continue
        by_node.setdefault(node, {})[tp] = acks
    return by_node, failed


def call_back(cb: Any, results: AckResults) -> list[Any]:
    """``cb({tp: offsets}, error)`` per partition (a raising callback is logged); returns the
    awaitables it gave back (an async callback), for the caller to run."""
    awaitables = []
    for tp, (offsets, err) in results.items():
        try:
            out = cb({tp: set(offsets)}, err)
            if inspect.isawaitable(out):
                awaitables.append(out)
        except Exception:
            log.exception("the acknowledgement commit callback raised")
    return awaitables


def leader_of(meta: Any, tp: TopicPartition) -> int | None:
    """The partition's leader in cached metadata, or None when unknown."""
    topic = meta.topic(tp.topic)
    if topic is None:
        return None
    p = topic.partition(tp.partition)
    if p is None or p.leader < 0:
        return None
    return int(p.leader)
