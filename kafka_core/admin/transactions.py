"""Transactions as an operator sees them: list, describe, the producers a partition holds, and
aborting a hanging transaction (KIP-664, what ``kafka-transactions.sh`` does).

ListTransactions goes to every broker (each lists the transactional ids it coordinates),
DescribeTransactions to each id's coordinator, DescribeProducers to each partition's leader and
the abort's WriteTxnMarkers to that leader too: the marker closes the transaction on that one
partition, which is all a hanging transaction needs (its coordinator no longer knows of it there).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import (
    FINAL_CODES,
    all_brokers,
    call_timeout,
    fan_out,
    per_broker,
    per_coordinator,
    per_resource,
)
from kafka_core.admin.results import (
    HangingTransaction,
    ProducerState,
    Result,
    TransactionDescription,
    TransactionListing,
)
from kafka_core.client.metadata import TopicPartition, as_topic_partition
from kafka_core.errors import KafkaConfigError, KafkaProtocolError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for
from kafka_core.protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)

if TYPE_CHECKING:
    from kafka_core.admin.offsets import OffsetCalls
    from kafka_core.client.cluster import KafkaClient

TXN_COORDINATOR = 1  # FindCoordinator's key type for a transactional id
# Java's default for --max-transaction-timeout (transaction.max.timeout.ms's default): a
# transaction open longer than any producer may keep one is a candidate.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
# States in which a coordinator still owns the partitions it added: an open transaction on one
# of them will be finished by it.
LIVE_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
LIST_TRANSACTIONS_DURATION_VERSION = 1  # KIP-994
LIST_TRANSACTIONS_PATTERN_VERSION = 2  # KIP-1152


def _optional(value: int) -> int | None:
    return None if value < 0 else value


def _producers(p: Any) -> list[ProducerState]:
    """A partition's producers in a DescribeProducers answer."""
    return [
        ProducerState(
            producer_id=s.producer_id,
            producer_epoch=s.producer_epoch,
            last_sequence=s.last_sequence,
            last_timestamp_ms=s.last_timestamp,
            coordinator_epoch=s.coordinator_epoch,
            current_txn_start_offset=_optional(s.current_txn_start_offset),
        )
        for s in p.active_producers
    ]


class TransactionCalls:
    """The transaction calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, offsets: OffsetCalls, default_timeout_ms: float) -> None:
        self.client = client
        self.offsets = offsets
        self.default_timeout_ms = default_timeout_ms

    async def list_transactions(
        self,
        *,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        min_duration_ms: int | None = None,
        transactional_id_pattern: str | None = None,
        timeout_ms: float | None = None,
    ) -> list[TransactionListing]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        state_filters = sorted(set(states or ()))
        pid_filters = sorted({int(p) for p in producer_ids or ()})
        nodes = await all_brokers(self.client, "list_transactions", timeout)

        async def ask(node: int) -> Any:
            version = await self.client.api_version(node, ApiKey.LIST_TRANSACTIONS)
            fields: dict[str, Any] = {"state_filters": state_filters, "producer_id_filters": pid_filters}
            if min_duration_ms is not None:
                if version < LIST_TRANSACTIONS_DURATION_VERSION:
                    raise KafkaConfigError("list_transactions: min_duration_ms needs Kafka 3.8+ (KIP-994)")
                fields["duration_filter"] = int(min_duration_ms)
            if transactional_id_pattern is not None:
                if version < LIST_TRANSACTIONS_PATTERN_VERSION:
                    raise KafkaConfigError(
                        "list_transactions: transactional_id_pattern needs Kafka 4.1+ (KIP-1152)"
                    )
                fields["transactional_id_pattern"] = transactional_id_pattern
            resp = await self.client.send(node, ListTransactionsRequest(**fields), version)
            if resp.error_code:
                return error_for(resp.error_code, f"ListTransactions on broker {node}")
            return [
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in resp.transaction_states
            ]

        results = await per_broker("list_transactions", nodes, ask, timeout)
        merged: dict[str, TransactionListing] = {}
        for res in results.values():
            for listing in res.result():  # a broker that never answered fails the listing
                merged.setdefault(listing.transactional_id, listing)
        return [merged[t] for t in sorted(merged)]

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, Result[TransactionDescription]]:
        await self.client.start()
        ids = [transactional_ids] if isinstance(transactional_ids, str) else list(transactional_ids)

        async def ask(node: int, tids: list[str]) -> dict[str, Any]:
            resp = await self.client.send(node, DescribeTransactionsRequest(transactional_ids=tids))
            out: dict[str, Any] = {}
            for s in resp.transaction_states:
                if s.error_code:
                    self.client.note_error(s.error_code, coordinator_key=s.transactional_id)
                    out[s.transactional_id] = error_for(
                        s.error_code, f"describing transactional id {s.transactional_id!r} on broker {node}"
                    )
                    continue
                out[s.transactional_id] = TransactionDescription(
                    transactional_id=s.transactional_id,
                    coordinator_id=node,
                    state=s.transaction_state,
                    producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch,
                    timeout_ms=s.transaction_timeout_ms,
                    start_time_ms=_optional(s.transaction_start_time_ms),
                    partitions=sorted(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions),
                )
            return out

        async def attempt(pending: list[str]) -> dict[str, Any]:
            return await per_coordinator(
                lambda tid: self.client.find_coordinator(tid, TXN_COORDINATOR), pending, lambda t: [t], ask
            )

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("describe_transactions", ids, attempt, timeout)

    async def describe_producers(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        *,
        broker_id: int | None = None,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Result[list[ProducerState]]]:
        await self.client.start()
        wanted = list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        topic_cls = DescribeProducersRequest.TopicRequest

        async def ask(node: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(tp.partition)
            body = DescribeProducersRequest(
                topics=[topic_cls(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
            )
            resp = await self.client.send(node, body)
            return self.offsets.partition_outcomes(resp, node, "DescribeProducers", _producers)

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            if broker_id is not None:  # a replica's own view (a follower may hold the hanging state)
                return await fan_out({broker_id: pending}, ask)
            return await self.offsets.per_leader(pending, ask)

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        # a broker named by the caller that holds no replica of a partition will not come to
        # hold one by asking again
        final = FINAL_CODES | {ErrorCode.NOT_LEADER_OR_FOLLOWER} if broker_id is not None else FINAL_CODES
        return await per_resource("describe_producers", wanted, attempt, timeout, final_codes=final)

    async def abort_transaction(
        self,
        partition: TopicPartition | tuple[str, int],
        *,
        start_offset: int | None = None,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        coordinator_epoch: int | None = None,
        timeout_ms: float | None = None,
    ) -> ProducerState:
        await self.client.start()
        tp = as_topic_partition(partition)
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        ids = (producer_id, producer_epoch, coordinator_epoch)
        if (start_offset is None) == all(i is None for i in ids):
            raise KafkaConfigError(
                "abort_transaction: give start_offset, or producer_id, producer_epoch and coordinator_epoch"
            )
        deadline = time.monotonic() + timeout / 1000.0
        if start_offset is not None:
            state = await self._open_at(tp, start_offset, timeout)
        elif producer_id is None or producer_epoch is None or coordinator_epoch is None:
            raise KafkaConfigError(
                "abort_transaction: producer_id, producer_epoch and coordinator_epoch go together"
            )
        else:
            state = ProducerState(producer_id, producer_epoch, -1, -1, coordinator_epoch, None)
        marker_cls = WriteTxnMarkersRequest.WritableTxnMarker
        topic_cls = WriteTxnMarkersRequest.WritableTxnMarkerTopic

        async def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Any]:
            by_leader, failed = await self.offsets.leaders(pending)
            if failed:
                return failed
            ((node, _),) = by_leader.items()
            body = WriteTxnMarkersRequest(
                markers=[
                    marker_cls(
                        producer_id=state.producer_id,
                        producer_epoch=state.producer_epoch,
                        transaction_result=False,  # abort
                        topics=[topic_cls(name=tp.topic, partition_indexes=[tp.partition])],
                        coordinator_epoch=state.coordinator_epoch,
                        transaction_version=0,  # the marker's epoch is the producer's own, as v1
                    )
                ]
            )
            resp = await self.client.send(node, body)
            for marker in resp.markers:
                for t in marker.topics:
                    for p in t.partitions:
                        if p.error_code:
                            self.client.note_error(p.error_code, t.name)
                            return {
                                tp: error_for(
                                    p.error_code,
                                    f"aborting producer {state.producer_id}'s transaction on "
                                    f"{tp.topic}-{tp.partition} (broker {node})",
                                )
                            }
                        return {tp: state}
            return {}

        left = max(deadline - time.monotonic(), 0.001) * 1000.0
        return (await per_resource("abort_transaction", [tp], attempt, left))[tp].result()

    async def _open_at(self, tp: TopicPartition, start_offset: int, timeout: float) -> ProducerState:
        """The producer whose open transaction on ``tp`` starts at ``start_offset``."""
        producers = (await self.describe_producers([tp], timeout_ms=timeout))[tp].result()
        for state in producers:
            if state.current_txn_start_offset == start_offset:
                return state
        open_at = sorted(
            s.current_txn_start_offset for s in producers if s.current_txn_start_offset is not None
        )
        raise error_for(
            ErrorCode.INVALID_TXN_STATE,
            f"no open transaction on {tp.topic}-{tp.partition} starts at offset {start_offset}"
            + (f" (open ones start at {open_at})" if open_at else " (none is open there)"),
        )

    async def find_hanging_transactions(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        topics: Iterable[str] | None = None,
        broker_id: int | None = None,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        timeout_ms: float | None = None,
    ) -> list[HangingTransaction]:
        await self.client.start()
        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        deadline = time.monotonic() + timeout / 1000.0

        def left() -> float:
            return max(deadline - time.monotonic(), 0.001) * 1000.0

        wanted = await self._partitions_to_search(partitions, topics, broker_id, timeout)
        if not wanted:
            return []
        producers = await self.describe_producers(wanted, broker_id=broker_id, timeout_ms=left())
        now_ms = int(time.time() * 1000)
        candidates: list[tuple[TopicPartition, ProducerState]] = []
        for tp, res in producers.items():
            for state in res.result():  # a partition that could not be searched fails the call
                if state.current_txn_start_offset is None:
                    continue
                if now_ms - state.last_timestamp_ms >= max_transaction_timeout_ms:
                    candidates.append((tp, state))
        if not candidates:
            return []
        listed = await self.list_transactions(
            producer_ids={s.producer_id for _, s in candidates}, timeout_ms=left()
        )
        tid_of = {t.producer_id: t.transactional_id for t in listed}
        described = await self.describe_transactions(sorted(set(tid_of.values())), timeout_ms=left())
        hanging: list[HangingTransaction] = []
        for tp, state in candidates:
            tid = tid_of.get(state.producer_id)
            reason = _hanging_reason(tp, state, tid, described.get(tid) if tid is not None else None)
            if reason is None:
                continue
            hanging.append(
                HangingTransaction(
                    topic=tp.topic,
                    partition=tp.partition,
                    producer_id=state.producer_id,
                    producer_epoch=state.producer_epoch,
                    coordinator_epoch=state.coordinator_epoch,
                    start_offset=state.current_txn_start_offset or 0,
                    last_timestamp_ms=state.last_timestamp_ms,
                    transactional_id=tid,
                    reason=reason,
                )
            )
        return hanging

    async def _partitions_to_search(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None,
        topics: Iterable[str] | None,
        broker_id: int | None,
        timeout: float,
    ) -> list[TopicPartition]:
        if partitions is not None:
            return list(dict.fromkeys(as_topic_partition(tp) for tp in partitions))
        names = [topics] if isinstance(topics, str) else list(topics) if topics is not None else None
        if names is None and broker_id is None:
            raise KafkaConfigError("find_hanging_transactions: give partitions, topics or broker_id")
        meta = await self.client.retry(
            "find_hanging_transactions: reading metadata",
            lambda: self.client.metadata(names, allow_auto_topic_creation=False),
            timeout,
        )
        out: list[TopicPartition] = []
        for t in meta.topics:
            if t.error_code:
                raise error_for(t.error_code, f"topic {t.name!r}")
            out.extend(
                TopicPartition(t.name, p.partition)
                for p in t.partitions
                if broker_id is None or broker_id in p.replicas
            )
        return sorted(out)


def _hanging_reason(
    tp: TopicPartition,
    state: ProducerState,
    tid: str | None,
    described: Result[TransactionDescription] | None,
) -> str | None:
    """Why the coordinator will never finish this open transaction, or None when it will."""
    if tid is None:
        return f"no transaction coordinator knows producer id {state.producer_id}"
    if described is None or not described.ok:
        error = described.error if described is not None else None
        if isinstance(error, KafkaProtocolError) and error.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            return f"the coordinator no longer knows transactional id {tid!r}"
        raise error if error is not None else error_for(-1, f"transactional id {tid!r} was not described")
    d = described.value
    assert d is not None
    if d.producer_id != state.producer_id:
        return f"transactional id {tid!r} has moved on to producer id {d.producer_id}"
    if d.state not in LIVE_STATES:
        return f"the coordinator has no open transaction for {tid!r} (state {d.state})"
    if tp not in d.partitions:
        return f"the coordinator's open transaction for {tid!r} does not include {tp.topic}-{tp.partition}"
    # a live transaction that includes the partition: the coordinator's markers (its epoch is
    # never below the partition's) will close it there
    return None
