"""The blocking KafkaShareConsumer: the asyncio one on a private loop thread."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kafka_core._sync import SyncFace, sync_face
from kafka_core.share.consumer import KafkaShareConsumer as AsyncKafkaShareConsumer
from kafka_core.share.fetch import join_tables
from kafka_core.share.records import AcknowledgeType, ShareRecord

AHEAD = 32  # polls' worth of records one hop to the loop thread brings


PLUMBING = (
    "poll_pieces",
    "hand_over",
    "release_pieces",
    "settle_for_poll",
    "poll_column_pieces",
    "hand_over_columns",
    "release_column_pieces",
)


@sync_face(AsyncKafkaShareConsumer, exclude=PLUMBING)
class KafkaShareConsumer(SyncFace):
    """Same constructor and methods as :class:`kafka_core.aio.KafkaShareConsumer`, but blocking.

    One hop to the loop thread brings up to several polls' worth of fetched records; the polls
    after it hand them out from the application's thread (a thread hop per poll would cost
    more than the records). Records taken but not handed out yet are released by close.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Guards _held, _held_pos and _held_columns: pieces fetched ahead, handed out by polls
        # from any application thread.
        self._held_lock = threading.Lock()
        self._held: list[tuple[Any, list[ShareRecord]]] = []
        self._held_pos = 0  # records of _held[0] handed out already (no re-slicing per poll)
        self._held_columns: list[Any] = []

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> KafkaShareConsumer:
        """A share consumer from Java-style names (see the asyncio class's ``from_config``)."""
        from kafka_core.share.options import share_keywords

        return cls(**share_keywords(config, overrides))

    def __enter__(self) -> KafkaShareConsumer:
        return self

    def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ShareRecord]:
        """The records acquired for this member (empty after ``timeout_ms`` without any)."""
        obj = self._async_obj
        limit = max_records or obj.max_poll_records
        with self._held_lock:
            if self._held:
                obj.settle_for_poll()
                return self._hand(limit)
            self._held = self._run(obj.poll_pieces(timeout_ms, limit, AHEAD, False))
            return self._hand(limit)

    def poll_columns(self, timeout_ms: float = 1_000, max_records: int | None = None) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` with a delivery_count column, or None."""
        obj = self._async_obj
        limit = max_records or obj.max_poll_records
        with self._held_lock:
            if self._held_columns:
                obj.settle_for_poll()
            else:
                self._held_columns = self._run(obj.poll_column_pieces(timeout_ms, limit, AHEAD, False))
            held = self._held_columns
            tables = []
            rows = 0
            while held and rows < limit:
                tp, table, single = held[0]
                room = limit - rows
                if table.num_rows <= room:
                    held.pop(0)
                else:
                    held[0] = (tp, table.slice(room), single)
                    table = table.slice(0, room)
                obj.hand_over_columns((tp, table, single))
                tables.append(table)
                rows += table.num_rows
            return join_tables(tables)

    def _hand(self, limit: int) -> list[ShareRecord]:
        out: list[ShareRecord] = []
        held = self._held
        while held and len(out) < limit:
            tp, records = held[0]
            pos = self._held_pos
            end = min(len(records), pos + limit - len(out))
            taken = records if pos == 0 and end == len(records) else records[pos:end]
            if end == len(records):
                held.pop(0)
                self._held_pos = 0
            else:
                self._held_pos = end
            self._async_obj.hand_over(tp, taken)
            if not out and len(taken) >= limit:
                return taken
            out.extend(taken)
        return out

    def acknowledge(self, record: Any, type: Any = AcknowledgeType.ACCEPT) -> None:
        """See :meth:`kafka_core.aio.KafkaShareConsumer.acknowledge` (runs here: no thread hop)."""
        self._async_obj.acknowledge(record, type)

    def acknowledge_batch(self, batch: Any, type: Any = AcknowledgeType.ACCEPT, rows: Any = None) -> None:
        """See :meth:`kafka_core.aio.KafkaShareConsumer.acknowledge_batch` (runs here)."""
        self._async_obj.acknowledge_batch(batch, type, rows)

    def _release_held(self) -> None:
        with self._held_lock:
            held, self._held = self._held, []
            if held and self._held_pos:
                held[0] = (held[0][0], held[0][1][self._held_pos :])
            self._held_pos = 0
            columns, self._held_columns = self._held_columns, []
        if held:
            self._async_obj.release_pieces(held)
        if columns:
            self._async_obj.release_column_pieces(columns)

    def unsubscribe(self) -> None:
        """See :meth:`kafka_core.aio.KafkaShareConsumer.unsubscribe` (records held here released)."""
        self._release_held()
        self._run(self._async_obj.unsubscribe())

    def close(self, timeout: float | None = None) -> None:
        """Send what is pending, close the share sessions, leave the group; then stop the loop."""
        try:
            self._release_held()
            if self._loop_thread.alive and not self._async_obj.closed:
                self._run(self._async_obj.close(timeout))
        finally:
            self._finalizer()

    def __iter__(self) -> Any:
        while not self._async_obj.closed:
            yield from self.poll(1_000)
