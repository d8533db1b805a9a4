"""Fetched data not yet handed to the application, per partition, and the handing over.

Positions move here and only here, as records are handed over: whatever was fetched but not
handed over (a seek, a revocation, an error in between) is fetched again from the position.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.fetch.results import PartitionFetch
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.metrics.registry import ConsumerMetrics

# drain(columns=True) hands parts of this size over as they are: concatenating them only copies.
COLUMNS_BATCH_ROWS = 8_192
COLUMNS_BATCH_BYTES = 1 << 20


class FetchBuffer(dict[TopicPartition, deque[PartitionFetch]]):
    """Undelivered fetch results per partition, oldest first (the fetcher appends, poll drains).

    The dict's order is the drain order: a partition whose data is not all taken goes to the
    back, so partitions take turns and a poll looks only at the partitions it takes from (and
    paused ones with data), never at every partition buffered.
    """

    def drain(
        self,
        subs: SubscriptionState,
        metrics: ConsumerMetrics,
        max_records: int | None,
        columns: bool,
        pending: list[BaseException],
    ) -> Any:
        """Hand buffered records over (positions move), fairly across partitions, at most
        ``max_records``: a list of messages, or one RecordBatch with ``columns``, or None.

        An error reached after some records is put in ``pending`` (raised at the next poll, so
        those records are not lost); reached first, it is raised now.
        """
        buffer = self
        parts: list[Any] = []
        taken = taken_bytes = 0
        held = False
        for _ in range(len(buffer)):
            if not buffer:
                break
            tp = next(iter(buffer))
            q = buffer.pop(tp)
            if tp not in subs:
                continue
            st = subs.state(tp)
            if st.paused:
                buffer[tp] = q  # its turn comes again once resumed
                continue
            try:
                while q:
                    limit = None if max_records is None else max_records - taken
                    if limit == 0:
                        break
                    pf = q[0]
                    if st.position != pf.fetch_offset:
                        q.clear()  # a seek or an error since this was fetched
                        break
                    chunk: Any = pf.columns(limit) if columns else pf.messages(limit)
                    n = 0 if chunk is None else (chunk.num_rows if columns else len(chunk))
                    if n:
                        metrics.delivered(tp.topic, n)
                        parts.append(chunk)
                        taken += n
                        if columns:
                            taken_bytes += chunk.nbytes
                    st.position = pf.fetch_offset = pf.position_after()
                    epoch = pf.epoch_before(st.position)
                    if epoch is not None:
                        st.offset_epoch = epoch
                    if not pf.exhausted:
                        break
                    q.popleft()
                    err = pf.take_error()
                    if err is not None:
                        q.clear()
                        if parts:
                            pending.append(err)
                            held = True
                            break
                        raise err
                    if columns and (taken >= COLUMNS_BATCH_ROWS or taken_bytes >= COLUMNS_BATCH_BYTES):
                        break  # big enough: no copying it together with the next fetch's rows
            finally:
                if q:
                    buffer[tp] = q  # the rest at the back: the others first next time
            if held or (max_records is not None and taken >= max_records):
                break
            if columns and (taken >= COLUMNS_BATCH_ROWS or taken_bytes >= COLUMNS_BATCH_BYTES):
                break
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        if columns:
            import pyarrow as pa

            return pa.concat_batches(parts)
        out: list[ConsumedMessage] = []
        for p in parts:
            out.extend(p)
        return out
